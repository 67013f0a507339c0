// bwd_kernels.h — the backward kernels' name expressions, shared by the planner and the
// emulator's host instantiations. Includes nothing from kernels_src.
#pragma once
#include <string>
#include <vector>

#include "cc1d/cc1d.h"

namespace cc1d {

// "cc1d::causal_conv1d_bwd_kernel<cc1d::bf16_t, float, 4, 1>" (layout: kBwdLayout*).
std::string bwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int layout);
// "time", "time_vec", "channel", "time_seq", "channel_seq", "channel_vec", "channel_vec_seq"
// (kBwdLayout*), for reports and benchmarks.
const char* bwd_layout_name(int layout);
// "cc1d::causal_conv1d_bwd_finalize_kernel<float>" (weight's dtype).
std::string bwd_finalize_kernel_name(cc1d_dtype w);
// The zeroing kernel of the atomic mode.
constexpr const char* kBwdZeroKernel = "cc1d::causal_conv1d_bwd_zero_kernel<float>";

// Every backward name expression (all dtype pairs, widths 1..CC1D_MAX_WIDTH, every layout,
// the finalize kernel per weight dtype, the zeroing kernel).
std::vector<std::string> all_bwd_kernels();

}  // namespace cc1d
