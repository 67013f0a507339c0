// conv_inputs.h — what the forward and the backward share: the convolution's inputs (x, weight,
// bias, seq_idx, initial_states), its sizes and activation, and the layout decision. Each op
// keeps its own argument table (fwd_op.cpp, bwd_op.cpp), whose symbol and row enums take the
// first values from ConvSym and ConvRow, so one binding and one fill of the kernel parameters
// serve both. Both ops share the whole symbol list, kConvSyms.
#pragma once
#include <cstdint>

#include "core/arg_table.h"
#include "core/tensor.h"
#include "ops/op.h"

namespace cc1d {

enum ConvSym { kConvBatch, kConvDim, kConvSeqlen, kConvWidth, kConvSymCount };
// Both ops' whole symbol list, in ConvSym's order.
inline constexpr SymbolSpec kConvSyms[kConvSymCount] = {{"batch"}, {"dim"}, {"seqlen", 1}, {"width", 1, CC1D_MAX_WIDTH}};
enum ConvRow { kConvX, kConvWeight, kConvBias, kConvSeqIdx, kConvInit };

struct ConvProblem : Problem {
  int64_t batch = 0, dim = 0, seqlen = 0;
  int width = 0;
  bool silu = false;
  cc1d_dtype x_dtype = CC1D_FLOAT32;  // also out, states and the gradients of x-shaped tensors
  cc1d_dtype w_dtype = CC1D_FLOAT32;  // also bias, dweight and dbias
  // Walk time (channel-first) or channels (channel-last): decided once here, from x's strides,
  // and followed by every backend of both ops.
  bool time_major = true;
  TensorRef x, weight, bias, seq_idx, initial_states;  // absent: !given

  // The fields above (and Problem's) from an op's validated arguments.
  void bind_conv(const BoundArgs& b, const OpTable& table, int32_t activation) {
    bind(b);
    batch = b.sym[kConvBatch];
    dim = b.sym[kConvDim];
    seqlen = b.sym[kConvSeqlen];
    width = static_cast<int>(b.sym[kConvWidth]);
    silu = silu_activation(table, activation);
    x = b.t[kConvX];
    weight = b.t[kConvWeight];
    bias = b.t[kConvBias];
    seq_idx = b.t[kConvSeqIdx];
    initial_states = b.t[kConvInit];
    x_dtype = x.dtype;
    w_dtype = weight.dtype;
    // The axis with the smaller stride is walked by adjacent threads / vector lanes.
    time_major = dim == 1 || (seqlen > 1 && x.strides[2] <= x.strides[1]);
  }
};

// The inputs' pointers, sizes and strides in a kernel parameter block (FwdParams, BwdParams:
// the same member names).
template <typename Params>
void fill_conv_params(Params& p, const ConvProblem& pr) {
  p.x = pr.x.data;
  p.weight = pr.weight.data;
  p.bias = pr.bias.data;
  p.seq_idx = static_cast<const int*>(pr.seq_idx.data);
  p.initial_states = pr.initial_states.data;
  p.batch = pr.batch;
  p.dim = pr.dim;
  p.seqlen = pr.seqlen;
  copy_strides(p.x_stride, pr.x, 3);
  copy_strides(p.w_stride, pr.weight, 2);
  p.bias_stride = pr.bias.strides[0];
  copy_strides(p.seq_stride, pr.seq_idx, 2);
  copy_strides(p.init_stride, pr.initial_states, 3);
  p.silu = pr.silu ? 1 : 0;
}

}  // namespace cc1d
