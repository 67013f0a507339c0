// bwd_vec_ends.cuh — what the backward's vector walk (TIME_VEC, bwd_time_vec.cuh; also the
// experiment in bench/variants/) leaves out, recomputed by the warp after the walk from x and
// dout: the steps of a row before its first 16-byte aligned one, dinitial_states, and
// dfinal_states' steps that begin in the step before a segment's last (the walk adds them only
// in its last step).
#pragma once
#include "bwd_common.cuh"

namespace cc1d {

// One warp's (channel, segment) after its walk: the walk's weights and its dweight/dbias sums.
// Computed from s_begin alone (the segment's first step: a + segment * segment_len), so that no
// other value of the walk stays live across it (at the 16-bit walk's 80 registers, any did spill).
template <typename TX, int W>
struct BwdVecEnds {
  const BwdParams& p;
  long long b, c, s_begin;
  int lane;
  const float (&w)[W];
  float bias;
  float (&dws)[W];
  float& dbs;

  // dx at steps base + l - (W-1), l = lane in [W-1, 32): lane l takes g at base + l (0 outside the
  // row), and the W-1 before it from the lanes below, summed in the walk's order (the same float
  // result). Steps in [lo, hi) store dx, before 0 dinitial_states (lo < 0 only for the row's
  // first steps); dfinal_states is added. With `head`, the steps before the walk's first (0 to
  // s_begin - 1) also add their g to the dweight/dbias sums.
  CC1D_HD void fix_dx(long long base, long long lo, long long hi, bool head) {
    const long long q = base + lane;
    float xw[W], gq = 0.f, z = bias;  // (bwd_g_at's g, with the window kept for the sums)
    for (int k = 0; k < W; ++k) {
      xw[k] = bwd_x<TX>(p, W, b, c, q - (W - 1) + k);
      z += w[k] * xw[k];
    }
    if (q >= 0 && q < p.seqlen) gq = p.silu ? bwd_dout<TX>(p, b, c, q) * silu_grad(z) : bwd_dout<TX>(p, b, c, q);
    if (head && q >= 0 && q < s_begin) {
      dbs += gq;
      for (int k = 0; k < W; ++k) dws[k] += gq * xw[k];
    }
    float sum = 0.f;
    for (int k = 0; k < W; ++k) {
      const float gk = __shfl_sync(0xffffffffu, gq, (lane - k) & 31);
      sum += w[k] * gk;
    }
    const long long s = q - (W - 1);
    if (lane < W - 1 || s < lo || s >= hi) return;
    sum += bwd_dfinal<TX>(p, W, b, c, s);
    if (s >= 0) {
      if (p.dx)
        static_cast<TX*>(p.dx)[b * p.dx_stride[0] + c * p.dx_stride[1] + s * p.dx_stride[2]] = from_float<TX>(sum);
    } else if (p.dinitial_states) {
      static_cast<TX*>(p.dinitial_states)[b * p.dinit_stride[0] + c * p.dinit_stride[1] +
                                          (s + W - 1) * p.dinit_stride[2]] = from_float<TX>(sum);
    }
  }

  // Segment 0 (s_begin < 16 bytes' steps <= kBwdWarpItems there): the row's steps before
  // s_begin, and dinitial_states, steps -(W-1)..s_begin-1. The row's last segment: dfinal_states'
  // steps in the step before its last.
  CC1D_HD void run() {
    const long long last_step = s_begin + (p.seqlen - 1 - s_begin) / kBwdWarpSpan * kBwdWarpSpan;
#pragma unroll 1
    for (int end = 0; end < 2; ++end) {  // one copy of fix_dx
      const bool head = end == 0;
      if (head ? s_begin < kBwdWarpItems && (s_begin > 0 || p.dinitial_states != nullptr)
               : W > 2 && p.dx != nullptr && p.dfinal_states != nullptr && last_step > s_begin &&
                     last_step < s_begin + p.segment_len && p.seqlen - (W - 1) < last_step)
        fix_dx(head ? -2 * (W - 1) : p.seqlen - 2 * (W - 1), head ? -(W - 1) : p.seqlen - (W - 1),
               head ? (s_begin < p.seqlen ? s_begin : p.seqlen) : last_step, head);
    }
  }
};

}  // namespace cc1d
