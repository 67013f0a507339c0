// bench/variants/bwd_time_vec_async.cuh — an experiment, not a kernel the library builds: the
// backward's TIME_VEC walk (kernels_src/bwd_time_vec.cuh) with its loads as asynchronous copies
// into shared memory. bench/kernel_variants.sh puts it in place of that file for a device run's
// `variants` step (bwd_async, bwd_async_mb7). After the run, it replaces the kernel or goes.
#pragma once
#include "bwd_common.cuh"
#include "bwd_vec_ends.cuh"

namespace cc1d {

// TIME_VEC layout (unit stride, 16-byte aligned rows, no seq_idx): a warp per (channel, segment),
// the segment walked backwards 32 lanes x P = kBwdWarpItems steps at a time. Lane l holds x, dout
// and dx of its P steps as packed words (one 16-byte load or store each, two for fp32). z needs
// the W-1 inputs before them: lane l-1's by shuffle; lane 0 copies the vectors before its steps
// itself, so no load waits on the earlier step's. dx needs the W-1 values of g after them: lane
// l+1's by shuffle; lane 31 the later step's lane 0 (carried). The words of the kAhead earlier
// steps are in flight during a step's math, as asynchronous copies into a ring of the warp's own
// shared memory, so no registers wait for them (each lane reads back only what it copied: no
// barrier). The segment's last step, which may be partial, is loaded into registers. The
// dweight/dbias sums are reduced over the warp in a fixed order.
template <typename TX, typename TW, int W>
struct BwdTimeWarp {
  static constexpr int P = kBwdWarpItems;
  static constexpr int NWD = P / Words<TX>::kPerWord;            // words per lane: 4 (16-bit) or 8 (fp32)
  static constexpr int NV = NWD / 4;                              // 16-byte vectors per lane
  static constexpr int H0 = (P - (W - 1)) / Words<TX>::kPerWord;  // first word holding a halo input
  static constexpr int NH = NWD - H0;                             // words of the halo (0 for W = 1)
  static constexpr int NHV = (NH + 3) / 4;                       // 16-byte vectors holding the halo
  // Warp steps whose copies are in flight during a step's math, and the ring's slots: one more,
  // so that a step's copies go to the slot its later step read (a step ago), never to the one
  // being read.
  static constexpr int kAhead = 3;
  static constexpr int kSlots = kAhead + 1;
  static_assert((kSlots & (kSlots - 1)) == 0, "a slot is a step's index masked");
  // A slot's words: x's and dout's vectors, [vector][lane][4 words], then lane 0's halo vectors.
  static constexpr int kSlotWords = 2 * NV * 32 * 4 + 4 * NHV;
  static constexpr int kWarpWords = kSlots * kSlotWords;
  static constexpr unsigned kAll = 0xffffffffu;

  // One warp step's words of this lane: x, dout, and (lane 0) the halo inputs before its first.
  struct Stage {
    unsigned x[NWD], d[NWD], h[NH > 0 ? NH : 1];
  };

  const BwdParams& p;
  long long b, c, s_begin = 0;
  int lane;
  float w[W] = {}, bias = 0.f;
  // This lane's first element of x and dout in the next step to copy (copies go backwards a
  // step at a time: one 64-bit add each), and of dx in the segment's step 0.
  const TX* __restrict__ xl = nullptr;
  const TX* __restrict__ dl = nullptr;
  TX* __restrict__ dx0 = nullptr;
  SmemAddr ring = 0;  // this lane's first word of slot 0 in the warp's ring
  float gcarry[W > 1 ? W - 1 : 1] = {};  // lane 31: g after its steps (the later step's lane 0's)
  float dws[W] = {}, dbs = 0.f;
  unsigned h0[NH > 0 ? NH : 1] = {};  // lane 0: the halo words before time 0 (initial states, or 0)

  // One object per (channel, segment): the sums and h0 start at zero; run() sets the rest.
  CC1D_HD BwdTimeWarp(const BwdParams& params, long long row, long long channel)
      : p(params), b(row), c(channel), lane((int)(threadIdx.x & 31)) {}

  CC1D_HD long long first_of(int i) const { return s_begin + (long long)i * kBwdWarpSpan + lane * P; }
  CC1D_HD bool has_halo(int i) const { return i > 0 || s_begin >= P; }  // else h0: segment 0's start

