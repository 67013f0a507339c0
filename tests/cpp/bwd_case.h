// bwd_case.h — one backward call through the public C ABI, checked against a float64 reference
// written from the definition (every output t, every tap k): fresh random inputs (segments with
// padding runs for seq_idx), gradients poisoned with NaN, every element compared, storage gaps of
// a strided dx checked untouched. Shared by the backend grids (cpu, emulate) and the fake driver.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "fwd_case.h"
#include "test_support.h"

namespace cc1d_test {

struct BwdCase {
  int xdt, wdt, width;
  Layout layout;
  int64_t B, D, L;
  bool bias, silu, seq, init, dfinal;
  bool dx = true, dweight = true, dbias = true, dinit = true;
  bool deterministic = false;
  int max_segment = 9;  // seq_idx segments of 1..max_segment steps
  bool dout_contiguous = false;  // else dout takes x's layout, as autograd hands it over
};

inline std::string describe(const BwdCase& c) {
  const char* dt[] = {"float32", "float16", "bfloat16"};
  return std::string("bwd x=") + dt[c.xdt] + " w=" + dt[c.wdt] + " W=" + std::to_string(c.width) + " " +
         layout_name(c.layout) + " B,D,L=" + std::to_string(c.B) + "," + std::to_string(c.D) + "," +
         std::to_string(c.L) + (c.bias ? " bias" : "") + (c.silu ? " silu" : "") + (c.seq ? " seq<=" + std::to_string(c.max_segment) : "") +
         (c.init ? " init" : "") + (c.dfinal ? " dfinal" : "") + " wants:" + (c.dx ? " dx" : "") +
         (c.dweight ? " dweight" : "") + (c.dbias ? " dbias" : "") + (c.dinit ? " dinit" : "") +
         (c.deterministic ? " deterministic" : "") + (c.dout_contiguous ? " dout contiguous" : "");
}

// float64 gradients and, per element, the sum of the magnitudes of the terms that make it up
// (which scales the rounding error of a float computation).
struct BwdReference {
  std::vector<double> dx, dx_mag, dinit, dinit_mag, dw, dw_mag, db, db_mag;
};

struct BwdRun {
  BwdCase c;
  HostTensor x, w, bias, seq, init, dout, dfinal, dx, dweight, dbias, dinit;
  cc1d_bwd_args a{};

  BwdRun(const BwdCase& cs, std::mt19937& rng) : c(cs) {
    const int W = c.width;
    x = make_x(c.xdt, c.B, c.D, c.L, c.layout);
    x.randomize(rng);
    w = HostTensor::contiguous(c.wdt, {c.D, W});
    w.randomize(rng, 0.5);
    bias = HostTensor::contiguous(c.wdt, {c.D});
    bias.randomize(rng);
    seq = random_segments(c.B, c.L, rng, c.max_segment);
    init = HostTensor::contiguous(c.xdt, {c.B, c.D, W - 1});
    init.randomize(rng);
    dout = make_x(c.xdt, c.B, c.D, c.L, c.dout_contiguous ? Layout::ChannelFirst : c.layout);
    dout.randomize(rng);
    // dfinal_states like final states: channel-last when x is.
    dfinal = c.layout == Layout::ChannelLast ? HostTensor(c.xdt, {c.B, c.D, W - 1}, {(W - 1) * c.D, 1, c.D})
                                             : HostTensor::contiguous(c.xdt, {c.B, c.D, W - 1});
    dfinal.randomize(rng);
    dx = make_x(c.xdt, c.B, c.D, c.L, c.layout);
    dweight = HostTensor::contiguous(c.wdt, {c.D, W});
    dbias = HostTensor::contiguous(c.wdt, {c.D});
    dinit = c.layout == Layout::ChannelLast ? HostTensor(c.xdt, {c.B, c.D, W - 1}, {(W - 1) * c.D, 1, c.D})
                                            : HostTensor::contiguous(c.xdt, {c.B, c.D, W - 1});
    for (HostTensor* t : {&dx, &dweight, &dbias, &dinit}) t->fill_all(NAN);
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.weight = &w.t;
    a.bias = c.bias ? &bias.t : nullptr;
    a.seq_idx = c.seq ? &seq.t : nullptr;
    a.initial_states = c.init ? &init.t : nullptr;
    a.dout = &dout.t;
    a.dfinal_states = c.dfinal ? &dfinal.t : nullptr;
    a.dx = c.dx ? &dx.t : nullptr;
    a.dweight = c.dweight ? &dweight.t : nullptr;
    a.dbias = c.dbias ? &dbias.t : nullptr;
    a.dinitial_states = c.dinit ? &dinit.t : nullptr;
    a.activation = c.silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
    a.deterministic = c.deterministic ? 1 : 0;
  }

