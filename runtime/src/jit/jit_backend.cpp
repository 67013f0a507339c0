// jit_backend.cpp — the vendor-neutral JIT backend: kernel sources, the compiled-image cache
// (memory and disk), compile-once per (device, kernel), the kernels one call needs compiled in
// one program, and launches through the toolchain on the caller's stream.
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

#include "core/env.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"

namespace cc1d {

namespace {

// CAUSAL_CONV1D_GRID_WAVES: unset or 0 launches a block per work item (the default); N caps each
// grid-strided launch at N waves of resident blocks.
constexpr const char* kGridWavesEnv = "CAUSAL_CONV1D_GRID_WAVES";
constexpr unsigned kMaxGridWaves = 1024;

// One kernel on one device; concurrent first calls wait on the same future (compile once).
struct Slot {
  std::promise<void*> promise;
  std::shared_future<void*> future = promise.get_future().share();
};

struct CompileRecord {
  // origin: "compiled", a prebuilt tier's name, "memory cache", "disk cache", "tier <path>"
  std::string kernel, target, origin;
  int device = 0;
  double ms = 0;        // the call's kernels together: lookup, compile, load
  size_t program = 0;   // compiled: how many kernels its compiler program held (0 otherwise)
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
    std::vector<KernelLaunch> launches = op.plan(problem, problem.workspace);
    const JitDevice& dev = tc_->devices()[problem.device_index];
    // Every kernel is compiled and loaded before the first launch: a failure leaves nothing half done.
    const std::vector<void*> fns = kernels(dev, op_sources(op), launches);
    if (const unsigned waves = env_count(kGridWavesEnv, kMaxGridWaves))
      for (size_t i = 0; i < launches.size(); ++i)
        if (launches[i].grid_strided) cap_to_waves(dev, fns[i], launches[i], waves);
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

  // The op's kernel sources (op_kernel_sources of the sources in force), made once per op.
  const KernelSources& op_sources(const OpEntry& op) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = op_sources_.find(op.name);
    if (it == op_sources_.end()) it = op_sources_.emplace(op.name, op_kernel_sources(sources_, kernel_file_of(op))).first;
    return it->second;  // never erased: the reference outlives the lock
  }
  std::vector<void*> kernels(const JitDevice& dev, const KernelSources& src, const std::vector<KernelLaunch>& launches);
  // A grid-strided launch cut to `waves` times the blocks the device holds at once (1: a
  // persistent grid: fewer blocks, each walking more work items); unchanged where that is not known.
  void cap_to_waves(const JitDevice& dev, void* function, KernelLaunch& l, unsigned waves) {
    const unsigned long long resident = tc_->resident_blocks(dev, function, l);
    const unsigned before[3] = {l.grid[0], l.grid[1], l.grid[2]};
    l.cap_blocks(waves * resident);
    log_line(CC1D_LOG_DEBUG, "{}: grid ({}, {}, {}) -> ({}, {}, {}): {} wave(s) of {} resident blocks", l.kernel,
             before[0], before[1], before[2], l.grid[0], l.grid[1], l.grid[2], waves, resident);
  }
  std::vector<void*> build(const JitDevice& dev, const KernelSources& src, const std::vector<std::string>& names);

  cc1d_backend id_;
  std::unique_ptr<Toolchain> tc_;
  std::once_flag probe_once_;
  std::string unavailable_;  // a reason that applies to every device
  KernelSources sources_;
  std::unordered_map<std::string, KernelSources> op_sources_;  // by op name
  std::unique_ptr<ImageCache> cache_;
  std::mutex mu_;
  std::vector<std::unordered_map<std::string, std::shared_ptr<Slot>>> slots_;  // per device
  std::vector<CompileRecord> records_;
};

// The entry points of one call's kernels. Those that no earlier or concurrent call is building
// are built here, together: what no cache holds is compiled in one program.
std::vector<void*> JitBackend::kernels(const JitDevice& dev, const KernelSources& src,
                                       const std::vector<KernelLaunch>& launches) {
  std::vector<std::shared_ptr<Slot>> slots;
  std::vector<std::string> mine;  // names copied only to build them
  std::vector<std::shared_ptr<Slot>> mine_slots;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const KernelLaunch& l : launches) {
      const std::string& name = l.kernel;
      auto& s = slots_[dev.ordinal][name];
      if (s == nullptr) {
        s = std::make_shared<Slot>();
        mine.push_back(name);
        mine_slots.push_back(s);
      }
      slots.push_back(s);
    }
  }
  if (!mine.empty()) {
    try {
      const std::vector<void*> fns = build(dev, src, mine);
      for (size_t i = 0; i < mine.size(); ++i) mine_slots[i]->promise.set_value(fns[i]);
    } catch (...) {
      // Waiters get this error; the next call retries (a failure is never cached).
      for (const auto& s : mine_slots) s->promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& name : mine) slots_[dev.ordinal].erase(name);
    }
  }
  std::vector<void*> fns;
  for (const auto& s : slots) fns.push_back(s->future.get());
  return fns;
}

