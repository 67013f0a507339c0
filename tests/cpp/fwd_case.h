// fwd_case.h — one forward case through the public C ABI, checked against the float64
// reference: fresh random inputs (segments with padding runs for seq_idx), outputs poisoned with
// NaN, every output and final state compared, and gaps of strided outputs checked untouched.
// Shared by the backend grids (cpu, emulate).
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace cc1d_test {

struct FwdCase {
  int xdt, wdt, width;
  Layout layout;
  int64_t B, D, L;
  bool bias, silu, seq, init, fin;
  int max_segment = 9;  // seq_idx segments of 1..max_segment steps
  bool out_contiguous = false;  // out channel-first contiguous whatever x's layout
};

inline std::string describe(const FwdCase& c) {
  const char* dt[] = {"float32", "float16", "bfloat16"};
  return std::string("x=") + dt[c.xdt] + " w=" + dt[c.wdt] + " W=" + std::to_string(c.width) + " " +
         layout_name(c.layout) + " B,D,L=" + std::to_string(c.B) + "," + std::to_string(c.D) + "," +
         std::to_string(c.L) + (c.bias ? " bias" : "") + (c.silu ? " silu" : "") + (c.seq ? " seq" : "") +
         (c.init ? " init" : "") + (c.fin ? " final" : "") +
         (c.seq ? " segments<=" + std::to_string(c.max_segment) : "") + (c.out_contiguous ? " out contiguous" : "");
}

// Storage elements of `t` that no logical index reaches (gaps of a strided view).
inline std::vector<int64_t> gaps(const HostTensor& t) {
  const int64_t n = static_cast<int64_t>(t.storage.size() / dtype_size(t.t.dtype));
  std::vector<char> used(n, 0);
  for (int64_t i = 0; i < t.t.shape[0]; ++i)
    for (int64_t j = 0; j < t.t.shape[1]; ++j)
      for (int64_t k = 0; k < t.t.shape[2]; ++k) used[t.off({i, j, k})] = 1;
  std::vector<int64_t> g;
  for (int64_t i = 0; i < n; ++i)
    if (!used[i]) g.push_back(i);
  return g;
}

// Runs `c` through `execute(args)`, which must perform the forward the cc1d_fwd_args describe
// (libcc1d's entry point, or a host framework's op on the same memory), then compares.
template <class Execute>
void check_fwd_case(const FwdCase& c, std::mt19937& rng, Execute&& execute) {
  HostTensor x = make_x(c.xdt, c.B, c.D, c.L, c.layout);
  x.randomize(rng);
  HostTensor w = HostTensor::contiguous(c.wdt, {c.D, c.width});
  w.randomize(rng, 0.5);
  HostTensor bias = HostTensor::contiguous(c.wdt, {c.D});
  bias.randomize(rng);
  HostTensor seq = random_segments(c.B, c.L, rng, c.max_segment);
  HostTensor init = HostTensor::contiguous(c.xdt, {c.B, c.D, c.width - 1});
  init.randomize(rng);
  // Outputs mirror x's layout (unless out_contiguous); final states are channel-last-like when
  // x is.
  HostTensor out = make_x(c.xdt, c.B, c.D, c.L, c.out_contiguous ? Layout::ChannelFirst : c.layout);
  out.fill_all(NAN);
  HostTensor fin = c.layout == Layout::ChannelLast
                       ? HostTensor(c.xdt, {c.B, c.D, c.width - 1}, {(c.width - 1) * c.D, 1, c.D})
                       : HostTensor::contiguous(c.xdt, {c.B, c.D, c.width - 1});
  fin.fill_all(NAN);
  const std::vector<unsigned char> out_before = out.storage;

  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.bias = c.bias ? &bias.t : nullptr;
  a.seq_idx = c.seq ? &seq.t : nullptr;
  a.initial_states = c.init ? &init.t : nullptr;
  a.out = &out.t;
  a.final_states = c.fin ? &fin.t : nullptr;
  a.activation = c.silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
  INFO(describe(c));
  execute(a);

  RefInputs in;
  in.x = &x;
  in.w = &w;
  in.bias = c.bias ? &bias : nullptr;
  in.seq = c.seq ? &seq : nullptr;
  in.init = c.init ? &init : nullptr;
  in.silu = c.silu;
  std::vector<double> want_out, want_fin;
  reference_fwd(in, want_out, want_fin);
  const double tol = tolerance(c.xdt);
  const std::string out_diff = compare(out, want_out, tol);
  CHECK_MESSAGE(out_diff == "", "out " << out_diff);
  if (c.fin) {
    const std::string fin_diff = compare(fin, want_fin, tol);
    CHECK_MESSAGE(fin_diff == "", "final_states " << fin_diff);
  }
  const size_t es = dtype_size(c.xdt);
  for (int64_t g : gaps(out))
    REQUIRE_MESSAGE(std::memcmp(&out.storage[g * es], &out_before[g * es], es) == 0, "stray write at element " << g);
}

inline void run_fwd_case(const FwdCase& c, std::mt19937& rng, int backend) {
  check_fwd_case(c, rng, [&](cc1d_fwd_args& a) {
    a.backend = backend;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, std::string(cc1d_last_error()));
  });
}

}  // namespace cc1d_test
