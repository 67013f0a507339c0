// bench_compile — cold NVRTC compile time per kernel variant (goal: < 100 ms each), the same
// variants compiled several to one program, and what the disk cache saves: the time to load a
// kernel back from a cache entry.
//
//   bench_compile [--all | --smoke] [--arch N] [--threads N] [--driver V]
// Default: every forward path with each x dtype (weight of x's dtype), the update kernel, the
// backward's main kernel per layout, its finalize and zeroing kernels, at width 4 (49 variants),
// sm_90, 1 thread, then one backward call's kernels in one program. --all compiles every variant
// of every op; --smoke two (ctest's check that the bench still runs; no NVRTC: exit 77). Times
// are the compiling thread's CPU time (what a cold first call costs on an idle core; wall time on
// a busy machine would measure the other processes too), with wall time beside. Prints one line
// per variant and a summary (min/median/max), and what the shipped PTX tier's lookup and
// decompression cost for the variants it holds. --driver V (e.g. 12090): the NVRTC that a driver of
// that CUDA version would get (with CAUSAL_CONV1D_NVRTC, an older CUDA's NVRTC; default: the newest).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "nvrtc/nvrtc_compile.h"
#include "jit/image_cache.h"
#include "kernels_src/bwd_params.h"
#include "kernels_src/fwd_params.h"
#include "ops/bwd/bwd_kernels.h"
#include "ops/fwd/fwd_op.h"
#include "ops/update/update_kernels.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_lib.h"
#include "nvrtc/ptx_tier.h"

using namespace cc1d;

namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void summary(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  std::printf("%-28s n=%-4zu min %7.2f  median %7.2f  max %7.2f ms\n", what, v.size(), v.front(), v[v.size() / 2],
              v.back());
}

}  // namespace

int main(int argc, char** argv) {
  bool all = false, smoke = false;
  int arch = 90, threads = 1, driver = 99000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--all")) all = true;
    else if (!std::strcmp(argv[i], "--smoke")) smoke = true;
    else if (!std::strcmp(argv[i], "--arch") && i + 1 < argc) arch = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--driver") && i + 1 < argc) driver = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--all | --smoke] [--arch N] [--threads N] [--driver V]\n", argv[0]);
      return 2;
    }
  }
  const double t_discover = now_ms();
  const auto cands = discover_nvrtc(default_nvrtc_search());
  std::vector<NvrtcFacts> facts;
  for (const auto& c : cands) facts.push_back(c.facts);
  const NvrtcChoice ch = choose_nvrtc(facts, driver, arch, 0);
  if (!ch.ok) return exit_without_nvrtc("bench_compile", ("no NVRTC for sm_" + std::to_string(arch) + ": " + ch.reason).c_str());
  const NvrtcLib& nvrtc = *cands[ch.index].lib;
  std::printf("NVRTC %s at %s (discovery and load of %zu candidate(s): %.1f ms), sm_%d, %d thread(s), %ld cores\n",
              nvrtc.facts.version_string().c_str(), nvrtc.facts.path.c_str(), cands.size(), now_ms() - t_discover,
              arch, threads, sysconf(_SC_NPROCESSORS_ONLN));
  const KernelSources all_src = load_kernel_sources();

  std::vector<std::string> names;
  if (smoke) {
    names = {fwd_kernel_name(CC1D_FLOAT32, CC1D_FLOAT32, 4, kFwdPathTimeVec), update_kernel_name(CC1D_FLOAT32, CC1D_FLOAT32, 4)};
  } else if (all) {
    for (const OpEntry* op : all_ops())
      if (op->kernels != nullptr)
        for (const std::string& n : op->kernels()) names.push_back(n);
  } else {
    const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
    for (int path = 0; path < kFwdNumPaths; ++path)
      for (cc1d_dtype x : dtypes) names.push_back(fwd_kernel_name(x, x, 4, path));
    for (cc1d_dtype x : dtypes) names.push_back(update_kernel_name(x, x, 4));
    for (int layout = 0; layout < kBwdNumLayouts; ++layout)
      for (cc1d_dtype x : dtypes) names.push_back(bwd_kernel_name(x, x, 4, layout));
    for (cc1d_dtype x : dtypes) names.push_back(bwd_finalize_kernel_name(x));
    names.push_back(kBwdZeroKernel);
  }

  // Each kernel compiles from its op's sources, as the runtime compiles it (resolved before any timing).
  std::vector<KernelSources> srcs;
  for (const std::string& n : names) srcs.push_back(kernel_sources_of(all_src, n));

  // The first compile pays NVRTC's one-time initialisation: report it apart.
  const double t_first = now_ms(), c_first = thread_cpu_ms();
  compile_kernel(nvrtc, srcs[0], names[0], CodeKind::Cubin, arch);
  std::printf("first compile in the process (includes NVRTC start-up): %.1f ms CPU, %.1f ms wall\n\n",
              thread_cpu_ms() - c_first, now_ms() - t_first);

  std::vector<double> cubin_cpu(names.size()), cubin_ms(names.size()), ptx_cpu(names.size()), load_ms(names.size());
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
        const KernelSources& src = srcs[i];
        double c = thread_cpu_ms();
        const CompiledImage k = compile_kernel(nvrtc, src, names[i], CodeKind::Cubin, arch);
        cubin_cpu[i] = thread_cpu_ms() - c;
        cubin_ms[i] = k.ms;
        sizes[i] = k.image.size();
        c = thread_cpu_ms();
        compile_kernel(nvrtc, src, names[i], CodeKind::Ptx, arch);
        ptx_cpu[i] = thread_cpu_ms() - c;
        const CacheKey key{src.hash, names[i], nvrtc_target(CodeKind::Cubin, arch),
                           "NVRTC " + nvrtc.facts.version_string(), nvrtc_options(CodeKind::Cubin, arch, nvrtc.facts),
                           CC1D_ABI_VERSION};
        cache.store(key, k);
        ImageCache fresh(dir, 0);  // a new process: nothing in memory
        CompiledImage back;
        const double tl = now_ms();
        if (!fresh.load(key, &back) || back.image != k.image) {
          std::fprintf(stderr, "bench_compile: the cache did not give back %s\n", names[i].c_str());
          std::abort();
        }
        load_ms[i] = now_ms() - tl;
      }
    });
  for (auto& th : pool) th.join();
  const double wall = now_ms() - t0;
  std::filesystem::remove_all(dir);
  for (size_t i = 0; i < names.size(); ++i)
    std::printf("%-66s cubin %6.1f ms CPU (%6.1f wall, %6zu B)  ptx only %6.1f ms CPU  cache load %5.2f ms\n",
                names[i].c_str(), cubin_cpu[i], cubin_ms[i], sizes[i], ptx_cpu[i], load_ms[i]);
  std::printf("\n");
  summary("cubin compile, CPU (sm_XY)", cubin_cpu);
  summary("cubin compile, wall", cubin_ms);
  summary("PTX only (front end), CPU", ptx_cpu);
  summary("disk cache load", load_ms);
  // What the shipped PTX tier costs a first call before the driver's JIT: its lookup and the
  // decompression (the JIT itself needs a driver: bench/ptx_tier.py times ptxas instead).
  const PtxTier tier(shipped_ptx_pack());
  std::vector<double> unpack_ms;
  for (size_t i = 0; i < names.size(); ++i) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const double c = thread_cpu_ms();
      const ShippedPtx* e = tier.find(srcs[i].hash, names[i], arch, 1 << 30);  // any driver: the newest NVRTC's
      if (e == nullptr) break;
      tier.ptx(*e);
      best = std::min(best, thread_cpu_ms() - c);
    }
    if (best < 1e30) unpack_ms.push_back(best);
  }
  summary("shipped PTX: find + unpack", unpack_ms);

  // The same variants several to a program: per-kernel CPU time of one program holding the
  // variants of one kernel family (its 3 x dtypes), and of one holding all of them.
  std::vector<double> grouped;
  for (size_t i = 0; i + 3 <= names.size(); i += 3) {
    if (srcs[i].hash != srcs[i + 2].hash) continue;  // a program holds one op's kernels (--all: at an op's end)
    const std::vector<std::string> group(names.begin() + i, names.begin() + i + 3);
    const double c = thread_cpu_ms();
    compile_kernels(nvrtc, srcs[i], group, CodeKind::Cubin, arch);
    grouped.push_back((thread_cpu_ms() - c) / group.size());
  }
  summary("3 per program, CPU/kernel", grouped);
  const double c_all = thread_cpu_ms();
  compile_kernels(nvrtc, all_src, names, CodeKind::Cubin, arch);  // every op's header
  std::printf("%-28s n=%-4zu %.1f ms CPU per kernel\n", "all in one program", names.size(),
              (thread_cpu_ms() - c_all) / names.size());
  // One backward call's kernels (zero, main, finalize; bf16) as the nvrtc backend compiles them
  // now, in one program, against one program each: the minimum of 3 alternated runs of each.
  if (!all && !smoke)
    for (int layout = 0; layout < kBwdNumLayouts; ++layout) {
      const std::vector<std::string> call = {kBwdZeroKernel, bwd_kernel_name(CC1D_BFLOAT16, CC1D_BFLOAT16, 4, layout),
                                             bwd_finalize_kernel_name(CC1D_BFLOAT16)};
      const KernelSources bwd_src = kernel_sources_of(all_src, call[0]);
      double apart = 1e30, together = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        double c = thread_cpu_ms();
        for (const std::string& n : call) compile_kernel(nvrtc, bwd_src, n, CodeKind::Cubin, arch);
        apart = std::min(apart, thread_cpu_ms() - c);
        c = thread_cpu_ms();
        compile_kernels(nvrtc, bwd_src, call, CodeKind::Cubin, arch);
        together = std::min(together, thread_cpu_ms() - c);
      }
      std::printf("backward call, %s, bf16: one program %.1f ms CPU, one program per kernel %.1f (%.0f%% less)\n",
                  bwd_layout_name(layout), together, apart, 100 * (1 - together / apart));
    }
  std::printf("wall time for %zu variants (cubin + ptx + cache, %d thread(s)): %.1f s\n", names.size(), threads,
              wall / 1000);
  return 0;
}
