// fwd.cuh — the forward kernel.
//
// One template, instantiated per variant through NVRTC name expressions, e.g.
//   cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, cc1d::kFwdPathTimeVec>
// TX: x/out/state type, TW: weight/bias type, W: width (1..8), PATH: one of the kFwdPath*
// constants of fwd_params.h. The paths are separate kernels, not branches of one: each is
// small, compiles fast and carries only its own code. The planner picks the fast ones (16-byte
// vector loads and stores; channel-last ones also with seq_idx) when the layout allows, and the
// generic strided ones otherwise. Bias and states are runtime flags in FwdParams (uniform
// branches); so is silu on the generic paths and CHANNEL_VEC_SEQ, while each other vector path
// has a variant with and one without.
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

// Final state j of row (b, c): the entry W-1-j before the end of concat(initial_states or
// zeros, x).
template <typename TX>
CC1D_HD void fwd_write_final_one(const FwdParams& p, int W, long long b, long long c, int j) {
  const float v = fwd_load_x<TX>(p, W, b, c, p.seqlen - (W - 1) + j);
  static_cast<TX*>(p.final_states)[b * p.final_stride[0] + c * p.final_stride[1] + j * p.final_stride[2]] =
      from_float<TX>(v);
}

template <typename TX>
CC1D_HD void fwd_write_final(const FwdParams& p, int W, long long b, long long c) {
  for (int j = 0; j < W - 1; ++j) fwd_write_final_one<TX>(p, W, b, c, j);
}

template <typename TW, int W>
CC1D_HD void fwd_load_weights(const FwdParams& p, long long c, float (&w)[W], float& bias) {
  for (int k = 0; k < W; ++k) w[k] = load_as_float<TW>(p.weight, c * p.w_stride[0] + k * p.w_stride[1]);
  bias = p.bias ? load_as_float<TW>(p.bias, c * p.bias_stride) : 0.f;
}

// The activation: fixed in the variant (the vector paths: fewer instructions, one copy of the
// code) or read from FwdParams::silu (the generic paths, to halve their variants).
enum FwdAct { kActRuntime, kActNone, kActSilu };

// bias + sum_k w[k] * x[k], then the activation.
template <int W, int ACT = kActRuntime>
CC1D_HD float fwd_tap(const FwdParams& p, const float (&w)[W], float bias, const float* x) {
  float acc = bias;
  for (int k = 0; k < W; ++k) acc += w[k] * x[k];
  if constexpr (ACT == kActSilu) return silu(acc);
  if constexpr (ACT == kActNone) return acc;
  return silu_if(p.silu != 0, acc);
}

// ---- TIME and TIME_SEQ: one row (b, c) per item, any strides. Warp w owns kFwdWarpSpan
// consecutive outputs, lane l those at 32j + l (j < kFwdItemsTime): the warp's loads and stores
// walk consecutive elements (coalesced where the time stride is 1: rows that are not 16-byte
// aligned), and the window, staged in shared memory (segment ids too), is read at consecutive
// banks with constant offsets. Lanes owning 8 neighbouring steps made each 2-byte load touch its
// own sector (20% of copy bandwidth on an H200); staging their outputs back through shared
// memory then made the kernel bound by instruction issue (30%). Entry i of a warp's buffer is
// time tw0-8+i.
constexpr int kFwdTimeStage = kFwdWarpSpan + kFwdItemsTime;  // window entries per warp

