// nvrtc_backend.cpp — the GPU backend: kernels_src JIT-compiled by NVRTC for each device's
// exact SM, cached on disk, launched on the caller's stream in the device's primary context.
//
// State lives in a process-lifetime object that is never destroyed: modules, contexts and
// loaded libraries must outlive every static destructor that might still launch, and the
// CUDA driver may already be torn down when ours would run.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend.h"
#include "compiler.h"
#include "cubin_cache.h"
#include "cubin_elf.h"
#include "env_query.h"
#include "env_report.h"
#include "error.h"
#include "fwd_plan.h"
#include "kernel_source.h"
#include "log.h"
#include "nvrtc_choice.h"
#include "nvrtc_lib.h"

namespace cc1d {

namespace {

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

// One variant on one device; concurrent first calls wait on the same future (compile once).
struct Slot {
  std::promise<LoadedKernel> promise;
  std::shared_future<LoadedKernel> future = promise.get_future().share();
};

struct DeviceState {
  DeviceInfo info;
  NvrtcChoice choice;
  std::shared_ptr<NvrtcLib> nvrtc;  // null when !choice.ok
  // Retained on the device's first use only: retaining every GPU's primary context up front
  // would create a context (hundreds of MB) on GPUs the program never touches.
  std::atomic<CUcontext> ctx{nullptr};
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Slot>> kernels;
};

struct CompileRecord {
  std::string variant, target, origin;  // origin: "compiled", "disk cache", "memory cache"
  int device = 0;
  double ms = 0;
};

class NvrtcRuntime {
 public:
  // Probes driver, devices, NVRTC and kernel sources once; never throws.
  void probe() { std::call_once(probe_once_, [this] { do_probe(); }); }

  void check_available(cc1d_device_type type, int index) {
    if (type != CC1D_DEVICE_CUDA)
      fail(CC1D_ERR_BACKEND_UNAVAILABLE, "the nvrtc backend runs CUDA tensors only; host tensors "
                                         "use the cpu backend (CC1D_BACKEND_CPU or AUTO)");
    probe();
    if (!unavailable_.empty()) fail(CC1D_ERR_BACKEND_UNAVAILABLE, "nvrtc backend unavailable: " + unavailable_);
    if (index < 0 || (size_t)index >= devices_.size())
      fail(CC1D_ERR_INVALID_ARGUMENT, "CUDA device " + std::to_string(index) + " does not exist; the driver sees " +
                                          std::to_string(devices_.size()) + " device(s)");
    const DeviceState& d = *devices_[index];
    if (!d.choice.ok)
      fail(CC1D_ERR_BACKEND_UNAVAILABLE, "nvrtc backend unavailable on device " + std::to_string(index) +
                                             " (" + d.info.name + ", sm_" + std::to_string(d.info.sm) + "): " + d.choice.reason);
  }

  void fwd(const FwdProblem& problem, void* stream) {
    check_available(problem.device_type, problem.device_index);
    const FwdLaunch launch = plan_fwd(problem);
    DeviceState& dev = *devices_[problem.device_index];
    const LoadedKernel k = kernel(dev, launch.kernel);
    FwdParams params = launch.params;  // by value: the driver copies it at launch
    void* args[] = {&params};
    const CudaDriver& drv = *env_.driver.driver;
    ContextGuard ctx(drv, context(dev));
    const CUresult r = drv.api().cuLaunchKernel(k.function, launch.grid, launch.grid_y, 1, launch.block, 1, 1,
                                                launch.shared_bytes, static_cast<CUstream>(stream), args, nullptr);
    if (r != kCudaSuccess)
      fail(CC1D_ERR_CUDA, "cuLaunchKernel(" + launch.kernel + ", grid (" + std::to_string(launch.grid) + ", " + std::to_string(launch.grid_y) + ")" +
                              ", block " + std::to_string(launch.block) + ") on device " +
                              std::to_string(problem.device_index) + ": " + drv.describe(r));
  }

  std::string report_json();

 private:
  void do_probe();
  LoadedKernel kernel(DeviceState& dev, const std::string& name);
  CUcontext context(DeviceState& dev) {
    CUcontext c = dev.ctx.load(std::memory_order_acquire);
    if (c == nullptr) {
      c = env_.driver.driver->primary_context(dev.info.ordinal);  // locked, retains once
      dev.ctx.store(c, std::memory_order_release);
    }
    return c;
  }
  LoadedKernel build(DeviceState& dev, const std::string& name);
  void discover_for_report();

