// update_case.h — one decode-step update through the public C ABI, checked against a float64
// reference: fresh random inputs and state, outputs poisoned with NaN, every output and every
// state element compared (rows and slots the call must not touch compared bitwise).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "test_support.h"

namespace cc1d_test {

struct UpdateCase {
  int xdt, wdt, width;
  int64_t B, D, L, state_len;
  bool circular, gather, state_channel_last, x_2d, bias, silu;
  bool state_strided = false;  // state rows strided along time (2) and channels (2S+1)
  // A 3-D x contiguous (each channel's tokens back to back) and out channel-last; else the reverse.
  bool x_tokens = false;
  bool out_strided = false;  // out's channels two elements apart (unless x_tokens)
};

inline std::string describe(const UpdateCase& c) {
  const char* dt[] = {"float32", "float16", "bfloat16"};
  return std::string("x=") + dt[c.xdt] + " w=" + dt[c.wdt] + " W=" + std::to_string(c.width) + " B,D,L=" +
         std::to_string(c.B) + "," + std::to_string(c.D) + "," + std::to_string(c.L) + " state_len=" +
         std::to_string(c.state_len) + (c.circular ? " circular" : " shift") + (c.gather ? " gather" : "") +
         (c.state_channel_last ? " state-channel-last" : "") + (c.state_strided ? " state-strided" : "") +
         (c.x_tokens ? " x-tokens" : "") + (c.out_strided ? " out-strided" : "") + (c.x_2d ? " x-2d" : "") +
         (c.bias ? " bias" : "") + (c.silu ? " silu" : "");
}

// float64 reference of the update for tensors of any strides: out (B, D, L) and the whole state
// pool after the call (pool, D, S), both row-major. x has rank 2 (B, D) or 3 (B, D, L).
inline void reference_update(const HostTensor& x, int x_rank, const HostTensor& state, const HostTensor& w,
                             const HostTensor* bias, const HostTensor* cache, const HostTensor* indices, bool silu,
                             std::vector<double>& want_out, std::vector<double>& want_state) {
  const int64_t B = x.t.shape[0], D = x.t.shape[1], L = x_rank == 3 ? x.t.shape[2] : 1;
  const int64_t pool = state.t.shape[0], S = state.t.shape[2];
  const int W = static_cast<int>(w.t.shape[1]);
  want_out.assign(B * D * L, 0.0);
  want_state.resize(pool * D * S);
  for (int64_t r = 0; r < pool; ++r)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t s = 0; s < S; ++s) want_state[(r * D + d) * S + s] = state.get(state.off({r, d, s}));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row = indices ? static_cast<int64_t>(indices->get(indices->off({b}))) : b;
    const int64_t cs = cache ? static_cast<int64_t>(cache->get(cache->off({b}))) : 0;
    if (row < 0 || row >= pool || cs < 0) continue;  // padding: outputs 0, state untouched
    for (int64_t d = 0; d < D; ++d) {
      const double* st = &want_state[(row * D + d) * S];
      // The token sequence: the W-1 state values before the first new token, then x.
      std::vector<double> seq;
      for (int i = 0; i < W - 1; ++i) {
        const int64_t pos = cache ? ((cs - (W - 1) + i) % S + S) % S : S - (W - 1) + i;
        seq.push_back(st[pos]);
      }
      for (int64_t t = 0; t < L; ++t) seq.push_back(x.get(x_rank == 2 ? x.off({b, d}) : x.off({b, d, t})));
      for (int64_t t = 0; t < L; ++t) {
        double acc = bias ? bias->get(bias->off({d})) : 0.0;
        for (int k = 0; k < W; ++k) acc += w.get(w.off({d, k})) * seq[t + k];
        if (silu) acc = acc / (1.0 + std::exp(-acc));
        want_out[(b * D + d) * L + t] = acc;
      }
      std::vector<double> next(st, st + S);
      if (cache) {
        for (int64_t t = 0; t < L; ++t) next[(cs + t) % S] = seq[W - 1 + t];
      } else {
        std::vector<double> cat(st, st + S);
        cat.insert(cat.end(), seq.begin() + (W - 1), seq.end());
        std::copy(cat.end() - S, cat.end(), next.begin());
      }
      std::copy(next.begin(), next.end(), want_state.begin() + (row * D + d) * S);
    }
  }
}

struct UpdateRun {
  HostTensor x, w, bias, state, cache, indices, out;
  int64_t pool = 0;
  cc1d_update_args a{};

