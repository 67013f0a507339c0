// convert.h — typed strided gather/scatter between tensors and fp32 work buffers, for the CPU
// backend. The element type is resolved once per row (a table of function pointers), so the
// inner loops are branch-free; runs of more than a few elements take the SIMD build's conversions
// (simd.h), which round the same way: unit strides directly, 16-bit elements at other strides
// through a small buffer.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cc1d/cc1d.h"
#include "fallback/cpu/simd.h"

#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"

namespace cc1d {

template <typename T>
constexpr int dtype_code = sizeof(T) == 4 ? CC1D_FLOAT32 : std::is_same<T, half_t>::value ? CC1D_FLOAT16 : CC1D_BFLOAT16;
constexpr int64_t kSimdMin = 16;  // below this many, the scalar loop (no call through simd())
// Strided 16-bit elements move through a buffer of this many raw elements, which the SIMD
// conversions take: the scalar fp16 conversion made channel-first rows of 16 steps 2.4 times
// slower in fp16 than in bf16.
constexpr int64_t kStaged = 256;

template <typename T>
void gather_as(const void* base, int64_t off, int64_t stride, int64_t n, float* dst) {
  const T* src = static_cast<const T*>(base) + off;
  if (n >= kSimdMin && stride == 1) return simd().to_f32(dtype_code<T>, src, dst, n);
  if (n >= kSimdMin && sizeof(T) == 2) {
    T raw[kStaged];
    for (int64_t i0 = 0; i0 < n; i0 += kStaged) {
      const int64_t m = std::min(kStaged, n - i0);
      for (int64_t i = 0; i < m; ++i) raw[i] = src[(i0 + i) * stride];
      simd().to_f32(dtype_code<T>, raw, dst + i0, m);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i * stride]);
}

template <typename T>
void scatter_as(void* base, int64_t off, int64_t stride, int64_t n, const float* src) {
  T* dst = static_cast<T*>(base) + off;
  if (n >= kSimdMin && stride == 1) return simd().from_f32(dtype_code<T>, src, dst, n);
  if (n >= kSimdMin && sizeof(T) == 2) {
    T raw[kStaged];
    for (int64_t i0 = 0; i0 < n; i0 += kStaged) {
      const int64_t m = std::min(kStaged, n - i0);
      simd().from_f32(dtype_code<T>, src + i0, raw, m);
      for (int64_t i = 0; i < m; ++i) dst[(i0 + i) * stride] = raw[i];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i * stride] = from_float<T>(src[i]);
}

using GatherFn = void (*)(const void*, int64_t, int64_t, int64_t, float*);
using ScatterFn = void (*)(void*, int64_t, int64_t, int64_t, const float*);

inline GatherFn gather_fn(cc1d_dtype dt) {
  return dt == CC1D_FLOAT16 ? gather_as<half_t> : dt == CC1D_BFLOAT16 ? gather_as<bf16_t> : gather_as<float>;
}
inline ScatterFn scatter_fn(cc1d_dtype dt) {
  return dt == CC1D_FLOAT16 ? scatter_as<half_t> : dt == CC1D_BFLOAT16 ? scatter_as<bf16_t> : scatter_as<float>;
}

}  // namespace cc1d
