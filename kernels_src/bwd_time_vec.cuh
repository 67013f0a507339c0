// bwd_time_vec.cuh — the backward's TIME_VEC layout (bwd.cuh): channel-first rows of unit
// stride whose x, dout and dx rows share their offset mod 16 bytes, no seq_idx (Mamba-1's
// training layout), walked by a warp per (channel, segment) with everything in registers.
#pragma once
#include "bwd_common.cuh"
#include "bwd_vec_ends.cuh"

namespace cc1d {

// TIME_VEC layout (unit stride, equally aligned rows, no seq_idx): a warp per (channel, segment),
// the segment walked backwards 32 lanes x P = kBwdWarpItems steps at a time. Lane l holds x, dout
// and dx of its P steps in registers as packed words (one 16-byte load or store each, two for
// fp32). z needs the W-1 inputs before them: lane l-1's by shuffle; lane 0 loads the words before
// its steps itself, with its own (so no load waits on the earlier step's). dx needs the W-1
// values of g after them: lane l+1's by shuffle; lane 31 the later step's lane 0 (carried). The
// loads of the kAhead earlier steps are in flight during a step's math (a ring of stages). No
// shared memory, no barrier; the dweight/dbias sums are reduced over the warp in a fixed order.
// Rows need not start on 16 bytes: segments start at the row's first aligned step a (0 to 7), and
// after the walk the warp recomputes what the vectors leave out (bwd_vec_ends.cuh): the a steps
// before it, dinitial_states, and dfinal_states' steps that begin in the step before the
// segment's last. (A row of odd length makes most rows unaligned: they took the scalar TIME
// layout at 31% of the copy on an H200, against 54% aligned.)
template <typename TX, typename TW, int W>
struct BwdTimeWarp {
  static constexpr int P = kBwdWarpItems;
  static constexpr int NWD = P / Words<TX>::kPerWord;            // words per lane: 4 (16-bit) or 8 (fp32)
  static constexpr int H0 = (P - (W - 1)) / Words<TX>::kPerWord;  // first word holding a halo input
  static constexpr int NH = NWD - H0;                             // words of the halo (0 for W = 1)
  // Warp steps whose loads are in flight during a step's math. On an H200 (2026-12-04) more than
  // one lost in every dtype: 16-bit two ahead at 96 registers ran at 52-54% of the copy, three at
  // 120 at 46-48%, one at 80 at 55-56%; fp32 two ahead 71-73% against one's 80-82%. The walk is
  // bound by instruction issue, so occupancy counts more than bytes in flight.
  static constexpr int kAhead = 1;
  static constexpr unsigned kAll = 0xffffffffu;

  // One warp step's words of this lane: x, dout, and (lane 0) the halo inputs before its first.
  struct Stage {
    unsigned x[NWD], d[NWD], h[NH > 0 ? NH : 1];
  };

  const BwdParams& p;
  long long b, c, s_begin = 0;  // s_begin: the segment's first step, a + segment * segment_len
  int lane;
  float w[W] = {}, bias = 0.f;
  // This lane's first element of x and dout in the next step to load (loads go backwards a
  // step at a time: one 64-bit add, where an offset from the row ptxas rematerialised from the
  // strides), and of dx in the segment's step 0.
  const TX* __restrict__ xl = nullptr;
  const TX* __restrict__ dl = nullptr;
  TX* __restrict__ dx0 = nullptr;
  float gcarry[W > 1 ? W - 1 : 1] = {};  // lane 31: g after its steps (the later step's lane 0's)
  float dws[W] = {}, dbs = 0.f;
  Stage ring[kAhead] = {};  // ring[r]: the stage r steps earlier than the one about to run
  unsigned h0[NH > 0 ? NH : 1] = {};  // lane 0: the halo words before time 0 (initial states, or 0)

  // One object per (channel, segment): the sums and h0 start at zero; run() sets the rest.
  CC1D_HD BwdTimeWarp(const BwdParams& params, long long row, long long channel)
      : p(params), b(row), c(channel), lane((int)(threadIdx.x & 31)) {}

  static CC1D_HD void load(const TX* __restrict__ q, unsigned (&wd)[NWD]) {
    for (int v = 0; v < NWD / 4; ++v)
      load16(q + v * (16 / (int)sizeof(TX)), *reinterpret_cast<unsigned(*)[4]>(wd + 4 * v));
  }

