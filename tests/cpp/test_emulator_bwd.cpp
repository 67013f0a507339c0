// test_emulator_bwd.cpp — every backward kernel of kernels_src, compiled for the host and run by
// the emulator through the public C ABI, against the float64 reference (bwd_case.h). ctest runs
// it with CAUSAL_CONV1D_EMULATE_CHECK=1: every launch also runs with threads, blocks and atomics
// shuffled, outputs compared byte for byte (atomically summed floats within their rounding).
// The deterministic mode must give the same bits for any shuffled order.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "bwd_case.h"
#include "emu_launches.h"
#include "fallback/emulator/kernel_registry.h"
#include "fallback/emulator/launch.h"
#include "kernels_src/bwd_params.h"
#include "ops/bwd/bwd_op.h"

using namespace cc1d_test;

TEST_CASE("emulate: every backward variant against the float64 reference, in checking mode") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);  // also set by ctest; read at every launch
  const cc1d::emu::Stats before = cc1d::emu::stats();
  std::mt19937 rng = test_rng(811);
  const int cases = run_bwd_grid(CC1D_BACKEND_EMULATE, rng, kMaxLen);
  CHECK(cases == 9 * CC1D_MAX_WIDTH * kBwdGridKinds);
  CHECK(cc1d::emu::stats().checked_launches - before.checked_launches >= static_cast<uint64_t>(cases));
  // Every host instantiation ran, and they are exactly bwd_plan's list.
  const std::vector<std::string> names = cc1d::all_bwd_kernels();
  REQUIRE(names.size() == 9 * CC1D_MAX_WIDTH * cc1d::kBwdNumLayouts + 4);
  for (const std::string& n : names) {
    const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(n);
    REQUIRE_MESSAGE(k != nullptr, n);
    CHECK_MESSAGE(cc1d::emu::host_kernel_launches(*k) > 0, n << " never ran");
  }
}

// channel_vec tests dfinal_states once a tile (its dx phase compiled with and without it): rows
// whose last tile ends just before, on, and just after the first of the last W-1 steps, and rows
// that end one step into a tile, with dfinal_states, silu on and off.
TEST_CASE("emulate: channel-last tiles that meet the final states' rows") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
  std::mt19937 rng = test_rng(823);
  const int T = cc1d::kBwdChannelTile;
  for (int xdt : {0, 2})
    for (int W = 2; W <= CC1D_MAX_WIDTH; ++W)
      for (int64_t L : {int64_t{2 * T + W - 3}, int64_t{2 * T + W - 2}, int64_t{2 * T + W - 1}, int64_t{T + 1}}) {
        const bool silu = (W + L) % 2 == 0;
        BwdCase c{xdt, xdt, W, Layout::ChannelLast, 2, 72, L, true, silu, false, W % 2 == 0, true};
        run_bwd_case(c, rng, CC1D_BACKEND_EMULATE);
      }
}

TEST_CASE("emulate: deterministic gradients are bitwise identical under shuffled launches") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
  for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
    std::vector<unsigned char> first_dw, first_db, first_dx;
    for (const char* seed : {"11", "12", "13"}) {
      setenv("CAUSAL_CONV1D_EMULATE_SEED", seed, 1);
      std::mt19937 rng = test_rng(812);  // the same inputs every time
      BwdCase c{CC1D_BFLOAT16, CC1D_FLOAT32, 4, layout, 3, 140, std::min<int64_t>(3000, kMaxLen), true, true, true,
                true, true};
      c.deterministic = true;
      const BwdRun r = run_bwd_case(c, rng, CC1D_BACKEND_EMULATE);
      if (first_dw.empty()) {
        first_dw = r.dweight.storage;
        first_db = r.dbias.storage;
        first_dx = r.dx.storage;
      } else {
        CHECK(r.dweight.storage == first_dw);
        CHECK(r.dbias.storage == first_db);
        CHECK(r.dx.storage == first_dx);
      }
    }
    unsetenv("CAUSAL_CONV1D_EMULATE_SEED");
  }
}

TEST_CASE("emulate: a caller's workspace is used, and the result is the same") {
  std::mt19937 rng = test_rng(813);
  BwdCase c{CC1D_FLOAT32, CC1D_FLOAT32, 3, Layout::ChannelFirst, 2, 9, 700, true, true, false, false, false};
  c.deterministic = true;
  BwdRun r(c, rng);
  int64_t n = 0;
  REQUIRE(cc1d_causal_conv1d_bwd_workspace(&r.a, &n) == CC1D_OK);
  HostTensor ws = HostTensor::contiguous(CC1D_FLOAT32, {n + 5});
  ws.fill_all(NAN);
  r.a.workspace = &ws.t;
  r.a.backend = CC1D_BACKEND_EMULATE;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd(&r.a) == CC1D_OK, cc1d_last_error());
  check_bwd(r, r.reference());
  int written = 0;
  for (int64_t i = 0; i < n; ++i) written += !std::isnan(ws.get(i));
  CHECK(written == n);  // every partial sum stored
  for (int64_t i = n; i < n + 5; ++i) CHECK(std::isnan(ws.get(i)));
}

TEST_CASE("emulate: dim beyond 65536 channels, and an empty batch") {
  std::mt19937 rng = test_rng(814);
  run_bwd_case({CC1D_FLOAT16, CC1D_FLOAT32, 3, Layout::ChannelLast, 1, 65536 + 5, 2, true, true, false, true, true},
               rng, CC1D_BACKEND_EMULATE);
  BwdRun r(BwdCase{CC1D_FLOAT32, CC1D_FLOAT32, 4, Layout::ChannelFirst, 0, 5, 9, true, true, false, false, false}, rng);
  r.a.backend = CC1D_BACKEND_EMULATE;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd(&r.a) == CC1D_OK, cc1d_last_error());
  for (int64_t i = 0; i < 5 * 4; ++i) CHECK(r.dweight.get(i) == 0.0);
}

