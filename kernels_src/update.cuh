// update.cuh — the decode-step update kernel (causal_conv1d_update).
//
// One thread per (batch row, channel): it reads its channel's window of the state (in shift mode
// it then shifts the kept entries left by seqlen), walks the seqlen new tokens (convolving each
// with the W-1 values before it), and writes each output and each token's state entry: at the
// end after the shift (shift mode), or at (cache_seqlens[b] + t) % state_len (circular mode).
// Nothing reads the state after the window. A thread touches only its own channel of
// its own state row, so no two threads share memory (unless the caller maps two rows to one
// state slot, which races as on upstream). A row whose state index is out of [0, pool), or
// whose cache_seqlens is negative, is padding: outputs 0, state untouched.
//
// Template: TX (x/state/out type), TW (weight/bias type), W (width 1..8). Bias, silu, the
// circular mode and the index gather are runtime flags in UpdateParams.
#pragma once
#include "cc1d_types.cuh"
#include "common.cuh"
#include "update_params.h"

namespace cc1d {

// (cache % state_len) for cache >= 0: cache is an int32, so a state_len beyond 32 bits leaves it
// unchanged and 32-bit arithmetic suffices (64-bit division would double the kernel's code).
CC1D_HD long long update_ring_head(long long cache, long long sl) {
  return sl > 0x7fffffffLL ? cache : (long long)((unsigned)cache % (unsigned)sl);
}

template <typename TX, typename TW, int W>
__global__ void __launch_bounds__(kUpdateThreads) causal_conv1d_update_kernel(const UpdateParams p) {
  const long long c = (long long)blockIdx.x * kUpdateThreads + threadIdx.x;
  if (c >= p.dim) return;
  float w[W];
  for (int k = 0; k < W; ++k) w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
  const float bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
  const long long sl = p.state_len, ss = p.state_stride[2], xs = p.x_stride[2], os = p.out_stride[2];
  for (long long b = blockIdx.y; b < p.batch; b += gridDim.y) {
    const TX* __restrict__ x = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
    TX* __restrict__ out = static_cast<TX*>(p.out) + b * p.out_stride[0] + c * p.out_stride[1];
    const long long row = p.conv_state_indices ? (long long)p.conv_state_indices[b * p.index_stride] : b;
    const long long cache = p.cache_seqlens ? (long long)p.cache_seqlens[b * p.cache_stride] : 0;
    if (row < 0 || row >= p.pool || cache < 0) {  // a padding slot (or an index the kernel must not follow)
#pragma unroll 1
      for (long long t = 0; t < p.seqlen; ++t) out[t * os] = from_float<TX>(0.f);
      continue;
    }
    TX* __restrict__ state = static_cast<TX*>(p.conv_state) + row * p.state_stride[0] + c * p.state_stride[1];
    // Circular: token 0 goes to `head`, and the window before it ends there; shift mode: the
    // window is the state's last W-1 entries.
    const long long head = p.cache_seqlens ? update_ring_head(cache, sl) : sl;
    // The window: the W-1 state entries before token 0, as stored.
    TX last[W > 1 ? W - 1 : 1];
    for (int i = 0; i < W - 1; ++i) {
      long long pos = head - (W - 1) + i;
      if (pos < 0) pos += sl;
      last[i] = state[pos * ss];
    }
    if (!p.cache_seqlens) {
      // Shift mode: concat(state, x)[-state_len:], in place. Entry i takes old entry i + seqlen
      // while that exists: those below the window move in memory, in ascending order (each read
      // before it is overwritten), the window's are written from registers (a decode step's
      // whole shift, with no load waiting on a store); the token loop writes the rest.
#pragma unroll 1
      for (long long i = 0; i < sl - (W - 1) - p.seqlen; ++i) state[i * ss] = state[(i + p.seqlen) * ss];
      for (int k = 0; k < W - 1; ++k) {
        const long long i = sl - (W - 1) + k - p.seqlen;
        if (i >= 0) state[i * ss] = last[k];
      }
    }
    // win[k] holds x at time k-(W-1) relative to the current token; the last slot is the token.
    float win[W];
    for (int i = 0; i < W - 1; ++i) win[i] = to_float(last[i]);
    // Where token t goes in the state (`at`, and sp = state + at * ss): its ring position, in
    // order (a later one overwrites an earlier one), or sl - seqlen + t in shift mode (a token
    // that falls off the front is not written; `at` reaches sl there only after the last
    // token). The window was read before the loop, so no token reads what another wrote.
    // Pointers move by increments: products of 64-bit strides would cost 5 instructions each.
    long long at = p.cache_seqlens ? head : sl - p.seqlen;
    TX* sp = state + (at > 0 ? at : 0) * ss;
    const TX* xp = x;
    TX* op = out;
    // Loops over runtime counts stay rolled: a decode step has one token, and unrolled copies
    // would only add code (and compile time).
#pragma unroll 1
    for (long long t = 0; t < p.seqlen; ++t, xp += xs, op += os) {
      const TX xt = *xp;
      win[W - 1] = to_float(xt);
      float acc = bias;
      for (int k = 0; k < W; ++k) acc += w[k] * win[k];
      if (p.silu) acc = silu(acc);
      *op = from_float<TX>(acc);
      if (at >= 0) *sp = xt, sp += ss;
      if (++at == sl) at = 0, sp = state;
      for (int k = 0; k < W - 1; ++k) win[k] = win[k + 1];
    }
  }
}

}  // namespace cc1d
