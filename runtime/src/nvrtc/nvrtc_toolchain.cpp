// nvrtc_toolchain.cpp — the NVIDIA toolchain of the JIT layer: the CUDA driver (loaded at run
// time), every NVRTC the process could use, the choice of NVRTC and target per device, compile,
// module load in the device's primary context, and launch on the caller's stream.
#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "jit/tier_targets.h"
#include "jit/toolchain.h"
#include "nvrtc/cubin_elf.h"
#include "nvrtc/gpu_env.h"
#include "nvrtc/nvrtc_choice.h"
#include "nvrtc/nvrtc_compile.h"
#include "nvrtc/nvrtc_lib.h"
#include "nvrtc/nvrtc_memo.h"
#include "nvrtc/ptx_tier.h"

namespace cc1d {

namespace {

// The report's mode of a device with no usable NVRTC that the shipped PTX tier alone serves, or a
// precompiled tier (then the shipped one).
constexpr const char* kTierOnlyMode = "shipped PTX only";
constexpr const char* kPrecompiledMode = "precompiled";
// A precompiled tier target's use on a device (the report's "precompiled"): the device's own
// keys, or another compiler's images loaded instead of a compile (Toolchain::stand_ins).
constexpr const char* kOwnKeys = "own keys";
constexpr const char* kStandsIn = "stands in";

struct DeviceChoice {
  NvrtcChoice choice;        // choice.index: the candidate of its NVRTC
  std::string tier_refusal;  // "" when the shipped PTX tier serves the device
  // The driver's refusal of the tier's PTX (under tier_mu_): the device's kernels then compile
  // with NVRTC.
  std::string tier_failure;
};

class NvrtcToolchain final : public Toolchain {
 public:
  cc1d_device_type device_type() const override { return CC1D_DEVICE_CUDA; }

  explicit NvrtcToolchain(const OfflineTargets* offline)
      : offline_(offline != nullptr), targets_(offline != nullptr ? *offline : OfflineTargets{}) {}

  std::string probe() override {
    if (offline_) return probe_offline();
    env_ = query_gpu_env();
    if (!env_.available()) return env_.driver.reason.empty() ? "no usable CUDA device" : env_.driver.reason;
    discover(true);
    const int torch_major = torch_cuda_major();
    for (const DeviceInfo& info : env_.devices)
      add_device(info.ordinal, info.name, info.sm, env_.driver.driver->version(), torch_major);
    return "";
  }

  const std::vector<JitDevice>& devices() const override { return devices_; }

  Producer producer(const JitDevice& dev, const KernelSources& sources, const std::string& name) override {
    if (const ShippedPtx* e = shipped(dev, sources, name))
      return Producer{shipped_ptx_tier().producer(*e, driver().version()), {std::string("ptx sha256 ") + e->digest},
                      "shipped PTX"};
    return Producer{dev.compiler, dev.options, ""};
  }

  // A precompiled tier's images for the device's arch and target by another NVRTC (or, on a
  // device without one, another than the tier target it took), whose driver rule this driver
  // meets: a node whose choice drifted from the tier's (another torch, another driver) loads
  // them rather than compile its own.
  std::vector<Producer> stand_ins(const JitDevice& dev) override {
    std::vector<Producer> out;
    if (offline_) return out;
    for (const TierTarget& t : tier_targets()) {
      bool known = false;
      for (const Producer& q : out) known |= q.compiler == t.compiler && q.options == t.options;
      if (!known && t.arch == dev.arch && tier_use(t, dev) == kStandsIn)
        out.push_back(Producer{t.compiler, t.options, ""});
    }
    return out;
  }

