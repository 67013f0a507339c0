// library.cpp — the ops of ops.def registered with the torch dispatcher for CPU and CUDA
// tensors: STABLE_TORCH_LIBRARY with the stable ABI (one build for every newer libtorch),
// TORCH_LIBRARY otherwise; and the build facts.
#include "cc1d_torch/cc1d_torch.h"
#include "cc1d_torch/kernels.h"
#include "cc1d_torch_info.h"  // CC1D_TORCH_BUILD_INFO, written by cmake/cc1d_torch.cmake

#if CC1D_TORCH_STABLE
#include <torch/csrc/stable/library.h>
#define CC1D_TORCH_DEF STABLE_TORCH_LIBRARY
#define CC1D_TORCH_IMPL STABLE_TORCH_LIBRARY_IMPL
#define CC1D_TORCH_KERNEL(fn) TORCH_BOX(&fn)
#else
#include <torch/library.h>
#define CC1D_TORCH_DEF TORCH_LIBRARY
#define CC1D_TORCH_IMPL TORCH_LIBRARY_IMPL
#define CC1D_TORCH_KERNEL(fn) &fn
#endif

namespace cc1d_torch {

void check_rank(const char* op, const char* arg, const Tensor& t, int64_t lo, int64_t hi) {
  if (t.dim() < lo || t.dim() > hi)
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string(op) + ": argument '" + arg + "' must have " +
                                        (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
                                        " dimensions, got " + std::to_string(t.dim()));
}

}  // namespace cc1d_torch

CC1D_TORCH_DEF(causal_conv1d, m) {
#define CC1D_TORCH_OP(name, schema) m.def(schema);
#include "cc1d_torch/ops.def"
#undef CC1D_TORCH_OP
}

CC1D_TORCH_IMPL(causal_conv1d, CPU, m) {
#define CC1D_TORCH_OP(name, schema) m.impl(#name, CC1D_TORCH_KERNEL(cc1d_torch::name));
#include "cc1d_torch/ops.def"
#undef CC1D_TORCH_OP
}

CC1D_TORCH_IMPL(causal_conv1d, CUDA, m) {
#define CC1D_TORCH_OP(name, schema) m.impl(#name, CC1D_TORCH_KERNEL(cc1d_torch::name));
#include "cc1d_torch/ops.def"
#undef CC1D_TORCH_OP
}

extern "C" CC1D_TORCH_API const char* cc1d_torch_build_info(void) { return CC1D_TORCH_BUILD_INFO; }
