// nvrtc_backend.cpp — the `nvrtc` backend: the vendor-neutral JIT backend (jit/) over the NVIDIA
// toolchain (nvrtc/): kernels_src compiled by NVRTC for each device's exact SM, cached on disk,
// launched on the caller's stream in the device's primary context.
#include "backends/backend.h"
#include "jit/jit_backend.h"

namespace cc1d {

std::unique_ptr<Backend> make_nvrtc_backend() { return make_jit_backend(CC1D_BACKEND_NVRTC, make_nvrtc_toolchain()); }

}  // namespace cc1d