  std::vector<CompiledImage> compile(const KernelSources& sources, const std::vector<std::string>& names,
                                     const JitDevice& dev) override {
    std::vector<CompiledImage> out(names.size());
    // The tier's kernels are linked side by side, each in a thread of its own (a backward call's
    // three take its main kernel's time, not the sum); the rest go to NVRTC in one program here.
    std::vector<std::future<CompiledImage>> links(names.size());  // std::async's join when destroyed
    std::vector<std::string> todo;
    std::vector<size_t> at;
    for (size_t i = 0; i < names.size(); ++i) {
      if (const ShippedPtx* e = shipped(dev, sources, names[i]))
        links[i] = std::async(std::launch::async, [this, &dev, e] { return link_shipped(dev, *e); });
      else
        todo.push_back(names[i]), at.push_back(i);
    }
    if (!todo.empty()) {
      const NvrtcChoice& c = choices_[dev.ordinal].choice;
      if (!c.ok) no_compiler(dev, todo);
      // NVRTC may call the driver itself (it dlopen()s libcuda): relaxed for a first use inside a
      // capture too, as for the load below.
      std::optional<RelaxedCaptureGuard> relaxed;
      if (!offline_) relaxed.emplace(driver());
      const CompiledProgram p = compile_kernels(*nvrtc_of(dev), sources, todo, c.kind, c.target_arch);
      for (size_t k = 0; k < todo.size(); ++k) out[at[k]] = CompiledImage{p.image, p.lowered_names[k], p.target, p.ms};
    }
    std::exception_ptr failed;  // every link is waited for before an error leaves
    for (size_t i = 0; i < names.size(); ++i) {
      if (!links[i].valid()) continue;
      try {
        out[i] = links[i].get();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    return out;
  }

  void* load(const JitDevice& dev, const CompiledImage& image, const std::string& name) override {
    if (offline_) fail(CC1D_ERR_INTERNAL, "an offline toolchain (precompile) cannot load " + name);
    const NvrtcChoice& ch = choices_[dev.ordinal].choice;
    const std::string what = std::string(ch.kind == CodeKind::Cubin ? "cubin " : "PTX ") + dev.target + " from " +
                             (dev.compiler.empty() ? "the shipped PTX tier" : dev.compiler) + " on device " +
                             std::to_string(dev.ordinal) + " (" + dev.name + ", sm_" + std::to_string(dev.arch) + ")";
    if (ch.kind == CodeKind::Cubin && cubin_sm(image.image.data(), image.image.size()) != dev.arch)
      fail(CC1D_ERR_INTERNAL, "kernel image for " + name + " names sm_" +
                                  std::to_string(cubin_sm(image.image.data(), image.image.size())) + ", expected " + what);
    const CudaDriver& drv = driver();
    const RelaxedCaptureGuard relaxed(drv);  // a first call inside the caller's CUDA-graph capture
    ContextGuard ctx(drv, context(dev.ordinal));
    CUmodule module = nullptr;
    CUresult r = drv.api().cuModuleLoadData(&module, image.image.data());
    if (r != kCudaSuccess) {
      const std::string hint =
          r == kCudaErrorUnsupportedPtxVersion ? "; the PTX is newer than this driver can JIT: update the NVIDIA driver"
          : r == kCudaErrorStreamCaptureUnsupported || r == kCudaErrorStreamCaptureInvalidated
              ? "; a CUDA graph capture refused the module load: make this call once before capturing, or "
                "compile ahead with `causal-conv1d precompile`"
              : "; please report this with the cc1d_report() output";
      // The driver cannot run this image here (too old for the PTX, a mismatched cubin, a
      // capture that refuses the load): the backend is unusable for this call, and callers fall back.
      fail(CC1D_ERR_BACKEND_UNAVAILABLE,
           "cuModuleLoadData failed for " + name + " (" + what + "): " + drv.describe(r) + hint);
    }
    CUfunction fn = nullptr;
    r = drv.api().cuModuleGetFunction(&fn, module, image.lowered_name.c_str());
    if (r != kCudaSuccess) {
      drv.api().cuModuleUnload(module);
      fail(CC1D_ERR_CUDA, "cuModuleGetFunction(" + image.lowered_name + ") failed for " + name + " (" + what +
                              "): " + drv.describe(r));
    }
    return fn;
  }

  void launch(const JitDevice& dev, void* function, const KernelLaunch& l, void* stream) override {
    const CudaDriver& drv = driver();
    ContextGuard ctx(drv, context(dev.ordinal));
    void* args[] = {const_cast<unsigned char*>(l.params.data())};  // the driver copies it at launch
    const CUresult r =
        drv.api().cuLaunchKernel(static_cast<CUfunction>(function), l.grid[0], l.grid[1], l.grid[2], l.block[0],
                                 l.block[1], l.block[2], l.shared_bytes, static_cast<CUstream>(stream), args, nullptr);
    if (r != kCudaSuccess)
      fail(CC1D_ERR_CUDA, "cuLaunchKernel(" + l.kernel + ", grid (" + std::to_string(l.grid[0]) + ", " +
                              std::to_string(l.grid[1]) + ", " + std::to_string(l.grid[2]) + "), block " +
                              std::to_string(l.block[0]) + ") on device " + std::to_string(dev.ordinal) + ": " +
                              drv.describe(r));
  }

  unsigned long long resident_blocks(const JitDevice& dev, void* function, const KernelLaunch& l) override {
    int sms = 0;
    for (const DeviceInfo& info : env_.devices)
      if (info.ordinal == dev.ordinal) sms = info.sm_count;
    const CudaDriver& drv = driver();
    ContextGuard ctx(drv, context(dev.ordinal));
    int per_sm = 0;
    const CUresult r = drv.api().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, static_cast<CUfunction>(function), static_cast<int>(l.block[0] * l.block[1] * l.block[2]),
        l.shared_bytes);
    if (r != kCudaSuccess) {  // the launch goes ahead uncapped; say why once
      warn_once("occupancy:" + l.kernel, "cuOccupancyMaxActiveBlocksPerMultiprocessor failed for " + l.kernel + ": " +
                                             drv.describe(r) + "; CAUSAL_CONV1D_GRID_WAVES does not apply to it");
      return 0;
    }
    return static_cast<unsigned long long>(std::max(sms, 0)) * static_cast<unsigned long long>(std::max(per_sm, 0));
  }

  std::string report_members() override {
    discover();  // lists NVRTC candidates even when no GPU is usable
    std::string j = offline_ ? "\"assumed\": {\"driver_version\": " + std::to_string(targets_.driver_version) +
                                   ", \"torch_cuda_major\": " + std::to_string(targets_.torch_major) + "}"
                             : "\"driver\": " + gpu_env_json(env_);
    j += ", \"ptx_tier\": " + shipped_ptx_tier().report_json() + ", \"nvrtc_candidates\": [";
    std::lock_guard<std::mutex> lock(nvrtc_mu_);
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const NvrtcFacts& f = candidates_[i].facts;
      std::string archs;
      for (size_t k = 0; k < f.archs.size(); ++k) archs += (k ? ", " : "") + std::to_string(f.archs[k]);
      j += std::string(i ? ", " : "") + "{\"path\": " + json_quote(f.path) + ", \"origin\": " + json_quote(f.origin) +
           ", \"version\": " + json_quote(f.load_error.empty() ? f.version_string() : "") + ", \"archs\": [" + archs +
           "], \"loaded\": " + (candidates_[i].lib ? "true" : "false") +
           ", \"error\": " + json_quote(f.load_error) + "}";
    }
    j += "], \"nvrtc_not_found\": [";
    for (size_t i = 0; i < not_found_.size(); ++i) j += std::string(i ? ", " : "") + json_quote(not_found_[i]);
    j += "], \"devices\": [";
    for (size_t i = 0; i < devices_.size(); ++i) {
      const JitDevice& d = devices_[i];
      const DeviceChoice& dc = choices_[i];
      const NvrtcFacts* nv = dc.choice.ok ? &candidates_[dc.choice.index].facts : nullptr;
      j += std::string(i ? ", " : "") + "{\"index\": " + std::to_string(d.ordinal) + ", \"sm\": " +
           std::to_string(d.arch) + ", \"usable\": " + (d.usable ? "true" : "false") +
           ", \"mode\": " + json_quote(nv                    ? code_kind_name(dc.choice.kind)
                                         : !d.usable            ? ""
                                         : d.compiler.empty()   ? kTierOnlyMode
                                                                : kPrecompiledMode) +
           ", \"target\": " + json_quote(d.target) +
           ", \"nvrtc\": " + json_quote(nv ? nv->path : "") +
           ", \"nvrtc_version\": " + json_quote(nv ? nv->version_string() : "") +
           ", \"reason\": " + json_quote(d.reason) + ", \"ptx_tier\": " +
           json_quote(tier_state(dc)) + ", \"precompiled\": " + precompiled_json(d) +
           ", \"decisions\": " + decisions_json(dc.choice.decisions) + "}";
    }
    return j + "]";
  }

