// fwd_cpu.cpp — the forward op's native CPU implementation (run by the cpu backend).
//
// Inputs are converted to fp32 tiles, the convolution runs on contiguous fp32 arrays with the
// width as a template parameter (so the compiler unrolls the taps and vectorises the other
// axis), and results are converted back. Two tilings, following the problem's time_major:
//  - time-major (channel-first): one row (b, c) tile of time at a time, vectorised over t;
//  - channel-major (channel-last): a (time x channel) tile, vectorised over c.
#include <algorithm>
#include <vector>

#include "fallback/cpu/convert.h"
#include "fallback/cpu/thread_pool.h"
#include "ops/fwd/fwd_op.h"

namespace cc1d {

namespace {

constexpr int64_t kTimeTile = 2048;    // row tiling: outputs per tile
constexpr int64_t kCLTimeTile = 64;    // channel-last tiling: time steps per tile
constexpr int64_t kCLChanTile = 256;   // channel-last tiling: channels per tile

float load(const void* base, cc1d_dtype dt, int64_t off) {
  float v;
  gather_fn(dt)(base, off, 1, 1, &v);
  return v;
}

// x at time s of row (b, c), with initial states (or zeros) before 0.
float x_at(const FwdProblem& p, int64_t b, int64_t c, int64_t s) {
  if (s >= 0) return load(p.x.data, p.x_dtype, b * p.x.strides[0] + c * p.x.strides[1] + s * p.x.strides[2]);
  if (!p.initial_states.present()) return 0.f;
  const TensorRef& st = p.initial_states;
  return load(st.data, p.x_dtype, b * st.strides[0] + c * st.strides[1] + (p.width - 1 + s) * st.strides[2]);
}

int seq_at(const FwdProblem& p, int64_t b, int64_t s) {
  if (s < 0) s = 0;  // initial states belong to token 0's segment
  return static_cast<const int32_t*>(p.seq_idx.data)[b * p.seq_idx.strides[0] + s * p.seq_idx.strides[1]];
}

void write_final_states(const FwdProblem& p, int64_t b, int64_t c) {
  const TensorRef& f = p.final_states;
  float v[CC1D_MAX_WIDTH];
  for (int j = 0; j < p.width - 1; ++j) v[j] = x_at(p, b, c, p.seqlen - (p.width - 1) + j);
  scatter_fn(p.x_dtype)(f.data, b * f.strides[0] + c * f.strides[1], f.strides[2], p.width - 1, v);
}

// x[b, c, s0 .. s0+n) into dst, reading initial states (or zeros) for s < 0.
void gather_x(const FwdProblem& p, GatherFn g, int64_t b, int64_t c, int64_t s0, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i < n && s0 + i < 0; ++i) dst[i] = x_at(p, b, c, s0 + i);
  g(p.x.data, b * p.x.strides[0] + c * p.x.strides[1] + (s0 + i) * p.x.strides[2], p.x.strides[2], n - i, dst + i);
}

// out[t] = bias + sum_k w[k] * xin[t + k] for t in [0, n): xin holds n + W - 1 values.
template <int W>
void conv_row(const float* xin, const float* w, float bias, float* out, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += w[k] * xin[t + k];
    out[t] = acc;
  }
}

// Same with segment masking: taps whose segment differs from the output's are skipped.
template <int W>
void conv_row_seq(const float* xin, const int* seg, const float* w, float bias, float* out, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    const int cur = seg[t + W - 1];
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += seg[t + k] == cur ? w[k] * xin[t + k] : 0.f;
    out[t] = acc;
  }
}

using RowFn = void (*)(const float*, const float*, float, float*, int64_t);
using RowSeqFn = void (*)(const float*, const int*, const float*, float, float*, int64_t);

template <int... Ws>
struct RowTable {
  static constexpr RowFn plain[] = {conv_row<Ws>...};
  static constexpr RowSeqFn seq[] = {conv_row_seq<Ws>...};
};
using Rows = RowTable<1, 2, 3, 4, 5, 6, 7, 8>;

void fwd_time_major(const FwdProblem& p) {
  const int W = p.width;
  const int64_t tiles = (p.seqlen + kTimeTile - 1) / kTimeTile;
  const int64_t rows = p.batch * p.dim;
  parallel_for(rows * tiles, std::max<int64_t>(1, 16 / tiles), [&](int64_t begin, int64_t end) {
    std::vector<float> xin(kTimeTile + W - 1), out(kTimeTile);
    std::vector<int> seg(p.seq_idx.present() ? kTimeTile + W - 1 : 0);
    const GatherFn gx = gather_fn(p.x_dtype);
    const ScatterFn sx = scatter_fn(p.x_dtype);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / tiles, tile = item % tiles;
      const int64_t b = row / p.dim, c = row % p.dim;
      const int64_t t0 = tile * kTimeTile, n = std::min(kTimeTile, p.seqlen - t0);
      float w[CC1D_MAX_WIDTH];
      gather_fn(p.w_dtype)(p.weight.data, c * p.weight.strides[0], p.weight.strides[1], W, w);
      const float bias = p.bias.present() ? load(p.bias.data, p.w_dtype, c * p.bias.strides[0]) : 0.f;
      gather_x(p, gx, b, c, t0 - (W - 1), n + W - 1, xin.data());
      if (p.seq_idx.present()) {
        for (int64_t i = 0; i < n + W - 1; ++i) seg[i] = seq_at(p, b, t0 - (W - 1) + i);
        Rows::seq[W - 1](xin.data(), seg.data(), w, bias, out.data(), n);
      } else {
        Rows::plain[W - 1](xin.data(), w, bias, out.data(), n);
      }
      if (p.silu) silu_inplace(out.data(), n);
      if (p.seq_idx.present())
        for (int64_t i = 0; i < n; ++i) out[i] = seg[i + W - 1] < 0 ? 0.f : out[i];  // padding tokens
      sx(p.out.data, b * p.out.strides[0] + c * p.out.strides[1] + t0 * p.out.strides[2], p.out.strides[2], n,
         out.data());
      if (p.final_states.present() && t0 + n == p.seqlen) write_final_states(p, b, c);
    }
  });
}

