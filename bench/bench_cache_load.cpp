// bench_cache_load — a new process's first kernel served from the disk cache, from lookup to
// module in hand (goal: under 2 ms). Every sample is a fresh process (this binary re-executed),
// as a node's worker starting on a warm machine is.
//
//   bench_cache_load [--runs N]
//
// The parent compiles one real variant (fwd, fp32, width 4, sm_90) through the nvrtc backend on
// the fake libcuda (tests/fake_driver/, launches not executed), into a private cache and, with
// precompile, into a read-only tier. Each child then measures, in this order:
//  1. "first call: lookup to module": the runtime's own timing of its first kernel (key, cache
//     lookup and checks, counters, cuModuleLoadData and cuModuleGetFunction on the fake driver),
//     read from cc1d_report's "compiled" record, and the whole first call around it (which also
//     pays the driver and NVRTC discovery);
//  2. "cache lookup alone": a fresh ImageCache's load of the same key (trust checks, open, read,
//     SHA-256, counters), and the same with the counters off;
//  3. "read the same bytes": open, read and close of the entry file, the floor of any lookup.
// Run with the local cache; the same with NVRTC's facts (nvrtc_memo.h) removed before each child,
// so its discovery loads NVRTC as every process did before they were kept; and with the local
// cache off and the tier as the only source (no facts are kept then).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <string>
#include <vector>

#include "bench_tensor.h"
#include "bench_util.h"
#include "cc1d/cc1d.h"
#include "jit/cache_fs.h"
#include "jit/image_cache.h"
#include "jit/kernel_source.h"
#include "jit/toolchain.h"
#include "nvrtc/nvrtc_memo.h"

using namespace cc1d;

namespace {

// The first call of a process: a tiny forward on "CUDA" tensors (host memory; the fake driver
// does not execute it). Returns the call's wall time, the runtime's build time of its kernel, where
// the kernel came from, and which variant the planner chose (read back, not assumed).
bool first_call(double* call_ms, double* build_ms, std::string* origin, std::string* variant) {
  const BenchTensor x(CC1D_DEVICE_CUDA, {2, 8, 16}), w(CC1D_DEVICE_CUDA, {8, 4}), out(CC1D_DEVICE_CUDA, {2, 8, 16});
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.out = &out.t;
  a.backend = CC1D_BACKEND_NVRTC;
  const double t0 = now_ms();
  if (cc1d_causal_conv1d_fwd(&a) != CC1D_OK) {
    std::fprintf(stderr, "first call failed: %s\n", cc1d_last_error());
    return false;
  }
  *call_ms = now_ms() - t0;
  size_t n = 0;
  cc1d_report(nullptr, 0, &n);
  std::string r(n, '\0');
  cc1d_report(&r[0], r.size(), &n);
  const size_t rec = r.find("\"compiled\": [{");
  const size_t o = r.find("\"origin\": \"", rec), ms = r.find("\"ms\": ", rec);
  const size_t v = r.find("\"variant\": \"", rec);
  if (rec == std::string::npos || o == std::string::npos || ms == std::string::npos || v == std::string::npos)
    return false;
  *origin = r.substr(o + 11, r.find('"', o + 11) - o - 11);
  *variant = r.substr(v + 12, r.find('"', v + 12) - v - 12);
  *build_ms = std::atof(r.c_str() + ms + 6);
  return true;
}

// The key the nvrtc backend uses for `kernel` on the fake sm_90 device (its driver: CUDA 13.0).
CacheKey bench_key(const std::string& kernel) {
  OfflineTargets t;
  t.archs = {90};
  t.driver_version = 13000;
  const auto tc = make_nvrtc_toolchain(&t);
  if (!tc->probe().empty() || !tc->devices()[0].usable) std::abort();
  const JitDevice& d = tc->devices()[0];
  // Keys hash the op's own sources (kernel_sources_of), as the nvrtc backend's do.
  return CacheKey{kernel_sources_of(load_kernel_sources(), kernel).hash, kernel, d.target, d.compiler, d.options,
                  CC1D_ABI_VERSION};
}

int child() {
  double call_ms = 0, build_ms = 0;
  std::string origin, variant;
  if (!first_call(&call_ms, &build_ms, &origin, &variant)) return 1;
  const CacheKey key = bench_key(variant);  // not timed: NVRTC discovery
  CacheConfig cfg = CacheConfig::from_env();
  double t0 = now_ms();
  CompiledImage img;
  if (!ImageCache(cfg).load(key, &img)) return 1;
  const double lookup_ms = now_ms() - t0;
  cfg.persist_stats = false;
  t0 = now_ms();
  if (!ImageCache(cfg).load(key, &img)) return 1;
  const double lookup_nostats_ms = now_ms() - t0;
  const std::string dir = cfg.dir.empty() ? cfg.tiers.at(0) : cfg.dir;
  const std::string path = dir + "/" + kEntriesSubdir + "/" + key.digest() + kEntrySuffix;
  std::string bytes(1 << 20, '\0');  // allocated and touched before the clock starts
  t0 = now_ms();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const ssize_t got = fd >= 0 ? read(fd, &bytes[0], bytes.size()) : -1;
  if (fd >= 0) close(fd);
  const double raw_ms = now_ms() - t0;
  if (got <= 0) return 1;
  std::replace(origin.begin(), origin.end(), ' ', '_');
  std::printf("%s %.4f %.4f %.4f %.4f %.4f %zd\n", origin.c_str(), build_ms, call_ms, lookup_ms, lookup_nostats_ms,
              raw_ms, got);
  return 0;
}

std::string run_child(const std::string& self) {
  int p[2];
  if (pipe(p) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    execl(self.c_str(), self.c_str(), "--child", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  std::string out;
  char buf[512];
  for (ssize_t r; (r = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, (size_t)r);
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "";
}

struct Dist {
  std::vector<double> v;
  std::string str() {
    std::sort(v.begin(), v.end());
    char b[96];
    std::snprintf(b, sizeof b, "%7.3f | %7.3f | %7.3f", v[v.size() / 2], v[v.size() * 9 / 10], v.back());
    return b;
  }
};

// `forget`: a file removed before each child (nullptr: none).
void series(const std::string& self, const char* what, int runs, const char* forget = nullptr) {
  Dist build, call, lookup, nostats, raw;
  std::string origin;
  ssize_t bytes = 0;
  for (int i = 0; i < runs; ++i) {
    if (forget != nullptr) std::remove(forget);
    char o[64];
    double b, c, l, n, r;
    if (std::sscanf(run_child(self).c_str(), "%63s %lf %lf %lf %lf %lf %zd", o, &b, &c, &l, &n, &r, &bytes) != 7) {
      std::printf("a child failed\n");
      std::exit(1);
    }
    origin = o;
    build.v.push_back(b), call.v.push_back(c), lookup.v.push_back(l), nostats.v.push_back(n), raw.v.push_back(r);
  }
  std::printf("\n%s: %d fresh processes, the kernel came from the %s (entry %zd bytes); ms: median | p90 | max\n",
              what, runs, origin.c_str(), bytes);
  std::printf("  first call: lookup to module in hand (runtime's timing) %s\n", build.str().c_str());
  std::printf("  first call, whole (with driver and NVRTC discovery)    %s\n", call.str().c_str());
  std::printf("  cache lookup alone (fresh ImageCache, with counters)   %s\n", lookup.str().c_str());
  std::printf("  cache lookup alone, counters off                       %s\n", nostats.str().c_str());
  std::printf("  read the same bytes (open, read, close)                %s\n", raw.str().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "--child")) return child();
  int runs = 30;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::max(3, std::atoi(argv[++i]));
  if (!have_nvrtc()) return exit_without_nvrtc("bench_cache_load", "no NVRTC to compile the kernel it loads back");
  char tmpl[] = "/tmp/cc1d_bench_load_XXXXXX";
  const std::string root = mkdtemp(tmpl), local = root + "/local", tier = root + "/tier";
  const std::string self = std::string(argv[0]);
  setenv("CAUSAL_CONV1D_CUDA_DRIVER", CC1D_BENCH_FAKE_DRIVER, 1);
  setenv("CC1D_FAKE_EXECUTE", "0", 1);
  setenv("CC1D_FAKE_SM", "90", 1);
  setenv("CAUSAL_CONV1D_CACHE_DIR", local.c_str(), 1);
  unsetenv("CAUSAL_CONV1D_CACHE_PATH");
  setenv("CAUSAL_CONV1D_PTX_TIER", "0", 1);  // the cold run compiles with NVRTC, as precompile does below
  const std::string cold = run_child(self);
  if (cold.rfind("compiled ", 0) != 0) {  // the cold child compiled: the kernel is now on disk
    std::printf("the cold run did not compile (needs an NVRTC and the fake driver): %s\n", cold.c_str());
    return 1;
  }
  const int32_t arch = 90, op = CC1D_OP_FWD, dtype = CC1D_FLOAT32, width = 4;
  cc1d_precompile_args a{};
  a.struct_size = sizeof a;
  a.out_dir = tier.c_str();
  a.archs = &arch, a.num_archs = 1, a.ops = &op, a.num_ops = 1, a.dtypes = &dtype, a.num_dtypes = 1;
  a.widths = &width, a.num_widths = 1, a.driver_version = 13000;
  char* manifest = nullptr;
  if (cc1d_precompile(&a, &manifest) != CC1D_OK) {
    std::printf("precompile failed: %s\n", cc1d_last_error());
    return 1;
  }
  cc1d_free(manifest);
  std::printf("bench_cache_load: the first forward (fp32, width 4, (2, 8, 16)), %ld cores\n", sysconf(_SC_NPROCESSORS_ONLN));
  series(self, "local cache", runs);
  // As every process was before NVRTC's facts were kept: discovery loads NVRTC to ask it.
  const std::string facts = local + "/" + NvrtcMemo::kFileName;
  series(self, "local cache, NVRTC's facts forgotten before each process", runs, facts.c_str());
  setenv("CAUSAL_CONV1D_CACHE_DIR", "off", 1);
  setenv("CAUSAL_CONV1D_CACHE_PATH", tier.c_str(), 1);
  series(self, "read-only tier only (local cache off)", runs);
  std::filesystem::remove_all(root);
  return 0;
}
