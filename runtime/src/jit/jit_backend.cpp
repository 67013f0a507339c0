// jit_backend.cpp — the vendor-neutral JIT backend: kernel sources, the compiled-image cache
// (memory and disk), compile-once per (device, kernel), and launches through the toolchain on
// the caller's stream.
//
// State lives in a process-lifetime object that is never destroyed: modules, contexts and
// loaded libraries must outlive every static destructor that might still launch, and the
// driver may already be torn down when ours would run.
#include "jit/jit_backend.h"

#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"

namespace cc1d {

namespace {

// One kernel on one device; concurrent first calls wait on the same future (compile once).
struct Slot {
  std::promise<void*> promise;
  std::shared_future<void*> future = promise.get_future().share();
};

struct CompileRecord {
  std::string kernel, target, origin;  // origin: "compiled", "memory cache", "disk cache", "tier <path>"
  int device = 0;
  double ms = 0;
};

class JitBackend final : public Backend {
 public:
  JitBackend(cc1d_backend id, std::unique_ptr<Toolchain> tc) : id_(id), tc_(std::move(tc)) {}

  cc1d_backend id() const override { return id_; }

  std::string unavailable_reason(const OpEntry& op, cc1d_device_type type, int index) override {
    const std::string me = std::string("the ") + backend_name(id_) + " backend";
    if (op.plan == nullptr) return me + " has no kernel for op '" + op.name + "'";
    if (type != tc_->device_type())
      return me + " runs on " + (tc_->device_type() == CC1D_DEVICE_CUDA ? "CUDA" : "GPU") +
             " tensors only; host tensors use the cpu backend";
    probe();
    if (!unavailable_.empty()) return me + " is unavailable: " + unavailable_;
    const auto& devs = tc_->devices();
    if (index < 0 || static_cast<size_t>(index) >= devs.size())  // the caller's mistake, not a fallback
      fail(CC1D_ERR_INVALID_ARGUMENT, me + ": device " + std::to_string(index) + " does not exist; the driver sees " +
                                          std::to_string(devs.size()) + " device(s)");
    const JitDevice& d = devs[index];
    if (!d.usable)
      return me + " is unavailable on device " + std::to_string(index) + " (" + d.name + ", arch " +
             std::to_string(d.arch) + "): " + d.reason;
    return "";
  }

  void run(const OpEntry& op, const Problem& problem, void* stream) override {
    const std::string why = unavailable_reason(op, problem.device_type, problem.device_index);
    if (!why.empty()) fail(CC1D_ERR_BACKEND_UNAVAILABLE, why);
    if (problem.workspace_bytes > 0 && problem.workspace == nullptr)
      fail(CC1D_ERR_INVALID_ARGUMENT, std::string("op '") + op.name + "' needs a device workspace of " +
                                          std::to_string(problem.workspace_bytes) + " bytes on the " +
                                          backend_name(id_) + " backend and none was passed (libcc1d never "
                                          "allocates device memory); pass the op's workspace argument");
    const std::vector<KernelLaunch> launches = op.plan(problem, problem.workspace);
    const JitDevice& dev = tc_->devices()[problem.device_index];
    // Every kernel is compiled and loaded before the first launch: a failure leaves nothing half done.
    std::vector<void*> fns;
    for (const KernelLaunch& l : launches) fns.push_back(kernel(dev, l.kernel));
    for (size_t i = 0; i < launches.size(); ++i) tc_->launch(dev, fns[i], launches[i], stream);
  }

  std::string report_json() override;

 private:
  void probe() {
    std::call_once(probe_once_, [this] {
      try {
        cache_ = std::make_unique<ImageCache>(CacheConfig::from_env());
        std::string sources_error;
        try {
          sources_ = load_kernel_sources();
        } catch (const Error& e) {
          sources_error = e.what();
        }
        unavailable_ = tc_->probe();
        if (unavailable_.empty()) unavailable_ = sources_error;
        slots_.resize(tc_->devices().size());
      } catch (const std::exception& e) {
        unavailable_ = std::string("probe failed: ") + e.what();
      }
    });
  }

  void* kernel(const JitDevice& dev, const std::string& name);
  void* build(const JitDevice& dev, const std::string& name);

  cc1d_backend id_;
  std::unique_ptr<Toolchain> tc_;
  std::once_flag probe_once_;
  std::string unavailable_;  // a reason that applies to every device
  KernelSources sources_;
  std::unique_ptr<ImageCache> cache_;
  std::mutex mu_;
  std::vector<std::unordered_map<std::string, std::shared_ptr<Slot>>> slots_;  // per device
  std::vector<CompileRecord> records_;
};

void* JitBackend::kernel(const JitDevice& dev, const std::string& name) {
  std::shared_ptr<Slot> slot;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = slots_[dev.ordinal][name];
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
      std::lock_guard<std::mutex> lock(mu_);
      slots_[dev.ordinal].erase(name);
    }
  }
  return slot->future.get();
}

void* JitBackend::build(const JitDevice& dev, const std::string& name) {
  const CacheKey key{sources_.hash, name, dev.target, dev.compiler, dev.options, CC1D_ABI_VERSION};
  CompileRecord rec{name, dev.target, "", dev.ordinal, 0};
  const auto t0 = std::chrono::steady_clock::now();
  // Compile once across processes: a hit, or this process compiles while the others wait.
  const CompiledImage image =
      cache_->get_or_compile(key, [&] { return tc_->compile(sources_, name, dev); }, &rec.origin);
  void* fn = tc_->load(dev, image, name);
  rec.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(rec);
  return fn;
}

std::string JitBackend::report_json() {
  probe();
  std::string j = "{\"compiled_in\": true, \"available\": " + std::string(unavailable_.empty() ? "true" : "false") +
                  ", \"reason\": " + json_quote(unavailable_) + ", " + tc_->report_members() +
                  ", \"kernel_sources\": {\"origin\": " + json_quote(sources_.origin) +
                  ", \"hash\": " + json_quote(sources_.hash) +
                  "}, \"cache\": " + (cache_ ? cache_->report_json() : std::string("null")) + ", \"compiled\": [";
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < records_.size(); ++i) {
    const CompileRecord& r = records_[i];
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", r.ms);
    j += std::string(i ? ", " : "") + "{\"variant\": " + json_quote(r.kernel) + ", \"device\": " +
         std::to_string(r.device) + ", \"target\": " + json_quote(r.target) + ", \"origin\": " +
         json_quote(r.origin) + ", \"ms\": " + ms + "}";
  }
  return j + "]}";
}

}  // namespace

std::unique_ptr<Backend> make_jit_backend(cc1d_backend id, std::unique_ptr<Toolchain> toolchain) {
  return std::make_unique<JitBackend>(id, std::move(toolchain));
}

}  // namespace cc1d
