// update_kernels.h — the update kernel's name expressions, shared by the planner and the
// emulator's host instantiations (which must not see kernels_src from here).
#pragma once
#include <string>
#include <vector>

#include "cc1d/cc1d.h"

namespace cc1d {

// "cc1d::causal_conv1d_update_kernel<cc1d::bf16_t, float, 4>".
std::string update_kernel_name(cc1d_dtype x, cc1d_dtype w, int width);

// Every update name expression (all dtype pairs, widths 1..CC1D_MAX_WIDTH).
std::vector<std::string> all_update_kernels();

}  // namespace cc1d