template <typename TX, typename TW, int W, bool SEQ>
CC1D_HD void fwd_time_block(const FwdParams& p, long long b, long long c, long long chunk) {
  static_assert(W - 1 <= kFwdItemsTime, "the buffer holds kFwdItemsTime entries before the warp's outputs");
  constexpr int ROUNDS = (kFwdTimeStage + 31) / 32;
  CC1D_SHARED_ARRAY(float, xsh, kFwdWarps * kFwdTimeStage);
  CC1D_SHARED_ARRAY(int, ssh, SEQ ? kFwdWarps * kFwdTimeStage : 1);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long tw0 = chunk * (long long)(kFwdThreads * kFwdItemsTime) + (long long)warp * kFwdWarpSpan;
  if (tw0 >= p.seqlen) return;  // uniform in the warp
  float* xw = xsh + warp * kFwdTimeStage;
  int* sw = ssh + (SEQ ? warp * kFwdTimeStage : 0);
  float w[W], bias;
  fwd_load_weights<TW, W>(p, c, w, bias);
  // All loads first, then the stores into the buffer.
  const long long s0 = tw0 - kFwdItemsTime + lane;  // time of this lane's first entry
  const long long xs = p.x_stride[2];
  const TX* __restrict__ xr = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
  float v[ROUNDS];
  int q[ROUNDS] = {};
  if (tw0 >= kFwdItemsTime && tw0 - kFwdItemsTime + kFwdTimeStage <= p.seqlen) {
    // Interior (almost every warp): the window lies in the row; pointers walk it, no checks.
    const TX* __restrict__ xp = xr + s0 * xs;
    for (int r = 0; r < ROUNDS; ++r, xp += 32 * xs) v[r] = r * 32 + lane < kFwdTimeStage ? to_float(*xp) : 0.f;
    if constexpr (SEQ) {
      const int* __restrict__ sp = p.seq_idx + b * p.seq_stride[0] + s0 * p.seq_stride[1];
      for (int r = 0; r < ROUNDS; ++r, sp += 32 * p.seq_stride[1]) q[r] = r * 32 + lane < kFwdTimeStage ? *sp : 0;
    }
  } else {
    // A row's ends: entries past the end read 0, before the start the initial states or 0.
    for (int r = 0; r < ROUNDS; ++r) {
      const long long s = s0 + r * 32;
      const bool used = r * 32 + lane < kFwdTimeStage;
      v[r] = used && s >= 0 && s < p.seqlen ? to_float(xr[s * xs]) : 0.f;
      if constexpr (SEQ) q[r] = used ? fwd_load_seq(p, b, s) : 0;
    }
    if (s0 < 0 && s0 >= -(W - 1)) v[0] = fwd_load_x<TX>(p, W, b, c, s0);
  }
  __syncwarp();  // the warp's previous item is done with its buffer
  for (int r = 0; r < ROUNDS; ++r) {
    if (r * 32 + lane < kFwdTimeStage) {
      xw[r * 32 + lane] = v[r];
      if constexpr (SEQ) sw[r * 32 + lane] = q[r];
    }
  }
  __syncwarp();
  // Output 32j + l reads entries 32j + l + kFwdItemsTime - (W-1) + k, k < W.
  const float* xl = xw + lane + kFwdItemsTime - (W - 1);
  const int* sl = sw + lane + kFwdItemsTime - (W - 1);
  const long long os = p.out_stride[2];
  TX* __restrict__ out = static_cast<TX*>(p.out) + b * p.out_stride[0] + c * p.out_stride[1] + (tw0 + lane) * os;
  for (int j = 0; j < kFwdItemsTime; ++j) {
    if (tw0 + lane + 32 * j >= p.seqlen) break;
    float x[W];
    for (int k = 0; k < W; ++k) x[k] = xl[32 * j + k];
    float y;
    if constexpr (SEQ) {
      const int cur = sl[32 * j + W - 1];
      for (int k = 0; k < W - 1; ++k) x[k] = sl[32 * j + k] == cur ? x[k] : 0.f;  // taps of other segments
      y = cur < 0 ? 0.f : fwd_tap<W>(p, w, bias, x);
    } else {
      y = fwd_tap<W>(p, w, bias, x);
    }
    out[32 * j * os] = from_float<TX>(y);
  }
  if (p.final_states && lane == 0 && p.seqlen - 1 < tw0 + kFwdWarpSpan) fwd_write_final<TX>(p, W, b, c);
}

