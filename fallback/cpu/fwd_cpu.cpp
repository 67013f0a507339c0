// fwd_cpu.cpp — the forward op's native CPU implementation (run by the cpu backend).
//
// The tiling and threading live here; the inner loops are the SIMD builds of simd.h (AVX-512,
// AVX2 or baseline, chosen at run time), with the width fixed per call. Short channel-first rows
// stored back to back are one array a batch row (packed_rows.h); the others take one of two
// tilings, chosen by cpu_time_major (tiling.h):
//  - time-major (channel-first but for rows under 40 steps, and channel-last under 16 channels):
//    one row (b, c) tile of time at a time, vectorised over t;
//  - channel-major (the others): a (time x channels) tile, step by step, vectorised over c.
// With unit strides (time for the first, channels for the second), one fused pass reads x in its
// dtype and writes out; only the W-1 steps of history before a tile are staged as floats. With
// seq_idx the fused pass runs once per run of one segment id (its history masked to that id);
// other strides, and tiles cut into many short runs, gather the tile into floats, then scatter.
#include <algorithm>
#include <vector>

#include "fallback/cpu/convert.h"
#include "fallback/cpu/packed_rows.h"
#include "fallback/cpu/segments.h"
#include "fallback/cpu/simd.h"
#include "fallback/cpu/stream_out.h"
#include "fallback/cpu/thread_pool.h"
#include "fallback/cpu/tiling.h"
#include "fallback/cpu/x_rows.h"
#include "ops/fwd/fwd_op.h"

namespace cc1d {

namespace {

constexpr int64_t kTimeTile = 2048;    // row tiling: outputs per tile
constexpr int64_t kCLTimeTile = 64;    // channel-last tiling: time steps per tile
constexpr int64_t kCLChanTile = 256;   // channel-last tiling: channels per tile
constexpr int64_t kPackedTile = 4096;  // packed rows: elements a tile

// The segment id of step s of batch row b.
int seq_at(const FwdProblem& p, int64_t b, int64_t s) { return seq_value(p.seq_idx, b, s); }

// final_states[b, c, j] for channels [c0, c1): x at time seqlen-(W-1)+j, the initial states (or
// zeros) before time 0. Elements of E (x's element size) copied as they are: one dtype for all
// three, so no conversion (a float gather and scatter a channel took 3.3 ns an element: as long
// as the convolution itself on rows of 8 steps, whose final states are 3/8 of x).
template <typename E>
void copy_final_states(const FwdProblem& p, int64_t b, int64_t c0, int64_t c1) {
  const TensorRef &f = p.final_states, &x = p.x, &init = p.initial_states;
  const int H = p.width - 1;
  E* fs = static_cast<E*>(f.data) + b * f.strides[0];
  const E* xs = static_cast<const E*>(x.data) + b * x.strides[0];
  const E* is = init.present() ? static_cast<const E*>(init.data) + b * init.strides[0] : nullptr;
  for (int64_t c = c0; c < c1; ++c)
    for (int j = 0; j < H; ++j) {
      const int64_t s = p.seqlen - H + j;
      fs[c * f.strides[1] + j * f.strides[2]] = s >= 0 ? xs[c * x.strides[1] + s * x.strides[2]]
                                                : is ? is[c * init.strides[1] + (H + s) * init.strides[2]]
                                                     : E(0);
    }
}
void write_final_states(const FwdProblem& p, int64_t b, int64_t c0, int64_t c1) {
  if (dtype_size(p.x_dtype) == 2)
    copy_final_states<uint16_t>(p, b, c0, c1);
  else
    copy_final_states<uint32_t>(p, b, c0, c1);
}

// x[b, c, s0 .. s0+n) into dst as floats, reading initial states (or zeros) for s < 0.
void gather_x(const FwdProblem& p, int64_t b, int64_t c, int64_t s0, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i < n && s0 + i < 0; ++i) dst[i] = x_at(p, b, c, s0 + i);
  gather_fn(p.x_dtype)(p.x.data, b * p.x.strides[0] + c * p.x.strides[1] + (s0 + i) * p.x.strides[2],
                       p.x.strides[2], n - i, dst + i);
}

// Whether history step s counts for a run starting at r0 (same segment; always without seq_idx).
bool same_segment(const FwdProblem& p, int64_t b, int64_t s, int64_t r0) {
  return !p.seq_idx.present() || seq_at(p, b, s) == seq_at(p, b, r0);
}

// A run of padding tokens (seq_idx < 0) outputs 0.
bool padding_run(const FwdProblem& p, int64_t b, int64_t r0) { return p.seq_idx.present() && seq_at(p, b, r0) < 0; }

// Taps with segment masking: a tap whose segment differs from the output's is skipped.
void conv_row_seq(int W, const float* xin, const int* seg, const float* w, float bias, float* out, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    const int cur = seg[t + W - 1];
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += seg[t + k] == cur ? w[k] * xin[t + k] : 0.f;
    out[t] = acc;
  }
}