std::vector<void*> JitBackend::build(const JitDevice& dev, const KernelSources& src,
                                     const std::vector<std::string>& names) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<CompiledImage> images(names.size());
  std::vector<std::string> origins(names.size());
  size_t compiled = 0;
  std::vector<std::string> prebuilt(names.size());  // Producer::prebuilt of each image compile() made
  // Compile once across processes: hits, or this process compiles while the others wait.
  const auto fetch = [&](const std::vector<size_t>& which, const std::vector<CacheKey>& keys) {
    std::vector<std::string> got;
    const std::vector<CompiledImage> imgs = cache_->get_or_compile_all(
        keys,
        [&](const std::vector<size_t>& missing) {
          std::vector<std::string> todo;
          compiled = 0;  // those of the compiler's program
          for (size_t i : missing) {
            todo.push_back(names[which[i]]);
            compiled += prebuilt[which[i]].empty();
          }
          return tc_->compile(src, todo, dev);
        },
        &got);
    for (size_t k = 0; k < which.size(); ++k) {
      images[which[k]] = imgs[k];
      origins[which[k]] = got[k];
    }
  };
  const Producer own{dev.compiler, dev.options, ""};
  const auto key = [&](const std::string& name, const Producer& p) {
    return CacheKey{src.hash, name, dev.target, p.compiler, p.options, CC1D_ABI_VERSION};
  };
  const std::vector<Producer> stand_ins = tc_->stand_ins(dev);
  for (int attempt = 0;; ++attempt) {
    std::vector<size_t> which;
    std::vector<CacheKey> keys;
    for (size_t i = 0; i < names.size(); ++i) {
      const Producer p = tc_->producer(dev, src, names[i]);
      prebuilt[i] = p.prebuilt;
      // What a cache holds comes before what would be made: the device compiler's own image
      // (fetch looks for it too, but would link a prebuilt tier's kernel first), then another
      // compiler's image in a precompiled tier.
      const auto held = [&](const Producer& q) {
        return cache_->load(key(names[i], q), &images[i], &origins[i], false);
      };
      bool found = !own.compiler.empty() && (!p.prebuilt.empty() || !stand_ins.empty()) && held(own);
      for (size_t k = 0; !found && k < stand_ins.size(); ++k)
        if ((found = held(stand_ins[k])))
          log_line(CC1D_LOG_INFO, "{}: {}'s image from {} stands in for a compile with {}", names[i],
                   stand_ins[k].compiler, origins[i], own.compiler.empty() ? "no compiler" : own.compiler);
      if (found) {
        prebuilt[i].clear();
        continue;
      }
      which.push_back(i);
      keys.push_back(key(names[i], p));
    }
    try {
      if (!which.empty()) fetch(which, keys);
      break;
    } catch (const Error& e) {
      // A prebuilt tier that failed turns itself off: then once more, with the device's compiler.
      bool turned_off = false;
      for (size_t i = 0; i < names.size(); ++i)
        turned_off |= !prebuilt[i].empty() && tc_->producer(dev, src, names[i]).prebuilt.empty();
      if (attempt > 0 || !turned_off) throw;
      // (A device with no compiler fails the retry with a message that holds this one.)
      if (!own.compiler.empty())
        log_line(CC1D_LOG_WARN, "{} backend: {}; using {}'s kernels instead", backend_name(id_), e.what(),
                 dev.compiler);
    }
  }
  std::vector<void*> fns;
  for (size_t i = 0; i < names.size(); ++i) fns.push_back(tc_->load(dev, images[i], names[i]));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < names.size(); ++i) {
    const bool made = origins[i] == "compiled";
    records_.push_back(CompileRecord{names[i], dev.target, made && !prebuilt[i].empty() ? prebuilt[i] : origins[i],
                                     dev.ordinal, ms, made && prebuilt[i].empty() ? compiled : 0});
  }
  return fns;
}

std::string JitBackend::report_json() {
  probe();
  const std::string ops = sources_.main_source.empty()  // the sources did not load
                              ? std::string()
                              : op_digests_json([&](const OpEntry& op) { return op_sources(op).hash; });
  std::string j = "{\"compiled_in\": true, \"available\": " + std::string(unavailable_.empty() ? "true" : "false") +
                  ", \"reason\": " + json_quote(unavailable_) + ", " + tc_->report_members() +
                  ", \"grid_waves\": " + std::to_string(env_count(kGridWavesEnv, kMaxGridWaves)) +
                  ", \"kernel_sources\": {\"origin\": " + json_quote(sources_.origin) +
                  ", \"hash\": " + json_quote(sources_.hash) + ", \"ops\": {" + ops +
                  "}}, \"cache\": " + (cache_ ? cache_->report_json() : std::string("null")) + ", \"compiled\": [";
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < records_.size(); ++i) {
    const CompileRecord& r = records_[i];
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", r.ms);
    j += std::string(i ? ", " : "") + "{\"variant\": " + json_quote(r.kernel) + ", \"device\": " +
         std::to_string(r.device) + ", \"target\": " + json_quote(r.target) + ", \"origin\": " +
         json_quote(r.origin) + ", \"program_kernels\": " + std::to_string(r.program) + ", \"ms\": " + ms + "}";
  }
  return j + "]}";
}

}  // namespace

std::unique_ptr<Backend> make_jit_backend(cc1d_backend id, std::unique_ptr<Toolchain> toolchain) {
  return std::make_unique<JitBackend>(id, std::move(toolchain));
}

}  // namespace cc1d