// ---- TIME_VEC: a warp computes kFwdVecSegment steps of one row, kFwdWarpSpan at a time. Lane
// l holds x[s+8l, s+8l+8) as packed words (one 16-byte load, two for fp32) and takes the W-1
// inputs before them from lane l-1 by shuffle; lane 0 takes lane 31's from the previous step
// (its carry). No shared memory, no barrier; one vector store per 8 outputs.
template <typename TX, int W, int ACT>
struct TimeVec {
  static constexpr int kPer = Words<TX>::kPerWord;
  static constexpr int kWords = kFwdItemsTime / kPer;        // 4 (16-bit) or 8 (fp32)
  static constexpr int kHalo0 = (kFwdItemsTime - (W - 1)) / kPer;  // first word holding a halo input
  // Steps whose loads are issued before the first one's math: a whole segment of 16-bit data
  // (64 bytes a lane), 1 step of fp32 (32 bytes; its 88-90% of the copy left no gap to close).
  static constexpr int kAhead = sizeof(TX) == 4 ? 1 : kFwdVecSegment / kFwdWarpSpan;
  static_assert(kAhead * kFwdWarpSpan <= kFwdVecSegment, "a segment holds the steps loaded ahead");

  static CC1D_HD void load(const TX* p, unsigned (&w)[kWords]) {
    for (int v = 0; v < kWords / 4; ++v) load16(p + v * (16 / (int)sizeof(TX)), *reinterpret_cast<unsigned(*)[4]>(w + 4 * v));
  }
  static CC1D_HD void store(TX* p, const unsigned (&w)[kWords]) {
    for (int v = 0; v < kWords / 4; ++v)
      store16(p + v * (16 / (int)sizeof(TX)), *reinterpret_cast<const unsigned(*)[4]>(w + 4 * v));
  }

  // The outputs of one warp step from this lane's inputs `cur`; the W-1 inputs before them
  // come from lane l-1 by shuffle, or for lane 0 from its carry (lane 31's, the step before).
  static CC1D_HD void compute(const FwdParams& p, int lane, const float (&w)[W], float bias,
                              const unsigned (&cur)[kWords], unsigned (&carry)[kWords], float (&o)[kFwdItemsTime]) {
    unsigned prev[kWords] = {};
    for (int j = kHalo0; j < kWords; ++j) {
      const unsigned left = __shfl_sync(0xffffffffu, cur[j], (lane + 31) & 31);
      prev[j] = lane == 0 ? carry[j] : left;
      carry[j] = left;  // lane 0: lane 31's words, the next step's halo
    }
    float xv[W - 1 + kFwdItemsTime];
    for (int i = 0; i < W - 1; ++i) xv[i] = word_elem<TX>(prev, kFwdItemsTime - (W - 1) + i);
    for (int i = 0; i < kFwdItemsTime; ++i) xv[W - 1 + i] = word_elem<TX>(cur, i);
    for (int i = 0; i < kFwdItemsTime; ++i) o[i] = fwd_tap<W, ACT>(p, w, bias, xv + i);
  }

