// common.cuh — device helpers every op's kernel shares: the activation, typed loads, 16-byte
// vector accesses and shared memory (the emulator's prelude defines the last two for the host,
// with alignment checks and exactly sized buffers).
#pragma once
#include "cc1d_types.cuh"

namespace cc1d {

// Fast-math exp and division, as upstream builds with --use_fast_math: far less code (NVRTC
// compiles faster) and relative error ~1e-6, well inside fp32 tolerances. For z < -88 the
// denominator is inf and the result 0, the correctly rounded silu up to a subnormal.
CC1D_HD float silu(float z) { return __fdividef(z, 1.0f + __expf(-z)); }

template <typename T>
CC1D_HD float load_as_float(const void* base, long long off) {
  return to_float(static_cast<const T*>(base)[off]);
}

}  // namespace cc1d

#ifndef CC1D_EMULATION
// One 16-byte load or store (LDG.128 / STG.128) of N consecutive T: the address and the local
// array must both be 16-byte aligned (declare it `alignas(16) T v[N]`). The store is written in
// PTX: through a plain uint4 assignment NVVM splits it into four 4-byte stores.
template <typename T, int N>
__device__ __forceinline__ void cc1d_vec_load(const T* p, T (&out)[N]) {
  static_assert(N * sizeof(T) == 16, "device vector accesses move 16 bytes");
  *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(p);
}
template <typename T, int N>
__device__ __forceinline__ void cc1d_vec_store(T* p, const T (&in)[N]) {
  static_assert(N * sizeof(T) == 16, "device vector accesses move 16 bytes");
  const uint4 v = *reinterpret_cast<const uint4*>(in);
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
#define CC1D_SHARED_ARRAY(T, name, N) __shared__ T name[N]
#define CC1D_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif
