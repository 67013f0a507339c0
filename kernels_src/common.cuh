// common.cuh — device helpers every op's kernel shares: the activation, typed loads, 16-byte
// vector accesses and shared memory (the emulator's prelude defines the last two for the host,
// with alignment checks and exactly sized buffers).
#pragma once
#include "cc1d_types.cuh"

// cc1d_vec_load / cc1d_vec_store move N consecutive T as one access of N*sizeof(T) bytes (8 or
// 16: LDG/STG.64 or .128), which must be aligned to that size. The emulator's prelude
// (fallback/emulator/cuda_prelude.h) defines them for the host with an alignment check. Loads go
// through CUDA's built-in vector types; stores (to global memory only) are written in PTX,
// because NVVM splits a plain uint4 store into four 4-byte ones.
#ifndef CC1D_EMULATION
// A block's shared arrays (the prelude's versions are exactly sized and checked by ASan).
#define CC1D_SHARED_ARRAY(T, name, N) __shared__ alignas(16) T name[N]
#define CC1D_DYNAMIC_SHARED(T, name) extern __shared__ T name[]

template <typename T, int N>
__device__ __forceinline__ void cc1d_vec_load(const T* p, T (&out)[N]) {
  static_assert(N * sizeof(T) == 16 || N * sizeof(T) == 8, "device vector accesses move 8 or 16 bytes");
  unsigned* w = reinterpret_cast<unsigned*>(out);
  if constexpr (N * sizeof(T) == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  }
}
template <typename T, int N>
__device__ __forceinline__ void cc1d_vec_store(T* p, const T (&in)[N]) {
  static_assert(N * sizeof(T) == 16 || N * sizeof(T) == 8, "device vector accesses move 8 or 16 bytes");
  const unsigned* w = reinterpret_cast<const unsigned*>(in);
  if constexpr (N * sizeof(T) == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  }
}
#endif

namespace cc1d {

// Fast-math exp and division, as upstream builds with --use_fast_math: far less code (NVRTC
// compiles faster) and relative error ~1e-6, well inside fp32 tolerances. For z < -88 the
// denominator is inf and the result 0, the correctly rounded silu up to a subnormal.
CC1D_HD float silu(float z) { return __fdividef(z, 1.0f + __expf(-z)); }

// silu(z) when `on`, else z exactly (z / 1), without a branch: one copy of the code serves
// both, which halves what NVRTC compiles where the activation is a runtime flag.
CC1D_HD float silu_if(bool on, float z) { return __fdividef(z, 1.0f + (on ? __expf(-z) : 0.f)); }

// 1/d by the hardware's approximate reciprocal (MUFU.RCP, within 1 ulp, subnormal results
// flushed as fast math does). __fdividef(1, d) compiles to the same plus a multiply by 1 (one FADD
// each call) that keeps its flush-to-zero rule.
CC1D_HD float rcp_approx(float d) {
#ifdef CC1D_EMULATION
  return 1.0f / d;
#else
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
#endif
}

template <typename T>
CC1D_HD float load_as_float(const void* base, long long off) {
  return to_float(static_cast<const T*>(base)[off]);
}

// 16 bytes of T at p (aligned, global or shared memory) as 4 packed words.
template <typename T>
CC1D_HD void load16(const T* p, unsigned (&w)[4]) {
  cc1d_vec_load<unsigned, 4>(reinterpret_cast<const unsigned*>(p), w);
}
// The first step of a unit-stride row of T at a 16-byte boundary (0 to 16 / sizeof(T) - 1): the
// vector paths start a row there and handle the steps before it apart.
template <typename T>
CC1D_HD int first_aligned_step(const T* row) {
  constexpr int V = 16 / (int)sizeof(T);
  return (int)((V - (reinterpret_cast<unsigned long long>(row) & 15) / sizeof(T)) % V);
}

// 4 packed words to 16 aligned bytes of global memory.
template <typename T>
CC1D_HD void store16(T* p, const unsigned (&w)[4]) {
  cc1d_vec_store<unsigned, 4>(reinterpret_cast<unsigned*>(p), w);
}
// N packed words (1 or 2) from shared memory as one access of 4N aligned bytes.
template <int N>
CC1D_HD void load_words_shared(const unsigned* p, unsigned (&w)[N]) {
  if constexpr (N == 1)
    w[0] = *p;
  else
    cc1d_vec_load<unsigned, N>(p, w);
}
// The same to shared memory (the device store16 is global-only).
template <typename T>
CC1D_HD void store16_shared(T* p, const unsigned (&w)[4]) {
#ifdef CC1D_EMULATION
  cc1d_vec_store<unsigned, 4>(reinterpret_cast<unsigned*>(p), w);
#else
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#endif
}

// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and newer): no
// registers hold the data, so a block's next tile loads while it computes the current one.
// `valid` false writes 16 zero bytes and reads nothing. A thread's copies become visible to it
// after async_wait<N>() (all but its N most recent committed groups are done), to the block after
// a barrier that follows that wait. Before sm_80, and in the emulator, the copy is synchronous.
// The destination is a shared-memory address (smem_addr, then byte offsets), so the conversion
// from a generic pointer happens once, not per copy.
#if defined(__CUDA_ARCH__)
using SmemAddr = unsigned;
CC1D_HD SmemAddr smem_addr(const void* p) {
  unsigned s;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}
#else
using SmemAddr = unsigned long long;
CC1D_HD SmemAddr smem_addr(const void* p) { return reinterpret_cast<SmemAddr>(p); }
#endif
CC1D_HD void async_copy16(SmemAddr dst, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
#else
  unsigned w[4] = {0, 0, 0, 0};
  if (valid) load16(static_cast<const unsigned*>(gmem), w);
#if defined(__CUDA_ARCH__)
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
#else
  store16_shared(reinterpret_cast<unsigned*>(dst), w);
#endif
#endif
}
// The same for 4 bytes (a segment id): `valid` false writes 0.
CC1D_HD void async_copy4(SmemAddr dst, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 4 : 0) : "memory");
#else
  const unsigned v = valid ? *static_cast<const unsigned*>(gmem) : 0u;
