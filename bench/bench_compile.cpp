// bench_compile — cold NVRTC compile time per forward variant (goal: < 100 ms each), and what
// the disk cache saves: the time to load the same kernel back from a cache entry.
//
//   bench_compile [--all] [--arch N] [--threads N]
// Default: one variant per dtype pair and layout at width 4 (18 variants), sm_90, 1 thread.
// --all compiles all 144. Prints one line per variant and a summary (min/median/max).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc/nvrtc_compile.h"
#include "jit/image_cache.h"
#include "ops/fwd/fwd_op.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_lib.h"

using namespace cc1d;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void summary(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  std::printf("%-28s n=%-4zu min %7.1f  median %7.1f  max %7.1f ms\n", what, v.size(), v.front(), v[v.size() / 2],
              v.back());
}

}  // namespace

int main(int argc, char** argv) {
  bool all = false;
  int arch = 90, threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--all")) all = true;
    else if (!std::strcmp(argv[i], "--arch") && i + 1 < argc) arch = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--all] [--arch N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  const double t_discover = now_ms();
  const auto cands = discover_nvrtc(default_nvrtc_search());
  std::vector<NvrtcFacts> facts;
  for (const auto& c : cands) facts.push_back(c.facts);
  const NvrtcChoice ch = choose_nvrtc(facts, 99000, arch, 0);
  if (!ch.ok) {
    std::printf("no NVRTC for sm_%d: %s\n", arch, ch.reason.c_str());
    return 1;
  }
  const NvrtcLib& nvrtc = *cands[ch.index].lib;
  std::printf("NVRTC %s at %s (discovery and load of %zu candidate(s): %.1f ms), sm_%d, %d thread(s), %ld cores\n",
              nvrtc.facts.version_string().c_str(), nvrtc.facts.path.c_str(), cands.size(), now_ms() - t_discover,
              arch, threads, sysconf(_SC_NPROCESSORS_ONLN));
  const KernelSources src = load_kernel_sources();

  std::vector<std::string> names;
  for (const auto& n : all_fwd_kernels())
    if (all || n.find(", 4, ") != std::string::npos) names.push_back(n);

  // The first compile pays NVRTC's one-time initialisation: report it apart.
  const double t_first = now_ms();
  compile_kernel(nvrtc, src, names[0], CodeKind::Cubin, arch);
  std::printf("first compile in the process (includes NVRTC start-up): %.1f ms\n\n", now_ms() - t_first);

  std::vector<double> cubin_ms(names.size()), ptx_ms(names.size()), load_ms(names.size());
  std::vector<size_t> sizes(names.size());
  char dir_tmpl[] = "/tmp/cc1d_bench_cache_XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  std::atomic<size_t> next{0};
  const double t0 = now_ms();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      ImageCache cache(dir, 0);
      for (size_t i; (i = next++) < names.size();) {
        const CompiledImage k = compile_kernel(nvrtc, src, names[i], CodeKind::Cubin, arch);
        cubin_ms[i] = k.ms;
        sizes[i] = k.image.size();
        ptx_ms[i] = compile_kernel(nvrtc, src, names[i], CodeKind::Ptx, arch).ms;
        const CacheKey key{src.hash, names[i], nvrtc_target(CodeKind::Cubin, arch),
                           "NVRTC " + nvrtc.facts.version_string(), nvrtc_options(CodeKind::Cubin, arch, nvrtc.facts),
                           CC1D_ABI_VERSION};
        cache.store(key, k);
        ImageCache fresh(dir, 0);  // a new process: nothing in memory
        CompiledImage back;
        const double tl = now_ms();
        if (!fresh.load(key, &back) || back.image != k.image) std::abort();
        load_ms[i] = now_ms() - tl;
      }
    });
  for (auto& th : pool) th.join();
  const double wall = now_ms() - t0;
  for (size_t i = 0; i < names.size(); ++i)
    std::printf("%-62s cubin %6.1f ms (%6zu B)  ptx only %6.1f ms  cache load %5.2f ms\n", names[i].c_str(),
                cubin_ms[i], sizes[i], ptx_ms[i], load_ms[i]);
  std::printf("\n");
  summary("cubin compile (sm_XY)", cubin_ms);
  summary("PTX only (front end)", ptx_ms);
  summary("disk cache load", load_ms);
  std::printf("wall time for %zu variants (cubin + ptx + cache): %.1f s\n", names.size(), wall / 1000);
  return 0;
}