 private:
  // The choice of NVRTC and target for one device, as the rules of nvrtc_choice.h make it.
  void add_device(int ordinal, const std::string& name, int sm, int driver_version, int torch_major) {
    std::vector<NvrtcFacts> facts;
    for (const auto& c : candidates_) facts.push_back(c.facts);
    DeviceChoice dc;
    dc.choice = choose_nvrtc(facts, driver_version, sm, torch_major);
    if (!dc.choice.ok && no_nvrtc_search_) dc.choice.reason = kNoNvrtcReason;
    JitDevice d;
    d.ordinal = ordinal;
    d.name = name;
    d.arch = sm;
    d.usable = dc.choice.ok;
    d.reason = dc.choice.reason;
    if (dc.choice.ok) {
      const NvrtcFacts& nv = candidates_[dc.choice.index].facts;
      d.target = nvrtc_target(dc.choice.kind, dc.choice.target_arch);
      d.compiler = "NVRTC " + nv.version_string();
      d.options = nvrtc_options(dc.choice.kind, dc.choice.target_arch, nv);
      d.min_driver = dc.choice.kind == CodeKind::Cubin ? nv.major * 1000 : nv.version();  // nvrtc_choice.h's rules
    }
    dc.tier_refusal = offline_ ? "precompile compiles with NVRTC (the tier needs a driver)"
                               : shipped_ptx_tier().refusal(sm, driver_version);
    if (!dc.choice.ok && !offline_) without_nvrtc(d, dc, driver_version);
    log_line(CC1D_LOG_INFO, "nvrtc backend, device {} ({}, sm_{}): {}; shipped PTX tier: {}", ordinal, name, sm,
             dc.choice.reason, dc.tier_refusal.empty() ? "serves it" : dc.tier_refusal);
    devices_.push_back(d);
    choices_.push_back(dc);
  }

