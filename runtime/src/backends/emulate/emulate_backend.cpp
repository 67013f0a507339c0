// emulate_backend.cpp — the `emulate` backend: kernels_src compiled for the host and launched,
// by the kernel emulator (fallback/emulator/), with exactly the launch the nvrtc backend would
// perform (the op's plan), on host memory. A debugging tool: it shows that the GPU code computes
// the right thing and is free of barrier races, not how fast it is.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"

#ifdef CC1D_WITH_EMULATOR
#include "core/log.h"
#include "fallback/cpu/thread_pool.h"
#include "fallback/emulator/kernel_registry.h"
#include "fallback/emulator/launch.h"
#endif

namespace cc1d {

namespace {

#ifdef CC1D_WITH_EMULATOR

class EmulateBackend final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_EMULATE; }

  std::string unavailable_reason(const OpEntry& op, cc1d_device_type type, int device_index) override {
    if (op.plan == nullptr || op.host_kernels == nullptr)
      return std::string("the emulate backend has no kernel for op '") + op.name + "'";
    if (type != CC1D_DEVICE_CPU)
      return "the emulate backend runs kernels_src on the host and needs host (CPU) tensors, got CUDA device " +
             std::to_string(device_index) + "; use the nvrtc backend for CUDA tensors, or pass host tensors";
    return "";
  }

  void run(const OpEntry& op, const Problem& problem, void*) override {
    std::vector<float> own;  // host tensors without a caller's workspace: one of ours
    void* workspace = problem.workspace;
    if (problem.workspace_bytes > 0 && workspace == nullptr) {
      own.resize((problem.workspace_bytes + sizeof(float) - 1) / sizeof(float));
      std::memset(own.data(), 0xff, own.size() * sizeof(float));  // NaN: a read before a write shows
      workspace = own.data();
    }
    const std::vector<KernelLaunch> launches = op.plan(problem, workspace);
    std::vector<const emu::HostKernel*> kernels;
    for (const KernelLaunch& l : launches) {
      kernels.push_back(emu::find_host_kernel(l.kernel));
      if (kernels.back() == nullptr)
        fail(CC1D_ERR_INTERNAL, "emulate backend: no host instantiation of " + l.kernel + " (op '" + op.name +
                                    "': its host kernel list is out of date with its plan)");
    }
    if (!logged_.exchange(true))
      log_line(CC1D_LOG_INFO, "emulate backend: running kernels_src on the CPU, one fiber per GPU thread "
                              "(a debugging tool, not a fast path)");
    for (size_t i = 0; i < launches.size(); ++i) {
      const KernelLaunch& l = launches[i];
      emu::launch_host_kernel(*kernels[i], dim3(l.grid[0], l.grid[1], l.grid[2]),
                              dim3(l.block[0], l.block[1], l.block[2]), l.shared_bytes, l.params.data(),
                              l.params.size(), emu::options_from_env());
      ++launches_;
    }
  }

  std::string report_json() override {
    const emu::LaunchOptions o = emu::options_from_env();
    const emu::Stats s = emu::stats();
    return "{\"compiled_in\": true, \"available\": true, \"host_kernels\": " +
           std::to_string(emu::host_kernels().size()) + ", \"check\": " + (o.check ? "true" : "false") +
           ", \"workers\": " + std::to_string(num_threads()) + ", \"launches\": " + std::to_string(launches_.load()) +
           ", \"emulated_blocks\": " + std::to_string(s.blocks) + ", \"emulated_threads\": " +
           std::to_string(s.threads) + ", \"note\": \"debugging tool: kernels_src on the CPU, not a fast path\"}";
  }

 private:
  std::atomic<bool> logged_{false};
  std::atomic<uint64_t> launches_{0};
};

#else

// This libcc1d was built without the emulator (CC1D_BUILD_EMULATOR=OFF).
class EmulateBackend final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_EMULATE; }
  std::string unavailable_reason(const OpEntry&, cc1d_device_type, int) override {
    return "the emulate backend is not compiled into this libcc1d (built with CC1D_BUILD_EMULATOR=OFF); "
           "rebuild with -DCC1D_BUILD_EMULATOR=ON";
  }
  void run(const OpEntry& op, const Problem&, void*) override {
    throw Error(CC1D_ERR_BACKEND_UNAVAILABLE, unavailable_reason(op, CC1D_DEVICE_CPU, 0));
  }
  std::string report_json() override { return "{\"compiled_in\": false, \"available\": false}"; }
};

#endif

}  // namespace

std::unique_ptr<Backend> make_emulate_backend() { return std::make_unique<EmulateBackend>(); }

}  // namespace cc1d
