// simd.cpp — picks the CPU backend's SIMD build (simd.h) from the CPU's features, once.
#include "fallback/cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/log.h"

#ifdef CC1D_HAVE_NEON_BF16  // aarch64 only (CMakeLists.txt)
#include <sys/auxv.h>
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)  // Linux's arch/arm64 hwcap, for C libraries older than it
#endif
#endif

const cc1d::SimdKernels* cc1d_simd_base();
#if defined(__x86_64__) || defined(__i386__)
const cc1d::SimdKernels* cc1d_simd_avx2();
const cc1d::SimdKernels* cc1d_simd_avx512();
#ifdef CC1D_HAVE_AVX512BF16
const cc1d::SimdKernels* cc1d_simd_avx512bf16();
const cc1d::SimdKernels* cc1d_simd_avx512bf16_div();
#endif
#endif
#ifdef CC1D_HAVE_NEON_BF16
const cc1d::SimdKernels* cc1d_simd_neon_bf16();
#endif

namespace cc1d {

const SimdKernels* simd_build(const char* name) {
  if (!std::strcmp(name, "base")) return cc1d_simd_base();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!std::strcmp(name, "avx2"))
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? cc1d_simd_avx2() : nullptr;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (!std::strcmp(name, "avx512")) return avx512 ? cc1d_simd_avx512() : nullptr;
#ifdef CC1D_HAVE_AVX512BF16
  const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  if (!std::strcmp(name, "avx512bf16")) return bf16 ? cc1d_simd_avx512bf16() : nullptr;
  if (!std::strcmp(name, "avx512bf16_div")) return bf16 ? cc1d_simd_avx512bf16_div() : nullptr;
#endif
#endif
#ifdef CC1D_HAVE_NEON_BF16
  if (!std::strcmp(name, "neon_bf16")) return getauxval(AT_HWCAP2) & HWCAP2_BF16 ? cc1d_simd_neon_bf16() : nullptr;
#endif
  return nullptr;
}

namespace {
std::atomic<const SimdKernels*> g_override{nullptr};

// Whether the automatic choice takes build `name` where the CPU runs it: avx512bf16_div only on
// AMD's cores, whose vector divider it needs (simd_avx512bf16_div.cpp).
bool preferred(const char* name) {
#if defined(__x86_64__) || defined(__i386__)
  if (!std::strcmp(name, "avx512bf16_div")) return __builtin_cpu_is("amd");
#endif
  (void)name;
  return true;
}
}  // namespace

void simd_override_for_testing(const SimdKernels* k) { g_override.store(k); }

const SimdKernels& simd() {
  if (const SimdKernels* k = g_override.load(std::memory_order_relaxed)) return *k;
  static const SimdKernels* chosen = [] {
    const char* cap = std::getenv("CAUSAL_CONV1D_CPU_ISA");
    bool allowed = cap == nullptr || *cap == '\0';
    for (const char* name : kSimdBuilds) {
      const bool named = cap != nullptr && !std::strcmp(cap, name);
      allowed = allowed || named;
      const SimdKernels* k = allowed && (named || preferred(name)) ? simd_build(name) : nullptr;
      if (k != nullptr) {
        log_line(CC1D_LOG_DEBUG, "cpu backend: {} kernels ({} floats per vector){}", k->name, k->width,
                 cap && *cap ? std::string(" (CAUSAL_CONV1D_CPU_ISA=") + cap + ")" : std::string());
        return k;
      }
    }
    if (cap != nullptr && *cap != '\0') {
      std::string names;
      for (const char* name : kSimdBuilds) names += (names.empty() ? "" : ", ") + std::string(name);
      log_line(CC1D_LOG_WARN, "CAUSAL_CONV1D_CPU_ISA={} is not one of {}; using the baseline build", cap, names);
    }
    return cc1d_simd_base();
  }();
  return *chosen;
}

}  // namespace cc1d