void fwd_time_major(const FwdProblem& p) {
  const int W = p.width;
  const int64_t tiles = (p.seqlen + kTimeTile - 1) / kTimeTile;
  const int64_t rows = p.batch * p.dim;
  const SimdKernels& k = simd();
  const bool seq = p.seq_idx.present(), unit = p.x.strides[2] == 1 && p.out.strides[2] == 1;
  const int64_t es = dtype_size(p.x_dtype);
  const std::vector<std::vector<int64_t>> runs = seq_runs(p.seq_idx, unit ? p.batch : 0, p.seqlen);  // fused only
  const int64_t tile_len = std::min(kTimeTile, p.seqlen);
  parallel_for(rows * tiles, chunk_items(tile_len), [&](int64_t begin, int64_t end) {
    std::vector<float> xin(tile_len + W - 1), out(tile_len);
    std::vector<int> seg(seq ? tile_len + W - 1 : 0);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / tiles, tile = item % tiles;
      const int64_t b = row / p.dim, c = row % p.dim;
      const int64_t t0 = tile * kTimeTile, n = std::min(kTimeTile, p.seqlen - t0);
      float w[CC1D_MAX_WIDTH];
      gather_fn(p.w_dtype)(p.weight.data, c * p.weight.strides[0], p.weight.strides[1], W, w);
      const float bias = p.bias.present() ? load(p.bias.data, p.w_dtype, c * p.bias.strides[0]) : 0.f;
      const int64_t o_off = b * p.out.strides[0] + c * p.out.strides[1] + t0 * p.out.strides[2];
      const TileRuns tr(seq && unit ? &runs[b] : nullptr, t0, n);
      if (unit && tr.fused()) {
        // x read in its dtype, straight into out, a run at a time: only the history goes through floats.
        const char* xrow = static_cast<const char*>(p.x.data) + (b * p.x.strides[0] + c * p.x.strides[1]) * es;
        char* orow = static_cast<char*>(p.out.data) + (o_off - t0) * es;
        tr.each([&](int64_t r0, int64_t r1) {
          if (padding_run(p, b, r0)) return (void)std::fill(orow + r0 * es, orow + r1 * es, char(0));
          for (int i = 0; i < W - 1; ++i) {
            const int64_t s = r0 - (W - 1) + i;
            xin[i] = same_segment(p, b, s, r0) ? x_at(p, b, c, s) : 0.f;
          }
          k.conv_time[W - 1](p.x_dtype, xrow + r0 * es, xin.data(), w, bias, p.silu, orow + r0 * es, r1 - r0);
        });
      } else {
        gather_x(p, b, c, t0 - (W - 1), n + W - 1, xin.data());
        if (seq) {
          for (int64_t i = 0; i < n + W - 1; ++i) seg[i] = seq_at(p, b, t0 - (W - 1) + i);
          conv_row_seq(W, xin.data(), seg.data(), w, bias, out.data(), n);
          if (p.silu) k.silu_inplace(out.data(), n);
          for (int64_t i = 0; i < n; ++i) out[i] = seg[i + W - 1] < 0 ? 0.f : out[i];  // padding tokens
        } else {
          k.conv_time[W - 1](CC1D_FLOAT32, xin.data() + W - 1, xin.data(), w, bias, p.silu, out.data(), n);
        }
        scatter_fn(p.x_dtype)(p.out.data, o_off, p.out.strides[2], n, out.data());
      }
      if (p.final_states.present() && t0 + n == p.seqlen) write_final_states(p, b, c, c + 1);
    }
  });
}

