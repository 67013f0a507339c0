// convert.h — typed strided gather/scatter between tensors and fp32 work buffers, and a
// vectorisable silu, for the CPU backend. The element type is resolved once per row (a table of
// function pointers), so the inner loops are branch-free and the compiler can vectorise them.
#pragma once
#include <cstdint>
#include <cmath>
#include <cstring>

#include "cc1d/cc1d.h"

#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"

namespace cc1d {

// The stride-1 loops are written apart so the compiler vectorises them.
template <typename T>
void gather_as(const void* base, int64_t off, int64_t stride, int64_t n, float* dst) {
  const T* src = static_cast<const T*>(base) + off;
  if (stride == 1)
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i * stride]);
}

template <typename T>
void scatter_as(void* base, int64_t off, int64_t stride, int64_t n, const float* src) {
  T* dst = static_cast<T*>(base) + off;
  if (stride == 1)
    for (int64_t i = 0; i < n; ++i) dst[i] = from_float<T>(src[i]);
  else
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

// silu over a buffer. exp without a libm call, 4 lanes at a time through GCC/Clang vector
// extensions (SSE2/NEON; the compiler does not vectorise float clamps itself without fast-math):
// x = n*ln2 + r with |r| <= ln2/2, a degree-6 Taylor polynomial for e^r (relative error < 3e-7),
// times 2^n assembled from bits. The tail uses std::exp.
typedef float cc1d_v4f __attribute__((vector_size(16)));
typedef int32_t cc1d_v4i __attribute__((vector_size(16)));

inline cc1d_v4f exp_approx(cc1d_v4f x) {
  const cc1d_v4f lo = {-87.f, -87.f, -87.f, -87.f}, hi = {88.f, 88.f, 88.f, 88.f};
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const cc1d_v4f n = (x * 1.44269504088896341f + shifter) - shifter;
  const cc1d_v4f r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  const cc1d_v4f p =
      1.f + r * (1.f + r * (0.5f + r * (0.16666667f + r * (0.041666668f + r * (0.008333334f + r * 0.0013888889f)))));
  const cc1d_v4i bits = (__builtin_convertvector(n, cc1d_v4i) + 127) << 23;
  cc1d_v4f scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline void silu_inplace(float* v, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    cc1d_v4f x;
    std::memcpy(&x, v + i, sizeof x);
    x = x / (1.f + exp_approx(-x));
    std::memcpy(v + i, &x, sizeof x);
  }
  for (; i < n; ++i) v[i] = v[i] / (1.f + std::exp(-v[i]));
}

}  // namespace cc1d
