// bwd.cuh — the backward kernels: gradients of x, weight, bias and initial states.
//
// With g(t) = dout(t) * act'(z(t)) the gradient of the pre-activation z at output t (0 at padding
// tokens and outside [0, seqlen)) and m(s, t) = [seq(s) == seq(t)] (1 without seq_idx):
//     dx(s)  = sum_k w[k] g(s+W-1-k) m(s, s+W-1-k) + dfinal(s)   (s < 0: dinitial_states)
//     dw[k]  = sum_t g(t) x(t-W+1+k) m(t-W+1+k, t),   db = sum_t g(t)
// SiLU is recomputed from the pre-activation, never stored.
//
// Kernels, launched in order by the planner (runtime/src/ops/bwd/bwd_plan.cpp):
//  - causal_conv1d_bwd_zero_kernel: zeroes the fp32 sums the atomics accumulate into (atomic mode);
//  - causal_conv1d_bwd_kernel<TX, TW, W, LAYOUT>: dx and dinitial_states, and per (batch, time
//    segment) the fp32 partial sums of dweight and dbias, added with atomics into one row of
//    BwdParams::acc, or (deterministic) stored into its own row;
//  - causal_conv1d_bwd_finalize_kernel<TW>: sums the rows of acc in a fixed order into dweight and
//    dbias, in weight's dtype.
// Time layouts (any strides): a block walks one row's time segment backwards, chunk by chunk;
// each thread owns 16 bytes' worth of steps (4 fp32 or 8 fp16/bf16), a block's width apart, so
// that a warp's loads and stores walk consecutive elements (coalesced at unit stride; steps next
// to each other made each 2-byte load touch its own sector, 8x the sectors on an H200), and its
// shared-memory reads hit consecutive banks. The left halo of x and the
// right halo of g (carried from the later chunk, so silu is recomputed once) go through shared
// memory. The block then reduces dweight and dbias in a fixed order. TIME_VEC (unit stride,
// x's, dout's and dx's rows equally aligned, bwd_time_vec.cuh): a warp walks a segment with x,
// dout and dx in registers, halos by shuffle.
// Channel layout: a thread walks its channel backwards over a segment (and W-1 steps of halo)
// with sliding windows. CHANNEL_VEC (channel-last, 16-byte aligned rows of channels): a block
// walks 64 channels over a segment, tile by tile, through shared memory.
// What every layout reads and writes through (x, g, the partial sums): bwd_common.cuh.
#pragma once
#include "bwd_common.cuh"
#include "bwd_time_vec.cuh"

