// cuda_prelude.h — the subset of CUDA C++ that kernels_src/ uses, for the host compiler.
//
// Included before kernels_src/*.cu in the emulator's kernel translation units (and by tests
// that write their own host-compiled kernels). The kernels then compile unchanged with g++ or
// clang++: __CUDA_ARCH__ stays undefined, so the 16-bit conversions in cc1d_types.cuh take their
// software path and no inline PTX is seen.
//
// What it provides, and how the emulator (fallback/emulator/block_runner.cpp) makes it real:
//  - threadIdx, blockIdx, blockDim, gridDim, warpSize: per-fiber values (each GPU thread of a
//    block is a cooperative fiber on one OS thread).
//  - __syncthreads (+ _count/_and/_or), __syncwarp: barriers that park the fiber until every
//    non-exited thread of the block (or lane of the mask) arrives.
//  - __shfl_sync/__shfl_xor_sync/__shfl_up_sync/__shfl_down_sync, __ballot_sync, __any_sync,
//    __all_sync, __activemask: warp-level exchanges among the 32 lanes of a warp.
//  - atomics on host memory (atomicAdd float/double/int/unsigned/ull, atomicMax/Min/Exch/CAS):
//    real read-modify-writes, and scheduling points of the shuffled run (see atomic_point).
//  - shared memory: `__shared__ T a[N];` is per worker thread (correct per-block semantics: a
//    worker runs one block at a time), CC1D_SHARED_ARRAY(T, a, N) is an exactly-sized buffer
//    allocated per block (AddressSanitizer sees overruns), CC1D_DYNAMIC_SHARED(T, a) is the
//    launch's dynamic shared memory, also exactly sized per block.
//  - cc1d_vec_load / cc1d_vec_store: one N*sizeof(T)-byte vector access whose alignment the
//    emulator checks (a misaligned one is reported as an error naming the kernel).
#pragma once

#if defined(__CUDACC__) || defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__)
#error "cuda_prelude.h is for host compilation of CUDA kernels only"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "emu_types.h"

#define CC1D_EMULATION 1

// ---- qualifiers -----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
// Block-scope static storage duplicated per OS thread: a worker runs one block at a time, so
// this has exactly the per-block semantics of shared memory (but no AddressSanitizer redzones;
// prefer CC1D_SHARED_ARRAY where an overrun must be caught).
#define __shared__ static thread_local

// ---- built-in vector types and indices -----------------------------------------------------
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

#define threadIdx (::cc1d::emu::tls_builtins.thread_idx)
#define blockIdx (::cc1d::emu::tls_builtins.block_idx)
#define blockDim (::cc1d::emu::tls_builtins.block_dim)
#define gridDim (::cc1d::emu::tls_builtins.grid_dim)
constexpr int warpSize = 32;

