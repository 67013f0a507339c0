// fwd_kernels.h — the forward kernel's name expressions, shared by the planner and the
// emulator's host instantiations. Includes nothing from kernels_src (the emulator compiles
// those inside an anonymous namespace).
#pragma once
#include <string>
#include <vector>

#include "cc1d/cc1d.h"

namespace cc1d {

// "cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, 0>" (path: a kFwdPath* constant of
// kernels_src/fwd_params.h).
std::string fwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int path);

// "time", "channel", "time_seq", "channel_seq", "time_vec", "channel_vec", "time_vec_silu",
// "channel_vec_silu", "channel_vec_seq" (kFwdPath* order).
const char* fwd_path_name(int path);

// Every forward name expression (all dtype pairs, widths 1..CC1D_MAX_WIDTH, every path).
std::vector<std::string> all_fwd_kernels();

}  // namespace cc1d