namespace cc1d {

// TIME and TIME_SEQ layouts (any strides): block (b, c, seg). Per chunk, three barriers: the tiles
// are free, the tiles of x (and seq) are filled, g is filled. SEQ: with seq_idx; without it the
// segment ids and their compares are not compiled at all.
template <typename TX, typename TW, int W, bool SEQ>
CC1D_HD void bwd_time_segment(const BwdParams& p, long long b, long long c, long long seg, float* smem) {
  constexpr int C = bwd_chunk(sizeof(TX)), N = C / kBwdThreads;  // bwd_params.h
  float* xt = smem;                     // xt[W-1+q] = x(t0+q), q in [-(W-1), C)
  float* gt = smem + bwd_smem_gt(C, W);  // gt[q] = g(t0+q), q in [0, C+W-1)
  int* st = reinterpret_cast<int*>(smem + bwd_smem_st(C, W));  // st[W-1+q] = seq(t0+q), q in [-(W-1), C+W-1)
  const int tid = threadIdx.x;
  float w[W], bias;
  bwd_load_weights<TW, W>(p, c, w, bias);
  const TX* xrow = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
  const TX* drow = static_cast<const TX*>(p.dout) + b * p.dout_stride[0] + c * p.dout_stride[1];
  TX* dxrow = p.dx ? static_cast<TX*>(p.dx) + b * p.dx_stride[0] + c * p.dx_stride[1] : nullptr;
  const long long s_begin = seg * p.segment_len;
  const long long s_end = s_begin + p.segment_len < p.seqlen ? s_begin + p.segment_len : p.seqlen;
  float dw[W], db = 0.f;
  for (int k = 0; k < W; ++k) dw[k] = 0.f;
  // Thread j < W-1 carries g(t0 + C + j), the right halo of the chunk at t0.
  float carry = tid < W - 1 ? bwd_g_at<TX, W, SEQ>(p, w, bias, b, c, s_end + tid) : 0.f;
  for (long long t0 = s_begin + (s_end - s_begin - 1) / C * C; t0 >= s_begin; t0 -= C) {
    // The thread's steps: q = j * kBwdThreads + tid, time t0 + q.
    float xv[N], dv[N];
    int sv[N];
    for (int j = 0; j < N; ++j) {
      const long long t = t0 + j * kBwdThreads + tid;
      const bool in = t < p.seqlen;
      xv[j] = in ? to_float(xrow[t * p.x_stride[2]]) : 0.f;
      dv[j] = in ? to_float(drow[t * p.dout_stride[2]]) : 0.f;
    }
    if (SEQ)
      for (int j = 0; j < N; ++j) sv[j] = bwd_seq(p, b, t0 + j * kBwdThreads + tid);
    float xl = 0.f;
    int sl = 0, sr = 0;
    if (tid < W - 1) {
      xl = bwd_x<TX>(p, W, b, c, t0 - (W - 1) + tid);
      if (SEQ) {
        sl = bwd_seq(p, b, t0 - (W - 1) + tid);
        sr = bwd_seq(p, b, t0 + C + tid);
      }
    }
    __syncthreads();
    for (int j = 0; j < N; ++j) xt[W - 1 + j * kBwdThreads + tid] = xv[j];
    if (SEQ)
      for (int j = 0; j < N; ++j) st[W - 1 + j * kBwdThreads + tid] = sv[j];
    if (tid < W - 1) {
      xt[tid] = xl;
      gt[C + tid] = carry;
      if (SEQ) {
        st[tid] = sl;
        st[W - 1 + C + tid] = sr;
      }
    }
    __syncthreads();
    // g at the thread's N steps (dv is 0 past seqlen); silu's derivative from the recomputed z.
    float gv[N];
    if (p.silu) {
      for (int j = 0; j < N; ++j) {
        const int q = j * kBwdThreads + tid;
        float z = bias;
        for (int k = 0; k < W; ++k) z += (!SEQ || st[q + k] == st[W - 1 + q]) ? w[k] * xt[q + k] : 0.f;
        gv[j] = dv[j] * silu_grad(z);
      }
    } else {
      for (int j = 0; j < N; ++j) gv[j] = dv[j];
    }
    for (int j = 0; j < N; ++j) {
      const int q = j * kBwdThreads + tid;
      if (SEQ) gv[j] = st[W - 1 + q] < 0 ? 0.f : gv[j];  // a padding token
      gt[q] = gv[j];
      db += gv[j];
      for (int k = 0; k < W; ++k) dw[k] += (!SEQ || st[q + k] == st[W - 1 + q]) ? gv[j] * xt[q + k] : 0.f;
    }
    __syncthreads();
    if (dxrow != nullptr) {
      float dxv[N];
      for (int j = 0; j < N; ++j) {
        const int q = j * kBwdThreads + tid;
        const int cur = SEQ ? st[W - 1 + q] : 0;
        float a = 0.f;
        for (int k = 0; k < W; ++k)
          a += (!SEQ || st[2 * (W - 1) + q - k] == cur) ? w[k] * gt[q + W - 1 - k] : 0.f;
        dxv[j] = a;
      }
      if (p.dfinal_states != nullptr && t0 + C > p.seqlen - (W - 1))  // the last W-1 steps only
        for (int j = 0; j < N; ++j) dxv[j] += bwd_dfinal<TX>(p, W, b, c, t0 + j * kBwdThreads + tid);
      for (int j = 0; j < N; ++j) {
        const long long t = t0 + j * kBwdThreads + tid;
        if (t < p.seqlen) dxrow[t * p.dx_stride[2]] = from_float<TX>(dxv[j]);
      }
    }
    if (t0 == 0 && p.dinitial_states != nullptr && tid < W - 1) {
      // x at s = tid - (W-1) < 0 (token 0's segment) reaches outputs 0..tid.
      const int cur = SEQ ? st[W - 1] : 0;
      float a = 0.f;
      for (int k = 0; k < W; ++k)  // constant bounds: w stays in registers
        if (k <= tid) a += (!SEQ || st[W - 1 + tid - k] == cur) ? w[k] * gt[tid - k] : 0.f;
      a += bwd_dfinal<TX>(p, W, b, c, tid - (W - 1));
      static_cast<TX*>(p.dinitial_states)[b * p.dinit_stride[0] + c * p.dinit_stride[1] + tid * p.dinit_stride[2]] =
          from_float<TX>(a);
    }
    if (tid < W - 1) carry = gt[tid];
  }
  if (p.acc != nullptr)
    bwd_block_reduce<W>(p, b * p.num_segments + seg, c, dw, db, smem + bwd_smem_red(C, W),
                        smem + bwd_smem_red2(C, W));
}

// CHANNEL layout: thread = channel; it walks its segment backwards with windows indexed
// o <-> time t-(W-1)+o. The walk starts W-1 steps after the segment (g there is dx's halo: it
// is computed, not accumulated) and, in the first segment, ends at -(W-1) for dinitial_states.
// SEQ: with seq_idx; without it no segment id is read or compared.
template <typename TX, typename TW, int W, bool SEQ>
CC1D_HD void bwd_channel_segment(const BwdParams& p, long long b, long long cb, long long seg) {
  const long long c = cb * kBwdThreads + threadIdx.x;
  if (c >= p.dim) return;
  float w[W], bias;
  bwd_load_weights<TW, W>(p, c, w, bias);
  const long long t0 = seg * p.segment_len;
  const long long t1 = t0 + p.segment_len < p.seqlen ? t0 + p.segment_len : p.seqlen;
  const long long t_start = t1 + (W - 2) < p.seqlen - 1 ? t1 + (W - 2) : p.seqlen - 1;
  float xw[W];          // x(t-(W-1)+o), o < W
  float gw[2 * W - 1];  // g(t-(W-1)+o), o >= W-1 (0 beyond the walk's start: past seqlen or not needed)
  int sw[2 * W - 1];    // seq(t-(W-1)+o) (SEQ only)
  for (int o = 0; o < 2 * W - 1; ++o) {
    if (o < W) xw[o] = bwd_x<TX>(p, W, b, c, t_start + 1 - (W - 1) + o);
    sw[o] = SEQ ? bwd_seq(p, b, t_start + 1 - (W - 1) + o) : 0;
    gw[o] = 0.f;
  }
  float dw[W], db = 0.f;
  for (int k = 0; k < W; ++k) dw[k] = 0.f;
  const long long t_stop = t0 == 0 ? -(W - 1) : t0;
  for (long long t = t_start; t >= t_stop; --t) {
    for (int o = 2 * W - 2; o > 0; --o) {
      gw[o] = gw[o - 1];
      if (SEQ) sw[o] = sw[o - 1];
    }
    for (int o = W - 1; o > 0; --o) xw[o] = xw[o - 1];
    xw[0] = bwd_x<TX>(p, W, b, c, t - (W - 1));
    if (SEQ) sw[0] = bwd_seq(p, b, t - (W - 1));
    const int cur = SEQ ? sw[W - 1] : 0;
    auto same = [&](int o) { return !SEQ || sw[o] == cur; };  // window slot o in the segment of t
    const bool mine = t < t1;  // t >= t1: the halo
    float g = 0.f;
    if (t >= 0 && cur >= 0) {
      g = bwd_dout<TX>(p, b, c, t);
      if (p.silu) {
        float z = bias;
        for (int k = 0; k < W; ++k) z += same(k) ? w[k] * xw[k] : 0.f;
        g *= silu_grad(z);
      }
      if (mine) {
        db += g;
        for (int k = 0; k < W; ++k) dw[k] += same(k) ? g * xw[k] : 0.f;
      }
    }
    gw[W - 1] = g;
    if (!mine) continue;
    float a = bwd_dfinal<TX>(p, W, b, c, t);
    for (int k = 0; k < W; ++k) a += same(2 * W - 2 - k) ? w[k] * gw[2 * W - 2 - k] : 0.f;
    if (t >= 0) {
      if (p.dx) static_cast<TX*>(p.dx)[b * p.dx_stride[0] + c * p.dx_stride[1] + t * p.dx_stride[2]] = from_float<TX>(a);
    } else if (p.dinitial_states) {
      static_cast<TX*>(p.dinitial_states)[b * p.dinit_stride[0] + c * p.dinit_stride[1] +
                                           (t + W - 1) * p.dinit_stride[2]] = from_float<TX>(a);
    }
  }
  if (p.acc == nullptr) return;
  const long long part = b * p.num_segments + seg;
  for (int k = 0; k < W; ++k) bwd_put_partial<W>(p, part, c, k, dw[k]);
  bwd_put_partial<W>(p, part, c, W, db);
}

// CHANNEL_VEC layout (channel-last rows of 16-byte aligned channels): block (b, C = 64
// channels, segment), the segment walked backwards a tile of T steps at a time. A tile's
// x rows [t0-(W-1), t0+T) and dout rows [t0, t0+T) reach shared tiles of packed words by
// asynchronous 16-byte copies, issued a tile ahead into the other of two buffers (as the
// forward's tiles: no registers stage the data). Lane l of warp w then takes channels 2l and 2l+1
// (one word of 16-bit ones, two of fp32: a tile of fp32 rows twice the bytes, so that its fixed
// work, the copies' addresses, barriers and loop, spreads over as many outputs as in 16-bit
// types) over the steps [t0+S*w, t0+S*(w+1)): g into a float tile, whose rows [T, T+W-1) hold dx's
// right halo (the later tile's first W-1 rows of g, or for the segment's last tile g read and
// recomputed from global memory), and the dweight/dbias sums in registers; then dx from the g
// tile into the packed dout tile, which 16-byte stores write out. Three barriers per tile; the
// block's sums are reduced over its warps in a fixed order.
// SEQ (CHANNEL_VEC_SEQ): the tile's segment ids, times [t0-(W-1), t0+T+W-1), reach shared memory
// beside it by the same asynchronous copies. A warp whose
// ids (its steps' windows in both phases) are one segment, not padding, runs the unmasked
// phases; the others mask each tap across segments and zero g in padding, as CHANNEL_SEQ does.
template <typename TX, typename TW, int W, bool SEQ>
CC1D_HD void bwd_channel_tiles(const BwdParams& p, long long b, long long cb, long long seg) {
  constexpr int V = 16 / (int)sizeof(TX);      // channels per vector
  constexpr int C = kBwdTileChannels;          // channels per tile row
  constexpr int CPL = C / 32;                  // channels per lane: 2
  constexpr int LW = CPL / Words<TX>::kPerWord;  // words per lane: 1 (16-bit) or 2 (fp32)
  constexpr int RW = 32 * LW;                  // words per tile row
  constexpr int VR = RW / 4;                   // vectors per row: 8 or 16
  constexpr int RR = kBwdThreads / VR;         // rows per load round: 16 or 8
  constexpr int T = kBwdChannelTile;           // steps per tile
  constexpr int R = T + W - 1;                 // rows of x (from t0-(W-1)) and of g (from t0)
  constexpr int NW = kBwdWarps;
  constexpr int S = T / NW;                    // steps per warp
  constexpr int DR = T / RR;                   // dout load rounds
  constexpr int kRound = RR * RW * 4;          // bytes of a tile per load round
  static_assert(NW * (W + 1) <= R, "the warps' partial sums must fit in the g tile");
  static_assert(CPL * 32 == C && LW * Words<TX>::kPerWord == CPL, "whole words a lane");
  constexpr int NS = T + 2 * (W - 1);          // SEQ: a tile's segment ids
  constexpr int RS = (NS + 3) / 4 * 4;         // SEQ: their row in shared memory, 16-byte aligned
  constexpr int NQ = (S + 2 * (W - 1) + 3) / 4;  // SEQ: 16-byte loads of a warp's ids
  static_assert(NS <= kBwdThreads, "a thread per segment id");
  CC1D_SHARED_ARRAY(unsigned, xbuf, 2 * R * RW);
  CC1D_SHARED_ARRAY(unsigned, dbuf, 2 * T * RW);  // dout, then dx
  CC1D_SHARED_ARRAY(float, gs, R * C);            // g; after the walk, the warps' partial sums
  CC1D_SHARED_ARRAY(int, sbuf, SEQ ? 2 * RS : 1);  // SEQ: the two tiles' segment ids
  const SmemAddr xbuf_addr = smem_addr(xbuf), dbuf_addr = smem_addr(dbuf);
  const int tid = threadIdx.x, lr = tid / VR, lv = tid % VR;  // load/store: row in a round, vector
  const int lane = tid & 31, warp = tid >> 5, r0 = warp * S;  // compute: channels, first step
  const long long c0 = cb * C;
  const bool lv_ok = c0 + lv * V < p.dim;
  float w[CPL][W] = {}, bias[CPL] = {};
  for (int i = 0; i < CPL; ++i)
    if (c0 + lane * CPL + i < p.dim) bwd_load_weights<TW, W>(p, c0 + lane * CPL + i, w[i], bias[i]);
  float dw[CPL][W] = {}, db[CPL] = {};
  const long long s_begin = seg * p.segment_len;
  const long long s_end = s_begin + p.segment_len < p.seqlen ? s_begin + p.segment_len : p.seqlen;
  const long long xs_t = p.x_stride[2], ds_t = p.dout_stride[2], dxs_t = p.dx_stride[2];
  long long t0 = s_begin + (s_end - s_begin - 1) / T * T;
  // This thread's first copy of the tile at t0 (and its dx offset), moved back a tile at a time.
  const TX* __restrict__ xtile =
      static_cast<const TX*>(p.x) + b * p.x_stride[0] + c0 + lv * V + (t0 - (W - 1) + lr) * xs_t;
  const TX* __restrict__ dtile = static_cast<const TX*>(p.dout) + b * p.dout_stride[0] + c0 + lv * V + (t0 + lr) * ds_t;
  long long dxo = b * p.dx_stride[0] + c0 + lv * V + (t0 + lr) * dxs_t;

  // The copies of the tile at time t into buffer `buf`: x's rows (the initial states' rows are
  // written in the walk), and dout's rows [0, T) from time t, zeros from seqlen on.
  auto issue = [&](long long t, const TX* __restrict__ xt, const TX* __restrict__ dt, int buf) {
    async_copy_x_rows<TX, W, R, RR, RW>(xbuf_addr + (SmemAddr)((buf * R * RW + lr * RW + lv * 4) * 4), xt, xs_t, t,
                                        p.seqlen, p.initial_states != nullptr, lr, lv_ok, p.x);
    SmemAddr ddst = dbuf_addr + (SmemAddr)((buf * T * RW + lr * RW + lv * 4) * 4);
    const long long drows = p.seqlen - t;  // dout's rows in the row
    for (int i = 0; i < DR; ++i, dt += RR * ds_t, ddst += kRound) {
      const bool in_d = i * RR + lr < drows && lv_ok;
      async_copy16(ddst, in_d ? dt : p.dout, in_d);
    }
    if constexpr (SEQ)  // the ids of times t-(W-1) .. t+T+W-2
      async_copy_seq_ids(smem_addr(sbuf + buf * RS), p.seq_idx + b * p.seq_stride[0], p.seq_stride[1], t - (W - 1),
                         p.seqlen, tid, NS);
    async_commit();
  };

  __syncthreads();  // the block's previous item is done with both buffers and gs
  issue(t0, xtile, dtile, 0);
  // The segment's last tile's halo: g at t0+T+j from global memory (0 from seqlen on; its window
  // lies in [0, seqlen), as t0+T >= W-1). A warp a row, each thread its own channels.
#pragma unroll 1
  for (int j = warp; j < W - 1; j += NW) {
    const long long t = t0 + T + j;
    const int cur = SEQ ? bwd_seq(p, b, t) : 0;  // SEQ: taps of other segments masked, padding 0
    bool same[W];
    for (int k = 0; k < W; ++k) same[k] = !SEQ || bwd_seq(p, b, t - (W - 1) + k) == cur;
    for (int i = 0; i < CPL; ++i) {
      const int ci = lane * CPL + i;
      float g = 0.f;
      if (t < p.seqlen && c0 + ci < p.dim && cur >= 0) {  // x's channel stride is 1
        float z = bias[i];
        for (int k = 0; k < W; ++k)
          if (same[k]) z += w[i][k] * load_as_float<TX>(p.x, b * p.x_stride[0] + c0 + ci + (t - (W - 1) + k) * xs_t);
        g = load_as_float<TX>(p.dout, b * p.dout_stride[0] + c0 + ci + t * ds_t);
        if (p.silu) g *= silu_grad(z);
      }
      gs[(T + j) * C + ci] = g;
    }
  }

#pragma unroll 1
  for (int k = 0; t0 >= s_begin; ++k, t0 -= T, xtile -= T * xs_t, dtile -= T * ds_t, dxo -= T * dxs_t) {
    unsigned* xs = xbuf + (k & 1) * R * RW;
    unsigned* ds = dbuf + (k & 1) * T * RW;
    async_wait<0>();  // this tile's copies (the only ones in flight)
    // dx's right halo, g at t0+T+j: the later tile's first W-1 rows of g (the segment's last
    // tile has it from before the walk). The later tile's dx read these rows a barrier ago.
    // (Rounds of a constant count: a strided loop compiled to a generic one of about 36
    // instructions a tile.)
    if (W > 1 && k > 0)
#pragma unroll
      for (int r = 0; r < ((W - 1) * C + kBwdThreads - 1) / kBwdThreads; ++r) {
        const int idx = tid + r * kBwdThreads;
        if (idx < (W - 1) * C) gs[T * C + idx] = gs[idx];
      }
    if (t0 < W - 1 && p.initial_states != nullptr) {  // the row's first tile: row r < W-1-t0 is a state
#pragma unroll 1
      for (int idx = tid; idx < (int)(W - 1 - t0) * RW; idx += kBwdThreads) {  // a word each
        constexpr int CPW = Words<TX>::kPerWord;
        float f[CPW];
        for (int i = 0; i < CPW; ++i) {
          const long long c = c0 + (idx % RW) * CPW + i;
          f[i] = c < p.dim ? load_as_float<TX>(p.initial_states, b * p.init_stride[0] + c * p.init_stride[1] +
                                                                     (t0 + idx / RW) * p.init_stride[2])
                           : 0.f;
        }
        pack_words<TX>(f, xs + idx);
      }
    }
    __syncthreads();
    // The earlier tile's copies go into the buffers the later tile read before this barrier.
    if (t0 - T >= s_begin) issue(t0 - T, xtile - T * xs_t, dtile - T * ds_t, (k + 1) & 1);
    // SEQ: the ids of the warp's steps' windows in both phases, sq[i] the one of time
    // t0+r0-(W-1)+i (i < S+2(W-1)); `masked` (uniform in the warp) unless they are one segment,
    // not padding. The masked copies read them from shared memory, so that the unmasked ones
    // hold none in registers.
    const int* sq = sbuf + (k & 1) * RS + r0;
    bool masked = false;
    if constexpr (SEQ) {
      int q[4 * NQ];
      for (int v = 0; v < NQ; ++v) load16(sq + 4 * v, *reinterpret_cast<unsigned(*)[4]>(q + 4 * v));
      for (int j = 1; j < S + 2 * (W - 1); ++j) masked = masked || q[j] != q[0];
      masked = masked || q[0] < 0;
    }

    // g at the warp's steps (dout is 0 past seqlen, so g is), and the sums. The activation and
    // (below) dfinal_states are tested once a tile: each phase is called with a constant flag
    // from both sides of the test, so it is inlined twice with the flag's branches folded (tested
    // per element, they were a sixth of the tile's instructions).
    // MK: the masked copy (SEQ).
    auto g_phase = [&](const bool SILU, const bool MK) {
      float win[W][CPL];  // x at steps t-(W-1)..t (a lane's words are adjacent: fp32's two load as one LDS.64)
      for (int j = 0; j < W - 1; ++j)
        for (int i = 0; i < CPL; ++i) win[j + 1][i] = word_elem<TX>(xs + (r0 + j) * RW + lane * LW, i);
#pragma unroll
      for (int j = 0; j < S; ++j) {
        for (int m = 0; m < W - 1; ++m)
          for (int i = 0; i < CPL; ++i) win[m][i] = win[m + 1][i];
        unsigned xw[LW], dword[LW];  // (one access each: a loop over the words cost fp32 4 more an output)
        load_words_shared<LW>(xs + (r0 + j + W - 1) * RW + lane * LW, xw);
        load_words_shared<LW>(ds + (r0 + j) * RW + lane * LW, dword);
        const int cur = MK ? sq[j + W - 1] : 0;
        for (int i = 0; i < CPL; ++i) {
          win[W - 1][i] = word_elem<TX>(xw, i);
          float g = word_elem<TX>(dword, i), x[W];
          for (int m = 0; m < W; ++m) x[m] = MK && sq[j + m] != cur ? 0.f : win[m][i];
          if (SILU) {
            float z = bias[i];
            for (int m = 0; m < W; ++m) z += w[i][m] * x[m];
            g *= silu_grad(z);
          }
          if (MK && cur < 0) g = 0.f;  // a padding step passes no gradient
          gs[(r0 + j) * C + lane * CPL + i] = g;
          db[i] += g;
          for (int m = 0; m < W; ++m) dw[i][m] += g * x[m];
        }
      }
    };
    if (SEQ && masked) {
      if (p.silu)
        g_phase(true, SEQ);
      else
        g_phase(false, SEQ);
    } else {
      if (p.silu)
        g_phase(true, false);
      else
        g_phase(false, false);
    }
    __syncthreads();

    // dx(s) = sum_k w[k] g(s+W-1-k): the g tile's rows s-t0 .. s-t0+W-1, packed into the dout
    // tile, then stored. DFIN: the tile holds some of the row's last W-1 steps.
    if (p.dx != nullptr) {
      auto dx_phase = [&](const bool DFIN, const bool MK) {
        float gw[W][CPL];
        for (int j = 0; j < W - 1; ++j)
          for (int i = 0; i < CPL; ++i) gw[j + 1][i] = gs[(r0 + j) * C + lane * CPL + i];
#pragma unroll
        for (int j = 0; j < S; ++j) {
          float o[CPL];
          const int cur = MK ? sq[j + W - 1] : 0;  // MK: g of another segment is masked
          for (int i = 0; i < CPL; ++i) {
            for (int m = 0; m < W - 1; ++m) gw[m][i] = gw[m + 1][i];
            gw[W - 1][i] = gs[(r0 + j + W - 1) * C + lane * CPL + i];
            float a = 0.f;
            for (int m = 0; m < W; ++m)
              a += w[i][m] * (MK && sq[j + 2 * (W - 1) - m] != cur ? 0.f : gw[W - 1 - m][i]);
            o[i] = a;
          }
          const long long s = t0 + r0 + j;
          if (DFIN && s >= p.seqlen - (W - 1))  // the last W-1 steps only
            for (int i = 0; i < CPL; ++i)
              if (c0 + lane * CPL + i < p.dim) o[i] += bwd_dfinal<TX>(p, W, b, c0 + lane * CPL + i, s);
          pack_words<TX>(o, ds + (r0 + j) * RW + lane * LW);
        }
      };
      const bool dfin = p.dfinal_states != nullptr && t0 + T > p.seqlen - (W - 1);
      if (SEQ && masked) {
        if (dfin)
          dx_phase(true, SEQ);
        else
          dx_phase(false, SEQ);
      } else {
        if (dfin)
          dx_phase(true, false);
        else
          dx_phase(false, false);
      }
      __syncthreads();
      const int dhi = p.seqlen - t0 < T ? (int)(p.seqlen - t0) : T;  // rows of dx in the row
      TX* __restrict__ dxt = static_cast<TX*>(p.dx) + dxo;
      for (int i = 0; i < DR; ++i, dxt += RR * dxs_t) {
        unsigned o[4];
        load16(ds + (i * RR + lr) * RW + lv * 4, o);
        if (i * RR + lr < dhi && lv_ok) store16(dxt, o);
      }
    }
  }
  if (s_begin == 0 && p.dinitial_states != nullptr) {  // x at s = j-(W-1) < 0 reaches outputs 0..j
    // The tile at 0 was the last one: its g is still in gs.
#pragma unroll 1
    for (int j = warp; j < W - 1; j += NW)
      for (int i = 0; i < CPL; ++i) {
        const int ci = lane * CPL + i;
        const long long c = c0 + ci;
        if (c >= p.dim) continue;
        float a = bwd_dfinal<TX>(p, W, b, c, j - (W - 1));
        for (int k = 0; k < W; ++k)  // constant bounds: w stays in registers
          if (k <= j && (!SEQ || bwd_seq(p, b, j - k) == bwd_seq(p, b, j - (W - 1))))
            a += w[i][k] * gs[(j - k) * C + ci];
        static_cast<TX*>(p.dinitial_states)[b * p.dinit_stride[0] + c * p.dinit_stride[1] + j * p.dinit_stride[2]] =
            from_float<TX>(a);
      }
  }
  if (p.acc == nullptr) return;
  __syncthreads();  // gs is free: each warp's sums, then the warps added in order
  for (int i = 0; i < CPL; ++i) {
    for (int k = 0; k < W; ++k) gs[(warp * (W + 1) + k) * C + lane * CPL + i] = dw[i][k];
    gs[(warp * (W + 1) + W) * C + lane * CPL + i] = db[i];
  }
  __syncthreads();
  const long long part = b * p.num_segments + seg;
  for (int idx = tid; idx < (W + 1) * C; idx += kBwdThreads) {
    const int k = idx / C, ci = idx % C;
    float v = 0.f;
    for (int wp = 0; wp < NW; ++wp) v += gs[(wp * (W + 1) + k) * C + ci];
    if (c0 + ci < p.dim) bwd_put_partial<W>(p, part, c0 + ci, k, v);
  }
}

// Grid: x walks (channel or channel block, segment) pairs of one batch row, y walks batches; both
// are block-strided. The planner keeps the pairs per batch under 2^32 (32-bit index math).
template <typename TX, typename TW, int W, int LAYOUT>
__global__ void __launch_bounds__(kBwdThreads, bwd_min_blocks(LAYOUT, sizeof(TX)))
    causal_conv1d_bwd_kernel(const BwdParams p) {
  CC1D_DYNAMIC_SHARED(float, smem);
  constexpr bool PER_WARP = LAYOUT == kBwdLayoutTimeVec;  // a pair per warp, else per block
  const unsigned ns = (unsigned)p.num_segments;
  const long long per_batch = p.num_segments * p.num_channel_blocks;
  const long long blocks = PER_WARP ? (per_batch + kBwdWarps - 1) / kBwdWarps : per_batch;
  for (long long b = blockIdx.y; b < p.batch; b += gridDim.y) {
    for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
      const long long item = PER_WARP ? blk * kBwdWarps + (threadIdx.x >> 5) : blk;
      if (PER_WARP && item >= per_batch) continue;  // a warp without a pair (no barrier follows)
      const unsigned u = (unsigned)item;
      const long long seg = u % ns, cb = u / ns;
      if constexpr (PER_WARP) {
        BwdTimeWarp<TX, TW, W>(p, b, cb).run(seg);
      } else if constexpr (LAYOUT == kBwdLayoutChannelVec || LAYOUT == kBwdLayoutChannelVecSeq) {
        bwd_channel_tiles<TX, TW, W, LAYOUT == kBwdLayoutChannelVecSeq>(p, b, cb, seg);
      } else if constexpr (bwd_channel_layout(LAYOUT)) {
        bwd_channel_segment<TX, TW, W, LAYOUT == kBwdLayoutChannelSeq>(p, b, cb, seg);
      } else {
        bwd_time_segment<TX, TW, W, LAYOUT == kBwdLayoutTimeSeq>(p, b, cb, seg, smem);
      }
    }
  }
}

