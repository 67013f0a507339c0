// nvrtc_compile.h — compiles kernel variants with a chosen NVRTC.
//
// The main source and every other kernels_src file (as in-memory headers) go to NVRTC; each
// variant is named by a C++ name expression, so only what the program uses is instantiated
// and the mangled (lowered) name comes back from NVRTC rather than being guessed. Several
// variants can share one program (one front-end pass and one image holding every kernel):
// cheaper per kernel than one program each.
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

// The exact NVRTC options for a target with this NVRTC; part of every cache key. --minimal
// (NVRTC 12.4 and later: no texture, device-runtime or driver-API declarations, which the
// kernels do not use) makes the front end about 5% faster and leaves the SASS unchanged.
std::vector<std::string> nvrtc_options(CodeKind kind, int arch, const NvrtcFacts& nvrtc);

// Throws Error(CC1D_ERR_COMPILE) with the compile log when NVRTC rejects the source, and
// Error(CC1D_ERR_INTERNAL) for other NVRTC failures.
CompiledImage compile_kernel(const NvrtcLib& nvrtc, const KernelSources& sources,
                              const std::string& name_expression, CodeKind kind, int arch);

// Several variants in one program: one image (every entry point in it), and each variant's
// lowered name in the order of `names`. Same errors as compile_kernel.
struct CompiledProgram {
  std::string image;
  std::vector<std::string> lowered_names;
  std::string target;
  double ms = 0;
};
CompiledProgram compile_kernels(const NvrtcLib& nvrtc, const KernelSources& sources,
                                const std::vector<std::string>& names, CodeKind kind, int arch);

}  // namespace cc1d
