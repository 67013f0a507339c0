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
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"
#include "fwd_case.h"
#include "emu_launches.h"

using namespace cc1d_test;

namespace {

int64_t g_elements = 0;  // outputs computed, for the throughput figure

void run_case(const FwdCase& c, std::mt19937& rng) {
  run_fwd_case(c, rng, CC1D_BACKEND_EMULATE);
  g_elements += c.B * c.D * c.L;
}

}  // namespace

TEST_CASE("emulate: every forward variant against the float64 reference") {
  setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);  // also set by ctest; read at every launch
  const cc1d::emu::Stats before = cc1d::emu::stats();
  int runs = 0;
  std::mt19937 rng = cc1d_test::test_rng(1);
  const int dts[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  const auto t0 = std::chrono::steady_clock::now();
  for (int xdt : dts)
    for (int wdt : dts)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width) {
        // Generic paths: a strided view (time stride 1) with a contiguous out, whose rows start
        // at other offsets mod 16 than x's, walks time; channel-last with dim % 8 != 0 walks
        // channels; seq_idx takes the _seq paths. Channel-first rows of 37 and 3 steps take the
        // vector path, each row peeling its unaligned head. Per layout: no options; all five
        // options over several time chunks; states with a sequence shorter than width-1; seq_idx
        // with final states only.
        for (Layout layout : {Layout::ChannelFirst, Layout::View, Layout::ChannelLast}) {
          const bool time_walk = layout != Layout::ChannelLast, out_contiguous = layout == Layout::View;
          FwdCase plain{xdt, wdt, width, layout, 2, 5, 37, false, false, false, false, false};
          FwdCase states{xdt, wdt, width, layout, 2, 4, 3, true, true, false, true, true};
          plain.out_contiguous = states.out_contiguous = out_contiguous;
          run_case(plain, rng);
          run_case({xdt, wdt, width, layout, 1, 3, time_walk ? 1100 : 70, true, true, true, true, true}, rng);
          run_case(states, rng);
          run_case({xdt, wdt, width, layout, 2, 3, 37, false, false, true, false, true}, rng);
          runs += 4;
        }
        // Vector paths (unit-stride rows, no seq_idx). TIME_VEC: 16-byte aligned rows over two
        // warp segments, full steps and a tail ending inside a lane; rows of 1323 steps, all but
        // the first starting unaligned (a peeled head, then shifted segments); a tail only; a
        // sequence shorter than width-1. CHANNEL_VEC: a partial channel tile over several
        // tiles; several channel tiles and time items (initial states only in the first); a
        // sequence shorter than width-1.
        run_case({xdt, wdt, width, Layout::Padded, 1, 3, 1324, true, true, false, true, true}, rng);
        run_case({xdt, wdt, width, Layout::ChannelFirst, 1, 3, 1323, true, true, false, true, true}, rng);
        run_case({xdt, wdt, width, Layout::Padded, 2, 2, 19, false, false, false, false, false}, rng);
        run_case({xdt, wdt, width, Layout::Padded, 2, 2, 3, true, false, false, true, true}, rng);
        run_case({xdt, wdt, width, Layout::ChannelLast, 1, 40, 70, true, true, false, true, true}, rng);
        run_case({xdt, wdt, width, Layout::ChannelLast, 2, 136, 300, false, true, false, true, true}, rng);
        run_case({xdt, wdt, width, Layout::ChannelLast, 2, 16, 3, true, false, false, true, true}, rng);
        // CHANNEL_VEC_SEQ: segments of 1-9 steps with padding (most warps masked); segments of
        // up to 120 steps over several items (most warps on the unmasked copy, with states);
        // without silu; a sequence shorter than width-1.
        FwdCase long_segments{xdt, wdt, width, Layout::ChannelLast, 2, 72, 300, true, true, true, true, true};
        long_segments.max_segment = 120;
        run_case({xdt, wdt, width, Layout::ChannelLast, 2, 40, 150, true, true, true, false, true}, rng);
        run_case(long_segments, rng);
        run_case({xdt, wdt, width, Layout::ChannelLast, 1, 16, 70, false, false, true, true, false}, rng);
        run_case({xdt, wdt, width, Layout::ChannelLast, 2, 16, 2, true, true, true, true, true}, rng);
        runs += 11;
      }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("emulate grid: %lld output elements in %.2f s (reference included)\n",
              static_cast<long long>(g_elements), s);

  // Every launch ran in checking mode (natural order, then shuffled, compared byte for byte).
  CHECK(cc1d::emu::stats().checked_launches - before.checked_launches == static_cast<uint64_t>(runs));

  // Every host instantiation ran (9 dtype pairs x widths x paths), and they are exactly
  // fwd_plan's list.
  const std::vector<std::string> names = cc1d::all_fwd_kernels();
  REQUIRE(names.size() == 9 * CC1D_MAX_WIDTH * cc1d::kFwdNumPaths);
  for (const std::string& n : names) {
    const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(n);
    REQUIRE_MESSAGE(k != nullptr, n);
    CHECK_MESSAGE(cc1d::emu::host_kernel_launches(*k) > 0, n << " never ran");
  }
}