  BwdReference reference() const {
    const int64_t B = c.B, D = c.D, L = c.L;
    const int W = c.width;
    BwdReference r;
    r.dx.assign(B * D * L, 0.0);
    r.dx_mag = r.dx;
    r.dinit.assign(B * D * (W - 1), 0.0);
    r.dinit_mag = r.dinit;
    r.dw.assign(D * W, 0.0);
    r.dw_mag = r.dw;
    r.db.assign(D, 0.0);
    r.db_mag = r.db;
    auto xs = [&](int64_t b, int64_t d, int64_t s) -> double {
      if (s >= 0) return x.get(x.off({b, d, s}));
      return c.init ? init.get(init.off({b, d, W - 1 + s})) : 0.0;
    };
    auto sq = [&](int64_t b, int64_t s) -> int64_t {
      return c.seq ? static_cast<int64_t>(seq.get(seq.off({b, std::max<int64_t>(s, 0)}))) : 0;
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t d = 0; d < D; ++d) {
        // dxs[s + W-1] for s in [-(W-1), L)
        std::vector<double> dxs(L + W - 1, 0.0), mag(L + W - 1, 0.0);
        for (int64_t t = 0; t < L; ++t) {
          const int64_t cur = sq(b, t);
          if (cur < 0) continue;  // a padding token: its output is constant 0
          double z = c.bias ? bias.get(d) : 0.0;
          for (int k = 0; k < W; ++k)
            if (sq(b, t - W + 1 + k) == cur) z += w.get(w.off({d, k})) * xs(b, d, t - W + 1 + k);
          const double dy = dout.get(dout.off({b, d, t}));
          double g = dy, gmag = std::fabs(dy);
          if (c.silu) {
            // silu'(z) = s (1 + z (1 - s)) cancels near z = -1.28: its rounding scales with the
            // terms, and an error of z (fp32 sums, scale zmag) moves it by at most |silu''| <= 1/2.
            double zmag = c.bias ? std::fabs(bias.get(d)) : 0.0;
            for (int k = 0; k < W; ++k)
              if (sq(b, t - W + 1 + k) == cur) zmag += std::fabs(w.get(w.off({d, k})) * xs(b, d, t - W + 1 + k));
            const double s = 1.0 / (1.0 + std::exp(-z));
            g *= s * (1.0 + z * (1.0 - s));
            gmag *= s * (1.0 + std::fabs(z) * (1.0 - s)) + 0.5 * zmag;
          }
          r.db[d] += g;
          r.db_mag[d] += gmag;
          for (int k = 0; k < W; ++k) {
            const int64_t s = t - W + 1 + k;
            if (sq(b, s) != cur) continue;
            const double wk = w.get(w.off({d, k}));
            dxs[s + W - 1] += wk * g;
            mag[s + W - 1] += std::fabs(wk) * gmag;
            r.dw[d * W + k] += g * xs(b, d, s);
            r.dw_mag[d * W + k] += gmag * std::fabs(xs(b, d, s));
          }
        }
        if (c.dfinal)
          for (int j = 0; j < W - 1; ++j) {
            const double v = dfinal.get(dfinal.off({b, d, j}));
            dxs[L + j] += v;  // final state j is x at L-(W-1)+j, i.e. dxs index L+j
            mag[L + j] += std::fabs(v);
          }
        for (int64_t t = 0; t < L; ++t) {
          r.dx[(b * D + d) * L + t] = dxs[t + W - 1];
          r.dx_mag[(b * D + d) * L + t] = mag[t + W - 1];
        }
        for (int j = 0; j < W - 1; ++j) {
          r.dinit[(b * D + d) * (W - 1) + j] = dxs[j];
          r.dinit_mag[(b * D + d) * (W - 1) + j] = mag[j];
        }
      }
    return r;
  }
};

// |got - want| <= tol * |want| + acc * magnitude + spacing: the output's rounding to its dtype,
// the fp32 arithmetic on terms of that magnitude, and the dtype's subnormal spacing. NaN (an
// unwritten element) fails.
inline bool close(double got, double want, double mag, int dtype) {
  const double spacing = dtype == CC1D_FLOAT16 ? 5.97e-8 : dtype == CC1D_BFLOAT16 ? 9.2e-41 : 1.5e-45;
  return std::fabs(got - want) <= tolerance(dtype) * std::fabs(want) + 3e-5 * mag + spacing;
}

inline void check_bwd(const BwdRun& r, const BwdReference& ref) {
  const BwdCase& c = r.c;
  const int W = c.width;
  if (c.dx)
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t d = 0; d < c.D; ++d)
        for (int64_t t = 0; t < c.L; ++t) {
          const size_t i = (b * c.D + d) * c.L + t;
          const double got = r.dx.get(r.dx.off({b, d, t}));
          REQUIRE_MESSAGE(close(got, ref.dx[i], ref.dx_mag[i], c.xdt),
                          "dx[" << b << "," << d << "," << t << "] = " << got << ", want " << ref.dx[i]);
        }
  if (c.dinit)
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t d = 0; d < c.D; ++d)
        for (int j = 0; j < W - 1; ++j) {
          const size_t i = (b * c.D + d) * (W - 1) + j;
          const double got = r.dinit.get(r.dinit.off({b, d, j}));
          REQUIRE_MESSAGE(close(got, ref.dinit[i], ref.dinit_mag[i], c.xdt),
                          "dinitial_states[" << b << "," << d << "," << j << "] = " << got << ", want " << ref.dinit[i]);
        }
  for (int64_t d = 0; d < c.D; ++d) {
    if (c.dweight)
      for (int k = 0; k < W; ++k) {
        const double got = r.dweight.get(r.dweight.off({d, k}));
        REQUIRE_MESSAGE(close(got, ref.dw[d * W + k], ref.dw_mag[d * W + k], c.wdt),
                        "dweight[" << d << "," << k << "] = " << got << ", want " << ref.dw[d * W + k]);
      }
    if (c.dbias) {
      const double got = r.dbias.get(d);
      REQUIRE_MESSAGE(close(got, ref.db[d], ref.db_mag[d], c.wdt), "dbias[" << d << "] = " << got << ", want " << ref.db[d]);
    }
  }
  // Gradients not asked for are not written.
  for (auto [wanted, t, name] : {std::tuple{c.dx, &r.dx, "dx"}, std::tuple{c.dweight, &r.dweight, "dweight"},
                                 std::tuple{c.dbias, &r.dbias, "dbias"}, std::tuple{c.dinit, &r.dinit, "dinitial_states"}})
    if (!wanted)
      for (int64_t i = 0; i < static_cast<int64_t>(t->storage.size() / dtype_size(t->t.dtype)); ++i)
        REQUIRE_MESSAGE(std::isnan(t->get(i)), name << " was written though not asked for");
}

