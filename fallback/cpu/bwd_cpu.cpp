// bwd_cpu.cpp — the backward op's native CPU implementation (run by the cpu backend).
//
// The same walk as the GPU kernel (kernels_src/bwd.cuh): time backwards, tile by tile, carrying
// the W-1 values of g (the gradient of the pre-activation) that the later tile computed, so
// silu's derivative is evaluated once per element. Short channel-first rows stored back to back
// with no states or seq_idx take the packed kernels (packed_rows.h), each batch row's rows one
// array. The others have two tilings:
//  - time-major (channel-first but for rows under 40 steps, and channel-last under 16 channels:
//    cpu_time_major in tiling.h): one work item per row (b, c), vectorised over time;
//  - channel-major (the others): one item per (b, tile of channels), vectorised over channels.
// At widths 2-4, rows with unit time strides and no seq_idx (time-major), and x, dout and dx
// with contiguous channels (channel-major), take one pass a tile (simd_bwd_steps.inc, driven by
// bwd_walk.cpp): x and dout read and converted once, no float tiles. The rest are converted to
// fp32 tiles and the loops run over the contiguous axis with the width as a template parameter,
// so they vectorise.
// The pre-activation and dx run on the forward's SIMD kernels (simd.h; dx with the taps
// reversed), and the channel-last sums on tap_sums, a run of one seq_idx value at a time (the
// whole tile without seq_idx): within a run every tap counts but those reaching before it (the
// pre-activation, the sums) or after it (dx), which are masked to the run's segment. Tiles cut
// into runs shorter than kMinRun steps on average keep plain loops that skip each tap of
// another segment.
// Deterministic by construction: the items depend on the problem only, each accumulates its
// dweight/dbias in a fixed order (its group's batch rows in order) into its own slot, and the
// slots are summed per channel in batch order at the end — the same bits for any thread count.
// A tile's sums are fp32; they join the item's in double (fold_sums): a running fp32 sum stops
// growing once it is 2^24 times its terms, which a row of 10^7-10^8 steps reaches (its dweight
// and dbias came out up to 21% off).
#include <algorithm>
#include <vector>

#include "fallback/cpu/bwd_cpu.h"
#include "fallback/cpu/packed_rows.h"
#include "fallback/cpu/thread_pool.h"
#include "fallback/cpu/tiling.h"
#include "fallback/cpu/x_rows.h"
#include "ops/bwd/bwd_op.h"

namespace cc1d {

namespace {

using namespace bwdcpu;

constexpr int64_t kCLTimeTile = 64;  // channel-major: steps per tile
constexpr int64_t kCLChanTileMin = 128, kCLChanTileMax = 1024;  // channel-major: channels per item
constexpr int64_t kCLFoldTiles = 16;  // channel-major: tiles whose fp32 sums join the totals at once
constexpr int64_t kPackedTile = 1024;  // packed rows: elements a tile (its sums' accumulators in L1)

// Each item's sums: per (group of batch rows, channel) the W taps of dweight then dbias. A group
// is `rows` batch rows, so that it spans at least kGroupSteps steps: a slot per batch row was 10
// times the input on rows of one step, and its page faults took most of their backward.
constexpr int64_t kGroupSteps = 256;
struct Sums {
  int64_t rows, groups, dim;
  int stride;
  std::vector<float> slots;
  Sums(const BwdProblem& p)
      : rows(std::max<int64_t>(1, kGroupSteps / std::max<int64_t>(1, p.seqlen))),
        groups((p.batch + rows - 1) / rows), dim(p.dim), stride(p.width + 1),
        slots(static_cast<size_t>(groups * dim * stride), 0.f) {}
  float* at(int64_t group, int64_t c) { return &slots[(group * dim + c) * stride]; }
  const float* at(int64_t group, int64_t c) const { return &slots[(group * dim + c) * stride]; }
  // The batch rows of a group.
  int64_t first(int64_t group) const { return group * rows; }
  int64_t last(const BwdProblem& p, int64_t group) const { return std::min(p.batch, (group + 1) * rows); }
};

// While it lives, the `count` steps of `len` floats at v that are not the run's segment
// (keep(j) false) read as zeros; they are restored after. A run's fused pass sees its history
// (or, for dx, the steps after it) through one.
class MaskSteps {
 public:
  template <typename Keep>
  MaskSteps(float* v, int64_t len, int count, Keep keep, std::vector<float>& save)
      : v_(v), n_(len * count), save_(save) {
    std::copy(v, v + n_, save.begin());
    for (int j = 0; j < count; ++j)
      if (!keep(j)) std::fill(v + j * len, v + (j + 1) * len, 0.f);
  }
  ~MaskSteps() { std::copy(save_.begin(), save_.begin() + n_, v_); }
  MaskSteps(const MaskSteps&) = delete;
  MaskSteps& operator=(const MaskSteps&) = delete;