  // Rows need not start on 16 bytes: the vector steps start at the row's first 16-byte aligned
  // element `a` (x's and out's rows share their offset mod 16: the planner checks), and segment
  // 0's lanes compute the a < 16 / sizeof(TX) outputs before it one each. (A row of odd
  // length makes every other row start unaligned; these rows took the generic path at 40% of
  // the copy on an H200.)
  static CC1D_HD void warp(const FwdParams& p, long long b, long long c, long long seg, const float (&w)[W],
                           float bias) {
    const int lane = threadIdx.x & 31;
    const TX* __restrict__ xr = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
    TX* __restrict__ outr = static_cast<TX*>(p.out) + b * p.out_stride[0] + c * p.out_stride[1];
    const int a = first_aligned_step(xr);
    const long long s0 = a + seg * kFwdVecSegment;
    if (seg > 0 && s0 >= p.seqlen) return;  // the row's last segment, shifted past its end
    const long long s_end = s0 + kFwdVecSegment < p.seqlen ? s0 + kFwdVecSegment : p.seqlen;
    if (seg == 0 && lane < a && lane < p.seqlen) {
      float x[W];
      for (int k = 0; k < W; ++k) x[k] = fwd_load_x<TX>(p, W, b, c, lane - (W - 1) + k);
      outr[lane] = from_float<TX>(fwd_tap<W, ACT>(p, w, bias, x));
    }
    unsigned carry[kWords] = {};
    if (lane == 0) {
      if (s0 >= kFwdItemsTime) {
        load(xr + s0 - kFwdItemsTime, carry);
      } else {  // segment 0: the W-1 inputs before s0, from x, the initial states or zeros
        float f[kFwdItemsTime] = {};
        for (int i = kFwdItemsTime - (W - 1); i < kFwdItemsTime; ++i)
          f[i] = fwd_load_x<TX>(p, W, b, c, s0 - kFwdItemsTime + i);
        pack_words<TX>(f, carry);
      }
    }
    // Full steps, kAhead steps' loads in flight before the math: with one load of 16 bytes in
    // flight per lane, bf16 stayed at 84% of the copy on an H200, fp32 (32 bytes) at 88-90%.
    const TX* __restrict__ xp = xr + s0 + lane * kFwdItemsTime;
    TX* __restrict__ op = outr + s0 + lane * kFwdItemsTime;
    const int full = (int)((s_end - s0) / kFwdWarpSpan);
    unsigned ring[kAhead][kWords] = {}, cur[kWords];
    for (int r = 0; r < kAhead; ++r)
      if (r < full) load(xp + r * kFwdWarpSpan, ring[r]);
#pragma unroll 1
    for (int i = 0; i < full; ++i, xp += kFwdWarpSpan, op += kFwdWarpSpan) {
      for (int j = 0; j < kWords; ++j) cur[j] = ring[0][j];
      for (int r = 0; r + 1 < kAhead; ++r)
        for (int j = 0; j < kWords; ++j) ring[r][j] = ring[r + 1][j];
      if (kAhead < kFwdVecSegment / kFwdWarpSpan && i + kAhead < full) load(xp + kAhead * kFwdWarpSpan, ring[kAhead - 1]);
      float o[kFwdItemsTime];
      compute(p, lane, w, bias, cur, carry, o);
      unsigned ow[kWords];
      pack_words<TX>(o, ow);
      store(op, ow);
    }
    // The row ends inside this step: lanes wholly before the end load and store by vectors, the
    // lane that straddles it element by element, the lanes after it nothing. (All lanes element by
    // element left rows of odd length at 77-82% of the copy on an H200: the step is an eighth of
    // a 2047-step row.)
    if (s0 + (long long)full * kFwdWarpSpan < s_end) {
      const long long valid = p.seqlen - (s0 + (long long)full * kFwdWarpSpan + lane * kFwdItemsTime);
      if (valid >= kFwdItemsTime) {
        load(xp, cur);
      } else {
        float f[kFwdItemsTime];
        for (int i = 0; i < kFwdItemsTime; ++i) f[i] = i < valid ? to_float(xp[i]) : 0.f;
        pack_words<TX>(f, cur);
      }
      float o[kFwdItemsTime];
      compute(p, lane, w, bias, cur, carry, o);
      if (valid >= kFwdItemsTime) {
        unsigned ow[kWords];
        pack_words<TX>(o, ow);
        store(op, ow);
      } else {
        for (int i = 0; i < kFwdItemsTime; ++i)
          if (i < valid) op[i] = from_float<TX>(o[i]);
      }
    }
    if (p.final_states && s_end == p.seqlen && lane < W - 1) fwd_write_final_one<TX>(p, W, b, c, lane);
  }
};