#if defined(__CUDA_ARCH__)
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst), "r"(v) : "memory");
#else
  *reinterpret_cast<unsigned*>(dst) = v;
#endif
#endif
}
CC1D_HD void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
CC1D_HD void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Channel-last tiles (the forward's and the backward's CHANNEL_VEC): one thread's asynchronous
// copies of a tile's x rows. Row r (of R) is time t-(W-1)+r, RW words of channels, RW/4 threads a
// row; this thread copies rows lr, lr+RR, ... from xt (its first row's 16 bytes, xs_t elements a
// row) to dst (then kRound bytes a round). Rows outside x read zeros (from `any`, a valid
// address), except those before time 0 when the caller writes initial states there (skip_states).
// A tile inside the row runs with no row checks; a row's first or last tile is rolled (rare).
template <typename TX, int W, int R, int RR, int RW>
CC1D_HD void async_copy_x_rows(SmemAddr dst, const TX* __restrict__ xt, long long xs_t, long long t, long long seqlen,
                               bool skip_states, int lr, bool lv_ok, const void* any) {
  constexpr int kRound = RR * RW * 4, ROUNDS = (R + RR - 1) / RR;
  if (t >= W - 1 && t + R - (W - 1) <= seqlen) {
    for (int i = 0; i < ROUNDS; ++i, xt += RR * xs_t, dst += kRound)
      if (i * RR + lr < R) async_copy16(dst, lv_ok ? xt : any, lv_ok);
  } else {
    const long long left = seqlen - t + (W - 1);
    const int lo = t < W - 1 ? (int)(W - 1 - t) : 0, hi = left < R ? (int)left : R;
    const int skip = skip_states ? lo : 0;
#pragma unroll 1
    for (int i = 0; i < ROUNDS; ++i, xt += RR * xs_t, dst += kRound) {
      const int r = i * RR + lr;
      const bool in_x = r >= lo && r < hi && lv_ok;
      if (r < R && r >= skip) async_copy16(dst, in_x ? xt : any, in_x);
    }
  }
}

// A tile's segment ids (the _SEQ tiles): thread i < n copies the id of time t+i of a row of
// seq_idx (`stride` elements a step) to dst + 4i. Times before 0 take time 0's id (the initial
// states belong to the first token's segment); times from seqlen on read 0: nothing stored there
// depends on them.
CC1D_HD void async_copy_seq_ids(SmemAddr dst, const int* row, long long stride, long long t, long long seqlen, int i,
                                int n) {
  if (i >= n) return;
  const long long s = t + i;
  async_copy4(dst + (SmemAddr)(4 * i), row + (s > 0 && s < seqlen ? s * stride : 0), s < seqlen);
}

}  // namespace cc1d
