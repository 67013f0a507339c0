// bench_util.h — what the C++ benchmarks share: a wall clock, and the exit rule of their smoke
// runs (ctest label `bench`): a machine with no NVRTC skips (exit 77) unless
// CC1D_REQUIRE_NVRTC=1 asks for one, as the NVRTC tests do.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvrtc/nvrtc_lib.h"

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline bool have_nvrtc() { return !cc1d::discover_nvrtc(cc1d::default_nvrtc_search()).empty(); }

// Says why the bench cannot run and returns its exit status: 77 (skipped), or 1 under
// CC1D_REQUIRE_NVRTC=1.
inline int exit_without_nvrtc(const char* bench, const char* why) {
  std::printf("%s: SKIPPED: %s (searched CAUSAL_CONV1D_NVRTC, CAUSAL_CONV1D_NVRTC_SEARCH_PATH, CUDA_HOME, "
              "/usr/local/cuda and the pip wheels; install one with scripts/setup.sh)\n",
              bench, why);
  const char* req = std::getenv("CC1D_REQUIRE_NVRTC");
  return req != nullptr && !std::strcmp(req, "1") ? 1 : 77;
}