// Short channel-first rows stored back to back (packed_rows.h), each batch row's rows one array.
void fwd_packed(const FwdProblem& p) {
  const SimdKernels& k = simd();
  const int W = p.width, L = k.width;
  const int64_t tile_c = packed_tile_rows(p.dim, p.seqlen, L, kPackedTile);
  const int64_t ctiles = (p.dim + tile_c - 1) / tile_c, ws = p.dim + L;
  const std::vector<float> wt = packed_taps(p, ws);
  const std::vector<int> tab = packed_rows_table(p.seqlen, L);
  const int64_t es = dtype_size(p.x_dtype);
  parallel_for(p.batch * ctiles, chunk_items(tile_c * p.seqlen), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / ctiles, c0 = item % ctiles * tile_c, nc = std::min(tile_c, p.dim - c0);
      const char* x = static_cast<const char*>(p.x.data) + (b * p.x.strides[0] + c0 * p.seqlen) * es;
      char* out = static_cast<char*>(p.out.data) + (b * p.out.strides[0] + c0 * p.seqlen) * es;
      k.conv_packed[W - 1](p.x_dtype, x, p.seqlen, tab.data(), &wt[c0], ws, p.silu, out, nc);
      if (p.final_states.present()) write_final_states(p, b, c0, c0 + nc);
    }
  });
}

// Channel-major tiles of strided channels (channel-first short rows, strided views) or of short
// seq_idx runs: the (time x channels) tile gathered into floats (xin), computed into o, then
// scattered: without seq_idx by the forward's fused SIMD pass over floats, with seq_idx by taps
// vectorised over the floats, each skipping another segment.
void cl_tile_generic(const FwdProblem& p, const SimdKernels& k, int64_t b, int64_t t0, int64_t nt, int64_t c0,
                     int64_t nc, std::vector<float>& xin, std::vector<float>& o, const float* wt, const float* bias) {
  const int W = p.width;
  x_steps(p, b, t0 - (W - 1), nt + W - 1, c0, nc, xin.data());
  o.resize(nt * nc);
  if (!p.seq_idx.present()) {
    k.conv_channels[W - 1](CC1D_FLOAT32, &xin[(W - 1) * nc], nc, xin.data(), wt, bias, p.silu, false, o.data(), nc, nt,
                           nc);
  } else {
    for (int64_t t = 0; t < nt; ++t) {
      float* ot = &o[t * nc];
      const int cur = seq_at(p, b, t0 + t);
      std::copy(bias, bias + nc, ot);
      for (int kk = 0; kk < W; ++kk) {
        if (seq_at(p, b, t0 + t - (W - 1) + kk) != cur) continue;
        const float* xr = &xin[(t + kk) * nc];
        const float* wr = &wt[kk * nc];
        for (int64_t j = 0; j < nc; ++j) ot[j] += wr[j] * xr[j];
      }
      if (p.silu) k.silu_inplace(ot, nc);
      if (cur < 0) std::fill(ot, ot + nc, 0.f);  // a padding token
    }
  }
  put_steps(p.out, p.x_dtype, b, t0, nt, c0, nc, o.data());
}

