// bwd_walk.cpp — the backward's one pass over x, dout and dx (SimdKernels::bwd_time and
// bwd_steps, simd_bwd_steps.inc) driven for bwd_cpu: a channel-first row's tiles of kTimeTile
// steps, carrying g between them, or a channel-last tile of channels walked down the row in calls
// of kStepsFold steps, carrying the rings. dinitial_states and dfinal_states are handled here,
// from what the walks leave behind; the sums fold into double after each call.
#include "fallback/cpu/bwd_cpu.h"
#include "fallback/cpu/x_rows.h"

namespace cc1d {
namespace bwdcpu {

namespace {

// bwd_row for row_walk_problem (bwd_cpu picks it, once a call).
template <int W>
void bwd_row_walk(const BwdProblem& p, int64_t b, int64_t c, const std::vector<int64_t>*, double* sums,
                  RowBuffers&) {
  float w[W], halo[W], carry[W] = {};  // carry: g after the tile, 0 past the row's end
  gather_fn(p.w_dtype)(p.weight.data, c * p.weight.strides[0], p.weight.strides[1], W, w);
  const int lanes = simd().width;
  float dw[W * kLanes] = {}, db[kLanes] = {};
  double total[(W + 1) * kLanes] = {};
  const int64_t es = dtype_size(p.x_dtype);
  const auto at = [&](const TensorRef& t) { return (b * t.strides[0] + c * t.strides[1]) * es; };
  BwdRowArgs a{};
  a.dtype = p.x_dtype, a.silu = p.silu, a.halo = halo, a.carry = carry, a.w = w, a.dw = dw, a.db = db;
  a.bias = p.bias.present() ? load(p.bias.data, p.w_dtype, c * p.bias.strides[0]) : 0.f;
  // dx at step s >= t0 (s < 0: dinitial_states) from carry, g at t0..t0+W-2 (0 past the row's
  // end), plus dfinal_states.
  const auto dx_at = [&](int64_t s, int64_t t0) {
    float v = dfinal_at(p, b, c, s);
    for (int k = 0; k < W; ++k) {
      const int64_t r = s + W - 1 - k - t0;
      if (r >= 0 && r < W - 1 && t0 + r < p.seqlen) v += w[k] * carry[r];
    }
    return v;
  };
  // With dfinal_states the row's last W-1 steps are a call of their own, as in bwd_channel_walk.
  const bool dfinal = p.dfinal_states.present();
  for (int64_t hi = p.seqlen, t0; hi > 0; hi = t0) {
    const bool last = dfinal && hi == p.seqlen;
    t0 = last ? std::max<int64_t>(0, hi - (W - 1)) : (hi - 1) / kTimeTile * kTimeTile;
    for (int j = 0; j < W - 1; ++j) halo[j] = x_at(p, b, c, t0 - (W - 1) + j);
    a.x = static_cast<const char*>(p.x.data) + at(p.x) + t0 * es;
    a.dout = static_cast<const char*>(p.dout.data) + at(p.dout) + t0 * es;
    a.dx = static_cast<char*>(p.dx.data) + at(p.dx) + t0 * es;
    a.n = hi - t0;
    simd().bwd_time[W - 1](a);
    fold_sums(dw, total, W * lanes);
    fold_sums(db, total + W * lanes, lanes);
    for (int64_t s = t0; last && s < hi; ++s) {
      const float v = dx_at(s, t0);
      scatter_fn(p.x_dtype)(p.dx.data, b * p.dx.strides[0] + c * p.dx.strides[1] + s, 1, 1, &v);
    }
  }
  if (p.dinitial_states.present())  // x at s = jj-(W-1) reaches outputs 0..jj, whose g is carry
    for (int jj = 0; jj < W - 1; ++jj) store_dinit(p, b, c, jj, dx_at(jj - (W - 1), 0));
  for (int k = 0; k <= W; ++k)
    for (int l = 0; l < lanes; ++l) sums[k] += total[k * lanes + l];
}

constexpr int64_t kStepsFold = 256;  // steps whose fp32 sums join the totals at once

// Channels [c0, c0+nc) of batch row b, buf started for them; the row's sums are added to buf.total.
template <int W>
void bwd_channel_walk(const BwdProblem& p, int64_t b, int64_t c0, int64_t nc, const std::vector<int64_t>*,
                      WalkBuffers& buf) {
  const int64_t ls = buf.ls;
  float* halo = buf.halo();
  for (int j = 0; j < W - 1; ++j) x_steps(p, b, j - (W - 1), 1, c0, nc, halo + j * ls);
  for (int64_t s = p.seqlen - (W - 1); s < p.seqlen; ++s) x_steps(p, b, s, 1, c0, nc, buf.xring() + (s + W) % W * ls);
  std::fill(buf.gring(), buf.gring() + W * ls, 0.f);  // g past the row's end
  const auto at = [&](const TensorRef& t) { return (b * t.strides[0] + c0) * dtype_size(p.x_dtype); };
  BwdStepsArgs a{};
  a.dtype = p.x_dtype, a.silu = p.silu;
  a.x = static_cast<const char*>(p.x.data) + at(p.x);
  a.dout = static_cast<const char*>(p.dout.data) + at(p.dout);
  a.dx = static_cast<char*>(p.dx.data) + at(p.dx);
  a.xs = p.x.strides[2], a.ds = p.dout.strides[2], a.dxs = p.dx.strides[2], a.nc = nc, a.ls = ls;
  a.halo = halo, a.wt = buf.wt(), a.bias = buf.bias();
  a.xring = buf.xring(), a.gring = buf.gring(), a.dw = buf.dw(), a.db = buf.db();
  const int* seq = nullptr;  // the row's ids from step -(W-1) to seqlen+W-2
  if (p.seq_idx.present()) {
    buf.seq.resize(p.seqlen + 2 * (W - 1));
    for (int64_t s = -(W - 1); s < p.seqlen + W - 1; ++s) buf.seq[s + W - 1] = seq_at(p, b, s);
    seq = buf.seq.data() + (W - 1);
    buf.keep.resize(p.seqlen);
    for (int64_t s = 0; s < p.seqlen; ++s) {
      unsigned bits = seq[s] < 0 ? 1u << 2 * W : 0u;
      for (int k = 0; k < W; ++k)
        bits |= unsigned(seq[s - (W - 1) + k] == seq[s]) << k | unsigned(seq[s + W - 1 - k] == seq[s]) << (W + k);
      buf.keep[s] = bits;
    }
    a.keep = buf.keep.data();
  }
  // dx at step s (s < 0: dinitial_states) from the g the ring holds: sum_k w[k] g(r), r =
  // s+W-1-k, over the outputs r in the row and in s's segment, plus dfinal_states.
  float *row = buf.scratch(0), *scratch = buf.scratch(1);
  const auto dx_row = [&](int64_t s) {
    std::fill(row, row + nc, 0.f);
    for (int k = 0; k < W; ++k) {
      const int64_t r = s + W - 1 - k;
      if (r < 0 || r >= p.seqlen || (seq && seq[r] != seq[s])) continue;
      const float *g = buf.gring() + (r + W) % W * ls, *wk = buf.wt() + k * ls;
      for (int64_t q = 0; q < nc; ++q) row[q] += wk[q] * g[q];
    }
    add_dfinal_row(p, b, c0, nc, s, row, scratch);
    return row;
  };
  // dfinal_states adds to dx at the row's last W-1 steps, which are then a call of their own:
  // their dx rows are summed again from the g ring with it added (adding it to the kernel's
  // rounded rows would round twice).
  const bool dfinal = p.dfinal_states.present();
  for (a.hi = p.seqlen; a.hi > 0; a.hi = a.lo) {
    const bool last = dfinal && a.hi == p.seqlen;
    a.lo = std::max<int64_t>(0, a.hi - (last ? W - 1 : kStepsFold));
    simd().bwd_steps[W - 1](a);
    for (int k = 0; k <= W; ++k) fold_sums(buf.dw() + k * ls, buf.total.data() + k * nc, nc);  // db: row W
    for (int64_t s = a.lo; last && s < a.hi; ++s) put_steps(p.dx, p.x_dtype, b, s, 1, c0, nc, dx_row(s));
  }
  if (!p.dinitial_states.present()) return;
  // x at s = jj-(W-1) (token 0's segment) reaches outputs 0..jj, whose g the ring holds now.
  const TensorRef& d = p.dinitial_states;
  for (int jj = 0; jj < W - 1; ++jj)
    scatter_fn(p.x_dtype)(d.data, b * d.strides[0] + c0 * d.strides[1] + jj * d.strides[2], d.strides[1], nc,
                          dx_row(jj - (W - 1)));
}

// The drivers at the widths with a SIMD walk (kHasBwdWalk); nullptr at the others, whose calls
// the *_walk_problem tests send to the tiles.
template <int W>
constexpr RowFn row_at() {
  if constexpr (kHasBwdWalk<W>) return bwd_row_walk<W>;
  return nullptr;
}
template <int W>
constexpr TileFn<WalkBuffers> channel_at() {
  if constexpr (kHasBwdWalk<W>) return bwd_channel_walk<W>;
  return nullptr;
}
template <int... Ws>
struct Walks {
  static constexpr RowFn row[] = {row_at<Ws>()...};
  static constexpr TileFn<WalkBuffers> channel[] = {channel_at<Ws>()...};
};
using Table = Walks<1, 2, 3, 4, 5, 6, 7, 8>;

}  // namespace

// Rows with unit time strides in x, dout and dx, no seq_idx: one pass a tile, x and dout read
// once and dx written once (but its last W-1 steps with dfinal_states).
bool row_walk_problem(const BwdProblem& p) {
  return simd().bwd_time[p.width - 1] && p.x.strides[2] == 1 && p.dout.strides[2] == 1 && p.dx.present() &&
         p.dx.strides[2] == 1 && !p.seq_idx.present();
}
RowFn row_walk(int width) { return Table::row[width - 1]; }

// x, dout and dx with contiguous channels: x and dout read once, dx written once (but its last
// W-1 steps with dfinal_states), no float tiles.
bool channel_walk_problem(const BwdProblem& p) {
  return simd().bwd_steps[p.width - 1] && p.x.strides[1] == 1 && p.dout.strides[1] == 1 && p.dx.present() &&
         p.dx.strides[1] == 1;
}
TileFn<WalkBuffers> channel_walk(int width) { return Table::channel[width - 1]; }

}  // namespace bwdcpu
}  // namespace cc1d
