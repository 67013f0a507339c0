// fwd.cuh — the forward kernel.
//
// One template, instantiated per variant through NVRTC name expressions, e.g.
//   cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, cc1d::kLayoutTime>
// TX: x/out/state type, TW: weight/bias type, W: width (1..8), LAYOUT: thread mapping.
// Bias, silu, seq_idx and states are runtime flags in FwdParams: branches on uniform values
// are cheap, and fewer variants compile faster.
//
// All element offsets are 64-bit; dim and seqlen have no grid-derived limit.
#pragma once
#include "cc1d_types.cuh"
#include "common.cuh"
#include "fwd_params.h"

namespace cc1d {

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

// Applies the activation and the padding rule, then stores one output.
template <typename TX>
CC1D_HD void fwd_store(const FwdParams& p, long long b, long long c, long long t, float acc, bool pad) {
  if (p.silu) acc = silu(acc);
  static_cast<TX*>(p.out)[b * p.out_stride[0] + c * p.out_stride[1] + t * p.out_stride[2]] =
      from_float<TX>(pad ? 0.f : acc);
}

// TIME layout: one row (b, c) per block; each thread owns kFwdItemsTime consecutive outputs.
template <typename TX, typename TW, int W>
CC1D_HD void fwd_time_block(const FwdParams& p, long long b, long long c, long long chunk) {
  const long long t0 = chunk * (long long)(kFwdThreads * kFwdItemsTime) + (long long)threadIdx.x * kFwdItemsTime;
  if (t0 >= p.seqlen) return;
  float w[W];
  for (int k = 0; k < W; ++k) w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
  const float bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
  constexpr int N = W - 1 + kFwdItemsTime;
  float xv[N];
  int sq[N];
  const long long s0 = t0 - (W - 1);
  if (s0 >= 0 && t0 + kFwdItemsTime <= p.seqlen) {
    // Interior window (almost every thread): straight loads, no bounds or state checks.
    const TX* xr = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1] + s0 * p.x_stride[2];
    for (int i = 0; i < N; ++i) xv[i] = to_float(xr[i * p.x_stride[2]]);
  } else {
    // Edges: a rolled loop through a local buffer keeps this rare path small.
    float tmp[N];
#pragma unroll 1
    for (int i = 0; i < N; ++i) tmp[i] = fwd_load_x<TX>(p, W, b, c, s0 + i);
    for (int i = 0; i < N; ++i) xv[i] = tmp[i];
  }
  if (p.seq_idx) {
    int tmp[N];
#pragma unroll 1
    for (int i = 0; i < N; ++i) tmp[i] = fwd_load_seq(p, b, s0 + i);
    for (int i = 0; i < N; ++i) sq[i] = tmp[i];
  } else {
    for (int i = 0; i < N; ++i) sq[i] = 0;
  }
  for (int j = 0; j < kFwdItemsTime; ++j) {
    const long long t = t0 + j;
    if (t >= p.seqlen) break;
    const int cur = sq[j + W - 1];
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += (sq[j + k] == cur) ? w[k] * xv[j + k] : 0.f;
    fwd_store<TX>(p, b, c, t, acc, cur < 0);
  }
  if (p.final_states && p.seqlen - 1 < t0 + kFwdItemsTime) fwd_write_final<TX>(p, W, b, c);
}

// CHANNEL layout: threads walk channels (coalesced when stride(c) == 1); each thread slides a
// window of W inputs over kFwdChunkChannel time steps.
template <typename TX, typename TW, int W>
CC1D_HD void fwd_channel_block(const FwdParams& p, long long b, long long cb, long long chunk) {
  const long long c = cb * kFwdThreads + threadIdx.x;
  if (c >= p.dim) return;
  const long long t0 = chunk * (long long)kFwdChunkChannel;
  float w[W];
  for (int k = 0; k < W; ++k) w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
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
    sq[W - 1] = p.seq_idx ? fwd_load_seq(p, b, t) : 0;
    const int cur = sq[W - 1];
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += (sq[k] == cur) ? w[k] * win[k] : 0.f;
    fwd_store<TX>(p, b, c, t, acc, cur < 0);
  }
  if (p.final_states && t_end == p.seqlen) fwd_write_final<TX>(p, W, b, c);
}

// Segment ids default to 0 when seq_idx is absent, so one code path serves both cases: the
// compare is always true and the padding rule never fires.
// Grid: x walks (channel block, time chunk) pairs of one batch row, y walks batches; both are
// block-strided, so no grid limit applies. The planner guarantees fewer than 2^32 pairs per batch,
// which keeps the index math 32-bit (64-bit division would double ptxas time and code size).
template <typename TX, typename TW, int W, int LAYOUT>
__global__ void __launch_bounds__(kFwdThreads) causal_conv1d_fwd_kernel(const FwdParams p) {
  const unsigned nt = (unsigned)p.num_time_chunks;
  const long long per_batch = p.num_time_chunks * p.num_channel_blocks;
  for (long long b = blockIdx.y; b < p.batch; b += gridDim.y) {
    for (long long blk = blockIdx.x; blk < per_batch; blk += gridDim.x) {
      const unsigned u = (unsigned)blk;
      const long long chunk = u % nt, cb = u / nt;
      if constexpr (LAYOUT == kLayoutTime) {
        fwd_time_block<TX, TW, W>(p, b, cb, chunk);
      } else {
        fwd_channel_block<TX, TW, W>(p, b, cb, chunk);
      }
    }
  }
}

}  // namespace cc1d
