// bwd_common.cuh — what every layout of the backward kernel (bwd.cuh) reads and writes through:
// silu's derivative, x, dout and the segment ids at any time of a row (states and zeros outside
// it), dfinal_states' contribution, g recomputed at one step, the weights, and the partial sums
// of dweight and dbias.
#pragma once
#include "bwd_params.h"
#include "cc1d_types.cuh"
#include "common.cuh"

namespace cc1d {

// d silu(z) / dz = s (1 + z (1 - s)), s = sigmoid(z); fast-math like the forward's silu.
CC1D_HD float silu_grad(float z) {
  const float s = rcp_approx(1.0f + __expf(-z));
  return s * (1.0f + z * (1.0f - s));
}

// x at time s of row (b, c): initial states (or 0) for -(W-1) <= s < 0, 0 elsewhere outside x.
template <typename TX>
CC1D_HD float bwd_x(const BwdParams& p, int W, long long b, long long c, long long s) {
  if (s >= p.seqlen || s < -(W - 1)) return 0.f;
  if (s >= 0) return load_as_float<TX>(p.x, b * p.x_stride[0] + c * p.x_stride[1] + s * p.x_stride[2]);
  if (p.initial_states == nullptr) return 0.f;
  return load_as_float<TX>(p.initial_states,
                           b * p.init_stride[0] + c * p.init_stride[1] + (W - 1 + s) * p.init_stride[2]);
}

// Segment id of time s: token 0's before 0, -1 from seqlen on, 0 without seq_idx.
CC1D_HD int bwd_seq(const BwdParams& p, long long b, long long s) {
  if (p.seq_idx == nullptr) return 0;
  if (s >= p.seqlen) return -1;
  if (s < 0) s = 0;
  return p.seq_idx[b * p.seq_stride[0] + s * p.seq_stride[1]];
}

// What dfinal_states adds to the gradient of x at time s (final states are x at the last W-1
// positions, states included when seqlen < W-1).
template <typename TX>
CC1D_HD float bwd_dfinal(const BwdParams& p, int W, long long b, long long c, long long s) {
  const long long j = s - (p.seqlen - (W - 1));
  if (p.dfinal_states == nullptr || j < 0 || j >= W - 1) return 0.f;
  return load_as_float<TX>(p.dfinal_states,
                           b * p.dfinal_stride[0] + c * p.dfinal_stride[1] + j * p.dfinal_stride[2]);
}

template <typename TX>
CC1D_HD float bwd_dout(const BwdParams& p, long long b, long long c, long long t) {
  return load_as_float<TX>(p.dout, b * p.dout_stride[0] + c * p.dout_stride[1] + t * p.dout_stride[2]);
}

// g(t) read and recomputed from global memory, for the halo the time layouts' walk starts with.
template <typename TX, int W, bool SEQ>
CC1D_HD float bwd_g_at(const BwdParams& p, const float (&w)[W], float bias, long long b, long long c,
                       long long t) {
  if (t < 0 || t >= p.seqlen) return 0.f;
  const int cur = SEQ ? bwd_seq(p, b, t) : 0;
  if (cur < 0) return 0.f;
  const float d = bwd_dout<TX>(p, b, c, t);
  if (!p.silu) return d;
  float z = bias;
  for (int k = 0; k < W; ++k)
    if (!SEQ || bwd_seq(p, b, t - (W - 1) + k) == cur) z += w[k] * bwd_x<TX>(p, W, b, c, t - (W - 1) + k);
  return d * silu_grad(z);
}

// One (channel, part) partial sum: tap k < W of dweight, or dbias for k == W.
template <int W>
CC1D_HD void bwd_put_partial(const BwdParams& p, long long part, long long c, int k, float v) {
  float* a = p.acc + c * (W + 1) + k;
  if (p.deterministic)
    a[part * p.dim * (W + 1)] = v;
  else
    atomicAdd(a, v);
}

template <typename TW, int W>
CC1D_HD void bwd_load_weights(const BwdParams& p, long long c, float (&w)[W], float& bias) {
  for (int k = 0; k < W; ++k) w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
  bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
}

// Sums each thread's W+1 partials over the block in a fixed order and hands them to bwd_put_partial.
template <int W>
CC1D_HD void bwd_block_reduce(const BwdParams& p, long long part, long long c, const float (&dw)[W], float db,
                              float* red, float* red2) {
  constexpr int K = W + 1;
  const int tid = threadIdx.x;
  for (int k = 0; k < W; ++k) red[k * kBwdThreads + tid] = dw[k];
  red[W * kBwdThreads + tid] = db;
  __syncthreads();
  for (int i = tid; i < K * 32; i += kBwdThreads) {
    const float* r = red + (i / 32) * kBwdThreads + i % 32;
    red2[i] = (r[0] + r[32]) + (r[64] + r[96]);
  }
  __syncthreads();
  if (tid < K) {
    float s = 0.f;
    for (int l = 0; l < 32; ++l) s += red2[tid * 32 + l];
    bwd_put_partial<W>(p, part, c, tid, s);
  }
}

}  // namespace cc1d