  // The segment's last step into registers, element by element past seqlen (x and dout read 0
  // there, so g is 0).
  CC1D_HD void load_last(int i, Stage& st) const {
    const long long e0 = first_of(i);
    if (e0 + P <= p.seqlen) {
      for (int v = 0; v < NV; ++v) {
        load16(xl + v * (16 / (int)sizeof(TX)), *reinterpret_cast<unsigned(*)[4]>(st.x + 4 * v));
        load16(dl + v * (16 / (int)sizeof(TX)), *reinterpret_cast<unsigned(*)[4]>(st.d + 4 * v));
      }
    } else {
      float fx[P], fd[P];
      for (int j = 0; j < P; ++j) {
        fx[j] = e0 + j < p.seqlen ? to_float(xl[j]) : 0.f;
        fd[j] = e0 + j < p.seqlen ? to_float(dl[j]) : 0.f;
      }
      pack_words<TX>(fx, st.x);
      pack_words<TX>(fd, st.d);
    }
    if (lane == 0)  // the words are 4-byte aligned: e0 % P == 0
      for (int j = 0; j < NH; ++j) st.h[j] = has_halo(i) ? reinterpret_cast<const unsigned*>(xl - P)[H0 + j] : h0[j];
  }

  // The copies of step i (a whole step: not the segment's last) into its slot, from xl and dl,
  // which then move to step i-1; i < 0 (past step 0) commits an empty group, so that every step
  // waits for the same count.
  CC1D_HD void issue(int i) {
    if (i >= 0) {
      const SmemAddr s = ring + (SmemAddr)((i & (kSlots - 1)) * kSlotWords * 4);
      for (int v = 0; v < NV; ++v) {
        async_copy16(s + (SmemAddr)(v * 32 * 16), xl + v * (16 / (int)sizeof(TX)), true);
        async_copy16(s + (SmemAddr)((NV + v) * 32 * 16), dl + v * (16 / (int)sizeof(TX)), true);
      }
      if (lane == 0 && has_halo(i))  // the NHV vectors before the lane's steps
        for (int v = 0; v < NHV; ++v)
          async_copy16(s + (SmemAddr)((2 * NV * 32 + v) * 16), xl - (NHV - v) * (16 / (int)sizeof(TX)), true);
      xl -= kBwdWarpSpan;
      dl -= kBwdWarpSpan;
    }
    async_commit();
  }

  // Step i's words from its slot, once its copies are done (this lane's own: no barrier).
  CC1D_HD void read(int i, const unsigned* slots, Stage& st) const {
    async_wait<kAhead>();  // all but the kAhead steps issued after this one
    const unsigned* s = slots + (i & (kSlots - 1)) * kSlotWords;
    for (int v = 0; v < NV; ++v) {
      load16(s + (v * 32 + lane) * 4, *reinterpret_cast<unsigned(*)[4]>(st.x + 4 * v));
      load16(s + ((NV + v) * 32 + lane) * 4, *reinterpret_cast<unsigned(*)[4]>(st.d + 4 * v));
    }
    if (lane == 0)
      for (int j = 0; j < NH; ++j) st.h[j] = has_halo(i) ? s[2 * NV * 32 * 4 + 4 * NHV - NH + j] : h0[j];
  }

  // Step i from its words `cur`. LAST (the segment's last step, the only one that can reach past
  // seqlen) alone carries the partial store and dfinal_states: the walk's other steps are one
  // copy without them.
  template <bool LAST>
  CC1D_HD void step(int i, const Stage& cur) {
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
    s_begin = first_aligned_step(static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1]) +
              seg * p.segment_len;  // rows off 16 bytes: as bwd_time_vec.cuh
    const long long e = s_begin + lane * P;
    dx0 = p.dx ? static_cast<TX*>(p.dx) + b * p.dx_stride[0] + c * p.dx_stride[1] + e : nullptr;
    const long long s_end = s_begin + p.segment_len < p.seqlen ? s_begin + p.segment_len : p.seqlen;
    const TX* __restrict__ xrow = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
    const TX* __restrict__ drow = static_cast<const TX*>(p.dout) + b * p.dout_stride[0] + c * p.dout_stride[1];
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
    const int steps = s_end > s_begin ? (int)((s_end - s_begin + kBwdWarpSpan - 1) / kBwdWarpSpan) : 0;
    const long long last = e + (long long)(steps - 1) * kBwdWarpSpan;
    xl = xrow + last;
    dl = drow + last;
    CC1D_SHARED_ARRAY(unsigned, slots, kBwdWarps * kWarpWords);
    const unsigned* my = slots + (threadIdx.x >> 5) * kWarpWords;
    ring = smem_addr(my) + (SmemAddr)(lane * 16);
    if (steps > 0) {
      Stage st;
      load_last(steps - 1, st);
      xl -= kBwdWarpSpan;
      dl -= kBwdWarpSpan;
      for (int r = 1; r <= kAhead; ++r) issue(steps - 1 - r);
      step<true>(steps - 1, st);
    }
    // Unrolled by 2: rolled, ptxas copied the stage every step.
#pragma unroll 2
    for (int i = steps - 2; i >= 0; --i) {
      issue(i - kAhead);
      Stage st;
      read(i, my, st);
      step<false>(i, st);
    }
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