  // A device no NVRTC can compile for: a precompiled tier's images for its arch (their keys from
  // the tier's targets-v1), then the shipped PTX tier. A call whose kernel neither holds fails
  // with CC1D_ERR_UNSUPPORTED (compile()), so it falls back alone; with neither the device is
  // unusable.
  void without_nvrtc(JitDevice& d, DeviceChoice& dc, int driver_version) {
    std::string from;
    if (const TierTarget* t = find_tier_target(tier_targets(), d.arch, driver_version)) {
      d.target = t->target;
      d.compiler = t->compiler;
      d.options = t->options;
      d.min_driver = t->min_driver;
      dc.choice.kind = t->target.rfind("sm_", 0) == 0 ? CodeKind::Cubin : CodeKind::Ptx;
      from = "the precompiled tier " + t->tier + " (" + t->compiler + ", " + t->target + ")";
    }
    if (dc.tier_refusal.empty()) {
      if (d.target.empty()) d.target = "sm_" + std::to_string(d.arch);  // the driver links a cubin
      from += (from.empty() ? "" : ", then ") + std::string("the shipped PTX tier");
    }
    if (from.empty()) {
      d.reason += "; no precompiled tier holds its arch, and the shipped PTX tier cannot serve it: " + dc.tier_refusal;
      return;
    }
    d.usable = true;
    d.reason = "kernels only from " + from + ": " + dc.choice.reason;
  }

