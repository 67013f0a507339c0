// update_op.h — the decode-step update op (causal_conv1d_update): its validated problem, its
// registry entry and its parts (validation, plan and the C entry point in update_op.cpp, the
// CPU implementation in fallback/cpu/update_cpu.cpp, the kernel in kernels_src/update.cuh).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/op.h"
#include "ops/update/update_kernels.h"

namespace cc1d {

struct UpdateProblem : Problem {
  int64_t batch = 0, dim = 0, seqlen = 0, state_len = 0, pool = 0;
  int width = 0;
  bool silu = false;
  cc1d_dtype x_dtype = CC1D_FLOAT32;  // also conv_state and out
  cc1d_dtype w_dtype = CC1D_FLOAT32;  // also bias
  // x and out normalized to (batch, dim, seqlen); absent optional tensors: !given.
  TensorRef x, conv_state, weight, bias, cache_seqlens, conv_state_indices, out;
};

UpdateProblem validate_update(const cc1d_update_args* args);
KernelLaunch plan_update(const Problem& problem);
void update_cpu(const Problem& problem);  // fallback/cpu/update_cpu.cpp

extern const OpEntry kUpdateOp;

}  // namespace cc1d