  UpdateRun(const UpdateCase& c, std::mt19937& rng) {
    const int64_t B = c.B, D = c.D, L = c.L, S = c.state_len;
    x = c.x_2d       ? HostTensor::contiguous(c.xdt, {B, D})
        : c.x_tokens ? HostTensor::contiguous(c.xdt, {B, D, L})
                     : HostTensor(c.xdt, {B, D, L}, {D * L, 1, D});
    x.randomize(rng);
    w = HostTensor::contiguous(c.wdt, {D, c.width});
    w.randomize(rng, 0.5);
    bias = HostTensor::contiguous(c.wdt, {D});
    bias.randomize(rng);
    pool = c.gather ? B + 3 : B;
    state = c.state_strided        ? HostTensor(c.xdt, {pool, D, S}, {D * (2 * S + 1), 2 * S + 1, 2})
            : c.state_channel_last ? HostTensor(c.xdt, {pool, D, S}, {S * D, 1, D})
                                   : HostTensor::contiguous(c.xdt, {pool, D, S});
    state.randomize(rng);
    cache = HostTensor::contiguous(CC1D_INT32, {B});
    std::uniform_int_distribution<int> cs(0, 3 * static_cast<int>(S) + 5);
    for (int64_t b = 0; b < B; ++b) cache.set(b, cs(rng));
    indices = HostTensor::contiguous(CC1D_INT32, {B});
    std::vector<int> slots(pool);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t b = 0; b < B; ++b) indices.set(b, b % 3 == 1 ? -1 : slots[b]);  // every third row: padding
    // out_strided: out's channels two elements apart.
    const int64_t oc = c.out_strided ? 2 : 1;
    out = c.x_2d       ? HostTensor(c.xdt, {B, D}, {oc * D, oc})
          : c.x_tokens ? HostTensor(c.xdt, {B, D, L}, {D * L, 1, D})
                       : HostTensor(c.xdt, {B, D, L}, {oc * D * L, oc * L, 1});
    out.fill_all(NAN);
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.conv_state = &state.t;
    a.weight = &w.t;
    a.bias = c.bias ? &bias.t : nullptr;
    a.cache_seqlens = c.circular ? &cache.t : nullptr;
    a.conv_state_indices = c.gather ? &indices.t : nullptr;
    a.out = &out.t;
    a.activation = c.silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
  }

  void reference(const UpdateCase& c, std::vector<double>& want_out, std::vector<double>& want_state) const {
    reference_update(x, c.x_2d ? 2 : 3, state, w, c.bias ? &bias : nullptr, c.circular ? &cache : nullptr,
                     c.gather ? &indices : nullptr, c.silu, want_out, want_state);
  }
};

// Runs `c` through `execute(run)`, which must perform the update run.a describes (libcc1d's
// entry point, or a host framework's op on the same memory), and compares everything.
template <class Execute>
void check_update_case(const UpdateCase& c, std::mt19937& rng, Execute&& execute) {
  UpdateRun r(c, rng);
  INFO(describe(c));
  std::vector<double> want_out, want_state;
  r.reference(c, want_out, want_state);
  execute(r);
  const double tol = tolerance(c.xdt);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t t = 0; t < c.L; ++t) {
        const double got = r.out.get(c.x_2d ? r.out.off({b, d}) : r.out.off({b, d, t}));
        const double want = want_out[(b * c.D + d) * c.L + t];
        REQUIRE_MESSAGE(std::fabs(got - want) <= tol * (1.0 + std::fabs(want)),
                        "out[" << b << "," << d << "," << t << "] = " << got << ", want " << want);
      }
  // The state holds x's values unconverted: exact equality, including untouched rows.
  for (int64_t p = 0; p < r.pool; ++p)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t s = 0; s < c.state_len; ++s) {
        const double got = r.state.get(r.state.off({p, d, s}));
        const double want = want_state[(p * c.D + d) * c.state_len + s];
        REQUIRE_MESSAGE(got == want, "conv_state[" << p << "," << d << "," << s << "] = " << got << ", want " << want);
      }
}

// The grid every update backend runs: dtype pairs x widths, with modes, layouts and lengths
// varying with the case. `execute` as for check_update_case; `salt` seeds the inputs.
template <class Execute>
void run_update_grid(uint32_t salt, Execute&& execute) {
  std::mt19937 rng = test_rng(salt);
  int n = 0;
  for (int xdt = 0; xdt < 3; ++xdt)
    for (int wdt = 0; wdt < 3; ++wdt)
      for (int W = 1; W <= CC1D_MAX_WIDTH; ++W) {
        const int i = xdt * 27 + wdt * 9 + W;
        const int64_t L = std::vector<int64_t>{1, 1, 2, 3, 5, 9}[i % 6];
        const int64_t S = std::max<int64_t>(1, W - 1 + (i % 3 == 0 ? 0 : i % 4 + 1));
        const int64_t D = std::vector<int64_t>{1, 5, 33, 130}[(i / 2) % 4];
        UpdateCase c{xdt, wdt, W, 4, D, L, S, (i / 3) % 2 == 1, (i / 5) % 2 == 0, i % 2 == 1, L == 1 && i % 4 < 2,
                     i % 3 != 1, (i / 7) % 2 == 0};
        check_update_case(c, rng, execute);
        ++n;
      }
  CHECK(n == 9 * CC1D_MAX_WIDTH);
  // Every mode and layout combination at one width, and tokens beyond the state's length.
  for (int mode = 0; mode < 16; ++mode)
    check_update_case(UpdateCase{CC1D_FLOAT32, CC1D_FLOAT32, 4, 3, 7, mode % 2 ? 11 : 2, 5, (mode & 2) != 0,
                                 (mode & 4) != 0, (mode & 8) != 0, false, true, true},
                      rng, execute);
}

// The executor of a call through the C ABI on `backend`.
inline auto through_c_abi(int backend) {
  return [backend](UpdateRun& r) {
    r.a.backend = backend;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, std::string(cc1d_last_error()));
  };
}

inline void run_update_case(const UpdateCase& c, std::mt19937& rng, int backend) {
  check_update_case(c, rng, through_c_abi(backend));
}

inline void run_update_grid(int backend) { run_update_grid(500 + backend, through_c_abi(backend)); }

}  // namespace cc1d_test
