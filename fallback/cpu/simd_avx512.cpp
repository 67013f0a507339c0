// simd_avx512.cpp — simd_kernels.inc built with AVX-512 F/BW/VL/DQ (set in CMakeLists.txt); run
// only where the CPU has them. See simd.h.
#include <immintrin.h>

#include "fallback/cpu/simd.h"

namespace {
#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"  // in this anonymous namespace: no definition leaves the unit
#define CC1D_SIMD_WIDTH 16
#include "fallback/cpu/simd_kernels.inc"
}  // namespace

const ::cc1d::SimdKernels* cc1d_simd_avx512() {
  static const ::cc1d::SimdKernels k{"avx512", L, Widths::time, Widths::channels, to_f32, from_f32, silu_inplace};
  return &k;
}