 private:
  float* v_;
  int64_t n_;
  std::vector<float>& save_;
};

// ---- time-major: one row, vectorised over time ---------------------------------------------
// Tile arrays, index j <-> time t0-(W-1)+j: x (n+W-1), seg (n+2W-2); g index i <-> time t0+i
// (n+W-1: the tile, then the carried halo).
template <int W, bool SEQ>
struct RowTile {
  // The plain loops of a tile of short runs (otherwise the forward's SIMD kernels serve these two):
  // z[i] = bias + sum_k w[k] x[i+k], taps of another segment skipped.
  static void pre_activation(const float* x, const int* seg, const float* w, float bias, float* z, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = bias;
      for (int k = 0; k < W; ++k) acc += seg[i + k] == seg[W - 1 + i] ? w[k] * x[i + k] : 0.f;
      z[i] = acc;
    }
  }
  // dx[i] = sum_k w[k] g[i+W-1-k], outputs of another segment skipped.
  static void grad_x(const float* g, const int* seg, const float* w, float* dx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.f;
      for (int k = 0; k < W; ++k) acc += seg[2 * (W - 1) + i - k] == seg[W - 1 + i] ? w[k] * g[i + W - 1 - k] : 0.f;
      dx[i] = acc;
    }
  }
  // dw[k] += sum_i g[i] x[i+k], db += sum_i g[i], each in kLanes fixed-order partial sums.
  static void sums(const float* g, const float* x, const int* seg, float (&dw)[W][kLanes], float (&db)[kLanes],
                   int64_t n) {
    int64_t i0 = 0;
    for (; i0 + kLanes <= n; i0 += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const int64_t i = i0 + l;
        db[l] += g[i];
        for (int k = 0; k < W; ++k) dw[k][l] += (!SEQ || seg[i + k] == seg[W - 1 + i]) ? g[i] * x[i + k] : 0.f;
      }
    for (int64_t i = i0; i < n; ++i) {
      db[i - i0] += g[i];
      for (int k = 0; k < W; ++k) dw[k][i - i0] += (!SEQ || seg[i + k] == seg[W - 1 + i]) ? g[i] * x[i + k] : 0.f;
    }
  }
};

