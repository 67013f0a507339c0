// op.h — an op is the unit of extension. Each op (forward, update, ...) owns, in its own files:
//  - its argument table and validation: ops/<op>/<op>_op.cpp, which also defines its C entry point;
//  - its plan: the kernel launches (kernel, parameter block, grid, block, shared memory), in order,
//    and the device scratch memory they share (the workspace);
//  - its CPU implementation: fallback/cpu/<op>_cpu.cpp;
//  - its kernel: kernels_src/<op>.cuh, and its host instantiations for the emulator;
// and is registered by one line in ops/registry.cpp. Backends never name an op: they receive an
// OpEntry and a validated Problem, and run op.cpu(problem) or launch op.plan(problem, workspace).
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "core/arg_table.h"

namespace cc1d {

namespace emu {
struct HostKernel;
}

// A validated call. Each op derives its own problem (the tensors and sizes it needs).
struct Problem {
  cc1d_device_type device_type = CC1D_DEVICE_CPU;
  int device_index = 0;
  bool nothing_to_do = false;  // valid, but no element to compute (an empty batch or dim)
  // Scratch memory on the tensors' device that the op's kernel plan needs (0: none), and the
  // caller's buffer for it (null: none given). libcc1d never allocates device memory: an op that
  // needs a workspace requires it of the caller for GPU tensors; for host tensors the emulate
  // backend allocates one (filled with 0xff bytes, so a read before a write shows up).
  size_t workspace_bytes = 0;
  void* workspace = nullptr;
  // The memory of the outputs the op overwrites whole (its Role::Out tensors): the cpu backend
  // asks for huge pages on their untouched parts (platform/huge_pages.h).
  ByteSpan outputs[kMaxArgRows];
  int noutputs = 0;
  virtual ~Problem() = default;

  // The device and the outputs, from the op's validated arguments.
  void bind(const BoundArgs& b) {
    device_type = b.device_type;
    device_index = b.device_index;
    noutputs = b.nwritten;
    std::copy(b.written, b.written + b.nwritten, outputs);
  }
};

// A kernel launch as every kernel-running backend (nvrtc, emulate) performs it.
struct KernelLaunch {
  std::string kernel;                 // NVRTC name expression, e.g. "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>"
  std::vector<unsigned char> params;  // the kernel's one by-value parameter block
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  // The kernel strides over every grid axis (blk += gridDim.x, ...), so any smaller grid computes
  // the same result: a backend may cap it (cap_blocks; CAUSAL_CONV1D_GRID_WAVES).
  bool grid_strided = false;

  // At most max_blocks blocks in all (0: no cap): z and y keep what fits, x takes the rest, each
  // at least 1. Only for a grid_strided launch.
  void cap_blocks(unsigned long long max_blocks) {
    if (max_blocks == 0) return;
    for (int axis = 2; axis >= 0; --axis) {
      grid[axis] = static_cast<unsigned>(std::min<unsigned long long>(grid[axis], max_blocks));
      max_blocks /= grid[axis];
    }
  }

  template <typename Params>
  void set_params(const Params& p) {
    params.resize(sizeof p);
    std::memcpy(params.data(), &p, sizeof p);
  }
};

struct OpEntry {
  cc1d_op id;
  const char* name;                              // "fwd", as cc1d_op_name
  void (*cpu)(const Problem&);                   // the native CPU implementation, or null
  // The kernel launches, run in order on one stream, given the workspace (problem.workspace_bytes
  // at `workspace`); null when the op has no GPU kernel.
  std::vector<KernelLaunch> (*plan)(const Problem&, void* workspace);
  std::vector<std::string> (*kernels)();         // every name expression plan() can choose
  // Its file in kernels_src ("fwd.cuh"): a JIT backend compiles the op's kernels from it and
  // what it includes, and keys their cached images by those files alone.
  const char* kernel_file;
  void (*host_kernels)(std::vector<emu::HostKernel>&);  // the emulator's instantiations, or null
};

// The plan of an op that is one launch and needs no workspace.
template <KernelLaunch (*Plan)(const Problem&)>
std::vector<KernelLaunch> one_launch(const Problem& problem, void*) {
  return {Plan(problem)};
}

// Kernel type name of a dtype in kernels_src: "float", "cc1d::half_t", "cc1d::bf16_t" (for the
// ops' name expressions).
const char* kernel_type_name(cc1d_dtype dtype);

// The registered ops, in cc1d_op order.
const std::vector<const OpEntry*>& all_ops();
// The op with that id, or nullptr.
const OpEntry* find_op(int32_t id);
// The op whose kernels() lists name expression `kernel`, or nullptr (for tools and tests).
const OpEntry* find_kernel_op(const std::string& kernel);
// op.kernel_file; throws Error(CC1D_ERR_INTERNAL) for an op that has kernels but names no file.
const char* kernel_file_of(const OpEntry& op);

}  // namespace cc1d