#define CC1D_SHARED_ARRAY(T, name, N)                                                     \
  static const char cc1d_shared_key_##name = 0;                                          \
  T(&name)[N] = *reinterpret_cast<T(*)[N]>(::cc1d::emu::static_shared(                   \
      &cc1d_shared_key_##name, sizeof(T[N]), alignof(T) > 16 ? alignof(T) : 16))
#define CC1D_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::cc1d::emu::dynamic_shared())

// ---- barriers, warp shuffles and votes -------------------------------------------------------
inline void __syncthreads() { ::cc1d::emu::block_barrier(::cc1d::emu::BarrierKind::Sync, 0); }
inline int __syncthreads_count(int p) { return ::cc1d::emu::block_barrier(::cc1d::emu::BarrierKind::Count, p); }
inline int __syncthreads_and(int p) { return ::cc1d::emu::block_barrier(::cc1d::emu::BarrierKind::And, p); }
inline int __syncthreads_or(int p) { return ::cc1d::emu::block_barrier(::cc1d::emu::BarrierKind::Or, p); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::cc1d::emu::warp_exchange(::cc1d::emu::WarpOp::Sync, mask, 0, ::cc1d::emu::lane_id());
}
inline unsigned __activemask() { return ::cc1d::emu::active_mask(); }

namespace cc1d {
namespace emu {
template <typename T>
inline T shfl_to(unsigned mask, T var, int src) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp shuffles move 1..8-byte trivially copyable values");
  unsigned long long bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = warp_exchange(WarpOp::Shfl, mask, bits, src);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
inline int segment_base(int width) { return lane_id() & ~(width - 1); }
}  // namespace emu
}  // namespace cc1d

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::cc1d::emu::shfl_to(mask, var, ::cc1d::emu::segment_base(width) + (src_lane & (width - 1)));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::cc1d::emu::lane_id();
  int src = lane - static_cast<int>(delta);
  if (src < ::cc1d::emu::segment_base(width)) src = lane;
  return ::cc1d::emu::shfl_to(mask, var, src);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::cc1d::emu::lane_id();
  int src = lane + static_cast<int>(delta);
  if (src >= ::cc1d::emu::segment_base(width) + width) src = lane;
  return ::cc1d::emu::shfl_to(mask, var, src);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  const int lane = ::cc1d::emu::lane_id();
  int src = lane ^ lane_mask;
  if (src >= ::cc1d::emu::segment_base(width) + width) src = lane;
  return ::cc1d::emu::shfl_to(mask, var, src);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return static_cast<unsigned>(::cc1d::emu::warp_exchange(::cc1d::emu::WarpOp::Ballot, mask,
                                                          pred != 0, ::cc1d::emu::lane_id()));
}
inline int __any_sync(unsigned mask, int pred) {
  return static_cast<int>(::cc1d::emu::warp_exchange(::cc1d::emu::WarpOp::Any, mask, pred != 0,
                                                     ::cc1d::emu::lane_id()));
}
inline int __all_sync(unsigned mask, int pred) {
  return static_cast<int>(::cc1d::emu::warp_exchange(::cc1d::emu::WarpOp::All, mask, pred != 0,
                                                     ::cc1d::emu::lane_id()));
}

// ---- atomics (blocks run in parallel on several OS threads) ---------------------------------
// Each is a real read-modify-write on host memory (a CAS loop where the hardware has no
// instruction), preceded by atomic_point(): a scheduling point in shuffled runs, and the record
// of float additions that checking mode needs (emu_types.h).
template <typename T>
inline T cc1d_emu_atomic_update(T* address, T (*op)(T, T), T val) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- or 8-byte values");
  using Bits = typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type;
  Bits* p = reinterpret_cast<Bits*>(address);
  Bits old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    T old_val, new_val;
    std::memcpy(&old_val, &old_bits, sizeof(T));
    new_val = op(old_val, val);
    Bits new_bits;
    std::memcpy(&new_bits, &new_val, sizeof(T));
    if (__atomic_compare_exchange_n(p, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return old_val;
  }
}
#define CC1D_EMU_ATOMIC(address) ::cc1d::emu::atomic_point(address, false, 0.0)
inline int atomicAdd(int* a, int v) { CC1D_EMU_ATOMIC(a); return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* a, unsigned v) { CC1D_EMU_ATOMIC(a); return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  CC1D_EMU_ATOMIC(a);
  return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);
}
inline float atomicAdd(float* a, float v) {
  ::cc1d::emu::atomic_point(a, true, v);
  return cc1d_emu_atomic_update<float>(a, [](float x, float y) { return x + y; }, v);
}
inline double atomicAdd(double* a, double v) {
  CC1D_EMU_ATOMIC(a);
  return cc1d_emu_atomic_update<double>(a, [](double x, double y) { return x + y; }, v);
}
inline int atomicSub(int* a, int v) { CC1D_EMU_ATOMIC(a); return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }
inline int atomicMax(int* a, int v) {
  CC1D_EMU_ATOMIC(a);
  return cc1d_emu_atomic_update<int>(a, [](int x, int y) { return x > y ? x : y; }, v);
}
inline int atomicMin(int* a, int v) {
  CC1D_EMU_ATOMIC(a);
  return cc1d_emu_atomic_update<int>(a, [](int x, int y) { return x < y ? x : y; }, v);
}
inline int atomicExch(int* a, int v) { CC1D_EMU_ATOMIC(a); return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }
inline float atomicExch(float* a, float v) {
  CC1D_EMU_ATOMIC(a);
  return cc1d_emu_atomic_update<float>(a, [](float, float y) { return y; }, v);
}
inline int atomicCAS(int* a, int cmp, int v) {
  CC1D_EMU_ATOMIC(a);
  __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline unsigned atomicCAS(unsigned* a, unsigned cmp, unsigned v) {
  CC1D_EMU_ATOMIC(a);
  __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp, unsigned long long v) {
  CC1D_EMU_ATOMIC(a);
  __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
#undef CC1D_EMU_ATOMIC
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- math and memory intrinsics --------------------------------------------------------------
template <typename T> inline T __ldg(const T* p) { return *p; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
// CUDA's device min/max overloads (global namespace in device code).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }

// ---- checked vector loads and stores --------------------------------------------------------
// Moves N consecutive T as one access of N*sizeof(T) bytes (2, 4, 8 or 16), which on a GPU
// requires the address to be aligned to that size. The device version (for kernels_src) is a
// reinterpret_cast to a vector type of that size; here the alignment is checked and a
// misaligned access is reported as an error of the launch.
template <typename T, int N>
inline void cc1d_vec_load(const T* p, T (&out)[N]) {
  static_assert(N * sizeof(T) == 2 || N * sizeof(T) == 4 || N * sizeof(T) == 8 || N * sizeof(T) == 16,
                "a vector access moves 2, 4, 8 or 16 bytes");
  ::cc1d::emu::check_vector_access(p, N * sizeof(T), false);
  std::memcpy(out, p, N * sizeof(T));
}
template <typename T, int N>
inline void cc1d_vec_store(T* p, const T (&in)[N]) {
  static_assert(N * sizeof(T) == 2 || N * sizeof(T) == 4 || N * sizeof(T) == 8 || N * sizeof(T) == 16,
                "a vector access moves 2, 4, 8 or 16 bytes");
  ::cc1d::emu::check_vector_access(p, N * sizeof(T), true);
  std::memcpy(p, in, N * sizeof(T));
}

// ---- the emulator's calling convention ------------------------------------------------------
// trampoline<&kernel> adapts a __global__ function to void(void** args), where args is
// cuLaunchKernel's kernelParams (one pointer per parameter, pointing at its value):
//   __global__ void scale(float* x, float a, int n);
//   emu::Launch l; l.fn = cc1d::emu::trampoline<&scale>;
namespace cc1d {
namespace emu {

template <typename... A, size_t... I>
inline void call_with_params(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <typename F>
struct KernelArity;
template <typename... A>
struct KernelArity<void (*)(A...)> {
  static constexpr size_t value = sizeof...(A);
};

template <auto Kernel>
void trampoline(void** args) {
  call_with_params(Kernel, args, std::make_index_sequence<KernelArity<decltype(Kernel)>::value>{});
}

}  // namespace emu
}  // namespace cc1d
