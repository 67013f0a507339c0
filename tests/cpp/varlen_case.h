// varlen_case.h — one varlen-states call through the public C ABI, checked against a float64
// reference: fresh random x and cu_seqlens (empty sequences, sequences shorter and longer than
// state_len, unused tokens before the first and after the last sequence), out poisoned with NaN,
// every element of out compared exactly (the op copies bits; zeros must be +0.0).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_support.h"

namespace cc1d_test {

// x layouts: rows (total, dim) contiguous; a view of every other channel of a wider tensor;
// channel-major (a (dim, total) tensor transposed); rows padded by 8 elements (16-byte rows).
enum class VarlenX { Rows, EveryOther, ChannelMajor, Padded };
// out layouts: upstream's (empty(batch, state_len, dim).transpose(1, 2)), or (batch, dim, state_len)
// contiguous.
enum class VarlenOut { Upstream, Contiguous };

struct VarlenCase {
  int dtype;
  int64_t batch, dim, state_len;
  VarlenX x_layout = VarlenX::Rows;
  VarlenOut out_layout = VarlenOut::Upstream;
  bool cu_strided = false;  // cu_seqlens as every other element of a longer tensor
  int64_t min_lead = 0;     // at least this many unused tokens before the first sequence
};

inline std::string describe(const VarlenCase& c) {
  const char* dt[] = {"float32", "float16", "bfloat16"};
  const char* xl[] = {"rows", "every-other-channel", "channel-major", "padded-rows"};
  return std::string("dtype=") + dt[c.dtype] + " batch=" + std::to_string(c.batch) + " dim=" + std::to_string(c.dim) +
         " state_len=" + std::to_string(c.state_len) + " x=" + xl[static_cast<int>(c.x_layout)] +
         (c.out_layout == VarlenOut::Upstream ? " out=upstream" : " out=contiguous") +
         (c.cu_strided ? " cu-strided" : "");
}

// Random lengths: about a fifth empty, the others below, at or above state_len.
inline std::vector<int64_t> random_lengths(int64_t batch, int64_t state_len, std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 4);
  std::uniform_int_distribution<int64_t> shorter(1, std::max<int64_t>(1, state_len - 1)), longer(state_len, 3 * state_len + 4);
  std::vector<int64_t> len(batch);
  for (int64_t& n : len) {
    const int k = kind(rng);
    n = k == 0 ? 0 : k == 1 ? shorter(rng) : k == 2 ? state_len : longer(rng);
  }
  return len;
}

struct VarlenRun {
  HostTensor x, cu, out;
  int64_t total = 0;
  cc1d_varlen_states_args a{};

  VarlenRun(const VarlenCase& c, std::mt19937& rng) {
    const std::vector<int64_t> len = random_lengths(c.batch, c.state_len, rng);
    std::uniform_int_distribution<int64_t> slack(0, 3);
    const int64_t lead = c.min_lead + slack(rng);  // tokens before the first sequence (cu_seqlens[0] > 0)
    int64_t sum = lead;
    for (int64_t n : len) sum += n;
    total = sum + slack(rng);  // and after the last
    const int64_t T = total, D = c.dim;
    switch (c.x_layout) {
      case VarlenX::EveryOther: x = HostTensor(c.dtype, {T, D}, {2 * D, 2}); break;
      case VarlenX::ChannelMajor: x = HostTensor(c.dtype, {T, D}, {1, std::max<int64_t>(T, 1)}); break;
      case VarlenX::Padded: x = HostTensor(c.dtype, {T, D}, {D + 8, 1}); break;
      default: x = HostTensor::contiguous(c.dtype, {T, D});
    }
    x.randomize(rng);
    const int64_t cs = c.cu_strided ? 2 : 1;
    cu = HostTensor(CC1D_INT32, {c.batch + 1}, {cs});
    cu.fill_all(-7);  // the gaps of a strided cu_seqlens must not be read
    int64_t at = lead;
    cu.set(0, static_cast<double>(at));
    for (int64_t b = 0; b < c.batch; ++b) cu.set((b + 1) * cs, static_cast<double>(at += len[b]));
    const int64_t B = c.batch, S = c.state_len;
    out = c.out_layout == VarlenOut::Upstream ? HostTensor(c.dtype, {B, D, S}, {S * D, 1, D})
                                              : HostTensor::contiguous(c.dtype, {B, D, S});
    out.fill_all(NAN);
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.cu_seqlens = &cu.t;
    a.out = &out.t;
  }

