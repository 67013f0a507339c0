// causal_conv1d_fwd.cuh — the forward kernel.
//
// One template, instantiated per variant through NVRTC name expressions, e.g.
//   cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, cc1d::kLayoutTime>
// TX: x/out/state type, TW: weight/bias type, W: width (1..8), LAYOUT: thread mapping.
// Bias, silu, seq_idx and states are runtime flags in FwdParams: branches on uniform values
// are cheap, and fewer variants compile faster.
//
// The grid is 1-D and block-strided over (batch, channel block, time chunk), so no grid
// dimension limit applies to dim or seqlen, and all offsets are 64-bit.
#pragma once
#include "cc1d_types.cuh"
#include "fwd_params.h"

namespace cc1d {

template <typename T>
CC1D_HD float load_as_float(const void* base, long long off) {
  return to_float(static_cast<const T*>(base)[off]);
}

// x at time s for row (b, c): s < 0 reads initial_states (or 0), s >= seqlen reads 0.
template <typename TX>
CC1D_HD float fwd_load_x(const FwdParams& p, int W, long long b, long long c, long long s) {
  if (s >= p.seqlen) return 0.f;
  if (s >= 0) return load_as_float<TX>(p.x, b * p.x_stride[0] + c * p.x_stride[1] + s * p.x_stride[2]);
  if (p.initial_states == nullptr) return 0.f;
  long long j = (W - 1) + s;  // s >= -(W-1) by construction
  return load_as_float<TX>(p.initial_states,
                           b * p.init_stride[0] + c * p.init_stride[1] + j * p.init_stride[2]);
}

// Segment id of time s; positions before 0 (initial states) belong to token 0's segment.
CC1D_HD int fwd_load_seq(const FwdParams& p, long long b, long long s) {
  if (s < 0) s = 0;
  if (s >= p.seqlen) return -1;
  return p.seq_idx[b * p.seq_stride[0] + s * p.seq_stride[1]];
}

// Final states: the last W-1 entries of concat(initial_states or zeros, x).
template <typename TX>
CC1D_HD void fwd_write_final(const FwdParams& p, int W, long long b, long long c) {
  for (int j = 0; j < W - 1; ++j) {
    long long s = p.seqlen - (W - 1) + j;
    float v = fwd_load_x<TX>(p, W, b, c, s);
    static_cast<TX*>(p.final_states)[b * p.final_stride[0] + c * p.final_stride[1] +
                                     j * p.final_stride[2]] = from_float<TX>(v);
  }
}

template <typename TX, typename TW, int W>
CC1D_HD void fwd_store(const FwdParams& p, long long b, long long c, long long t, float acc,
                       bool masked_out) {
  if (p.silu) acc = silu(acc);
  if (masked_out) acc = 0.f;
  static_cast<TX*>(p.out)[b * p.out_stride[0] + c * p.out_stride[1] + t * p.out_stride[2]] =
      from_float<TX>(acc);
}

template <typename TX, typename TW, int W, int LAYOUT>
__global__ void __launch_bounds__(kFwdThreads) causal_conv1d_fwd_kernel(const FwdParams p) {
  const long long total = p.batch * p.num_channel_blocks * p.num_time_chunks;
  for (long long blk = blockIdx.x; blk < total; blk += gridDim.x) {
    const long long chunk = blk % p.num_time_chunks;
    const long long cb = (blk / p.num_time_chunks) % p.num_channel_blocks;
    const long long b = blk / (p.num_time_chunks * p.num_channel_blocks);

    if (LAYOUT == kLayoutTime) {
      // One row (b, c) per block; each thread owns kFwdItemsTime consecutive outputs.
      const long long c = cb;
      const long long t0 = chunk * (long long)(kFwdThreads * kFwdItemsTime) +
                           (long long)threadIdx.x * kFwdItemsTime;
      if (t0 >= p.seqlen) continue;
      float w[W];
      for (int k = 0; k < W; ++k)
        w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
      const float bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
      constexpr int N = W - 1 + kFwdItemsTime;
      float xv[N];
      for (int i = 0; i < N; ++i) xv[i] = fwd_load_x<TX>(p, W, b, c, t0 - (W - 1) + i);
      int sq[N];
      if (p.seq_idx)
        for (int i = 0; i < N; ++i) sq[i] = fwd_load_seq(p, b, t0 - (W - 1) + i);
      for (int j = 0; j < kFwdItemsTime; ++j) {
        const long long t = t0 + j;
        if (t >= p.seqlen) break;
        float acc = bias;
        if (p.seq_idx) {
          const int cur = sq[j + W - 1];
          for (int k = 0; k < W; ++k) acc += (sq[j + k] == cur) ? w[k] * xv[j + k] : 0.f;
          fwd_store<TX, TW, W>(p, b, c, t, acc, cur < 0);
        } else {
          for (int k = 0; k < W; ++k) acc += w[k] * xv[j + k];
          fwd_store<TX, TW, W>(p, b, c, t, acc, false);
        }
      }
      if (p.final_states && p.seqlen - 1 < t0 + kFwdItemsTime) fwd_write_final<TX>(p, W, b, c);
    } else {
      // Threads walk channels (coalesced when stride(c) == 1); each thread slides a window of
      // W inputs over kFwdChunkChannel time steps.
      const long long c = cb * kFwdThreads + threadIdx.x;
      if (c >= p.dim) continue;
      const long long t0 = chunk * (long long)kFwdChunkChannel;
      float w[W];
      for (int k = 0; k < W; ++k)
        w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
      const float bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
      float win[W];
      int sq[W];
      for (int i = 0; i < W - 1; ++i) {
        win[i + 1] = fwd_load_x<TX>(p, W, b, c, t0 - (W - 1) + i);
        sq[i + 1] = p.seq_idx ? fwd_load_seq(p, b, t0 - (W - 1) + i) : 0;
      }
      long long t_end = t0 + kFwdChunkChannel;
      if (t_end > p.seqlen) t_end = p.seqlen;
      for (long long t = t0; t < t_end; ++t) {
        for (int k = 0; k < W - 1; ++k) { win[k] = win[k + 1]; sq[k] = sq[k + 1]; }
        win[W - 1] = fwd_load_x<TX>(p, W, b, c, t);
        float acc = bias;
        if (p.seq_idx) {
          sq[W - 1] = fwd_load_seq(p, b, t);
          const int cur = sq[W - 1];
          for (int k = 0; k < W; ++k) acc += (sq[k] == cur) ? w[k] * win[k] : 0.f;
          fwd_store<TX, TW, W>(p, b, c, t, acc, cur < 0);
        } else {
          for (int k = 0; k < W; ++k) acc += w[k] * win[k];
          fwd_store<TX, TW, W>(p, b, c, t, acc, false);
        }
      }
      if (p.final_states && t_end == p.seqlen) fwd_write_final<TX>(p, W, b, c);
    }
  }
}

}  // namespace cc1d