void fwd_channel_major(const FwdProblem& p) {
  const int W = p.width;
  const int64_t ttiles = (p.seqlen + kCLTimeTile - 1) / kCLTimeTile;
  const int64_t ctiles = (p.dim + kCLChanTile - 1) / kCLChanTile;
  const SimdKernels& k = simd();
  const bool unit = p.x.strides[1] == 1 && p.out.strides[1] == 1;
  const int64_t es = dtype_size(p.x_dtype);
  const std::vector<std::vector<int64_t>> runs = seq_runs(p.seq_idx, unit ? p.batch : 0, p.seqlen);  // fused only
  const bool stream = stream_output(static_cast<size_t>(p.batch * p.dim * p.seqlen * es));
  // A thread takes whole blocks of steps (every channel tile of them) when there are enough for
  // all: two threads writing the same rows of a fresh output fault the same pages (measured:
  // causal_conv1d_fn 4x2048x2048 fp32, 2.3 -> 1.5 ns per output).
  // Every channel tile's taps ([W][nc] floats from W * c0) and bias, staged once per call: per
  // item they were W gathers an element on rows of one step.
  std::vector<float> wt_all(W * p.dim), bias_all(p.dim, 0.f);
  const GatherFn gw = gather_fn(p.w_dtype);
  for (int64_t c0 = 0; c0 < p.dim; c0 += kCLChanTile) {
    const int64_t nc = std::min(kCLChanTile, p.dim - c0);
    for (int kk = 0; kk < W; ++kk)
      gw(p.weight.data, c0 * p.weight.strides[0] + kk * p.weight.strides[1], p.weight.strides[0], nc,
         &wt_all[W * c0 + kk * nc]);
  }
  if (p.bias.present()) gw(p.bias.data, 0, p.bias.strides[0], p.dim, bias_all.data());
  const int64_t tile_t = std::min(kCLTimeTile, p.seqlen), tile_c = std::min(kCLChanTile, p.dim);
  const int64_t grain = chunk_items(tile_t * tile_c, p.batch * ttiles >= 2 * num_threads() ? ctiles : 1);
  parallel_for(p.batch * ttiles * ctiles, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> xin((tile_t + W - 1) * tile_c), o;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t ct = item % ctiles, tt = (item / ctiles) % ttiles, b = item / (ctiles * ttiles);
      const int64_t t0 = tt * kCLTimeTile, nt = std::min(kCLTimeTile, p.seqlen - t0);
      const int64_t c0 = ct * kCLChanTile, nc = std::min(kCLChanTile, p.dim - c0);
      const float *wt = &wt_all[W * c0], *bias = &bias_all[c0];
      const TileRuns tr(p.seq_idx.present() && unit ? &runs[b] : nullptr, t0, nt);
      if (unit && tr.fused()) {
        // x read in its dtype, straight into out, a run at a time: only the history goes through floats.
        const char* x0 = static_cast<const char*>(p.x.data) + (b * p.x.strides[0] + c0) * es;
        char* o0 = static_cast<char*>(p.out.data) + (b * p.out.strides[0] + c0) * es;
        const int64_t xs = p.x.strides[2], os = p.out.strides[2];
        tr.each([&](int64_t r0, int64_t r1) {
          if (padding_run(p, b, r0)) {
            for (int64_t t = r0; t < r1; ++t) std::fill(o0 + t * os * es, o0 + (t * os + nc) * es, char(0));
            return;
          }
          x_steps(p, b, r0 - (W - 1), W - 1, c0, nc, xin.data());  // the history, as floats
          for (int i = 0; i < W - 1; ++i)
            if (!same_segment(p, b, r0 - (W - 1) + i, r0)) std::fill(&xin[i * nc], &xin[(i + 1) * nc], 0.f);
          k.conv_channels[W - 1](p.x_dtype, x0 + r0 * xs * es, xs, xin.data(), wt, bias, p.silu, stream,
                                 o0 + r0 * os * es,
                                 os, r1 - r0, nc);
        });
      } else {
        cl_tile_generic(p, k, b, t0, nt, c0, nc, xin, o, wt, bias);
      }
      if (p.final_states.present() && t0 + nt == p.seqlen) write_final_states(p, b, c0, c0 + nc);
    }
  });
}

}  // namespace

void fwd_cpu(const Problem& problem) {
  const auto& p = static_cast<const FwdProblem&>(problem);
  if (packed_inputs(p) && packed_layout(p.out, p.seqlen))
    fwd_packed(p);
  else if (cpu_time_major(p))
    fwd_time_major(p);
  else
    fwd_channel_major(p);
}

}  // namespace cc1d
