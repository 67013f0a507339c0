// kernel_registry.h — the host-compiled instantiations of kernels_src/, by name expression.
//
// Every forward variant of fwd_plan.h's all_fwd_kernels() (3 x dtypes x 3 w dtypes x widths
// 1..8 x 2 layouts = 144) is compiled for the host in fwd_kernels_{f32,f16,bf16}.cpp and listed
// here under exactly the name expression the NVRTC backend compiles, e.g.
//   "cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, 0>".
// The fake CUDA driver finds them from NVRTC's lowered (Itanium-mangled) names by demangling.
//
// This header must not include kernels_src/ (the kernel translation units include the kernels
// inside an anonymous namespace).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "launch.h"

namespace cc1d {
namespace emu {

struct HostKernel {
  std::string name;                    // the NVRTC name expression
  void (*fn)(void** args) = nullptr;   // the kernel body for the current emulated thread
  size_t param_bytes = 0;              // size of its one by-value parameter (FwdParams)
  // What a launch writes, from its parameters (compared in checking mode).
  std::vector<Region> (*outputs)(const HostKernel& kernel, void** args) = nullptr;
  // Forward variants: the template arguments.
  cc1d_dtype x_dtype = CC1D_FLOAT32;
  cc1d_dtype w_dtype = CC1D_FLOAT32;
  int width = 0;
  int layout = 0;
};

// Filled by the kernel translation units: fn, param_bytes and the template arguments.
void add_fwd_kernels_f32(std::vector<HostKernel>& out);
void add_fwd_kernels_f16(std::vector<HostKernel>& out);
void add_fwd_kernels_bf16(std::vector<HostKernel>& out);

// Every host kernel, sorted by name (built on first use, thread-safe).
const std::vector<HostKernel>& host_kernels();

// The kernel with that name expression, or nullptr.
const HostKernel* find_host_kernel(const std::string& name_expression);

// The name expression of an Itanium-mangled function name, e.g.
// "_ZN4cc1d24causal_conv1d_fwd_kernelINS_6bf16_tEfLi4ELi0EEEvNS_9FwdParamsE" ->
// "cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, 0>", or "" if it does not demangle.
std::string name_expression_from_lowered(const char* lowered);

// find_host_kernel(name_expression_from_lowered(lowered)).
const HostKernel* find_host_kernel_lowered(const char* lowered);

// How many launches of `kernel` this process has run (tests check every variant ran).
uint64_t host_kernel_launches(const HostKernel& kernel);

// Runs `kernel` as cuLaunchKernel would, on host memory, with options_from_env().
void launch_host_kernel(const HostKernel& kernel, dim3 grid, dim3 block, size_t dynamic_shared, void** args,
                        const LaunchOptions& options);

}  // namespace emu
}  // namespace cc1d
