// varlen_op.h — the varlen-states op (causal_conv1d_varlen_states): its validated problem, its
// registry entry and its parts (validation, plan and the C entry point in varlen_op.cpp, the CPU
// implementation in fallback/cpu/varlen_cpu.cpp, the kernel in kernels_src/varlen.cuh).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/op.h"
#include "ops/varlen/varlen_kernels.h"

namespace cc1d {

struct VarlenProblem : Problem {
  int64_t total = 0, dim = 0, batch = 0, state_len = 0;
  cc1d_dtype dtype = CC1D_FLOAT32;  // x and out
  TensorRef x, cu_seqlens, out;     // x (total, dim), cu_seqlens (batch+1,), out (batch, dim, state_len)
  // The 16-byte path applies: x and out have unit dim stride, dim and every other stride are
  // multiples of 16 bytes' worth of elements, and both base pointers are 16-byte aligned.
  bool vec = false;
};

VarlenProblem validate_varlen(const cc1d_varlen_states_args* args);
KernelLaunch plan_varlen(const Problem& problem);
void varlen_cpu(const Problem& problem);  // fallback/cpu/varlen_cpu.cpp

// Sequence b's tokens [*begin, *end) whose states are kept (at most state_len of them), with the
// kernel's clamping (a no-op on validated host values): end = clamp(cu[b+1], 0, total),
// begin = max(clamp(cu[b], 0, end), end - state_len).
void varlen_bounds(const VarlenProblem& p, int64_t b, int64_t* begin, int64_t* end);

extern const OpEntry kVarlenOp;

}  // namespace cc1d
