// bwd_cpu.h — what the backward's CPU implementation shares between its tiles (bwd_cpu.cpp) and
// its one-pass walks (bwd_walk.cpp): the helpers both call, the buffers a worker allocates once,
// and the walks' entry points. Internal to fallback/cpu.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fallback/cpu/convert.h"
#include "fallback/cpu/segments.h"
#include "fallback/cpu/simd.h"
#include "fallback/cpu/x_rows.h"
#include "ops/bwd/bwd_op.h"

namespace cc1d {
namespace bwdcpu {

constexpr int64_t kTimeTile = 2048;  // time-major: steps per tile
// Independent fp32 accumulators of a dot product over time: a SIMD build's vector (row_sums, the
// fused passes) at most, and the plain loops' (seq_idx's short runs).
constexpr int kLanes = kMaxSimdWidth;

// The segment of step s of batch row b: token 0's before 0, -1 (none) from seqlen on.
inline int seq_at(const BwdProblem& p, int64_t b, int64_t s) { return s < p.seqlen ? seq_value(p.seq_idx, b, s) : -1; }

// What dfinal_states adds to the gradient of x at time s (channel c).
inline float dfinal_at(const BwdProblem& p, int64_t b, int64_t c, int64_t s) {
  const int64_t j = s - (p.seqlen - (p.width - 1));
  if (!p.dfinal_states.present() || j < 0 || j >= p.width - 1) return 0.f;
  const TensorRef& f = p.dfinal_states;
  return load(f.data, p.x_dtype, b * f.strides[0] + c * f.strides[1] + j * f.strides[2]);
}

// dfinal_states' row for step s (s < seqlen) of channels [c0, c0+nc) added to row, through
// scratch (nc floats). A row at once: an element at a time, it took 3 times the whole backward
// of rows of 8 steps, 3 in 8 of whose steps it touches.
inline void add_dfinal_row(const BwdProblem& p, int64_t b, int64_t c0, int64_t nc, int64_t s, float* row,
                           float* scratch) {
  const int64_t j = s - (p.seqlen - (p.width - 1));
  if (!p.dfinal_states.present() || j < 0) return;
  const TensorRef& f = p.dfinal_states;
  gather_fn(p.x_dtype)(f.data, b * f.strides[0] + c0 * f.strides[1] + j * f.strides[2], f.strides[1], nc, scratch);
  for (int64_t q = 0; q < nc; ++q) row[q] += scratch[q];
}

inline void store_dinit(const BwdProblem& p, int64_t b, int64_t c, int j, float v) {
  const TensorRef& d = p.dinitial_states;
  scatter_fn(p.x_dtype)(d.data, b * d.strides[0] + c * d.strides[1] + j * d.strides[2], 1, 1, &v);
}

// n fp32 partial sums added into their double totals, and zeroed for the next tile.
inline void fold_sums(float* part, double* total, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    total[i] += part[i];
    part[i] = 0.f;
  }
}

// Channels [c0, c0+nc)'s taps as W rows of floats ws apart at w, and their bias (0 without one).
inline void gather_taps(const BwdProblem& p, int64_t c0, int64_t nc, float* w, int64_t ws, float* bias) {
  const GatherFn gw = gather_fn(p.w_dtype);
  for (int k = 0; k < p.width; ++k)
    gw(p.weight.data, c0 * p.weight.strides[0] + k * p.weight.strides[1], p.weight.strides[0], nc, w + k * ws);
  std::fill(bias, bias + nc, 0.f);
  if (p.bias.present()) gw(p.bias.data, c0 * p.bias.strides[0], p.bias.strides[0], nc, bias);
}

// A worker's tile buffers, allocated once per chunk of items; nt: the longest tile,
// min(kTimeTile, seqlen).
struct RowBuffers {
  std::vector<float> x, z, g, dx, save;
  std::vector<int> seg;
  RowBuffers(int W, int64_t nt)
      : x(nt + W - 1), z(nt), g(nt + W - 1), dx(nt), save(W), seg(nt + 2 * (W - 1)) {}
};

// The walk's rows of up to nc floats, ls apart: the taps, dweight's and dbias's sums, the bias,
// the x and g rings, the x before step 0 (BwdStepsArgs) and two rows of scratch. A vector of
// channels reads its column of all of them, and rows a multiple of 4 KiB apart fall in the same
// L1 sets: rows wider than kSkew floats (1 KiB) are a multiple of 4 KiB and kSkew apart, so that
// they spread over the sets (measured with the earlier walk, 4x2048x2048 bf16, one thread: rows
// 4 KiB apart 35.9 ms, 4 KiB and a line 29.5, 4 KiB and 1 KiB 22.2); narrower rows are packed.
struct WalkBuffers {
  static constexpr int64_t kSkew = 256;
  int W;
  int64_t ls;
  std::vector<float> rows;
  std::vector<double> total;  // dw then db, as TileBuffers
  std::vector<int> seq;        // with seq_idx: a batch row's ids, from step -(W-1)
  std::vector<unsigned> keep;  // and its steps' bits (BwdStepsArgs::keep)
  WalkBuffers(int width, int64_t nc)
      : W(width),
        ls(nc <= kSkew ? (nc + 15) / 16 * 16 : (nc + 1023) / 1024 * 1024 + kSkew),
        rows((5 * width + 3) * ls),
        total((width + 1) * nc) {}
  float* row(int r) { return rows.data() + r * ls; }
  float* wt() { return row(0); }
  float* dw() { return row(W); }
  float* db() { return row(2 * W); }
  float* bias() { return row(2 * W + 1); }
  float* xring() { return row(2 * W + 2); }
  float* gring() { return row(3 * W + 2); }
  float* halo() { return row(4 * W + 2); }
  float* scratch(int i) { return row(5 * W + 1 + i); }
  void start(const BwdProblem& p, int64_t c0, int64_t nc) {
    gather_taps(p, c0, nc, wt(), ls, bias());
    std::fill(dw(), dw() + (W + 1) * ls, 0.f);  // dw's rows, then db's
    std::fill(total.begin(), total.end(), 0.);
  }
};

using RowFn = void (*)(const BwdProblem&, int64_t, int64_t, const std::vector<int64_t>*, double*, RowBuffers&);
template <typename Buffers>
using TileFn = void (*)(const BwdProblem&, int64_t, int64_t, int64_t, const std::vector<int64_t>*, Buffers&);

// The one-pass walks (bwd_walk.cpp), at widths with a SIMD walk (simd.h's kHasBwdWalk): whether
// a call can take them, and the walk at width W, called as bwd_cpu.cpp's tiles are.
bool row_walk_problem(const BwdProblem& p);
RowFn row_walk(int width);
bool channel_walk_problem(const BwdProblem& p);
TileFn<WalkBuffers> channel_walk(int width);

}  // namespace bwdcpu
}  // namespace cc1d
