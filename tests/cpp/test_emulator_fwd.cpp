// test_emulator_fwd.cpp — every forward kernel variant of kernels_src, compiled for the host and
// run by the emulator through the public C ABI (CC1D_BACKEND_EMULATE), against the float64
// reference on fresh random inputs. Outputs are poisoned with NaN first (an unwritten element
// fails) and storage gaps of strided outputs must stay untouched. ctest runs this with
// CAUSAL_CONV1D_EMULATE_CHECK=1, so every launch is also run in a shuffled thread order and
// compared byte for byte.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "fallback/emulator/kernel_registry.h"
#include "fwd_plan.h"
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
  return std::string("x=") + cc1d::dtype_name(c.xdt) + " w=" + cc1d::dtype_name(c.wdt) + " W=" +
         std::to_string(c.width) + " " + lay[int(c.layout)] + " B,D,L=" + std::to_string(c.B) + "," +
         std::to_string(c.D) + "," + std::to_string(c.L) + (c.bias ? " bias" : "") + (c.silu ? " silu" : "") +
         (c.seq ? " seq" : "") + (c.init ? " init" : "") + (c.fin ? " final" : "");
}

// Storage elements of `t` that no logical index reaches (gaps of a strided view).
std::vector<int64_t> gaps(const HostTensor& t) {
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

int64_t g_elements = 0;  // outputs computed, for the throughput figure

void run_case(const Case& c, std::mt19937& rng) {
  HostTensor x = make_x(c.xdt, c.B, c.D, c.L, c.layout);
  x.randomize(rng);
  HostTensor w = HostTensor::contiguous(c.wdt, {c.D, c.width});
  w.randomize(rng, 0.5);
  HostTensor bias = HostTensor::contiguous(c.wdt, {c.D});
  bias.randomize(rng);
  HostTensor seq = HostTensor::contiguous(CC1D_INT32, {c.B, c.L});
  std::uniform_int_distribution<int> len(1, 9), pad(0, 3);
  for (int64_t b = 0; b < c.B; ++b) {
    int id = 0;
    for (int64_t t = 0; t < c.L;) {  // segments of random length with padding (-1) runs
      const int n = len(rng);
      const int v = pad(rng) == 0 ? -1 : id++;
      for (int i = 0; i < n && t < c.L; ++i, ++t) seq.set(seq.off({b, t}), v);
    }
  }
  HostTensor init = HostTensor::contiguous(c.xdt, {c.B, c.D, c.width - 1});
  init.randomize(rng);
  HostTensor out = make_x(c.xdt, c.B, c.D, c.L, c.layout);
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
  a.backend = CC1D_BACKEND_EMULATE;
  INFO(describe(c));
  REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, std::string(cc1d_last_error()));
  g_elements += c.B * c.D * c.L;

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

}  // namespace

TEST_CASE("emulate: every forward variant against the float64 reference") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);  // also set by ctest; read at every launch
  const cc1d::emu::Stats before = cc1d::emu::stats();
  int runs = 0;
  const uint64_t seed = std::random_device{}();
  INFO("rng seed " << seed);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  const int dts[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  const auto t0 = std::chrono::steady_clock::now();
  for (int xdt : dts)
    for (int wdt : dts)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width) {
        // Channel-first and strided views walk time (layout 0), channel-last walks channels
        // (layout 1). Per variant: no options; all five options over several time chunks;
        // states with a sequence shorter than width-1; seq_idx with final states only.
        for (Layout layout : {Layout::ChannelFirst, Layout::View, Layout::ChannelLast}) {
          const bool time_walk = layout != Layout::ChannelLast;
          if (layout != Layout::View) run_case({xdt, wdt, width, layout, 2, 5, 37, false, false, false, false, false}, rng);
          run_case({xdt, wdt, width, layout, 1, 3, time_walk ? 1100 : 70, true, true, true, true, true}, rng);
          if (layout != Layout::View) {
            run_case({xdt, wdt, width, layout, 2, 4, 3, true, true, false, true, true}, rng);
            run_case({xdt, wdt, width, layout, 2, 3, 37, false, false, true, false, true}, rng);
          }
          runs += layout == Layout::View ? 1 : 4;
        }
      }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("emulate grid: %lld output elements in %.2f s (reference included)\n",
              static_cast<long long>(g_elements), s);

  // Every launch ran in checking mode (natural order, then shuffled, compared byte for byte).
  CHECK(cc1d::emu::stats().checked_launches - before.checked_launches == static_cast<uint64_t>(runs));

  // Every one of the 144 host instantiations ran, and they are exactly fwd_plan's list.
  const std::vector<std::string> names = cc1d::all_fwd_kernels();
  REQUIRE(names.size() == 144);
  for (const std::string& n : names) {
    const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(n);
    REQUIRE_MESSAGE(k != nullptr, n);
    CHECK_MESSAGE(cc1d::emu::host_kernel_launches(*k) > 0, n << " never ran");
  }
}

TEST_CASE("emulate: dim beyond one channel block and 65536 channels") {
  std::mt19937 rng(7);
  run_case({CC1D_FLOAT32, CC1D_BFLOAT16, 4, Layout::ChannelLast, 1, 300, 40, true, true, true, true, true}, rng);
  run_case({CC1D_FLOAT16, CC1D_FLOAT32, 3, Layout::ChannelLast, 1, 65536 + 5, 2, true, false, false, true, true}, rng);
}
