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

// Channel-first rows shorter than this, of at least kMinChannelMajorDim channels, are walked
// along channels: a walk along time pays a fixed cost a row (the cpu backend a tile's setup, the
// GPU's time paths a warp or a block of which a row of 8 steps keeps one lane busy), which only
// a long row amortises. Measured on the cpu backend (bf16, two threads, Zen 4 VM, 2026-12-05),
// time-major against channel-major, ns an element: 4 steps forward 6.9 against 1.1-1.2, backward
// 21 against 2.0-2.4; 24 steps 1.9-3.7 against 1.2-1.4 and 5.5-6.3 against 1.6-2.0; 40 steps 1.2
// against 1.2-1.5 and 3.6-4.1 against 1.5-2.4; 64 steps 0.5-0.8 against 1.3-1.4 and 1.8-2.0
// against 1.7-2.5. On the GPU, unmeasured (bench/RESULTS.md, "Short rows on the GPU").
constexpr int64_t kMinTimeMajorLen = 40;
// Problems narrower than this keep time-major: a channel walk would leave most lanes idle. (The
// cpu backend also walks narrow channel-last rows along time: fallback/cpu/tiling.h.)
constexpr int64_t kMinChannelMajorDim = 16;

struct ConvProblem : Problem {
  int64_t batch = 0, dim = 0, seqlen = 0;
  int width = 0;
  bool silu = false;
  cc1d_dtype x_dtype = CC1D_FLOAT32;  // also out, states and the gradients of x-shaped tensors
  cc1d_dtype w_dtype = CC1D_FLOAT32;  // also bias, dweight and dbias
  // Walk time or channels: decided once here, from x's strides and sizes, and followed by every
  // backend of both ops (the cpu backend adds a rule for narrow channel-last rows).
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
    // The axis with the smaller stride is walked by adjacent threads / vector lanes, unless the
    // rows along time are short (kMinTimeMajorLen).
    const bool rows_along_time = dim == 1 || (seqlen > 1 && x.strides[2] <= x.strides[1]);
    time_major = rows_along_time && (seqlen >= kMinTimeMajorLen || dim < kMinChannelMajorDim);
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
