// kernel_registry.h — the host-compiled instantiations of kernels_src/, by name expression.
//
// Each op's kernels are compiled for the host in its own translation units (kernels_<op>*.cpp),
// which include kernels_src inside an anonymous namespace: every kernel function then has
// internal linkage there, helpers that are not `inline` cannot collide between units, and
// nothing of the kernels leaks out of libcc1d (so kernels_src must not include system
// headers; NVRTC compiles it bare anyway). Each unit registers its kernels under exactly the
// name expression the op's planner produces, through the op's OpEntry::host_kernels. The fake
// CUDA driver finds them from NVRTC's lowered (Itanium-mangled) names by demangling.
//
// This header must not include kernels_src/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "fallback/emulator/launch.h"

namespace cc1d {
namespace emu {

struct HostKernel {
  std::string name;                   // the NVRTC name expression
  void (*fn)(void** args) = nullptr;  // the kernel body for the current emulated thread
  size_t param_bytes = 0;             // size of its one by-value parameter block
  // What a launch writes, read from its parameter block (compared in checking mode).
  std::vector<Region> (*writes)(const void* params) = nullptr;
};

// Every host kernel of every registered op, sorted by name (built on first use, thread-safe).
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

// Runs `kernel` as cuLaunchKernel would, on host memory. `params` is its parameter block of
// `param_bytes` bytes; a size mismatch is an error naming the kernel.
void launch_host_kernel(const HostKernel& kernel, dim3 grid, dim3 block, size_t dynamic_shared, const void* params,
                        size_t param_bytes, const LaunchOptions& options);

}  // namespace emu
}  // namespace cc1d
