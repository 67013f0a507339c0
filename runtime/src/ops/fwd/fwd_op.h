// fwd_op.h — the forward op: its validated problem, its registry entry and its parts
// (validation and the C entry point in fwd_op.cpp, the launch plan in fwd_plan.cpp, the CPU
// implementation in fallback/cpu/fwd_cpu.cpp, the kernel in kernels_src/fwd.cuh).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/fwd/fwd_kernels.h"
#include "ops/op.h"

namespace cc1d {

struct FwdProblem : Problem {
  int64_t batch = 0, dim = 0, seqlen = 0;
  int width = 0;
  bool silu = false;
  cc1d_dtype x_dtype = CC1D_FLOAT32;  // also out and states
  cc1d_dtype w_dtype = CC1D_FLOAT32;  // also bias
  // Walk time (channel-first) or channels (channel-last): decided once here, from x's strides,
  // and followed by every backend.
  bool time_major = true;
  TensorRef x, weight, bias, seq_idx, initial_states, out, final_states;  // absent: !given
};

// Validates every argument (see arg_table.h for the order of the checks).
FwdProblem validate_fwd(const cc1d_fwd_args* args);

// The launch of the forward kernel for a validated problem (fwd_plan.cpp).
KernelLaunch plan_fwd(const Problem& problem);

// The CPU implementation (fallback/cpu/fwd_cpu.cpp).
void fwd_cpu(const Problem& problem);

extern const OpEntry kFwdOp;

}  // namespace cc1d