  CC1D_HD long long first_of(int i) const { return s_begin + (long long)i * kBwdWarpSpan + lane * P; }

  // Step i's stage, from xl and dl, which then move to step i-1. LAST: the segment's last step,
  // the only one that can reach past seqlen (x and dout read 0 there, so g is 0). i < 0 (after
  // the walk's last step, step 0, when that is not LAST) loads step 0 again, unused: a skipped
  // load made ptxas copy the whole stage every step to keep its old value.
  template <bool LAST>
  CC1D_HD void load_step(int i, Stage& st) {
    const long long e0 = first_of(i);
    const TX* __restrict__ xq = xl;
    if (!LAST || e0 + P <= p.seqlen) {
      load(xq, st.x);
      load(dl, st.d);
    } else {
      float fx[P], fd[P];
      for (int j = 0; j < P; ++j) {
        fx[j] = e0 + j < p.seqlen ? to_float(xq[j]) : 0.f;
        fd[j] = e0 + j < p.seqlen ? to_float(dl[j]) : 0.f;
      }
      pack_words<TX>(fx, st.x);
      pack_words<TX>(fd, st.d);
    }
    if (lane == 0) {
      if (i > 0 || s_begin >= P)  // not segment 0 (whose s_begin is a < P); e0 is 16-byte aligned
        for (int j = 0; j < NH; ++j) st.h[j] = reinterpret_cast<const unsigned*>(xq - P)[H0 + j];
      else
        for (int j = 0; j < NH; ++j) st.h[j] = h0[j];
    }
    if (i > 0) {  // after step 0 they stay there, for the reload
      xl -= kBwdWarpSpan;
      dl -= kBwdWarpSpan;
    }
  }

  // Step i, from ring[0]; the ring moves on a step and the load of step i - kAhead is issued
  // before the math. LAST (see load_step) alone carries the partial store and dfinal_states: the
  // walk's other steps are one copy without them.
  template <bool LAST>
  CC1D_HD void step(int i) {
    const Stage cur = ring[0];
    for (int r = 0; r + 1 < kAhead; ++r) ring[r] = ring[r + 1];
    if (!LAST || i - kAhead >= 0) load_step<false>(i - kAhead, ring[kAhead - 1]);
    const long long e0 = first_of(i);
    unsigned prev[NWD] = {};
    for (int j = H0; j < NWD; ++j) {
      const unsigned left = __shfl_sync(kAll, cur.x[j], (lane + 31) & 31);
      prev[j] = lane == 0 ? cur.h[j - H0] : left;
    }
    float xv[W - 1 + P];  // x at e0-(W-1) .. e0+P-1
    for (int j = 0; j < W - 1; ++j) xv[j] = word_elem<TX>(prev, P - (W - 1) + j);
    for (int j = 0; j < P; ++j) xv[W - 1 + j] = word_elem<TX>(cur.x, j);
    float g[P + W - 1];  // g at e0 .. e0+P+W-2
    for (int j = 0; j < P; ++j) g[j] = word_elem<TX>(cur.d, j);
    if (p.silu)  // one branch per step, not per element
      for (int j = 0; j < P; ++j) {
        float z = bias;
        for (int k = 0; k < W; ++k) z += w[k] * xv[j + k];
        g[j] *= silu_grad(z);
      }
    for (int j = 0; j < P; ++j) {
      dbs += g[j];
      for (int k = 0; k < W; ++k) dws[k] += g[j] * xv[j + k];
    }
    for (int j = 0; j < W - 1; ++j) {
      const float right = __shfl_sync(kAll, g[j], (lane + 1) & 31);
      g[P + j] = lane == 31 ? gcarry[j] : right;
      gcarry[j] = right;  // lane 31: lane 0's, the earlier step's halo
    }
    {  // dx is computed whether or not it is wanted, so that only its stores are conditional
      const long long dxo = (long long)i * kBwdWarpSpan;  // (dx0 may be null: no pointer until then)
      float a[P];
      for (int j = 0; j < P; ++j) {
        a[j] = 0.f;
        for (int k = 0; k < W; ++k) a[j] += w[k] * g[j + W - 1 - k];
      }
      if (LAST && dx0 != nullptr && p.dfinal_states != nullptr && e0 + P > p.seqlen - (W - 1))
        for (int j = 0; j < P; ++j) a[j] += bwd_dfinal<TX>(p, W, b, c, e0 + j);  // the row's last W-1 steps
      // (Those in the step before, when this one holds fewer than W-1 of them: BwdVecEnds.)
      if (!LAST || e0 + P <= p.seqlen) {
        unsigned ow[NWD];
        pack_words<TX>(a, ow);
        if (dx0 != nullptr)
          for (int v = 0; v < NWD / 4; ++v)
            store16(dx0 + dxo + v * (16 / (int)sizeof(TX)), *reinterpret_cast<const unsigned(*)[4]>(ow + 4 * v));
      } else if (dx0 != nullptr) {
        for (int j = 0; j < P; ++j)
          if (e0 + j < p.seqlen) dx0[dxo + j] = from_float<TX>(a[j]);
      }
    }
  }

