// simd_base.cpp — simd_kernels.inc for the compiler's baseline instruction set (SSE2 on
// x86-64): every CPU runs it. See simd.h.
#include "fallback/cpu/simd.h"

namespace {
#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"  // in this anonymous namespace: no definition leaves the unit
#define CC1D_SIMD_WIDTH 4
#include "fallback/cpu/simd_kernels.inc"
}  // namespace

const ::cc1d::SimdKernels* cc1d_simd_base() {
  static const ::cc1d::SimdKernels k{"base", L, Widths::time, Widths::channels, to_f32, from_f32, silu_inplace};
  return &k;
}
