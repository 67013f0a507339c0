// compiler.h — compiles one kernel variant with a chosen NVRTC.
//
// The main source and every other kernels_src file (as in-memory headers) go to NVRTC; the
// variant is named by a C++ name expression, so only what the program uses is instantiated
// and the mangled (lowered) name comes back from NVRTC rather than being guessed.
#pragma once
#include <string>
#include <vector>

#include "kernel_source.h"
#include "nvrtc_choice.h"
#include "nvrtc_lib.h"

namespace cc1d {

struct CompiledKernel {
  std::string image;         // cubin bytes, or NUL-terminated PTX text
  std::string lowered_name;  // the symbol to pass to cuModuleGetFunction
  CodeKind kind = CodeKind::Cubin;
  int arch = 0;
  double ms = 0;             // wall time of nvrtcCompileProgram and friends
};

// The exact NVRTC options for a target; part of every cache key.
std::vector<std::string> nvrtc_options(CodeKind kind, int arch);

// Throws Error(CC1D_ERR_COMPILE) with the compile log when NVRTC rejects the source, and
// Error(CC1D_ERR_INTERNAL) for other NVRTC failures.
CompiledKernel compile_kernel(const NvrtcLib& nvrtc, const KernelSources& sources,
                              const std::string& name_expression, CodeKind kind, int arch);

}  // namespace cc1d