// ---- CHANNEL and CHANNEL_SEQ: a lane per channel (32 per item), the block's warps walk
// kFwdWarps runs of kFwdChunkChannel time steps; each thread slides a window of W steps over its
// run (any strides: the generic path stays small), loading kFwdChannelBurst steps (and their
// segment ids) at a time before their math: one load in flight per thread made these paths
// latency-bound (24% of copy bandwidth on an H200).
template <typename TX, typename TW, int W, bool SEQ>
CC1D_HD void fwd_channel_run(const FwdParams& p, long long b, long long cb, long long chunk) {
  constexpr int U = kFwdChannelBurst;
  const long long c = cb * 32 + (threadIdx.x & 31);
  const long long t0 = (chunk * kFwdWarps + (threadIdx.x >> 5)) * (long long)kFwdChunkChannel;
  if (c >= p.dim || t0 >= p.seqlen) return;
  const long long t_end = t0 + kFwdChunkChannel < p.seqlen ? t0 + kFwdChunkChannel : p.seqlen;
  const long long xs = p.x_stride[2], os = p.out_stride[2];
  const TX* __restrict__ xb = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
  TX* __restrict__ ob = static_cast<TX*>(p.out) + b * p.out_stride[0] + c * p.out_stride[1];
  float w[W], bias;
  fwd_load_weights<TW, W>(p, c, w, bias);
  float win[W] = {};  // win[k]: x at t-(W-1)+k for the current step t
  int sq[W] = {};     // their segment ids (SEQ)
  auto shift_in = [&](float x, int seq) {
    for (int k = 0; k < W - 1; ++k) win[k] = win[k + 1], sq[k] = sq[k + 1];
    win[W - 1] = x;
    sq[W - 1] = seq;
  };
#pragma unroll 1
  for (long long t = t0 - (W - 1); t < t0; ++t)  // x, states or 0
    shift_in(fwd_load_x<TX>(p, W, b, c, t), SEQ ? fwd_load_seq(p, b, t) : 0);
  const TX* __restrict__ xp = xb + t0 * xs;
  TX* __restrict__ op = ob + t0 * os;
  const int* __restrict__ sp = SEQ ? p.seq_idx + b * p.seq_stride[0] + t0 * p.seq_stride[1] : nullptr;
  const long long ss = SEQ ? p.seq_stride[1] : 0;
#pragma unroll 1
  for (long long t = t0; t < t_end; t += U, xp += U * xs, op += U * os, sp += U * ss) {
    const int n = t_end - t < U ? (int)(t_end - t) : U;
    float xv[U];
    int sv[U] = {};
    for (int u = 0; u < U; ++u) xv[u] = u < n ? to_float(xp[u * xs]) : 0.f;
    if constexpr (SEQ)
      for (int u = 0; u < U; ++u) sv[u] = u < n ? sp[u * ss] : 0;
    for (int u = 0; u < U && u < n; ++u) {
      shift_in(xv[u], sv[u]);
      float m[W];
      for (int k = 0; k < W; ++k) m[k] = SEQ && sq[k] != sq[W - 1] ? 0.f : win[k];  // other segments: masked
      op[u * os] = from_float<TX>(SEQ && sq[W - 1] < 0 ? 0.f : fwd_tap<W>(p, w, bias, m));
    }
  }
  if (p.final_states && t_end == p.seqlen) fwd_write_final<TX>(p, W, b, c);
}

