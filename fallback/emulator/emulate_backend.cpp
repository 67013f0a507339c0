// emulate_backend.cpp — the `emulate` backend (CC1D_BACKEND_EMULATE): kernels_src compiled for
// the host, launched with exactly the grid, block and FwdParams the NVRTC backend would use
// (plan_fwd), on host memory. A debugging tool: it shows that the GPU code computes the right
// thing and is free of barrier races, not how fast it is.
#include <atomic>
#include <string>

#include "backend.h"
#include "error.h"
#include "fallback/thread_pool.h"
#include "fwd_plan.h"
#include "kernel_registry.h"
#include "launch.h"
#include "log.h"

namespace cc1d {

namespace {

class EmulateBackend final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_EMULATE; }
  const char* name() const override { return "emulate"; }

  void check_available(cc1d_device_type device_type, int device_index) override {
    if (device_type != CC1D_DEVICE_CPU)
      fail(CC1D_ERR_BACKEND_UNAVAILABLE,
           "the emulate backend runs kernels_src on the host and needs host (CPU) tensors, got CUDA device " +
               std::to_string(device_index) + "; use the nvrtc backend for CUDA tensors, or pass host tensors");
  }

  void fwd(const FwdProblem& problem, void* /*stream*/) override {
    check_available(problem.device_type, problem.device_index);
    FwdLaunch l = plan_fwd(problem);
    const emu::HostKernel* k = emu::find_host_kernel(l.kernel);
    if (k == nullptr)
      fail(CC1D_ERR_INTERNAL, "emulate backend: no host instantiation of " + l.kernel +
                                  " (the emulator's kernel list is out of date with fwd_plan)");
    if (!logged_.exchange(true))
      logger().info("emulate backend: running kernels_src on the CPU, one fiber per GPU thread "
                    "(a debugging tool, not a fast path)");
    void* args[] = {&l.params};
    const emu::LaunchOptions options = emu::options_from_env();
    emu::launch_host_kernel(*k, dim3(l.grid, l.grid_y), dim3(l.block), l.shared_bytes, args, options);
    ++launches_;
  }

  std::string report_json() override {
    const emu::LaunchOptions o = emu::options_from_env();
    const emu::Stats s = emu::stats();
    return "{\"compiled_in\": true, \"host_kernels\": " + std::to_string(emu::host_kernels().size()) +
           ", \"check\": " + (o.check ? "true" : "false") + ", \"workers\": " + std::to_string(num_threads()) +
           ", \"launches\": " + std::to_string(launches_.load()) +
           ", \"emulated_blocks\": " + std::to_string(s.blocks) + ", \"emulated_threads\": " +
           std::to_string(s.threads) + ", \"note\": \"debugging tool: kernels_src on the CPU, not a fast path\"}";
  }

 private:
  std::atomic<bool> logged_{false};
  std::atomic<uint64_t> launches_{0};
};

}  // namespace

std::unique_ptr<Backend> make_emulate_backend() { return std::make_unique<EmulateBackend>(); }

}  // namespace cc1d