TEST_CASE("emulate: channel-last seq_idx rows take CHANNEL_VEC_SEQ where the tiles apply") {
  std::mt19937 rng = test_rng(829);
  auto launches = [](int layout) {
    return emu_launches(cc1d::bwd_kernel_name(CC1D_BFLOAT16, CC1D_FLOAT32, 4, layout));
  };
  const uint64_t vec = launches(cc1d::kBwdLayoutChannelVecSeq), walk = launches(cc1d::kBwdLayoutChannelSeq);
  run_bwd_case({CC1D_BFLOAT16, CC1D_FLOAT32, 4, Layout::ChannelLast, 1, 24, 90, true, true, true, false, false}, rng,
               CC1D_BACKEND_EMULATE);
  CHECK(launches(cc1d::kBwdLayoutChannelVecSeq) == vec + 1);  // dim 24: whole 16-byte vectors
  run_bwd_case({CC1D_BFLOAT16, CC1D_FLOAT32, 4, Layout::ChannelLast, 1, 20, 90, true, true, true, false, false}, rng,
               CC1D_BACKEND_EMULATE);
  CHECK(launches(cc1d::kBwdLayoutChannelSeq) == walk + 1);  // dim 20: not
}

// Channel-first rows under kMinTimeMajorLen steps (and at least kMinChannelMajorDim channels)
// walk channels (ConvProblem::time_major): contiguous, padded and strided rows, rows of one step
// (channel stride 1: the tiles), with every option and with seq_idx; 40 steps walk time.
TEST_CASE("emulate: short channel-first rows take the channel layouts") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
  std::mt19937 rng = test_rng(831);
  auto launches = [](int layout) {
    return emu_launches(cc1d::bwd_kernel_name(CC1D_BFLOAT16, CC1D_FLOAT32, 3, layout));
  };
  auto channel_runs = [&] {
    uint64_t n = 0;
    for (int layout = 0; layout < cc1d::kBwdNumLayouts; ++layout)
      if (cc1d::bwd_channel_layout(layout)) n += launches(layout);
    return n;
  };
  const int64_t short_len = cc1d::kMinTimeMajorLen - 1, dim = cc1d::kMinChannelMajorDim + 8;
  int runs = 0;
  const uint64_t before = channel_runs();
  for (Layout layout : {Layout::ChannelFirst, Layout::Padded, Layout::View})
    for (int64_t L : {int64_t{1}, int64_t{5}, short_len}) {
      BwdCase all{CC1D_BFLOAT16, CC1D_FLOAT32, 3, layout, 3, dim, L, true, true, false, true, true};
      all.deterministic = L == 5;
      run_bwd_case(all, rng, CC1D_BACKEND_EMULATE);
      run_bwd_case({CC1D_BFLOAT16, CC1D_FLOAT32, 3, layout, 2, dim, L, true, true, true, true, true}, rng,
                   CC1D_BACKEND_EMULATE);
      runs += 2;
    }
  CHECK(channel_runs() == before + runs);
  const uint64_t vec = launches(cc1d::kBwdLayoutTimeVec);
  run_bwd_case({CC1D_BFLOAT16, CC1D_FLOAT32, 3, Layout::ChannelFirst, 2, dim, short_len + 1, true, true, false, true,
                true},
               rng, CC1D_BACKEND_EMULATE);
  CHECK(launches(cc1d::kBwdLayoutTimeVec) == vec + 1);
}

// Channel-first rows that do not start on 16 bytes take TIME_VEC, whose segments start at a row's
// first aligned step (fix_dx recomputes the steps before it): rows at every offset mod 16 bytes
// (row 0 too), of lengths shorter than that head, inside the first vector, around a warp step
// (dfinal_states' steps split between two) and a segment's 1024 steps, with every option, both
// sum modes, and contiguous rows of odd length (the common case: every other row starts off 16
// bytes). (Rows of one step are channel-last to the planner.)
TEST_CASE("emulate: channel-first rows off 16 bytes walk the vector path") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
  std::mt19937 rng = test_rng(833);
  for (int xdt : {0, 1, 2}) {
    const int W = 2 + xdt;
    const std::string vec =
        cc1d::bwd_kernel_name(static_cast<cc1d_dtype>(xdt), CC1D_FLOAT32, W, cc1d::kBwdLayoutTimeVec);
    const uint64_t before = emu_launches(vec);
    const int64_t lens[] = {2, 3, 6, 9, 255, 257, 1021, 1023, 2051};
    for (size_t i = 0; i < std::size(lens); ++i) {
      const int64_t L = std::min(lens[i], kMaxLen);
      BwdCase c{xdt, CC1D_FLOAT32, W, Layout::OddRows, 2, 9, L, i % 2 == 0, i % 3 != 1, false, i % 2 == 1, i % 4 < 2};
      c.dinit = i % 3 != 2;
      c.dx = i != 4;
      c.deterministic = i % 2 == 0;
      run_bwd_case(c, rng, CC1D_BACKEND_EMULATE);
      c.layout = Layout::ChannelFirst;
      c.L = L | 1;
      run_bwd_case(c, rng, CC1D_BACKEND_EMULATE);
    }
    CHECK(emu_launches(vec) == before + 2 * std::size(lens));
  }
}
