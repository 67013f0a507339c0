// packed_rows.h — channel-first rows stored back to back (row (b, c) at b * strides[0] + c *
// seqlen, unit time stride): each batch row's rows are one array to the packed kernels
// (simd_packed.inc), whose vectors span rows. What the forward and the backward share: which
// problems qualify, the tiles, the phase table and the staged taps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fallback/cpu/convert.h"
#include "ops/conv_inputs.h"

namespace cc1d {

// Rows shorter than this take the packed kernels. The channel-major tiles moved such rows
// through transposes, and the row tiles pay a setup a row. Forward kernel GB/s, 1024 channels,
// silu, packed against before (bench/cpu_fwd.py --shape, Zen 4 VM, 2026-12-05): bf16 2 steps
// 14.6 / 5.4-5.8, 16 steps 13.4-14.7 / 8.2-8.6, 48 steps 12.8-14.3 / 5.5-6.0, 128 steps 11.6-12.9 /
// 13.0-13.7; fp32 16 steps 24-28 / 11-12, 128 steps 26.1-26.5 / 18.6-20.5, 512 steps 23-25 / 26-33.
constexpr int64_t kMaxPackedLen = 128;

// Whether t (x-shaped) holds its rows of len steps back to back.
inline bool packed_layout(const TensorRef& t, int64_t len) { return t.strides[2] == 1 && t.strides[1] == len; }

// The inputs' part of the rule: short packed rows of x, no seq_idx and no initial states (the
// kernels read every row from step 0 with nothing before it).
inline bool packed_inputs(const ConvProblem& p) {
  return p.seqlen < kMaxPackedLen && packed_layout(p.x, p.seqlen) && !p.seq_idx.present() &&
         !p.initial_states.present();
}

// Rows a tile: about `elements` elements, whole vectors of L but a batch row's last tile.
inline int64_t packed_tile_rows(int64_t dim, int64_t len, int L, int64_t elements) {
  return std::min(dim, (std::max<int64_t>(1, elements / len) + L - 1) / L * L);
}

// The phase table for rows of len steps and vectors of L floats: per phase q, lane j's row
// offset (q + j) / len, then its step (q + j) % len.
// Counted, not divided: two divisions an entry were a third of a tiny call's time.
inline std::vector<int> packed_rows_table(int64_t len, int L) {
  std::vector<int> tab(2 * len * L);
  for (int64_t q = 0; q < len; ++q) {
    int row = 0, step = static_cast<int>(q);
    for (int j = 0; j < L; ++j) {
      tab[2 * q * L + j] = row;
      tab[(2 * q + 1) * L + j] = step;
      if (++step == len) step = 0, ++row;
    }
  }
  return tab;
}

// The taps as floats, W rows of ws >= dim + L (tap k of channel c at k * ws + c), then the bias
// (or zeros): every row readable L past its last channel.
inline std::vector<float> packed_taps(const ConvProblem& p, int64_t ws) {
  const int W = p.width;
  std::vector<float> wt((W + 1) * ws, 0.f);
  const GatherFn gw = gather_fn(p.w_dtype);
  for (int k = 0; k < W; ++k) gw(p.weight.data, k * p.weight.strides[1], p.weight.strides[0], p.dim, &wt[k * ws]);
  if (p.bias.present()) gw(p.bias.data, 0, p.bias.strides[0], p.dim, &wt[W * ws]);
  return wt;
}

}  // namespace cc1d
