// fwd_plan.h — turns a validated FwdProblem into the kernel variant, parameter block and
// launch geometry. Shared by the NVRTC and emulator backends so both run the same launch.
#pragma once
#include <string>
#include <vector>

#include "../../kernels_src/fwd_params.h"
#include "fwd_problem.h"

namespace cc1d {

struct FwdLaunch {
  FwdParams params{};
  std::string kernel;  // NVRTC name expression, e.g. "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>"
  unsigned grid = 1;    // grid.x: (channel block, time chunk) pairs, capped (the kernel strides)
  unsigned grid_y = 1;  // grid.y: batches, capped at 65535 (the kernel strides)
  unsigned block = kFwdThreads;
  unsigned shared_bytes = 0;
};

FwdLaunch plan_fwd(const FwdProblem& problem);

// Kernel type name of a dtype in kernels_src: "float", "cc1d::half_t", "cc1d::bf16_t".
const char* kernel_type_name(cc1d_dtype dtype);

// Every forward name expression (all dtype pairs, widths 1..CC1D_MAX_WIDTH, both layouts).
std::vector<std::string> all_fwd_kernels();

}  // namespace cc1d