  int64_t cu_at(int64_t i) const { return static_cast<int64_t>(cu.get(cu.off({i}))); }

  // float64 reference (batch, dim, state_len), row-major.
  std::vector<double> reference() const {
    const int64_t B = out.t.shape[0], D = out.t.shape[1], S = out.t.shape[2];
    std::vector<double> want(B * D * S, 0.0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t begin = cu_at(b), end = cu_at(b + 1), n = std::min(end - begin, S);
      for (int64_t j = 0; j < n; ++j)  // token end-n+j goes to slot S-n+j
        for (int64_t d = 0; d < D; ++d) want[(b * D + d) * S + S - n + j] = x.get(x.off({end - n + j, d}));
    }
    return want;
  }
};

// Runs `c` through `execute(run)` (libcc1d's entry point, or a host framework's op on the same
// memory) and compares every element of out exactly.
template <class Execute>
void check_varlen_case(const VarlenCase& c, std::mt19937& rng, Execute&& execute) {
  VarlenRun r(c, rng);
  INFO(describe(c) << " total=" << r.total);
  const std::vector<double> want = r.reference();
  execute(r);
  const int64_t D = c.dim, S = c.state_len;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t s = 0; s < S; ++s) {
        const double got = r.out.get(r.out.off({b, d, s})), w = want[(b * D + d) * S + s];
        REQUIRE_MESSAGE((got == w && std::signbit(got) == std::signbit(w)),
                        "out[" << b << "," << d << "," << s << "] = " << got << ", want " << w
                               << " (cu_seqlens[b] = " << r.cu_at(b) << ", cu_seqlens[b+1] = " << r.cu_at(b + 1)
                               << ")");
      }
}

// The grid every backend runs: each dtype with every x and out layout, dims that do and do not
// fill 16-byte vectors, state lengths from 1 up.
template <class Execute>
void run_varlen_grid(uint32_t salt, Execute&& execute) {
  std::mt19937 rng = test_rng(salt);
  int n = 0;
  for (int dt = 0; dt < 3; ++dt)
    for (int xl = 0; xl < 4; ++xl)
      for (int ol = 0; ol < 2; ++ol) {
        const int i = dt * 8 + xl * 2 + ol;
        const int64_t D = std::vector<int64_t>{1, 5, 8, 40, 64, 136}[i % 6];
        const int64_t S = std::vector<int64_t>{1, 3, 4, 7}[(i / 2) % 4];
        const int64_t B = std::vector<int64_t>{1, 6, 13}[i % 3];
        check_varlen_case(VarlenCase{dt, B, D, S, static_cast<VarlenX>(xl), static_cast<VarlenOut>(ol), i % 5 == 2},
                          rng, execute);
        ++n;
      }
  CHECK(n == 24);
  // Many sequences, long states, fp32 rows of whole vectors, and no sequence at all.
  check_varlen_case(VarlenCase{CC1D_FLOAT16, 70, 24, 3}, rng, execute);
  check_varlen_case(VarlenCase{CC1D_BFLOAT16, 3, 16, 37}, rng, execute);
  check_varlen_case(VarlenCase{CC1D_FLOAT32, 9, 36, 5}, rng, execute);  // the 16-byte path of fp32
  check_varlen_case(VarlenCase{CC1D_FLOAT32, 0, 16, 4}, rng, execute);
}

// The executor of a call through the C ABI on `backend`.
inline auto varlen_through_c_abi(int backend) {
  return [backend](VarlenRun& r) {
    r.a.backend = backend;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_varlen_states(&r.a) == CC1D_OK, std::string(cc1d_last_error()));
  };
}

}  // namespace cc1d_test