TEST_CASE("emulate: dim beyond one channel block and 65536 channels") {
  std::mt19937 rng = cc1d_test::test_rng(109);
  run_case({CC1D_FLOAT32, CC1D_BFLOAT16, 4, Layout::ChannelLast, 1, 300, 40, true, true, true, true, true}, rng);
  run_case({CC1D_FLOAT16, CC1D_FLOAT32, 3, Layout::ChannelLast, 1, 65536 + 5, 2, true, false, false, true, true}, rng);
}

TEST_CASE("emulate: channel-last seq_idx rows take CHANNEL_VEC_SEQ where the vector path applies") {
  std::mt19937 rng = cc1d_test::test_rng(111);
  auto launches = [](int path) { return emu_launches(cc1d::fwd_kernel_name(CC1D_BFLOAT16, CC1D_FLOAT32, 4, path)); };
  const uint64_t vec = launches(cc1d::kFwdPathChannelVecSeq), generic = launches(cc1d::kFwdPathChannelSeq);
  run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 4, Layout::ChannelLast, 1, 24, 90, true, false, true, false, false}, rng);
  CHECK(launches(cc1d::kFwdPathChannelVecSeq) == vec + 1);  // dim 24: whole 16-byte vectors
  run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 4, Layout::ChannelLast, 1, 20, 90, true, true, true, false, false}, rng);
  CHECK(launches(cc1d::kFwdPathChannelSeq) == generic + 1);  // dim 20: not
}

// Channel-first rows under kMinTimeMajorLen steps (and at least kMinChannelMajorDim channels)
// walk channels (ConvProblem::time_major): contiguous, padded and strided rows, rows of one step
// (channel stride 1: the vector path), with every option and with seq_idx; 40 steps walk time.
TEST_CASE("emulate: short channel-first rows take the channel paths") {
  std::mt19937 rng = cc1d_test::test_rng(113);
  auto launches = [](int path) { return emu_launches(cc1d::fwd_kernel_name(CC1D_BFLOAT16, CC1D_FLOAT32, 3, path)); };
  auto channel_runs = [&] {
    return launches(cc1d::kFwdPathChannel) + launches(cc1d::kFwdPathChannelSeq) +
           launches(cc1d::kFwdPathChannelVec) + launches(cc1d::kFwdPathChannelVecSilu) +
           launches(cc1d::kFwdPathChannelVecSeq);
  };
  const int64_t short_len = cc1d::kMinTimeMajorLen - 1, dim = cc1d::kMinChannelMajorDim + 8;
  int runs = 0;
  const uint64_t before = channel_runs();
  for (Layout layout : {Layout::ChannelFirst, Layout::Padded, Layout::View})
    for (int64_t L : {int64_t{1}, int64_t{5}, short_len}) {
      run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 3, layout, 3, dim, L, true, true, false, true, true}, rng);
      run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 3, layout, 2, dim, L, true, false, true, true, true}, rng);
      runs += 2;
    }
  CHECK(channel_runs() == before + runs);
  const uint64_t vec = launches(cc1d::kFwdPathTimeVecSilu);
  run_case({CC1D_BFLOAT16, CC1D_FLOAT32, 3, Layout::ChannelFirst, 2, dim, short_len + 1, true, true, false, true, true},
           rng);
  CHECK(launches(cc1d::kFwdPathTimeVecSilu) == vec + 1);
}
