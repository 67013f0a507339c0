// bwd_time_vec.cuh — the backward's TIME_VEC layout (bwd.cuh): channel-first rows of unit
// stride and 16-byte alignment, no seq_idx (Mamba-1's training layout), walked by a warp per
// (channel, segment) with everything in registers.
#pragma once
#include "bwd_common.cuh"

namespace cc1d {

// TIME_VEC layout (unit stride, 16-byte aligned rows, no seq_idx): a warp per (channel, segment),
// the segment walked backwards 32 lanes x P = kBwdWarpItems steps at a time. Lane l holds x, dout
// and dx of its P steps in registers as packed words (one 16-byte load or store each, two for
// fp32). z needs the W-1 inputs before them: lane l-1's by shuffle; lane 0 loads the 16 bytes
// before its steps itself, with its own (so no load waits on the earlier step's). dx needs the W-1
// values of g after them: lane l+1's by shuffle; lane 31 the later step's lane 0 (carried). The
// earlier step's loads are issued before this step's math (two steps in flight). No shared
// memory, no barrier; the dweight/dbias sums are reduced over the warp in a fixed order.
template <typename TX, typename TW, int W>
struct BwdTimeWarp {
  static constexpr int P = kBwdWarpItems;
  static constexpr int NWD = P / Words<TX>::kPerWord;            // words per lane: 4 (16-bit) or 8 (fp32)
  static constexpr int H0 = (P - (W - 1)) / Words<TX>::kPerWord;  // first word holding a halo input
  static constexpr unsigned kAll = 0xffffffffu;

  const BwdParams& p;
  long long b, c, s_begin = 0;
  int lane;
  float w[W] = {}, bias = 0.f;
  const TX* __restrict__ xrow = nullptr;
  const TX* __restrict__ drow = nullptr;
  TX* __restrict__ dxrow = nullptr;
  float gcarry[W > 1 ? W - 1 : 1] = {};  // lane 31: g after its steps (the later step's lane 0's)
  float dws[W] = {}, dbs = 0.f;
  unsigned xc[NWD] = {}, dc[NWD] = {}, hc[NWD] = {};  // this step's x, dout and (lane 0) x before it
  unsigned h0[NWD > H0 ? NWD - H0 : 1] = {};  // lane 0: the W-1 inputs before 0 (initial states, or 0), packed

  // One object per (channel, segment): the sums and h0 start at zero; run() sets the rest.
  CC1D_HD BwdTimeWarp(const BwdParams& params, long long row, long long channel)
      : p(params), b(row), c(channel), lane((int)(threadIdx.x & 31)) {}

  static CC1D_HD void load(const TX* __restrict__ q, unsigned (&wd)[NWD]) {
    for (int v = 0; v < NWD / 4; ++v)
      load16(q + v * (16 / (int)sizeof(TX)), *reinterpret_cast<unsigned(*)[4]>(wd + 4 * v));
  }

  CC1D_HD long long first_of(int i) const { return s_begin + (long long)i * kBwdWarpSpan + lane * P; }

  // Step i's words of this lane: x, dout, and for lane 0 the P inputs before its first (before
  // time 0: h0). LAST: the segment's last step, the only one that can reach past seqlen (x and
  // dout read 0 there, so g is 0).
  template <bool LAST>
  CC1D_HD void load_step(int i, unsigned (&xw)[NWD], unsigned (&dw)[NWD], unsigned (&hw)[NWD]) const {
    const long long e0 = first_of(i);
    if (!LAST || e0 + P <= p.seqlen) {
      load(xrow + e0, xw);
      load(drow + e0, dw);
    } else {
      float fx[P], fd[P];
      for (int j = 0; j < P; ++j) {
        fx[j] = e0 + j < p.seqlen ? to_float(xrow[e0 + j]) : 0.f;
        fd[j] = e0 + j < p.seqlen ? to_float(drow[e0 + j]) : 0.f;
      }
      pack_words<TX>(fx, xw);
      pack_words<TX>(fd, dw);
    }
    if (lane == 0) {
      if (e0 >= P)
        load(xrow + e0 - P, hw);
      else
        for (int j = H0; j < NWD; ++j) hw[j] = h0[j - H0];
    }
  }