// starts: the batch row's runs of one seq_idx value (seq_runs), null without seq_idx. The row's
// dweight and dbias are added to sums (W taps, then the bias).
template <int W, bool SEQ>
void bwd_row(const BwdProblem& p, int64_t b, int64_t c, const std::vector<int64_t>* starts, double* sums,
             RowBuffers& buf) {
  const TensorRef &xt = p.x, &dt = p.dout;
  float w[W], w_rev[W];
  gather_fn(p.w_dtype)(p.weight.data, c * p.weight.strides[0], p.weight.strides[1], W, w);
  for (int k = 0; k < W; ++k) w_rev[k] = w[W - 1 - k];
  const float bias = p.bias.present() ? load(p.bias.data, p.w_dtype, c * p.bias.strides[0]) : 0.f;
  const GatherFn gx = gather_fn(p.x_dtype);
  std::vector<float>&x = buf.x, &z = buf.z, &g = buf.g, &dx = buf.dx;
  std::vector<int>& seg = buf.seg;
  float carry[W > 1 ? W - 1 : 1] = {};  // g after the tile: 0 beyond seqlen
  float dw[W][kLanes] = {}, db[kLanes] = {};
  double total[W + 1][kLanes] = {};
  for (int64_t t0 = (p.seqlen - 1) / kTimeTile * kTimeTile; t0 >= 0; t0 -= kTimeTile) {
    const int64_t n = std::min(kTimeTile, p.seqlen - t0);
    int64_t j = 0;
    for (; j < W - 1 && t0 - (W - 1) + j < 0; ++j) x[j] = x_at(p, b, c, t0 - (W - 1) + j);
    gx(xt.data, b * xt.strides[0] + c * xt.strides[1] + (t0 - (W - 1) + j) * xt.strides[2], xt.strides[2],
       n + W - 1 - j, &x[j]);
    gx(dt.data, b * dt.strides[0] + c * dt.strides[1] + t0 * dt.strides[2], dt.strides[2], n, g.data());
    // The tile's runs (one without seq_idx), as offsets from t0: x index j is time t0-(W-1)+j, g
    // index i time t0+i. A tile of short runs takes the plain loops, which read seg.
    const TileRuns tr(starts, t0, n);
    const bool fused = tr.fused();
    if (SEQ && !fused)
      for (int64_t k = 0; k < n + 2 * (W - 1); ++k) seg[k] = seq_at(p, b, t0 - (W - 1) + k);
    const auto each_run = [&](auto f) {
      tr.each([&](int64_t r0, int64_t r1) { f(r0 - t0, r1 - t0, SEQ ? seq_at(p, b, r0) : 0); });
    };
    // A run's history in x: the W-1 steps before it, those of another segment as zeros.
    const auto x_history = [&](int64_t r0, int cur) {
      return MaskSteps(&x[r0], 1, W - 1, [&](int j) { return !SEQ || seq_at(p, b, t0 + r0 - (W - 1) + j) == cur; },
                       buf.save);
    };
    if (fused) {
      each_run([&](int64_t r0, int64_t r1, int cur) {
        if (cur < 0) return std::fill(&g[r0], &g[r1], 0.f);  // padding tokens: no gradient flows
        if (!p.silu) return;
        const MaskSteps history = x_history(r0, cur);
        simd().conv_time[W - 1](CC1D_FLOAT32, &x[r0 + W - 1], &x[r0], w, bias, false, &z[r0], r1 - r0);
        simd().mul_silu_grad(&z[r0], &g[r0], r1 - r0);
      });
    } else {
      if (p.silu) {
        RowTile<W, SEQ>::pre_activation(x.data(), seg.data(), w, bias, z.data(), n);
        simd().mul_silu_grad(z.data(), g.data(), n);
      }
      for (int64_t i = 0; i < n; ++i) g[i] = seg[W - 1 + i] < 0 ? 0.f : g[i];  // padding tokens
    }
    std::copy(carry, carry + W - 1, g.begin() + n);
    if (p.dx.present()) {
      if (fused)  // dx[i] = sum_j w[W-1-j] g[i+j]: the forward's kernel with the taps reversed
        each_run([&](int64_t r0, int64_t r1, int cur) {
          const MaskSteps ahead(&g[r1], 1, W - 1, [&](int j) { return !SEQ || seq_at(p, b, t0 + r1 + j) == cur; },
                                buf.save);
          simd().conv_time[W - 1](CC1D_FLOAT32, &g[r0 + W - 1], &g[r0], w_rev, 0.f, false, &dx[r0], r1 - r0);
        });
      else
        RowTile<W, SEQ>::grad_x(g.data(), seg.data(), w, dx.data(), n);
      for (int64_t i = std::max<int64_t>(0, p.seqlen - (W - 1) - t0); i < n; ++i) dx[i] += dfinal_at(p, b, c, t0 + i);
      scatter_fn(p.x_dtype)(p.dx.data, b * p.dx.strides[0] + c * p.dx.strides[1] + t0 * p.dx.strides[2],
                            p.dx.strides[2], n, dx.data());
    }
    if (fused)
      each_run([&](int64_t r0, int64_t r1, int cur) {
        const MaskSteps history = x_history(r0, cur);
        simd().row_sums[W - 1](&g[r0], &x[r0], r1 - r0, dw[0], kLanes, db);
      });
    else
      RowTile<W, SEQ>::sums(g.data(), x.data(), seg.data(), dw, db, n);
    for (int k = 0; k < W; ++k) fold_sums(dw[k], total[k], kLanes);
    fold_sums(db, total[W], kLanes);
    if (t0 == 0 && p.dinitial_states.present())
      for (int jj = 0; jj < W - 1; ++jj) {  // x at s = jj-(W-1) reaches outputs 0..jj
        float a = dfinal_at(p, b, c, jj - (W - 1));
        for (int k = 0; k <= jj; ++k) a += (!SEQ || seq_at(p, b, jj - k) == seq_at(p, b, 0)) ? w[k] * g[jj - k] : 0.f;
        store_dinit(p, b, c, jj, a);
      }
    std::copy(g.begin(), g.begin() + W - 1, carry);
  }
  for (int k = 0; k <= W; ++k) {
    double s = 0.;
    for (int l = 0; l < kLanes; ++l) s += total[k][l];
    sums[k] += s;
  }
}

