// toolchain.h — the vendor-specific half of a JIT backend, behind a small interface:
// discover (driver, devices, compilers), choose (a target per device), compile, load, launch.
//
// jit_backend.cpp holds everything vendor-neutral (kernel sources, the compiled-image cache,
// compile-once per device and kernel, the report); nvrtc/nvrtc_toolchain.cpp implements this
// interface for NVIDIA. A hipRTC toolchain would be one more implementation. Nothing here
// names an NVRTC or CUDA type.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "jit/image_cache.h"
#include "jit/kernel_source.h"
#include "ops/op.h"

namespace cc1d {

// One device as the toolchain sees it, and what its kernels are compiled for.
struct JitDevice {
  int ordinal = 0;
  std::string name;
  int arch = 0;                      // e.g. 90 for sm_90
  bool usable = false;
  std::string reason;                // why this target, or (when !usable) why none
  std::string target;                // e.g. "sm_90" (an exact binary) or "compute_90" (portable IR)
  // The compiler's identity, part of every cache key: "NVRTC 13.0"; "" on a device that a
  // prebuilt tier alone serves (Toolchain::producer names the tier, compile() refuses the rest).
  std::string compiler;
  std::vector<std::string> options;  // the exact compile options, part of every cache key
  int min_driver = 0;                // the oldest driver that loads its images (CUDA: 13000 = 13.0)
};

// Who makes a kernel's image: the compiler identity and options of its cache key.
struct Producer {
  std::string compiler;
  std::vector<std::string> options;
  // A tier built with libcc1d, not the device's compiler: what the report calls an image it made
  // ("shipped PTX"); "" for the device's compiler.
  std::string prebuilt;
};

class Toolchain {
 public:
  virtual ~Toolchain() = default;
  virtual cc1d_device_type device_type() const = 0;
  // Finds the driver, the devices and the compilers, once. Returns "" when usable at all, else
  // the reason (no driver, no device, ...). Never throws.
  virtual std::string probe() = 0;
  virtual const std::vector<JitDevice>& devices() const = 0;
  // Compiles kernels `names` (C++ name expressions) for the device's target in one program: one
  // image holding them all, returned once per name with that kernel's entry point. Throws
  // CC1D_ERR_COMPILE with the compiler's log when the source is rejected.
  virtual std::vector<CompiledImage> compile(const KernelSources& sources, const std::vector<std::string>& names,
                                             const JitDevice& device) = 0;
  // Who makes kernel `name`'s image for `dev`: the device's compiler (dev.compiler, dev.options),
  // or a prebuilt tier that holds it, whose image compile() then returns. A tier that fails in
  // compile() turns itself off for the device, so the next producer() names the compiler.
  virtual Producer producer(const JitDevice& dev, const KernelSources& /*sources*/, const std::string& /*name*/) {
    return Producer{dev.compiler, dev.options, ""};
  }
  // Other producers whose images, where a cache holds them, load on `dev` and stand in for a
  // compile: a precompiled tier's, made for the device's target by another compiler (the tier
  // was built with another NVRTC than the node chooses), best first. Asked only when no cache
  // holds the device compiler's own image.
  virtual std::vector<Producer> stand_ins(const JitDevice& /*dev*/) { return {}; }
  // Loads an image on the device and returns its entry point (an opaque handle kept for the life
  // of the process). Throws CC1D_ERR_BACKEND_UNAVAILABLE when the driver refuses the image.
  virtual void* load(const JitDevice& device, const CompiledImage& image, const std::string& name) = 0;
  // Queues a launch on `stream` (the caller's). No allocation, copy or synchronisation.
  virtual void launch(const JitDevice& device, void* function, const KernelLaunch& launch, void* stream) = 0;
  // How many blocks of this launch's shape (its block size and dynamic shared memory) the device
  // holds at once: its multiprocessors times the blocks each keeps resident; 0 if unknown.
  virtual unsigned long long resident_blocks(const JitDevice& device, void* function, const KernelLaunch& launch) = 0;
  // JSON object members (no braces) describing the driver, compilers and per-device choices.
  virtual std::string report_members() = 0;
};

// Devices that are not here, for `precompile` on a machine without a GPU: one per arch, each
// compiled for exactly as a node with that arch and this driver would compile for it.
struct OfflineTargets {
  std::vector<int> archs;  // e.g. 90 for sm_90
  int driver_version = 0;  // as the driver reports it (CUDA: 12080 = 12.8); 0: the newest compiler's
  int torch_major = 0;     // torch's CUDA major on the node; 0: the torch of cc1d_set_torch_info
};

// The NVIDIA toolchain; with `offline`, probe() finds no driver and lists one device per arch.
std::unique_ptr<Toolchain> make_nvrtc_toolchain(const OfflineTargets* offline = nullptr);

}  // namespace cc1d
