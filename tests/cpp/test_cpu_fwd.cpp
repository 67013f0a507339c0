// The CPU backend against the float64 reference over the whole grid: 9 dtype pairs, widths 1..8,
// three layouts, odd and long lengths, bias/silu/seq_idx/initial/final states. Outputs are
// poisoned with NaN first, so an unwritten element fails.
#include <doctest/doctest.h>

#include "test_support.h"

using namespace cc1d_test;

namespace {

struct Case {
  int xdt, wdt, width;
  Layout layout;
  int64_t B, D, L;
  bool bias, silu, seq, init, fin;
};

std::string describe(const Case& c) {
  const char* lay[] = {"channel-first", "channel-last", "view"};
  return std::string("x=") + std::to_string(c.xdt) + " w=" + std::to_string(c.wdt) + " W=" + std::to_string(c.width) +
         " " + lay[int(c.layout)] + " B,D,L=" + std::to_string(c.B) + "," + std::to_string(c.D) + "," +
         std::to_string(c.L) + (c.bias ? " bias" : "") + (c.silu ? " silu" : "") + (c.seq ? " seq" : "") +
         (c.init ? " init" : "") + (c.fin ? " final" : "");
}

void run_case(const Case& c, std::mt19937& rng, int backend = CC1D_BACKEND_CPU) {
  HostTensor x = make_x(c.xdt, c.B, c.D, c.L, c.layout);
  x.randomize(rng);
  HostTensor w = HostTensor::contiguous(c.wdt, {c.D, c.width});
  w.randomize(rng, 0.5);
  HostTensor bias = HostTensor::contiguous(c.wdt, {c.D});
  bias.randomize(rng);
  HostTensor seq = HostTensor::contiguous(CC1D_INT32, {c.B, c.L});
  {
    // Segments of random length, with padding (-1) runs.
    std::uniform_int_distribution<int> len(1, 9), pad(0, 4);
    for (int64_t b = 0; b < c.B; ++b) {
      int id = 0;
      for (int64_t t = 0; t < c.L;) {
        const int n = len(rng);
        const int v = pad(rng) == 0 ? -1 : id++;
        for (int i = 0; i < n && t < c.L; ++i, ++t) seq.set(seq.off({b, t}), v);
      }
    }
  }
  HostTensor init = HostTensor::contiguous(c.xdt, {c.B, c.D, c.width - 1});
  init.randomize(rng);
  // Outputs mirror x's layout; final states are channel-last-like when x is.
  HostTensor out = make_x(c.xdt, c.B, c.D, c.L, c.layout);
  out.fill_all(NAN);
  HostTensor fin = c.layout == Layout::ChannelLast
                       ? HostTensor(c.xdt, {c.B, c.D, c.width - 1}, {(c.width - 1) * c.D, 1, c.D})
                       : HostTensor::contiguous(c.xdt, {c.B, c.D, c.width - 1});
  fin.fill_all(NAN);

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
  a.backend = backend;
  INFO(describe(c));
  REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, std::string(cc1d_last_error()));

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
  CHECK_MESSAGE(compare(out, want_out, tol) == "", "out " << compare(out, want_out, tol));
  if (c.fin) CHECK_MESSAGE(compare(fin, want_fin, tol) == "", "final_states " << compare(fin, want_fin, tol));
}

}  // namespace

TEST_CASE("cpu forward matches the float64 reference over the grid") {
  std::mt19937 rng(std::random_device{}());
  const int dts[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  const int64_t lens[] = {1, 2, 7, 37, 301};
  int combo = 0;
  for (int xdt : dts)
    for (int wdt : dts)
      for (int width = 1; width <= 8; ++width)
        for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View})
          for (int64_t L : lens) {
            // Cycle through the 32 option combinations so each appears for every dtype pair.
            const int m = combo++ % 32;
            run_case({xdt, wdt, width, layout, 2, 5, L, bool(m & 1), bool(m & 2), bool(m & 4), bool(m & 8),
                      bool(m & 16)}, rng);
          }
}

TEST_CASE("cpu forward: every option combination, fp32, both layouts") {
  std::mt19937 rng(std::random_device{}());
  for (int m = 0; m < 32; ++m)
    for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast})
      for (int width : {1, 4, 8})
        run_case({CC1D_FLOAT32, CC1D_FLOAT32, width, layout, 3, 7, 19, bool(m & 1), bool(m & 2), bool(m & 4),
                  bool(m & 8), bool(m & 16)}, rng);
}

TEST_CASE("cpu forward: long sequences cross tile boundaries") {
  std::mt19937 rng(std::random_device{}());
  for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View})
    run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 4, layout, 2, 3, 4099, true, true, true, true, true}, rng);
  run_case({CC1D_FLOAT32, CC1D_FLOAT32, 3, Layout::ChannelLast, 1, 300, 130, true, false, false, true, true}, rng);
}

TEST_CASE("cpu forward: dim beyond 65536 (upstream's grid limit)") {
  std::mt19937 rng(std::random_device{}());
  run_case({CC1D_FLOAT16, CC1D_FLOAT16, 4, Layout::ChannelFirst, 1, 65536 + 7, 3, true, true, false, false, true}, rng);
  run_case({CC1D_FLOAT32, CC1D_FLOAT32, 2, Layout::ChannelLast, 1, 65536 + 3, 2, true, false, false, true, true}, rng);
}
