// varlen_kernels.h — the varlen-states kernel's name expressions, shared by the planner and the
// emulator's host instantiations (which must not see kernels_src from here).
#pragma once
#include <string>
#include <vector>

#include "cc1d/cc1d.h"

namespace cc1d {

// "cc1d::causal_conv1d_varlen_states_kernel<cc1d::half_t, true>": VEC true is the 16-byte path.
std::string varlen_kernel_name(cc1d_dtype x, bool vec);

// Every varlen-states name expression (3 dtypes x {scalar, vector}).
std::vector<std::string> all_varlen_kernels();

}  // namespace cc1d