  // No driver: the archs asked for, with the driver assumed (by default one that runs the
  // newest NVRTC found, so each arch gets what a node with a current driver would choose).
  std::string probe_offline() {
    discover();
    if (targets_.driver_version == 0)
      for (const auto& c : candidates_)
        if (c.facts.load_error.empty()) targets_.driver_version = std::max(targets_.driver_version, c.facts.version());
    if (targets_.driver_version == 0) return "no usable NVRTC found (see nvrtc_candidates)";
    if (targets_.torch_major == 0) targets_.torch_major = torch_cuda_major();
    for (size_t i = 0; i < targets_.archs.size(); ++i)
      add_device((int)i, "sm_" + std::to_string(targets_.archs[i]) + " (offline)", targets_.archs[i],
                 targets_.driver_version, targets_.torch_major);
    return "";
  }

  // With the memo (nvrtc_memo.h), kept for processes that found a GPU: an NVRTC is loaded by
  // its first compile, not by discovery.
  void discover(bool memo = false) {
    std::call_once(discover_once_, [this, memo] {
      NvrtcMemo m(memo ? CacheConfig::default_dir() : "");
      const NvrtcSearchConfig search = default_nvrtc_search();
      no_nvrtc_search_ = search.disabled;
      candidates_ = discover_nvrtc(search, &not_found_, memo ? &m : nullptr);
    });
  }
  std::shared_ptr<NvrtcLib> nvrtc_of(const JitDevice& dev) {
    std::lock_guard<std::mutex> lock(nvrtc_mu_);
    NvrtcCandidate& c = candidates_[choices_[dev.ordinal].choice.index];
    if (c.lib == nullptr) c.lib = load_nvrtc(c);
    return c.lib;
  }
  CudaDriver& driver() const { return *env_.driver.driver; }
  // The targets of CAUSAL_CONV1D_CACHE_PATH's precompiled tiers, read at their first use.
  const std::vector<TierTarget>& tier_targets() {
    std::call_once(tier_targets_once_, [this] { tier_targets_ = read_tier_targets(CacheConfig::default_tiers()); });
    return tier_targets_;
  }

  // The tier's entry for a kernel on `dev`, or nullptr (refused for the device, or not held).
  const ShippedPtx* shipped(const JitDevice& dev, const KernelSources& sources, const std::string& name) {
    const DeviceChoice& dc = choices_[dev.ordinal];
    if (!dc.tier_refusal.empty()) return nullptr;
    std::lock_guard<std::mutex> lock(tier_mu_);
    return dc.tier_failure.empty() ? shipped_ptx_tier().find(sources.hash, name, dev.arch, driver().version()) : nullptr;
  }

  // A device without NVRTC (without_nvrtc) asked for kernels that no cache and not the shipped
  // PTX tier hold: that call falls back. Once the driver refused the tier's PTX, a device that
  // had only the tier has no kernels: every call does.
  [[noreturn]] void no_compiler(const JitDevice& dev, const std::vector<std::string>& names) {
    const DeviceChoice& dc = choices_[dev.ordinal];
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    std::lock_guard<std::mutex> lock(tier_mu_);
    const std::string where = "device " + std::to_string(dev.ordinal) + " (" + dev.name + ", sm_" +
                              std::to_string(dev.arch) + ") has ";
    if (!dc.tier_failure.empty() && dev.compiler.empty())
      fail(CC1D_ERR_BACKEND_UNAVAILABLE, where + "no kernels: the shipped PTX tier was turned off (" + dc.tier_failure +
                                             "), and NVRTC cannot compile them: " + dc.choice.reason);
    fail(CC1D_ERR_UNSUPPORTED, where + "no kernel for " + list + ": " +
                                   (dev.compiler.empty() ? "the shipped PTX tier does not hold it"
                                                         : "neither its precompiled tier nor the shipped PTX tier "
                                                           "holds it") +
                                   ", and NVRTC cannot compile it: " + dc.choice.reason);
  }

