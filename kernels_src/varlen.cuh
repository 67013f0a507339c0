// varlen.cuh — the varlen-states kernel (causal_conv1d_varlen_states): for each sequence b of a
// packed batch, its last min(len_b, state_len) tokens of x (total, dim), right-aligned along
// out[b] (dim, state_len), zeros before them. A copy of bits: no conversion, no arithmetic.
//
// Grid: x over channels (kVarlenThreads threads, each one element or, in the 16-byte path, one
// 16-byte vector of consecutive channels), y over state slots, z over sequences; y and z stride
// past the grid's 65535 limit. In upstream's layouts (x rows and out's (state_len, dim) planes
// contiguous in dim) a warp reads and writes whole 512-byte runs of one row. cu_seqlens is
// read once per sequence per thread, through the cache.
//
// Device values are not validated (libcc1d cannot read them without a synchronisation), so the
// bounds are clamped: end to [0, total], begin to [0, end]; x is never read outside its rows.
//
// Template: T (element type; only its size matters), VEC (the 16-byte path, chosen by the planner
// when every access is aligned).
#pragma once
#include "cc1d_types.cuh"
#include "common.cuh"
#include "varlen_params.h"

namespace cc1d {

template <typename T, bool VEC>
__global__ void __launch_bounds__(kVarlenThreads) causal_conv1d_varlen_states_kernel(const VarlenParams p) {
  constexpr int N = VEC ? 16 / (int)sizeof(T) : 1;  // channels per thread
  const long long c = ((long long)blockIdx.x * kVarlenThreads + threadIdx.x) * N;
  if (c >= p.dim) return;
  const T* __restrict__ x = static_cast<const T*>(p.x);  // null when total is 0: offset only to read
  const int sl = (int)p.state_len;
  for (long long b = blockIdx.z; b < p.batch; b += gridDim.z) {
    // 32-bit positions: cu_seqlens values are int32 and state_len <= 2^20, so every t fits.
    int end = __ldg(p.cu_seqlens + (b + 1) * p.cu_stride);
    int begin = __ldg(p.cu_seqlens + b * p.cu_stride);
    end = end < 0 ? 0 : end > p.total ? (int)p.total : end;
    begin = begin < 0 ? 0 : begin > end ? end : begin;
    T* __restrict__ out = static_cast<T*>(p.out) + b * p.out_stride[0] + c * p.out_stride[1];
    // Slot s holds token t = end - sl + s when that token belongs to the sequence. Offsets advance
    // by additions (no 64-bit multiply per slot), unsigned: x's offset of a slot before the
    // sequence (t < begin, never read) and both offsets after the last slot may wrap, which
    // unsigned arithmetic defines; so may x's channel offset when x has no tokens (its strides
    // are then unchecked: a fuzzed descriptor had 2^63-1).
    const int ys = gridDim.y;
    typedef unsigned long long u64;
    const u64 xstep = (u64)p.x_stride[0] * ys, ostep = (u64)p.out_stride[2] * ys;
    int t = end - sl + (int)blockIdx.y;
    u64 xo = (u64)(long long)t * (u64)p.x_stride[0] + (u64)c * (u64)p.x_stride[1];
    u64 oo = (u64)blockIdx.y * (u64)p.out_stride[2];
    for (int s = blockIdx.y; s < sl; s += ys, t += ys, xo += xstep, oo += ostep) {
      if constexpr (VEC) {
        unsigned w[4] = {0u, 0u, 0u, 0u};
        if (t >= begin) load16(x + (long long)xo, w);
        store16(out + (long long)oo, w);
      } else {
        out[(long long)oo] = t >= begin ? x[(long long)xo] : T{};  // T{}: zero bits, +0.0
      }
    }
  }
}

}  // namespace cc1d
