// jit_backend.h — a backend that compiles kernels_src at run time for each device, with any
// Toolchain (toolchain.h). The nvrtc backend is this over the NVRTC toolchain.
#pragma once
#include <memory>

#include "backends/backend.h"
#include "jit/toolchain.h"

namespace cc1d {

std::unique_ptr<Backend> make_jit_backend(cc1d_backend id, std::unique_ptr<Toolchain> toolchain);

}  // namespace cc1d