// ---- CHANNEL_VEC: a block computes kFwdChannelTiles tiles of kFwdChannelTile time steps x
// kFwdTileChannels channels (128 bytes of 16-bit ones, 256 of fp32), one after the other. A tile's input rows (with
// the W-1 steps before it: x, the initial states or zeros) reach shared memory by asynchronous
// 16-byte copies, issued a tile ahead into the other of two buffers, so the next tile loads
// while this one computes and no registers stage the data (staging through registers left bf16
// at 56 registers and 75-78% of the copy on an H200). Lane l of warp w walks channels 2l and 2l+1
// (a word of 16-bit ones, two of fp32) over the tile's rows [8w, 8w+8), writing its outputs into
// a shared output tile, which 16-byte stores write out. The final states are the last W-1 rows
// of the last input tile. Two barriers per tile.
// SEQ (CHANNEL_VEC_SEQ): the tile's segment ids, one per input row, reach shared memory beside
// it, by the same asynchronous copies. A warp whose
// rows and their windows lie in one segment (not padding) skips the masks; the others mask each
// tap of another segment and zero the outputs of padding, as the generic paths do.
template <typename TX, typename TW, int W, int ACT, bool SEQ>
CC1D_HD void fwd_channel_tiles(const FwdParams& p, long long b, long long cb, long long run) {
  constexpr int V = 16 / (int)sizeof(TX);      // channels per vector
  constexpr int CPW = Words<TX>::kPerWord;     // channels per word
  constexpr int C = kFwdTileChannels;          // channels per tile row
  constexpr int CPL = C / 32;                  // channels per lane: 2
  constexpr int LW = CPL / CPW;                // words per lane: 1 (16-bit) or 2 (fp32)
  constexpr int RW = 32 * LW;                  // words per tile row
  constexpr int VR = RW / 4;                   // vectors per row: 8 or 16
  constexpr int RR = kFwdThreads / VR;         // rows per load round: 16 or 8
  constexpr int T = kFwdChannelTile;           // output rows
  constexpr int R = T + W - 1;                 // input rows
  constexpr int STEPS = T / kFwdWarps;         // rows per warp
  static_assert(CPL * 32 == C && LW * CPW == CPL, "whole words a lane");
  CC1D_SHARED_ARRAY(unsigned, xbuf, 2 * R * RW);
  CC1D_SHARED_ARRAY(unsigned, ys, T * RW);
  constexpr int RS = (R + 3) / 4 * 4;          // SEQ: a tile's segment ids, 16-byte aligned
  constexpr int NQ = (STEPS + W - 1 + 3) / 4;  // SEQ: 16-byte loads of a warp's ids
  CC1D_SHARED_ARRAY(int, sbuf, SEQ ? 2 * RS : 1);  // SEQ: the two tiles' segment ids, a row each
  const SmemAddr xbuf_addr = smem_addr(xbuf);
  const int tid = threadIdx.x, lr = tid / VR, lv = tid % VR;  // load/store: row in a round, vector
  const int lane = tid & 31, r0 = (tid >> 5) * STEPS;         // compute: channels, first row
  const long long c0 = cb * C;
  const bool lv_ok = c0 + lv * V < p.dim;
  const long long xs_t = p.x_stride[2], os_t = p.out_stride[2];
  long long t0 = run * kFwdChannelTiles * T;
  // This thread's first load and store of the tile at t0, moved on by pointer increments (a
  // round, a tile): no 64-bit multiply per tile, and ptxas keeps them in registers.
  const TX* __restrict__ xtile =
      static_cast<const TX*>(p.x) + b * p.x_stride[0] + c0 + lv * V + (t0 - (W - 1) + lr) * xs_t;
  TX* __restrict__ otile = static_cast<TX*>(p.out) + b * p.out_stride[0] + c0 + lv * V + (t0 + lr) * os_t;
  float w[CPL][W] = {}, bias[CPL] = {};
  for (int i = 0; i < CPL; ++i)
    if (c0 + lane * CPL + i < p.dim) fwd_load_weights<TW, W>(p, c0 + lane * CPL + i, w[i], bias[i]);

  // The copies of the tile at time t into buffer `buf` (the initial states' rows are written below).
  // SEQ: the ids of the tile's rows travel with them.
  auto issue = [&](long long t, const TX* __restrict__ xt, int buf) {
    const SmemAddr dst = xbuf_addr + (SmemAddr)((buf * R * RW + lr * RW + lv * 4) * 4);
    async_copy_x_rows<TX, W, R, RR, RW>(dst, xt, xs_t, t, p.seqlen, p.initial_states != nullptr, lr, lv_ok, p.x);
    if constexpr (SEQ)
      async_copy_seq_ids(smem_addr(sbuf + buf * RS), p.seq_idx + b * p.seq_stride[0], p.seq_stride[1], t - (W - 1),
                         p.seqlen, tid, R);
    async_commit();
  };
  __syncthreads();  // the block's previous item is done with both buffers and ys
  issue(t0, xtile, 0);
  unsigned* xs = xbuf;  // the current tile's buffer (after the loop: the last tile's)
#pragma unroll 1
  for (int k = 0; k < kFwdChannelTiles && t0 < p.seqlen; ++k, t0 += T, xtile += T * xs_t, otile += T * os_t) {
    xs = xbuf + (k & 1) * R * RW;
    // The next tile's copies go into the buffer the previous tile computed from (a barrier ago).
    const bool next = k + 1 < kFwdChannelTiles && t0 + T < p.seqlen;  // uniform in the block
    if (next) issue(t0 + T, xtile + T * xs_t, (k + 1) & 1);
    if (t0 < W - 1 && p.initial_states != nullptr) {  // the first tile of a row: rare, rolled
#pragma unroll 1
      for (int idx = tid; idx < (int)(W - 1 - t0) * RW; idx += kFwdThreads) {  // a word each
        float f[CPW];
        for (int i = 0; i < CPW; ++i) {
          const long long c = c0 + (idx % RW) * CPW + i;
          f[i] = c < p.dim ? fwd_load_x<TX>(p, W, b, c, t0 - (W - 1) + idx / RW) : 0.f;
        }
        pack_words<TX>(f, xs + idx);
      }
    }
    if (next) {
      async_wait<1>();  // this tile's copies are done, the next one's may still be in flight
    } else {
      async_wait<0>();
    }
    __syncthreads();

    // SEQ: the segment ids of the warp's input rows r0..r0+STEPS+W-2 (sq[i]: row r0+i, read from
    // shared memory by the masked copy only, so that the other holds none in registers); `masked`
    // (uniform in the warp) unless they are one segment, not padding.
    const int* sq = sbuf + (k & 1) * RS + r0;
    bool masked = false;
    if constexpr (SEQ) {
      int q[4 * NQ];
      for (int v = 0; v < NQ; ++v) load16(sq + 4 * v, *reinterpret_cast<unsigned(*)[4]>(q + 4 * v));
      for (int j = 1; j < STEPS + W - 1; ++j) masked = masked || q[j] != q[0];
      masked = masked || q[0] < 0;
    }
    // Two unrolled copies of the rows' math under SEQ, with the masks and without (mk is a
    // constant in each), one without SEQ.
#pragma unroll
    for (int mode = 0; mode < (SEQ ? 2 : 1); ++mode) {
      const bool mk = SEQ && mode == 1;
      if (mk != masked) continue;
      float win[W][CPL];  // a lane's words are adjacent: fp32's two load as one LDS.64
      for (int j = 0; j < W - 1; ++j)
        for (int i = 0; i < CPL; ++i) win[j + 1][i] = word_elem<TX>(xs + (r0 + j) * RW + lane * LW, i);
#pragma unroll
      for (int j = 0; j < STEPS; ++j) {
        for (int m = 0; m < W - 1; ++m)
          for (int i = 0; i < CPL; ++i) win[m][i] = win[m + 1][i];
        unsigned xw[LW];  // (load_words_shared here cost bf16 8 more registers; fp32's pair still loads as one)
        for (int v = 0; v < LW; ++v) xw[v] = xs[(r0 + j + W - 1) * RW + lane * LW + v];
        const int cur = mk ? sq[j + W - 1] : 0;
        float o[CPL];
        for (int i = 0; i < CPL; ++i) {
          win[W - 1][i] = word_elem<TX>(xw, i);
          float x[W];  // mk: a tap of another segment reads 0
          for (int m = 0; m < W; ++m) x[m] = mk && sq[j + m] != cur ? 0.f : win[m][i];
          o[i] = fwd_tap<W, ACT>(p, w[i], bias[i], x);
        }
        pack_words<TX>(o, ys + (r0 + j) * RW + lane * LW);
        if (mk && cur < 0)  // padding: 0
          for (int v = 0; v < LW; ++v) ys[(r0 + j) * RW + lane * LW + v] = 0;
      }
    }
    __syncthreads();

    const long long left = p.seqlen - t0;  // output rows of this tile in x: min(left, T)
    TX* __restrict__ ot = otile;
    for (int i = 0; i < T / RR; ++i, ot += RR * os_t) {
      unsigned o[4];
      load16(ys + (i * RR + lr) * RW + lv * 4, o);
      if (i * RR + lr < left && lv_ok) store16(ot, o);
    }
  }
  // The last tile of a row holds the final states in its input rows: x at seqlen-(W-1)+j is
  // row seqlen-t0'+j, t0' = t0 - T the tile's first step (xs is intact until the next item).
  if (p.final_states && t0 >= p.seqlen) {
#pragma unroll 1
    for (int idx = tid; idx < (W - 1) * C; idx += kFwdThreads) {
      const int j = idx / C, ci = idx % C;
      const long long c = c0 + ci;
      if (c < p.dim)
        static_cast<TX*>(p.final_states)[b * p.final_stride[0] + c * p.final_stride[1] + j * p.final_stride[2]] =
            from_float<TX>(word_elem<TX>(xs + (p.seqlen - (t0 - T) + j) * RW + ci / CPW, ci % CPW));
    }
  }
}