// ---- channel-major: one (batch, channel tile), vectorised over channels --------------------
// Rows of nc channels: x rows j <-> time t0-(W-1)+j (nt+W-1 rows), g rows i <-> time t0+i (nt,
// then the W-1 carried rows). nt: the longest tile, min(kCLTimeTile, seqlen).
// dw and db are zero between rows (the last tile folds them into total).
struct TileBuffers {
  std::vector<float> w, w_rev, bias, x, z, g, carry, dw, db, a, dfinal, save;
  std::vector<double> total;  // dw then db, over the rows and tiles walked
  TileBuffers(int W, int64_t nc, int64_t nt)
      : w(W * nc), w_rev(W * nc), bias(nc), x((nt + W - 1) * nc), z(nt * nc), g((nt + W - 1) * nc),
        carry((W - 1) * nc), dw(W * nc), db(nc), a(nc), dfinal(nc), save((W - 1) * nc),
        total((W + 1) * nc) {}
  // Channels [c0, c0+nc)'s taps, reversed taps and bias, and zero totals: an item's start.
  void start(const BwdProblem& p, int64_t c0, int64_t nc) {
    const int W = p.width;
    gather_taps(p, c0, nc, w.data(), nc, bias.data());
    for (int j = 0; j < W; ++j) std::copy(&w[j * nc], &w[j * nc] + nc, &w_rev[(W - 1 - j) * nc]);
    std::fill(total.begin(), total.end(), 0.);
  }
};

// Channels per item: as many as leave every thread two items, within [kCLChanTileMin,
// kCLChanTileMax]. Wide tiles read longer runs of each row (a row of a large dim is a page,
// which the prefetcher does not cross): 128 -> 1024 took 4x2048x2048 bf16 from 77-86 to 57 ms.
int64_t chan_tile(const BwdProblem& p, const Sums& sums) {
  const int64_t groups = std::max<int64_t>(1, sums.groups);  // an empty batch has no items
  const int64_t per_batch = (2 * num_threads() + groups - 1) / groups;
  const int64_t nc = ((p.dim + per_batch - 1) / per_batch + 15) / 16 * 16;
  return std::min(kCLChanTileMax, std::max(kCLChanTileMin, nc));
}