// Runs `c` on `backend` and compares everything; returns the run (for bitwise comparisons).
inline BwdRun run_bwd_case(const BwdCase& c, std::mt19937& rng, int backend) {
  BwdRun r(c, rng);
  r.a.backend = backend;
  INFO(describe(c));
  const std::vector<unsigned char> dx_before = r.dx.storage;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd(&r.a) == CC1D_OK, std::string(cc1d_last_error()));
  check_bwd(r, r.reference());
  const size_t es = dtype_size(c.xdt);
  for (int64_t g : gaps(r.dx))
    REQUIRE_MESSAGE(std::memcmp(&r.dx.storage[g * es], &dx_before[g * es], es) == 0, "stray write at dx element " << g);
  return r;
}

// The grid every backward backend runs: dtype pairs x widths x seven kinds of case, one per kernel
// layout, the options and lengths varying with the case. Channel-first rows are padded to 16-byte
// aligned strides (the time_vec warp walk, which has no seq_idx), with lengths that end inside a
// lane's 8 steps, inside and on a warp step's 256, 2 steps into the next (dfinal_states' steps
// in two warp steps from W = 4), and span several segments (over 1024 steps);
// the strided view has odd lengths and a contiguous dout (rows x's and dout's offsets mod 16 bytes
// differ: the scalar time path; the view with seq_idx keeps dout's layout); channel-last
// takes odd and tiny lengths, with dims that are no multiple of 8 (the scalar channel walk) or
// are (kind 5: the tiles of channel_vec, one and several blocks of channels, the last one partly
// beyond dim; kind 6: the same with seq_idx, channel_vec_seq, on segments of up to 9 steps, where
// most warps take the masked copy, or up to 300, where most take the unmasked one).
// The view and channel-last run once without seq_idx and once with it (the _seq layouts). One
// length per layout is above 4096. max_len caps the lengths (the sanitizer job: every variant
// still runs, on shorter rows).
constexpr int kBwdGridKinds = 7;
inline int run_bwd_grid(int backend, std::mt19937& rng, int64_t max_len = INT64_MAX) {
  int n = 0;
  for (int xdt = 0; xdt < 3; ++xdt)
    for (int wdt = 0; wdt < 3; ++wdt)
      for (int W = 1; W <= CC1D_MAX_WIDTH; ++W)
        for (int kind = 0; kind < kBwdGridKinds; ++kind) {
          const Layout layout = kind == 0                 ? Layout::Padded
                                : kind <= 2 || kind >= 5 ? Layout::ChannelLast
                                                          : Layout::View;
          const int cell = (xdt * 3 + wdt) * (CC1D_MAX_WIDTH + 1) + W, i = cell * kBwdGridKinds + kind;
          const int h = cell + kind;  // picks lengths and dims (i is kind modulo the kinds)
          int64_t L = 0, D = 0;
          if (layout == Layout::Padded) {
            L = W == 6 ? 4104 : std::vector<int64_t>{2, 5, 258, 37, 256, 1001, 1025, 2048}[h % 8];
            D = std::vector<int64_t>{1, 3, 5}[h % 3];
          } else if (layout == Layout::View) {
            L = W == 5 ? 4099 : std::vector<int64_t>{3, 7, 37, 131, 1001}[h % 5];
            D = std::vector<int64_t>{1, 3, 5}[h % 3];
          } else if (kind >= 5) {
            L = W == 3 + kind - 5 ? 4099 : std::vector<int64_t>{1, 2, 5, 33, 100, 700, 2049}[h % 7];
            D = std::vector<int64_t>{8, 72, 136}[h % 3];
          } else {
            L = W == 7 ? 4097 : std::vector<int64_t>{1, 2, 3, 7, 37, 130, 1001, 2049}[h % 8];
            D = std::vector<int64_t>{3, 41, 130}[h % 3];
          }
          L = std::min(L, max_len);
          BwdCase c{xdt, wdt, W, layout, 2, D, L, i % 2 == 0, (i / 2) % 2 == 0, (i / 3) % 3 == 0, (i / 5) % 2 == 0,
                    (i / 7) % 2 == 0};
          c.seq = kind == 2 || kind == 4 || kind == 6;  // the vector path (kind 0) takes no seq_idx
          c.dout_contiguous = kind == 3;
          c.max_segment = kind == 6 && h % 2 == 0 ? 300 : 9;
          c.dx = i % 11 != 3;
          c.dweight = i % 13 != 5;
          c.dbias = i % 7 != 2;
          c.dinit = (i / 4) % 3 != 0;
          c.deterministic = (i / 11) % 2 == 1;
          run_bwd_case(c, rng, backend);
          ++n;
        }
  return n;
}

}  // namespace cc1d_test
