#include "jit/precompile.h"

#include <errno.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "jit/cache_fs.h"
#include "jit/image_cache.h"
#include "jit/kernel_source.h"
#include "jit/tier_targets.h"
#include "ops/op.h"

namespace cc1d {

std::vector<std::string> template_args(const std::string& name) {
  std::vector<std::string> args;
  const size_t open = name.find('<'), close = name.rfind('>');
  if (open == std::string::npos || close == std::string::npos || close < open) return args;
  int depth = 0;
  std::string cur;
  for (size_t i = open + 1; i < close; ++i) {
    const char c = name[i];
    depth += c == '<' ? 1 : c == '>' ? -1 : 0;
    if (c == ',' && depth == 0) {
      args.push_back(cur);
      cur.clear();
    } else if (c != ' ' || depth > 0) {
      cur += c;
    }
  }
  args.push_back(cur);
  return args;
}

namespace {

constexpr cc1d_dtype kElementTypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};

bool is_integer(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}


struct Job {
  const OpEntry* op;
  const KernelSources* sources;  // the op's (op_kernel_sources)
  std::string kernel;
  const JitDevice* device;
  // results
  std::string key, origin, error;
  uint64_t bytes = 0;
  double ms = 0;
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// CPU time of the whole process: the compile threads' work, whatever else runs on the machine.
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

const std::vector<int>& default_precompile_archs() {
  static const std::vector<int> archs = {75, 80, 86, 89, 90, 100, 120};
  return archs;
}

std::vector<std::string> filter_variants(const std::vector<std::string>& kernels, const std::vector<cc1d_dtype>& dtypes,
                                         const std::vector<int>& widths) {
  std::vector<std::string> kept;
  for (const std::string& k : kernels) {
    bool keep = true, width_seen = false;
    for (const std::string& a : template_args(k)) {
      if (!width_seen && is_integer(a)) {
        width_seen = true;
        keep = keep && (widths.empty() || std::count(widths.begin(), widths.end(), std::atoi(a.c_str())) > 0);
      }
      for (cc1d_dtype d : kElementTypes)
        if (a == kernel_type_name(d) && !dtypes.empty())
          keep = keep && std::count(dtypes.begin(), dtypes.end(), d) > 0;
    }
    if (keep) kept.push_back(k);
  }
  return kept;
}

std::string precompile(Toolchain& tc, const PrecompileRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_s();
  const KernelSources sources = load_kernel_sources();
  // The output directory: created readable by all (an image layer is read by the service's
  // user), and held to the trust rule nodes will apply to it as a tier.
  const std::string entries = req.out_dir + "/" + kEntriesSubdir;
  if (!make_dirs(entries, 0755))
    fail(CC1D_ERR_INVALID_ARGUMENT, "precompile: cannot create the output directory " + entries + ": " +
                                        std::strerror(errno));
  for (const std::string& d : {req.out_dir, entries}) {
    std::string why;
    if (check_dir(d, true, &why) != DirCheck::Ok)
      fail(CC1D_ERR_INVALID_ARGUMENT, "precompile: the output directory " + d + " " + why +
                                          "; GPU nodes would refuse it as a tier. Use a directory owned by you "
                                          "(or root) and writable by no one else");
  }
  CacheConfig config;
  config.dir = req.out_dir;
  config.max_bytes = 0;  // everything asked for, whatever the size
  config.shared = true;
  config.persist_stats = false;
  config.lock_timeout_s = default_lock_timeout_s();
  ImageCache cache(config);

  std::vector<KernelSources> op_sources;  // all_ops() order
  for (const OpEntry* op : all_ops())
    op_sources.push_back(op->kernels ? op_kernel_sources(sources, kernel_file_of(*op)) : KernelSources{});
  std::vector<Job> jobs;
  for (const JitDevice& dev : tc.devices())
    for (size_t o = 0; o < all_ops().size(); ++o) {
      const OpEntry* op = all_ops()[o];
      if (op->kernels == nullptr || (!req.ops.empty() && std::count(req.ops.begin(), req.ops.end(), (int)op->id) == 0))
        continue;
      for (const std::string& k : filter_variants(op->kernels(), req.dtypes, req.widths))
        jobs.push_back(Job{op, &op_sources[o], k, &dev, "", "", "", 0, 0});
    }
  if (jobs.empty()) fail(CC1D_ERR_INVALID_ARGUMENT, "precompile: no kernel variant matches the ops, dtypes and widths asked for");

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(jobs.size(), (size_t)(req.jobs > 0 ? req.jobs : (int)cores));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      Job& j = jobs[i];
      const JitDevice& dev = *j.device;
      const CacheKey key{j.sources->hash, j.kernel, dev.target, dev.compiler, dev.options, CC1D_ABI_VERSION};
      j.key = key.digest();
      const auto s = std::chrono::steady_clock::now();
      try {
        j.bytes = cache.get_or_compile(key, [&] { return tc.compile(*j.sources, {j.kernel}, dev)[0]; }, &j.origin).image.size();
      } catch (const std::exception& e) {
        j.error = first_line(e.what());
      }
      j.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_s = process_cpu_s() - cpu0;

  size_t compiled = 0, failed = 0;
  uint64_t bytes = 0;
  std::string variants, errors;
  for (const Job& j : jobs) {
    compiled += j.origin == "compiled";
    bytes += j.bytes;
    const std::string common = "{\"op\": " + json_quote(j.op->name) + ", \"kernel\": " + json_quote(j.kernel) +
                               ", \"arch\": " + std::to_string(j.device->arch) + ", \"target\": " +
                               json_quote(j.device->target);
    if (!j.error.empty()) {
      ++failed;
      errors += (errors.empty() ? "" : ", ") + common + ", \"error\": " + json_quote(j.error) + "}";
      continue;
    }
    variants += (variants.empty() ? "" : ", ") + common + ", \"compiler\": " + json_quote(j.device->compiler) +
                ", \"key\": " + json_quote(j.key) + ", \"bytes\": " + std::to_string(j.bytes) +
                ", \"origin\": " + json_quote(j.origin) + ", \"ms\": " + fixed_text(j.ms, 1) + "}";
  }
  std::string archs;
  for (const JitDevice& d : tc.devices())
    archs += (archs.empty() ? "" : ", ") + std::string("{\"arch\": ") + std::to_string(d.arch) +
             ", \"target\": " + json_quote(d.target) + ", \"compiler\": " + json_quote(d.compiler) +
             ", \"reason\": " + json_quote(d.reason) + "}";
  const double per_s = compiled / std::max(wall_s, 1e-9);
  const std::string manifest =
      "{\"manifest\": \"causal-conv1d precompile\", \"library_version\": " + json_quote(cc1d_version()) +
      ", \"abi_version\": " + std::to_string(CC1D_ABI_VERSION) + ", \"entries_dir\": " + json_quote(kEntriesSubdir) +
      ", \"kernel_sources\": {\"origin\": " + json_quote(sources.origin) + ", \"hash\": " + json_quote(sources.hash) +
      ", \"ops\": {" + op_digests_json([&](const OpEntry& op) {
        return op_sources[std::find(all_ops().begin(), all_ops().end(), &op) - all_ops().begin()].hash;
      }) + "}}, \"toolchain\": {" + tc.report_members() + "}, \"archs\": [" + archs + "], \"variants\": [" + variants +
      "], \"errors\": [" + errors + "], \"totals\": {\"variants\": " + std::to_string(jobs.size()) +
      ", \"compiled\": " + std::to_string(compiled) + ", \"already_present\": " +
      std::to_string(jobs.size() - compiled - failed) + ", \"failed\": " + std::to_string(failed) +
      ", \"bytes\": " + std::to_string(bytes) + ", \"wall_s\": " + fixed_text(wall_s, 3) + ", \"cpu_s\": " +
      fixed_text(cpu_s, 3) + ", \"variants_per_cpu_s\": " + fixed_text(compiled / std::max(cpu_s, 1e-9), 3) + ", \"jobs\": " +
      std::to_string(threads) + ", \"variants_per_s\": " + fixed_text(per_s, 3) + ", \"variants_per_s_per_core\": " +
      fixed_text(per_s / threads, 3) + "}}";
  const std::string targets = tier_targets_text(merged_tier_targets(tc.devices(), req.out_dir));
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"manifest.json", manifest + "\n"},
                                    {kTierTargetsFile, targets}})
    if (const int err = write_file_atomic(req.out_dir, name, text, 0644))
      fail(CC1D_ERR_INTERNAL, "precompile: writing " + req.out_dir + "/" + name + " failed: " + std::strerror(err));
  if (cache.state() != "read-write")
    fail(CC1D_ERR_INTERNAL, "precompile: the output directory " + req.out_dir + " became " + cache.state() +
                                " while entries were written (see the warning above); the output is incomplete");
  if (!errors.empty())
    fail(CC1D_ERR_COMPILE, "precompile: some variants failed to compile (the others are in " + req.out_dir +
                               "; see \"errors\" in manifest.json): [" + errors + "]");
  log_line(CC1D_LOG_INFO, "precompile: {} variants ({} compiled) for {} archs in {} s with {} threads into {}",
           jobs.size(), compiled, tc.devices().size(), Fixed{wall_s, 1}, threads, req.out_dir);
  return manifest;
}

}  // namespace cc1d