  CC1D_HD void run(long long seg) {
    bwd_load_weights<TW, W>(p, c, w, bias);
    const TX* __restrict__ xrow = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
    const TX* __restrict__ drow = static_cast<const TX*>(p.dout) + b * p.dout_stride[0] + c * p.dout_stride[1];
    s_begin = first_aligned_step(xrow) + seg * p.segment_len;  // dout's and dx's rows share it: the planner checks
    const long long e = s_begin + lane * P;
    dx0 = p.dx ? static_cast<TX*>(p.dx) + b * p.dx_stride[0] + c * p.dx_stride[1] + e : nullptr;
    const long long s_end = s_begin + p.segment_len < p.seqlen ? s_begin + p.segment_len : p.seqlen;
    // g at s_end + j (j < W-1), the right halo of the segment's last step: lane j recomputes it
    // from the unit-stride rows (0 from seqlen on; s_end >= segment_len > W-1, so its window
    // holds no initial state), lane 31 takes it.
    float gj = 0.f;
    if (lane < W - 1 && s_end + lane < p.seqlen) {
      float z = bias;
      for (int k = 0; k < W; ++k) z += w[k] * to_float(xrow[s_end + lane - (W - 1) + k]);
      gj = to_float(drow[s_end + lane]);
      if (p.silu) gj *= silu_grad(z);
    }
    for (int j = 0; j < W - 1; ++j) gcarry[j] = __shfl_sync(kAll, gj, j);
    if (seg == 0 && lane == 0) {  // made before the walk: the loop carries no copy of bwd_x
      float fh[P];
      unsigned hw[NWD];
      for (int j = 0; j < P; ++j) fh[j] = bwd_x<TX>(p, W, b, c, s_begin - P + j);
      pack_words<TX>(fh, hw);
      for (int j = 0; j < NH; ++j) h0[j] = hw[H0 + j];
    }
    // (A segment can be empty: the row's last, past the end of a row that starts at a > 0, or all
    // of a row shorter than a. Its warp stores zero partial sums.)
    const int steps = s_end > s_begin ? (int)((s_end - s_begin + kBwdWarpSpan - 1) / kBwdWarpSpan) : 0;
    const long long last = e + (long long)(steps - 1) * kBwdWarpSpan;
    xl = xrow + last;
    dl = drow + last;
    if (steps > 0) {
      load_step<true>(steps - 1, ring[0]);
      for (int r = 1; r < kAhead; ++r)
        if (steps - 1 - r >= 0) load_step<false>(steps - 1 - r, ring[r]);
      step<true>(steps - 1);
    }
    // Unrolled by 2, the stage being loaded and the one computed alternate between two sets of
    // registers: rolled, ptxas copied the stage every step.
#pragma unroll 2
    for (int i = steps - 2; i >= 0; --i) step<false>(i);
    BwdVecEnds<TX, W>{p, b, c, s_begin, lane, w, bias, dws, dbs}.run();
    if (p.acc == nullptr) return;
    const long long part = b * p.num_segments + seg;
    for (int k = 0; k <= W; ++k) {
      float v = k < W ? dws[k] : dbs;
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAll, v, o);
      if (lane == 0) bwd_put_partial<W>(p, part, c, k, v);
    }
  }
};

}  // namespace cc1d
