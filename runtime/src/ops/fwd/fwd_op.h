// fwd_op.h — the forward op: its validated problem, its registry entry and its parts
// (validation and the C entry point in fwd_op.cpp, the launch plan in fwd_plan.cpp, the CPU
// implementation in fallback/cpu/fwd_cpu.cpp, the kernel in kernels_src/fwd.cuh).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/fwd/fwd_kernels.h"
#include "ops/conv_inputs.h"
#include "ops/op.h"

namespace cc1d {

struct FwdProblem : ConvProblem {
  TensorRef out, final_states;  // final_states absent: !given
};

// Validates every argument (see arg_table.h for the order of the checks).
FwdProblem validate_fwd(const cc1d_fwd_args* args);

// The launch of the forward kernel for a validated problem (fwd_plan.cpp).
KernelLaunch plan_fwd(const Problem& problem);

// The CPU implementation (fallback/cpu/fwd_cpu.cpp).
void fwd_cpu(const Problem& problem);

extern const OpEntry kFwdOp;

}  // namespace cc1d