// starts: as bwd_row's. Channels [c0, c0+nc) of batch row b, with buf started (TileBuffers::start)
// for them; the row's sums are added to buf.total.
template <int W>
void bwd_channels(const BwdProblem& p, int64_t b, int64_t c0, int64_t nc, const std::vector<int64_t>* starts,
                  TileBuffers& buf) {
  std::vector<float>&w = buf.w, &bias = buf.bias, &x = buf.x, &z = buf.z, &g = buf.g, &carry = buf.carry;
  std::vector<float>&dw = buf.dw, &db = buf.db, &a = buf.a;
  std::fill(carry.begin(), carry.end(), 0.f);
  const bool has_seq = p.seq_idx.present();
  auto seq = [&](int64_t s) { return has_seq ? seq_at(p, b, s) : 0; };
  const SimdKernels& k = simd();
  for (int64_t t0 = (p.seqlen - 1) / kCLTimeTile * kCLTimeTile; t0 >= 0; t0 -= kCLTimeTile) {
    const int64_t nt = std::min(kCLTimeTile, p.seqlen - t0);
    x_steps(p, b, t0 - (W - 1), nt + W - 1, c0, nc, x.data());
    get_steps(p.dout, p.x_dtype, b, t0, nt, c0, nc, g.data());
    // The tile's runs (one without seq_idx), as offsets from t0: x row j is time t0-(W-1)+j, g
    // row i time t0+i. A tile of short runs takes the plain loops.
    const TileRuns tr(starts, t0, nt);
    const bool fused = tr.fused();
    const auto each_run = [&](auto f) { tr.each([&](int64_t r0, int64_t r1) { f(r0 - t0, r1 - t0, seq(r0)); }); };
    // A run's history in x: the W-1 rows before it, those of another segment as zeros.
    const auto x_history = [&](int64_t r0, int cur) {
      return MaskSteps(&x[r0 * nc], nc, W - 1, [&](int j) { return seq(t0 - (W - 1) + r0 + j) == cur; }, buf.save);
    };
    for (int64_t i = 0; i < nt; ++i) {
      const int64_t t = t0 + i;
      float* gi = &g[i * nc];
      const int cur = seq(t);
      if (cur < 0) {  // a padding token: no gradient flows through it
        std::fill(gi, gi + nc, 0.f);
        continue;
      }
      if (!p.silu || fused) continue;
      std::copy(bias.begin(), bias.begin() + nc, z.begin());
      for (int kk = 0; kk < W; ++kk) {
        if (seq(t - (W - 1) + kk) != cur) continue;
        const float *xr = &x[(i + kk) * nc], *wr = &w[kk * nc];
        for (int64_t q = 0; q < nc; ++q) z[q] += wr[q] * xr[q];
      }
      k.mul_silu_grad(z.data(), gi, nc);
    }
    if (p.silu && fused)
      each_run([&](int64_t r0, int64_t r1, int cur) {
        if (cur < 0) return;  // padding: its rows of g stay the zeros they were loaded as
        const MaskSteps history = x_history(r0, cur);
        k.conv_channels[W - 1](CC1D_FLOAT32, &x[(r0 + W - 1) * nc], nc, &x[r0 * nc], w.data(), bias.data(), false,
                               false, &z[r0 * nc], nc, r1 - r0, nc);
        k.mul_silu_grad(&z[r0 * nc], &g[r0 * nc], (r1 - r0) * nc);
      });
    std::copy(carry.begin(), carry.begin() + (W - 1) * nc, g.begin() + nt * nc);
    const bool dx_tile = fused && p.dx.present();
    if (dx_tile) {  // row i: sum_j w_rev[j] g[i + j], the rows after the tile being the carry
      std::fill(a.begin(), a.begin() + nc, 0.f);
      each_run([&](int64_t r0, int64_t r1, int cur) {
        const MaskSteps ahead(&g[r1 * nc], nc, W - 1, [&](int j) { return seq(t0 + r1 + j) == cur; }, buf.save);
        k.conv_channels[W - 1](CC1D_FLOAT32, &g[(r0 + W - 1) * nc], nc, &g[r0 * nc], buf.w_rev.data(), a.data(),
                               false, false, &z[r0 * nc], nc, r1 - r0, nc);
      });
    }
    // dx at t0+i for i in [0, nt) (dx_tile: the tile's rows of z, written at once), and in the
    // first tile dinitial_states at -(W-1)..-1.
    const auto add_dfinal = [&](int64_t s, float* row) { add_dfinal_row(p, b, c0, nc, s, row, buf.dfinal.data()); };
    if (dx_tile) {
      for (int64_t i = 0; i < nt; ++i) add_dfinal(t0 + i, &z[i * nc]);
      put_steps(p.dx, p.x_dtype, b, t0, nt, c0, nc, z.data());
    }
    for (int64_t i = dx_tile ? -1 : nt - 1; i >= (t0 == 0 ? -(W - 1) : 0); --i) {
      const int64_t s = t0 + i;
      if (s >= 0 ? !p.dx.present() : !p.dinitial_states.present()) continue;
      const int cur = seq(s);
      std::fill(a.begin(), a.begin() + nc, 0.f);
      for (int kk = 0; kk < W; ++kk) {
        const int64_t r = i + W - 1 - kk;  // the output this tap feeds
        if (r < 0 || seq(t0 + r) != cur) continue;
        const float *gr = &g[r * nc], *wr = &w[kk * nc];
        for (int64_t q = 0; q < nc; ++q) a[q] += wr[q] * gr[q];
      }
      add_dfinal(s, a.data());
      if (s >= 0)
        put_steps(p.dx, p.x_dtype, b, s, 1, c0, nc, a.data());
      else
        for (int64_t q = 0; q < nc; ++q) store_dinit(p, b, c0 + q, static_cast<int>(s + W - 1), a[q]);
    }
    if (fused)
      each_run([&](int64_t r0, int64_t r1, int cur) {
        const MaskSteps history = x_history(r0, cur);
        k.tap_sums[W - 1](&g[r0 * nc], &x[r0 * nc], r1 - r0, nc, dw.data(), db.data());
      });
    else
      for (int64_t i = 0; i < nt; ++i) {  // the same sums, a tap of another segment skipped
        const float* gi = &g[i * nc];
        const int cur = seq(t0 + i);
        for (int64_t q = 0; q < nc; ++q) db[q] += gi[q];
        for (int kk = 0; kk < W; ++kk) {
          if (seq(t0 + i - (W - 1) + kk) != cur) continue;
          const float* xr = &x[(i + kk) * nc];
          float* d = &dw[kk * nc];
          for (int64_t q = 0; q < nc; ++q) d[q] += gi[q] * xr[q];
        }
      }
    std::copy(g.begin(), g.begin() + (W - 1) * nc, carry.begin());
    if ((t0 / kCLTimeTile) % kCLFoldTiles == 0) {  // and after the last tile, t0 = 0
      fold_sums(dw.data(), buf.total.data(), W * nc);
      fold_sums(db.data(), buf.total.data() + W * nc, nc);
    }
  }
}