  // The precompiled tiers' targets for a device's arch, each with its use there: "own keys" (the
  // images this device would make), "stands in" (another compiler's, loaded instead of a
  // compile), or why neither.
  std::string precompiled_json(const JitDevice& d) {
    std::string j;
    if (!offline_)
      for (const TierTarget& t : tier_targets())
        if (t.arch == d.arch)
          j += std::string(j.empty() ? "" : ", ") + "{\"tier\": " + json_quote(t.tier) + ", \"target\": " +
               json_quote(t.target) + ", \"compiler\": " + json_quote(t.compiler) + ", \"min_driver\": " +
               json_quote(cuda_version_string(t.min_driver)) + ", \"use\": " + json_quote(tier_use(t, d)) + "}";
    return "[" + j + "]";
  }
  // A tier target's use on a device of its arch (what stand_ins and the report say).
  std::string tier_use(const TierTarget& t, const JitDevice& d) const {
    if (!d.usable) return "the device is unusable";
    if (t.target != d.target) return "its target is not " + d.target;
    if (t.compiler == d.compiler && t.options == d.options) return kOwnKeys;
    if (t.min_driver > driver().version()) return "needs a CUDA " + cuda_version_string(t.min_driver) + " driver";
    return kStandsIn;
  }

  // The report's word on the tier for a device: "serves", why not, or why it was turned off.
  std::string tier_state(const DeviceChoice& dc) {
    if (!dc.tier_refusal.empty()) return dc.tier_refusal;
    std::lock_guard<std::mutex> lock(tier_mu_);
    return dc.tier_failure.empty() ? "serves" : "turned off: " + dc.tier_failure;
  }

  // The driver's cubin of a shipped kernel. A refusal turns the tier off for the device (said
  // once), so the caller's retry compiles with NVRTC.
  CompiledImage link_shipped(const JitDevice& dev, const ShippedPtx& e) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const RelaxedCaptureGuard relaxed(driver());
      ContextGuard ctx(driver(), context(dev.ordinal));
      std::string cubin = link_ptx(driver(), shipped_ptx_tier().ptx(e), e.name);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return CompiledImage{std::move(cubin), e.lowered, dev.target, ms};
    } catch (const Error& err) {
      std::lock_guard<std::mutex> lock(tier_mu_);
      choices_[dev.ordinal].tier_failure = err.what();
      throw;
    }
  }
  // Retained on the device's first use only: retaining every GPU's primary context up front
  // would create a context (hundreds of MB) on GPUs the program never touches.
  CUcontext context(int ordinal) { return env_.driver.driver->primary_context(ordinal); }

  const bool offline_;
  OfflineTargets targets_;
  GpuEnv env_;
  std::once_flag discover_once_;
  std::vector<NvrtcCandidate> candidates_;  // lib under nvrtc_mu_
  std::mutex nvrtc_mu_;
  std::vector<std::string> not_found_;
  bool no_nvrtc_search_ = false;  // CAUSAL_CONV1D_NVRTC=none
  std::once_flag tier_targets_once_;
  std::vector<TierTarget> tier_targets_;
  std::vector<JitDevice> devices_;
  std::vector<DeviceChoice> choices_;
  std::mutex tier_mu_;
};

}  // namespace

std::unique_ptr<Toolchain> make_nvrtc_toolchain(const OfflineTargets* offline) {
  return std::make_unique<NvrtcToolchain>(offline);
}

}  // namespace cc1d