  std::once_flag probe_once_, discover_once_;
  GpuEnv env_;
  std::string unavailable_;  // a reason that applies to every device
  std::vector<NvrtcCandidate> candidates_;
  std::vector<std::string> not_found_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  KernelSources sources_;
  std::unique_ptr<CubinCache> cache_;
  std::mutex records_mu_;
  std::vector<CompileRecord> records_;
};

void NvrtcRuntime::do_probe() {
  try {
    cache_ = std::make_unique<CubinCache>(CubinCache::default_dir(), CubinCache::default_max_bytes());
    std::string sources_error;
    try {
      sources_ = load_kernel_sources();
    } catch (const Error& e) {
      sources_error = e.what();
    }
    env_ = query_gpu_env();
    if (!env_.available()) {
      unavailable_ = env_.driver.reason.empty() ? "no usable CUDA device" : env_.driver.reason;
      return;
    }
    std::call_once(discover_once_, [this] { candidates_ = discover_nvrtc(default_nvrtc_search(), &not_found_); });
    std::vector<NvrtcFacts> facts;
    for (const auto& c : candidates_) facts.push_back(c.facts);
    const int torch_major = torch_cuda_major();
    const CudaDriver& drv = *env_.driver.driver;
    for (const DeviceInfo& info : env_.devices) {
      auto d = std::make_unique<DeviceState>();
      d->info = info;
      d->choice = choose_nvrtc(facts, drv.version(), info.sm, torch_major);
      if (d->choice.ok) d->nvrtc = candidates_[d->choice.index].lib;
      logger().info("nvrtc backend, device {} ({}, sm_{}): {}", info.ordinal, info.name, info.sm,
                    d->choice.reason);
      devices_.push_back(std::move(d));
    }
    unavailable_ = sources_error;
  } catch (const Error& e) {
    unavailable_ = e.what();
  } catch (const std::exception& e) {
    unavailable_ = std::string("probe failed: ") + e.what();
  }
}

LoadedKernel NvrtcRuntime::kernel(DeviceState& dev, const std::string& name) {
  std::shared_ptr<Slot> slot;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(dev.mu);
    auto& s = dev.kernels[name];
    if (s == nullptr) {
      s = std::make_shared<Slot>();
      owner = true;
    }
    slot = s;
  }
  if (owner) {
    try {
      slot->promise.set_value(build(dev, name));
    } catch (...) {
      // Waiters get this error; the next call retries (a failure is never cached).
      slot->promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(dev.mu);
      dev.kernels.erase(name);
    }
  }
  return slot->future.get();
}

LoadedKernel NvrtcRuntime::build(DeviceState& dev, const std::string& name) {
  const NvrtcChoice& ch = dev.choice;
  const NvrtcLib& nvrtc = *dev.nvrtc;
  CacheKey key{sources_.hash, name, ch.kind, ch.target_arch, nvrtc.facts.version_string(),
               nvrtc_options(ch.kind, ch.target_arch), CC1D_ABI_VERSION};
  CompiledKernel ck;
  CompileRecord rec{name, std::string(ch.kind == CodeKind::Cubin ? "sm_" : "compute_") + std::to_string(ch.target_arch),
                    "compiled", dev.info.ordinal, 0};
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t mem_hits = cache_->stats().memory_hits;
  if (cache_->load(key, &ck)) {
    rec.origin = cache_->stats().memory_hits > mem_hits ? "memory cache" : "disk cache";
  } else {
    ck = compile_kernel(nvrtc, sources_, name, ch.kind, ch.target_arch);
    cache_->store(key, ck);
  }
  const std::string what = std::string(ch.kind == CodeKind::Cubin ? "cubin " : "PTX ") + rec.target +
                           " from NVRTC " + nvrtc.facts.version_string() + " on device " +
                           std::to_string(dev.info.ordinal) + " (" + dev.info.name + ", sm_" +
                           std::to_string(dev.info.sm) + ")";
  if (ch.kind == CodeKind::Cubin && cubin_sm(ck.image.data(), ck.image.size()) != dev.info.sm)
    fail(CC1D_ERR_INTERNAL, "kernel image for " + name + " names sm_" +
                                std::to_string(cubin_sm(ck.image.data(), ck.image.size())) + ", expected " + what);
  const CudaDriver& drv = *env_.driver.driver;
  LoadedKernel k;
  {
    ContextGuard ctx(drv, context(dev));
    CUresult r = drv.api().cuModuleLoadData(&k.module, ck.image.data());
    if (r != kCudaSuccess) {
      std::string hint = r == kCudaErrorUnsupportedPtxVersion
                             ? "; the PTX is newer than this driver can JIT: update the NVIDIA driver"
                             : "; please report this with the cc1d_report() output";
      // The driver cannot run this image here (too old for the PTX, a mismatched cubin): the
      // backend is unusable on this device, and callers fall back.
      fail(CC1D_ERR_BACKEND_UNAVAILABLE, "cuModuleLoadData failed for " + name + " (" + what + "): " + drv.describe(r) + hint);
    }
    r = drv.api().cuModuleGetFunction(&k.function, k.module, ck.lowered_name.c_str());
    if (r != kCudaSuccess) {
      drv.api().cuModuleUnload(k.module);
      fail(CC1D_ERR_CUDA, "cuModuleGetFunction(" + ck.lowered_name + ") failed for " + name + " (" + what +
                              "): " + drv.describe(r));
    }
  }
  rec.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(records_mu_);
  records_.push_back(rec);
  return k;
}

void NvrtcRuntime::discover_for_report() {
  std::call_once(discover_once_, [this] { candidates_ = discover_nvrtc(default_nvrtc_search(), &not_found_); });
}

std::string NvrtcRuntime::report_json() {
  probe();
  discover_for_report();  // lists NVRTC candidates even when no GPU is usable
  std::string j = "{\"compiled_in\": true, \"available\": " + std::string(unavailable_.empty() ? "true" : "false") +
                  ", \"reason\": " + json_quote(unavailable_) + ", \"driver\": " + gpu_env_json(env_) +
                  ", \"nvrtc_candidates\": [";
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const NvrtcFacts& f = candidates_[i].facts;
    std::string archs;
    for (size_t k = 0; k < f.archs.size(); ++k) archs += (k ? ", " : "") + std::to_string(f.archs[k]);
    j += std::string(i ? ", " : "") + "{\"path\": " + json_quote(f.path) + ", \"origin\": " + json_quote(f.origin) +
         ", \"version\": " + json_quote(f.load_error.empty() ? f.version_string() : "") + ", \"archs\": [" + archs +
         "], \"error\": " + json_quote(f.load_error) + "}";
  }
  j += "], \"nvrtc_not_found\": [";
  for (size_t i = 0; i < not_found_.size(); ++i) j += std::string(i ? ", " : "") + json_quote(not_found_[i]);
  j += "], \"devices\": [";
  for (size_t i = 0; i < devices_.size(); ++i) {
    const DeviceState& d = *devices_[i];
    const NvrtcChoice& c = d.choice;
    j += std::string(i ? ", " : "") + "{\"index\": " + std::to_string(d.info.ordinal) +
         ", \"sm\": " + std::to_string(d.info.sm) + ", \"usable\": " + (c.ok ? "true" : "false") +
         ", \"mode\": " + json_quote(c.ok ? code_kind_name(c.kind) : "") +
         ", \"target\": " + json_quote(c.ok ? (c.kind == CodeKind::Cubin ? "sm_" : "compute_") + std::to_string(c.target_arch) : "") +
         ", \"nvrtc\": " + json_quote(c.ok ? d.nvrtc->facts.path : "") +
         ", \"nvrtc_version\": " + json_quote(c.ok ? d.nvrtc->facts.version_string() : "") +
         ", \"reason\": " + json_quote(c.reason) + ", \"decisions\": " + decisions_json(c.decisions) + "}";
  }
  j += "], \"kernel_sources\": {\"origin\": " + json_quote(sources_.origin) + ", \"hash\": " + json_quote(sources_.hash) +
       "}, \"cache\": " + (cache_ ? cache_->report_json() : std::string("null")) + ", \"compiled\": [";
  std::lock_guard<std::mutex> lock(records_mu_);
  for (size_t i = 0; i < records_.size(); ++i) {
    const CompileRecord& r = records_[i];
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", r.ms);
    j += std::string(i ? ", " : "") + "{\"variant\": " + json_quote(r.variant) + ", \"device\": " +
         std::to_string(r.device) + ", \"target\": " + json_quote(r.target) + ", \"origin\": " +
         json_quote(r.origin) + ", \"ms\": " + ms + "}";
  }
  return j + "]}";
}

NvrtcRuntime& runtime() {
  static NvrtcRuntime* r = new NvrtcRuntime();  // never destroyed: see the file comment
  return *r;
}

class NvrtcBackend final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_NVRTC; }
  const char* name() const override { return "nvrtc"; }
  void check_available(cc1d_device_type type, int index) override { runtime().check_available(type, index); }
  void fwd(const FwdProblem& problem, void* stream) override { runtime().fwd(problem, stream); }
  std::string report_json() override {
    try {
      return runtime().report_json();
    } catch (const std::exception& e) {
      return "{\"compiled_in\": true, \"report_error\": " + json_quote(e.what()) + "}";
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_nvrtc_backend() { return std::make_unique<NvrtcBackend>(); }

}  // namespace cc1d
