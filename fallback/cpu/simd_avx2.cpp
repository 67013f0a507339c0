// simd_avx2.cpp — simd_kernels.inc built with -mavx2 -mfma -mf16c (set in CMakeLists.txt); run
// only where the CPU has them. See simd.h.
#include <immintrin.h>

#include "fallback/cpu/simd.h"

namespace {
#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"  // in this anonymous namespace: no definition leaves the unit
#define CC1D_SIMD_WIDTH 8
#include "fallback/cpu/simd_kernels.inc"
}  // namespace

const ::cc1d::SimdKernels* cc1d_simd_avx2() {
  static const ::cc1d::SimdKernels k{"avx2", L, Widths::time, Widths::channels, to_f32, from_f32, silu_inplace};
  return &k;
}