// Channel-last and other views: tile (time x channels), inner loops over contiguous channels.
template <int W>
void cl_tile(const FwdProblem& p, int64_t b, int64_t t0, int64_t nt, int64_t c0, int64_t nc,
             std::vector<float>& xin, std::vector<float>& wt, std::vector<float>& acc) {
  // xin[i * nc + j] = x[b, c0+j, t0-W+1+i]; wt[k * nc + j] = w[c0+j, k]
  const GatherFn gx = gather_fn(p.x_dtype), gw = gather_fn(p.w_dtype);
  for (int64_t i = 0; i < nt + W - 1; ++i) {
    const int64_t s = t0 - (W - 1) + i;
    if (s >= 0)
      gx(p.x.data, b * p.x.strides[0] + c0 * p.x.strides[1] + s * p.x.strides[2], p.x.strides[1], nc, &xin[i * nc]);
    else
      for (int64_t j = 0; j < nc; ++j) xin[i * nc + j] = x_at(p, b, c0 + j, s);
  }
  for (int k = 0; k < W; ++k)
    gw(p.weight.data, c0 * p.weight.strides[0] + k * p.weight.strides[1], p.weight.strides[0], nc, &wt[k * nc]);
  if (p.bias.present())
    gw(p.bias.data, c0 * p.bias.strides[0], p.bias.strides[0], nc, acc.data());
  else
    std::fill(acc.begin(), acc.begin() + nc, 0.f);
  std::vector<float> o(nc);
  const ScatterFn sx = scatter_fn(p.x_dtype);
  for (int64_t t = 0; t < nt; ++t) {
    const int cur = p.seq_idx.present() ? seq_at(p, b, t0 + t) : 0;
    std::copy(acc.begin(), acc.begin() + nc, o.begin());
    for (int k = 0; k < W; ++k) {
      if (p.seq_idx.present() && seq_at(p, b, t0 + t - (W - 1) + k) != cur) continue;
      const float* xr = &xin[(t + k) * nc];
      const float* wr = &wt[k * nc];
      for (int64_t j = 0; j < nc; ++j) o[j] += wr[j] * xr[j];
    }
    if (p.silu) silu_inplace(o.data(), nc);
    if (p.seq_idx.present() && cur < 0) std::fill(o.begin(), o.end(), 0.f);  // a padding token
    sx(p.out.data, b * p.out.strides[0] + c0 * p.out.strides[1] + (t0 + t) * p.out.strides[2], p.out.strides[1], nc,
       o.data());
  }
}

using TileFn = void (*)(const FwdProblem&, int64_t, int64_t, int64_t, int64_t, int64_t, std::vector<float>&,
                        std::vector<float>&, std::vector<float>&);
constexpr TileFn kTiles[] = {cl_tile<1>, cl_tile<2>, cl_tile<3>, cl_tile<4>,
                             cl_tile<5>, cl_tile<6>, cl_tile<7>, cl_tile<8>};

void fwd_channel_major(const FwdProblem& p) {
  const int W = p.width;
  const int64_t ttiles = (p.seqlen + kCLTimeTile - 1) / kCLTimeTile;
  const int64_t ctiles = (p.dim + kCLChanTile - 1) / kCLChanTile;
  parallel_for(p.batch * ttiles * ctiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> xin((kCLTimeTile + W - 1) * kCLChanTile), wt(W * kCLChanTile), acc(kCLChanTile);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t ct = item % ctiles, tt = (item / ctiles) % ttiles, b = item / (ctiles * ttiles);
      const int64_t t0 = tt * kCLTimeTile, nt = std::min(kCLTimeTile, p.seqlen - t0);
      const int64_t c0 = ct * kCLChanTile, nc = std::min(kCLChanTile, p.dim - c0);
      kTiles[W - 1](p, b, t0, nt, c0, nc, xin, wt, acc);
      if (p.final_states.present() && t0 + nt == p.seqlen)
        for (int64_t j = 0; j < nc; ++j) write_final_states(p, b, c0 + j);
    }
  });
}

}  // namespace

void fwd_cpu(const Problem& problem) {
  const auto& p = static_cast<const FwdProblem&>(problem);
  if (p.time_major)
    fwd_time_major(p);
  else
    fwd_channel_major(p);
}

}  // namespace cc1d
