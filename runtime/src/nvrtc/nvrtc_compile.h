// nvrtc_compile.h — compiles one kernel variant with a chosen NVRTC.
//
// The main source and every other kernels_src file (as in-memory headers) go to NVRTC; the
// variant is named by a C++ name expression, so only what the program uses is instantiated
// and the mangled (lowered) name comes back from NVRTC rather than being guessed.
#pragma once
#include <string>
#include <vector>

#include "jit/image_cache.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_choice.h"
#include "nvrtc/nvrtc_lib.h"

namespace cc1d {


// "sm_90" (cubin) or "compute_90" (PTX).
std::string nvrtc_target(CodeKind kind, int arch);

// The exact NVRTC options for a target; part of every cache key.
std::vector<std::string> nvrtc_options(CodeKind kind, int arch);

// Throws Error(CC1D_ERR_COMPILE) with the compile log when NVRTC rejects the source, and
// Error(CC1D_ERR_INTERNAL) for other NVRTC failures.
CompiledImage compile_kernel(const NvrtcLib& nvrtc, const KernelSources& sources,
                              const std::string& name_expression, CodeKind kind, int arch);

}  // namespace cc1d