  // Step i from xc, dc and hc, the earlier step's words loaded first. LAST (see load_step) alone
  // carries the partial store and dfinal_states: the walk's other steps are one copy without them.
  template <bool LAST>
  CC1D_HD void step(int i) {
    unsigned xn[NWD] = {}, dn[NWD] = {}, hn[NWD] = {};
    if (!LAST && i > 0) load_step<false>(i - 1, xn, dn, hn);  // LAST loads them after its rare paths
    const long long e0 = first_of(i);
    unsigned prev[NWD] = {};
    for (int j = H0; j < NWD; ++j) {
      const unsigned left = __shfl_sync(kAll, xc[j], (lane + 31) & 31);
      prev[j] = lane == 0 ? hc[j] : left;
    }
    float xv[W - 1 + P];  // x at e0-(W-1) .. e0+P-1
    for (int j = 0; j < W - 1; ++j) xv[j] = word_elem<TX>(prev, P - (W - 1) + j);
    for (int j = 0; j < P; ++j) xv[W - 1 + j] = word_elem<TX>(xc, j);
    float g[P + W - 1];  // g at e0 .. e0+P+W-2
    for (int j = 0; j < P; ++j) g[j] = word_elem<TX>(dc, j);
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
    if (dxrow != nullptr) {
      float a[P];
      for (int j = 0; j < P; ++j) {
        a[j] = 0.f;
        for (int k = 0; k < W; ++k) a[j] += w[k] * g[j + W - 1 - k];
      }
      if (LAST && p.dfinal_states != nullptr && e0 + P > p.seqlen - (W - 1))  // the row's last W-1 steps
        for (int j = 0; j < P; ++j) a[j] += bwd_dfinal<TX>(p, W, b, c, e0 + j);
      if (!LAST || e0 + P <= p.seqlen) {
        unsigned ow[NWD];
        pack_words<TX>(a, ow);
        for (int v = 0; v < NWD / 4; ++v)
          store16(dxrow + e0 + v * (16 / (int)sizeof(TX)), *reinterpret_cast<const unsigned(*)[4]>(ow + 4 * v));
      } else {
        for (int j = 0; j < P; ++j)
          if (e0 + j < p.seqlen) dxrow[e0 + j] = from_float<TX>(a[j]);
      }
    }
    if (LAST && i > 0) load_step<false>(i - 1, xn, dn, hn);
    for (int j = 0; j < NWD; ++j) xc[j] = xn[j], dc[j] = dn[j], hc[j] = hn[j];
  }

  CC1D_HD void run(long long seg) {
    bwd_load_weights<TW, W>(p, c, w, bias);
    xrow = static_cast<const TX*>(p.x) + b * p.x_stride[0] + c * p.x_stride[1];
    drow = static_cast<const TX*>(p.dout) + b * p.dout_stride[0] + c * p.dout_stride[1];
    dxrow = p.dx ? static_cast<TX*>(p.dx) + b * p.dx_stride[0] + c * p.dx_stride[1] : nullptr;
    s_begin = seg * p.segment_len;
    const long long s_end = s_begin + p.segment_len < p.seqlen ? s_begin + p.segment_len : p.seqlen;
    // g at s_end + j (j < W-1), the right halo of the segment's last step: lane j recomputes it
    // from global memory (0 from seqlen on), lane 31 takes it.
    const float gj = lane < W - 1 ? bwd_g_at<TX, W, false>(p, w, bias, b, c, s_end + lane) : 0.f;
    for (int j = 0; j < W - 1; ++j) gcarry[j] = __shfl_sync(kAll, gj, j);
    if (s_begin == 0 && lane == 0) {  // made before the walk: the loop carries no copy of bwd_x
      float fh[P];
      unsigned hw[NWD];
      for (int j = 0; j < P; ++j) fh[j] = bwd_x<TX>(p, W, b, c, j - P);
      pack_words<TX>(fh, hw);
      for (int j = H0; j < NWD; ++j) h0[j - H0] = hw[j];
    }
    const int steps = (int)((s_end - s_begin + kBwdWarpSpan - 1) / kBwdWarpSpan);
    if (steps > 0) {
      load_step<true>(steps - 1, xc, dc, hc);
      step<true>(steps - 1);
    }
#pragma unroll 1
    for (int i = steps - 2; i >= 0; --i) step<false>(i);
    // x at s = j-(W-1) < 0 reaches outputs 0..j: the row's first step's g[0..W-2] (lane 0's),
    // which lane 31 holds in gcarry after the walk.
    if (s_begin == 0 && p.dinitial_states != nullptr && lane == 31) {
      for (int j = 0; j < W - 1; ++j) {
        float a = bwd_dfinal<TX>(p, W, b, c, j - (W - 1));
        for (int k = 0; k < W; ++k)  // constant bounds: w stays in registers
          if (k <= j) a += w[k] * gcarry[j - k];
        static_cast<TX*>(p.dinitial_states)[b * p.dinit_stride[0] + c * p.dinit_stride[1] + j * p.dinit_stride[2]] =
            from_float<TX>(a);
      }
    }
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