// ---- packed: short channel-first rows stored back to back (packed_rows.h) -------------------
// An item: a group's batch rows of one tile of rows, each batch row one call of the packed
// kernel, which adds its sums into an accumulator per element of the tile (and tap); the group's
// end sums those per channel in element order: the same bits for any thread count.

// The rule's rest: dout and dx packed too, and no dfinal_states or dinitial_states (the kernel
// reads and writes neither; dinitial_states may be asked for without initial states).
bool packed_bwd_problem(const BwdProblem& p) {
  return packed_inputs(p) && packed_layout(p.dout, p.seqlen) && (!p.dx.present() || packed_layout(p.dx, p.seqlen)) &&
         !p.dfinal_states.present() && !p.dinitial_states.present();
}

void bwd_packed(const BwdProblem& p, Sums& sums) {
  const SimdKernels& k = simd();
  const int W = p.width, L = k.width;
  const int64_t len = p.seqlen, tile_c = packed_tile_rows(p.dim, len, L, kPackedTile);
  const int64_t ctiles = (p.dim + tile_c - 1) / tile_c, ws = p.dim + L, sn = (tile_c * len + L - 1) / L * L;
  const std::vector<float> wt = packed_taps(p, ws);
  const std::vector<int> tab = packed_rows_table(len, L);
  const int64_t es = dtype_size(p.x_dtype);
  const bool want = p.wants_sums();
  parallel_for(sums.groups * ctiles, chunk_items(tile_c * len * sums.rows), [&](int64_t begin, int64_t end) {
    std::vector<float> g(sn + L + W), acc(want ? (W + 1) * sn : 0);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t grp = item / ctiles, c0 = item % ctiles * tile_c, nc = std::min(tile_c, p.dim - c0);
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t b = sums.first(grp); b < sums.last(p, grp); ++b) {
        const auto at = [&](const TensorRef& t) { return (b * t.strides[0] + c0 * len) * es; };
        void* dx = p.dx.present() ? static_cast<char*>(p.dx.data) + at(p.dx) : nullptr;
        k.bwd_packed[W - 1](p.x_dtype, static_cast<const char*>(p.x.data) + at(p.x),
                            static_cast<const char*>(p.dout.data) + at(p.dout), len, tab.data(), &wt[c0], ws, p.silu,
                            dx, g.data(), want ? acc.data() : nullptr, sn, nc);
      }
      for (int64_t c = 0; want && c < nc; ++c) {
        double total[CC1D_MAX_WIDTH + 1] = {};
        for (int64_t e = c * len; e < (c + 1) * len; ++e)
          for (int kk = 0; kk <= W; ++kk) total[kk] += acc[kk * sn + e];
        std::copy(total, total + W + 1, sums.at(grp, c0 + c));
      }
    }
  });
}