// Zeroes the (dim, width+1) sums the atomics of the main kernel add into (T: float; a template
// so that NVRTC compiles it only into the programs that name it).
template <typename T>
__global__ void __launch_bounds__(kBwdThreads) causal_conv1d_bwd_zero_kernel(const BwdParams p) {
  const long long n = p.dim * (p.width + 1);
  for (long long i = (long long)blockIdx.x * kBwdThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kBwdThreads)
    p.acc[i] = T(0);
}

// dweight and dbias in weight's dtype: element i of a (dim, width+1) row sums the parts 0, 1, ...
// in that order, whatever order the main kernel's blocks ran in.
template <typename TW>
__global__ void __launch_bounds__(kBwdThreads) causal_conv1d_bwd_finalize_kernel(const BwdParams p) {
  const long long K = p.width + 1, n = p.dim * K;
  for (long long i = (long long)blockIdx.x * kBwdThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kBwdThreads) {
    const long long c = i / K, k = i % K;
    void* out = k < p.width ? p.dweight : p.dbias;
    if (out == nullptr) continue;
    float s = 0.f;
    for (long long part = 0; part < p.parts; ++part) s += p.acc[part * n + i];
    const long long off = k < p.width ? c * p.dw_stride[0] + k * p.dw_stride[1] : c * p.db_stride;
    static_cast<TW*>(out)[off] = from_float<TW>(s);
  }
}

}  // namespace cc1d