// Grid: x walks the blocks of one batch row, y walks batches; both are block-strided, so no
// grid limit applies. The planner guarantees fewer than 2^32 work items per batch row, which
// keeps the index math 32-bit (64-bit division would double ptxas time and code size).
template <typename TX, typename TW, int W, int PATH>
__global__ void __launch_bounds__(kFwdThreads) causal_conv1d_fwd_kernel(const FwdParams p) {
  constexpr bool TIME_VEC = PATH == kFwdPathTimeVec || PATH == kFwdPathTimeVecSilu;
  constexpr bool CHANNEL_VEC =
      PATH == kFwdPathChannelVec || PATH == kFwdPathChannelVecSilu || PATH == kFwdPathChannelVecSeq;
  constexpr int ACT = PATH == kFwdPathChannelVecSeq                                     ? kActRuntime
                      : PATH == kFwdPathTimeVecSilu || PATH == kFwdPathChannelVecSilu ? kActSilu
                                                                                       : kActNone;
  const unsigned nt = (unsigned)p.num_time_chunks;
  for (long long b = blockIdx.y; b < p.batch; b += gridDim.y) {
    for (long long blk = blockIdx.x; blk < p.blocks_per_batch; blk += gridDim.x) {
      if constexpr (TIME_VEC) {
        // One item per warp: (channel, segment); a warp without one skips (no barrier here).
        const unsigned item = (unsigned)blk * kFwdWarps + (threadIdx.x >> 5);
        if (item >= (unsigned)(p.num_channel_blocks * p.num_time_chunks)) continue;
        const long long c = item / nt, seg = item % nt;
        float w[W], bias;
        fwd_load_weights<TW, W>(p, c, w, bias);
        TimeVec<TX, W, ACT>::warp(p, b, c, seg, w, bias);
      } else {
        const unsigned u = (unsigned)blk;
        const long long chunk = u % nt, cb = u / nt;
        if constexpr (PATH == kFwdPathTime || PATH == kFwdPathTimeSeq) {
          fwd_time_block<TX, TW, W, PATH == kFwdPathTimeSeq>(p, b, cb, chunk);
        } else if constexpr (CHANNEL_VEC) {
          fwd_channel_tiles<TX, TW, W, ACT, PATH == kFwdPathChannelVecSeq>(p, b, cb, chunk);
        } else {
          fwd_channel_run<TX, TW, W, PATH == kFwdPathChannelSeq>(p, b, cb, chunk);
        }
      }
    }
  }
}

}  // namespace cc1d