template <int... Ws>
struct Table {
  static constexpr RowFn row[] = {bwd_row<Ws, false>...};
  static constexpr RowFn row_seq[] = {bwd_row<Ws, true>...};
  static constexpr TileFn<TileBuffers> channels[] = {bwd_channels<Ws>...};
};
using Kernels = Table<1, 2, 3, 4, 5, 6, 7, 8>;

// dweight and dbias: per channel, the items' sums in batch order.
void write_sums(const BwdProblem& p, const Sums& sums) {
  const int W = p.width;
  parallel_for(p.dim, 256, [&](int64_t begin, int64_t end) {
    // Groups outer: each group's slots of [begin, end) are one contiguous run.
    const int64_t n = (end - begin) * (W + 1);
    std::vector<double> total(n, 0.);
    for (int64_t grp = 0; grp < sums.groups; ++grp) {
      const float* row = sums.at(grp, begin);
      for (int64_t i = 0; i < n; ++i) total[i] += row[i];
    }
    std::vector<float> f(W + 1);
    for (int64_t c = begin; c < end; ++c) {
      for (int k = 0; k <= W; ++k) f[k] = static_cast<float>(total[(c - begin) * (W + 1) + k]);
      if (p.dweight.present())
        scatter_fn(p.w_dtype)(p.dweight.data, c * p.dweight.strides[0], p.dweight.strides[1], W, f.data());
      if (p.dbias.present()) scatter_fn(p.w_dtype)(p.dbias.data, c * p.dbias.strides[0], 1, 1, &f[W]);
    }
  });
}

}  // namespace

void bwd_cpu(const Problem& problem) {
  const auto& p = static_cast<const BwdProblem&>(problem);
  const int W = p.width;
  Sums sums(p);
  const std::vector<std::vector<int64_t>> runs = seq_runs(p.seq_idx, p.batch, p.seqlen);
  const auto starts = [&](int64_t b) { return runs.empty() ? nullptr : &runs[b]; };
  const int64_t group_steps = sums.rows * p.seqlen;
  // An item: a group's rows of one channel (time-major) or of a tile of channels.
  if (packed_bwd_problem(p)) {
    bwd_packed(p, sums);
  } else if (cpu_time_major(p)) {
    const auto row = row_walk_problem(p)       ? row_walk(W)
                     : p.seq_idx.present() ? Kernels::row_seq[W - 1]
                                           : Kernels::row[W - 1];
    parallel_for(sums.groups * p.dim, chunk_items(group_steps), [&](int64_t begin, int64_t end) {
      RowBuffers buf(W, std::min(kTimeTile, p.seqlen));
      for (int64_t item = begin; item < end; ++item) {
        const int64_t grp = item / p.dim, c = item % p.dim;
        double total[CC1D_MAX_WIDTH + 1] = {};
        for (int64_t b = sums.first(grp); b < sums.last(p, grp); ++b) row(p, b, c, starts(b), total, buf);
        std::copy(total, total + W + 1, sums.at(grp, c));
      }
    });
  } else {
    const int64_t ct = chan_tile(p, sums), tiles = (p.dim + ct - 1) / ct;
    const auto items = [&](int64_t begin, int64_t end, auto& buf, auto tile) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t grp = item / tiles, c0 = (item % tiles) * ct, nc = std::min(ct, p.dim - c0);
        buf.start(p, c0, nc);
        for (int64_t b = sums.first(grp); b < sums.last(p, grp); ++b) tile(p, b, c0, nc, starts(b), buf);
        for (int64_t q = 0; q < nc; ++q)
          for (int k = 0; k <= W; ++k) sums.at(grp, c0 + q)[k] = static_cast<float>(buf.total[k * nc + q]);
      }
    };
    const bool walk = channel_walk_problem(p);
    parallel_for(sums.groups * tiles, chunk_items(ct * group_steps), [&](int64_t begin, int64_t end) {
      if (walk) {
        WalkBuffers buf(W, ct);
        items(begin, end, buf, channel_walk(W));
      } else {
        TileBuffers buf(W, ct, std::min(kCLTimeTile, p.seqlen));
        items(begin, end, buf, Kernels::channels[W - 1]);
      }
    });
  }
  if (p.wants_sums()) write_sums(p, sums);
}

}  // namespace cc1d
