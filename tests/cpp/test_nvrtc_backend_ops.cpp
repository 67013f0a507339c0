// test_nvrtc_backend_ops.cpp — the NVRTC backend scenarios of the update, varlen-states and
// backward ops, and of the disk cache (a forward and a backward call), in the executable of
// test_nvrtc_backend.cpp (its main and environment rules apply).
#include "nvrtc_backend_support.h"

using namespace cc1d_test;

// The disk cache scenarios' calls: a forward (one kernel) and a backward (three, compiled in one
// program). Returns the report.
namespace {
std::string forward_and_backward() {
  Problem p;
  ok(p);
  std::mt19937 rng = test_rng(80);
  bwd_on_device(bwd_case(Layout::ChannelFirst, false), rng);
  return report();
}
}  // namespace

// The warm process finds each kernel in its own entry, the backward's three included.
TEST_CASE("disk cache cold") {
  clean_cache_dir();
  const std::string r = forward_and_backward();
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 4);
  CHECK(occurrences(r, "\"program_kernels\": 3") == 3);
  CHECK(has(r, "\"writes\": 4"));
}

TEST_CASE("disk cache warm") {
  const std::string r = forward_and_backward();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"disk cache\"") == 4);
  CHECK(has(r, "\"misses\": 0"));
  CHECK(has(r, "\"writes\": 0"));
  CHECK_FALSE(has(r, "\"origin\": \"compiled\""));
  CHECK(count("cuModuleLoadData") == 4);
  // Nothing compiled, so NVRTC was never loaded: the cold process left its facts in the cache's
  // directory (nvrtc_memo.h).
  CHECK(has(r, "\"loaded\": false"));
  CHECK_FALSE(has(r, "\"loaded\": true"));
  CHECK_FALSE(nvrtc_mapped());
}

// Kernel sources whose bwd.cuh alone was edited, over the cold scenario's cache: an op's entries
// are keyed by its own files, so the forward's still serves and the backward's three compile.
TEST_CASE("disk cache after another op's edit") {
  const std::string r = forward_and_backward();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"disk cache\"") == 1);
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 3);
  CHECK(has(r, "\"writes\": 3"));
  CHECK(has(r, "\"loaded\": true"));  // the remembered NVRTC, loaded by its first compile
  CHECK(nvrtc_mapped());
  // The report gives each op's digest (its cache keys'): 64 hex digits, one per op.
  const auto digest = [&](const char* op) {
    const size_t at = r.find(std::string("\"") + op + "\": \"", r.find("\"ops\": {"));
    return at == std::string::npos ? std::string() : r.substr(at + std::strlen(op) + 5, 64);
  };
  CHECK(digest("fwd").find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(digest("fwd").size() == 64);
  CHECK(digest("bwd").size() == 64);
  CHECK(digest("fwd") != digest("bwd"));
}

TEST_CASE("update launch") {
  // The decode-step update through the real NVRTC and the fake driver, on "device" memory,
  // against the float64 reference; the launch path allocates, copies and synchronises nothing.
  clean_cache_dir();
  std::mt19937 rng = test_rng(77);
  for (bool circular : {false, true}) {
    UpdateCase c{CC1D_BFLOAT16, CC1D_FLOAT32, 4, 5, 40, 3, 6, circular, true, true, false, true, true};
    UpdateRun r(c, rng);
    std::vector<double> want_out, want_state;
    r.reference(c, want_out, want_state);
    for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.state, &r.cache, &r.indices, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
    r.a.backend = CC1D_BACKEND_NVRTC;
    r.a.stream = reinterpret_cast<void*>(0x77);
    REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, cc1d_last_error());
    for (int64_t i = 0; i < c.B * c.D * c.L; ++i) {
      const int64_t b = i / (c.D * c.L), d = (i / c.L) % c.D, t = i % c.L;
      const double got = r.out.get(r.out.off({b, d, t}));
      REQUIRE_MESSAGE(std::fabs(got - want_out[i]) <= tolerance(c.xdt) * (1 + std::fabs(want_out[i])), i);
    }
    for (int64_t p = 0; p < r.pool; ++p)
      for (int64_t d = 0; d < c.D; ++d)
        for (int64_t s = 0; s < c.state_len; ++s)
          REQUIRE(r.state.get(r.state.off({p, d, s})) == want_state[(p * c.D + d) * c.state_len + s]);
  }
  CHECK(count("cuLaunchKernel") == 2);
  CHECK(count("cuModuleLoadData") == 1);
  check_graph_safe_launch("causal_conv1d_update_kernel", reinterpret_cast<void*>(0x77));

  // On device memory libcc1d does not read index values: an index out of range is a padding
  // row for the kernel (outputs 0, nothing written), never a write outside conv_state.
  UpdateCase c{CC1D_FLOAT32, CC1D_FLOAT32, 3, 3, 8, 1, 4, false, true, false, false, false, false};
  UpdateRun r(c, rng);
  r.indices.set(0, 1000);
  const std::vector<unsigned char> state_before = r.state.storage;
  std::vector<double> want_out, want_state;
  r.reference(c, want_out, want_state);  // the reference skips the row whose index is out of range
  for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.state, &r.cache, &r.indices, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
  r.a.backend = CC1D_BACKEND_NVRTC;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, cc1d_last_error());
  for (int64_t d = 0; d < c.D; ++d) CHECK(r.out.get(r.out.off({0, d, 0})) == 0.0);
  for (int64_t p = 0; p < r.pool; ++p)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t s = 0; s < c.state_len; ++s)
        REQUIRE(r.state.get(r.state.off({p, d, s})) == want_state[(p * c.D + d) * c.state_len + s]);
}

TEST_CASE("varlen launch") {
  // The varlen states through the real NVRTC and the fake driver, on "device" memory: the
  // 16-byte and the scalar kernels against the float64 reference; then cu_seqlens values that
  // host validation would refuse (libcc1d does not read device values), which the kernel clamps.
  clean_cache_dir();
  std::mt19937 rng = test_rng(79);
  auto on_device = [](VarlenRun& r) {
    for (HostTensor* t : {&r.x, &r.cu, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
    r.a.backend = CC1D_BACKEND_NVRTC;
    r.a.stream = reinterpret_cast<void*>(0x79);
    REQUIRE_MESSAGE(cc1d_causal_conv1d_varlen_states(&r.a) == CC1D_OK, cc1d_last_error());
  };
  check_varlen_case(VarlenCase{CC1D_BFLOAT16, 9, 64, 3}, rng, on_device);
  check_varlen_case(VarlenCase{CC1D_FLOAT32, 5, 13, 4, VarlenX::ChannelMajor, VarlenOut::Contiguous}, rng, on_device);
  CHECK(count("cuLaunchKernel") == 2);
  check_graph_safe_launch("causal_conv1d_varlen_states_kernel", reinterpret_cast<void*>(0x79));

  VarlenRun r(VarlenCase{CC1D_FLOAT16, 3, 16, 4}, rng);
  const int64_t T = r.total;
  const int32_t bad[4] = {-3, static_cast<int32_t>(T) + 100, 1, static_cast<int32_t>(T)};
  for (int i = 0; i < 4; ++i) r.cu.set(i, bad[i]);
  on_device(r);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t end = std::clamp<int64_t>(bad[b + 1], 0, T);
    const int64_t begin = std::max(std::clamp<int64_t>(bad[b], 0, end), end - 4);
    for (int64_t d = 0; d < 16; ++d)
      for (int64_t s = 0; s < 4; ++s) {
        const int64_t t = end - 4 + s;
        REQUIRE(r.out.get(r.out.off({b, d, s})) == (t >= begin ? r.x.get(r.x.off({t, d})) : 0.0));
      }
  }
}

TEST_CASE("bwd launch") {
  // The backward through the real NVRTC and the fake driver, on "device" memory with the
  // caller's workspace, in both modes and both walks (time_seq: seq_idx is set; channel),
  // against the float64 reference; the launch path allocates, copies and synchronises nothing.
  clean_cache_dir();
  std::mt19937 rng = test_rng(78);
  long launches = 0;
  for (bool deterministic : {false, true})
    for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
      bwd_on_device(bwd_case(layout, deterministic), rng);
      launches += deterministic ? 2 : 3;  // (zero,) main, finalize
    }
  CHECK(count("cuLaunchKernel") == launches);
  check_graph_safe_launch("causal_conv1d_bwd_finalize_kernel", reinterpret_cast<void*>(0x78));
  // The first call's three kernels (zero, main, finalize) were compiled in one NVRTC program,
  // the channel layout's main kernel alone by the second call; each kernel has its own entry
  // and module, and the deterministic calls compiled nothing new.
  const std::string r = report();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"compiled\", \"program_kernels\": 3") == 3);
  CHECK(occurrences(r, "\"origin\": \"compiled\", \"program_kernels\": 1") == 1);
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 4);
  CHECK(has(r, "\"writes\": 4"));
  CHECK(count("cuModuleLoadData") == 4);
}

namespace {
unsigned blocks(const unsigned g[3]) { return g[0] * g[1] * g[2]; }
}  // namespace

TEST_CASE("grid waves") {
  // CAUSAL_CONV1D_GRID_WAVES=N caps every grid-strided launch at N waves of the blocks the device
  // holds at once (the fake: 2 SMs x 3 blocks = 6), z and y first; the results stay those of
  // the float64 reference, and a launch that does not stride (the update's) keeps its grid.
  clean_cache_dir();
  const char* kEnv = "CAUSAL_CONV1D_GRID_WAVES";
  unsetenv(kEnv);
  Problem p(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelFirst, 3, 256, 1000);
  ok(p);
  const FakeLaunch full = last_launch();
  REQUIRE(full.grid[1] == 3);
  REQUIRE(blocks(full.grid) > 12);
  for (unsigned waves : {1u, 2u}) {
    setenv(kEnv, std::to_string(waves).c_str(), 1);
    ok(p);
    const FakeLaunch l = last_launch();
    CHECK(l.function == full.function);
    CHECK(l.grid[1] == 3);  // the batches fit: x gave blocks up
    CHECK(l.grid[0] == waves * 6 / 3);
    CHECK(has(report(), "\"grid_waves\": " + std::to_string(waves) + ","));
  }
  // More batches than the cap: y is cut too, and x keeps one block.
  setenv(kEnv, "1", 1);
  Problem wide(0, CC1D_FLOAT32, CC1D_FLOAT32, Layout::ChannelLast, 8, 64, 200);
  ok(wide);
  CHECK(last_launch().grid[0] == 1);
  CHECK(last_launch().grid[1] == 6);
  // The backward's three kernels (zero, main, finalize) all stride; bwd_on_device checks every
  // gradient against the reference, and the last launch (finalize) was capped.
  std::mt19937 rng = test_rng(81);
  bwd_on_device(bwd_case(Layout::ChannelFirst, false), rng);
  cc1d_fake_launch fin = raw_last_launch();
  CHECK(has(fin.kernel, "finalize"));
  CHECK(blocks(fin.grid) <= 6);
  // The update's grid does not stride over channels: the same grid with and without the cap.
  unsigned update_grid[2][3];
  for (int capped : {0, 1}) {
    if (capped) setenv(kEnv, "1", 1); else unsetenv(kEnv);
    UpdateCase c{CC1D_FLOAT32, CC1D_FLOAT32, 4, 2, 4000, 1, 3, false, false, false, true, true, true};
    UpdateRun r(c, rng);
    for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.state, &r.cache, &r.indices, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
    r.a.backend = CC1D_BACKEND_NVRTC;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, cc1d_last_error());
    std::memcpy(update_grid[capped], raw_last_launch().grid, sizeof update_grid[capped]);
  }
  CHECK(blocks(update_grid[0]) > 6);
  CHECK(std::equal(update_grid[0], update_grid[0] + 3, update_grid[1]));
  // Not a count: one warning naming the variable, and the default grid.
  LogCapture log;
  setenv(kEnv, "many", 1);
  ok(p);
  ok(p);
  unsetenv(kEnv);
  CHECK(blocks(last_launch().grid) == blocks(full.grid));
  CHECK(log.count("CAUSAL_CONV1D_GRID_WAVES='many' is not a whole number from 0 to 1024") == 1);
}

TEST_CASE("grid waves without occupancy") {
  // The driver cannot say how many blocks fit (the fake's occupancy query fails): the launch
  // keeps its whole grid and the result, and one warning per kernel says why.
  clean_cache_dir();
  unsetenv("CAUSAL_CONV1D_GRID_WAVES");
  Problem p(0, CC1D_FLOAT32, CC1D_FLOAT32, Layout::ChannelFirst, 2, 256, 700);
  ok(p);
  const FakeLaunch full = last_launch();
  LogCapture log;
  setenv("CAUSAL_CONV1D_GRID_WAVES", "1", 1);
  ok(p);
  ok(p);
  unsetenv("CAUSAL_CONV1D_GRID_WAVES");
  CHECK(blocks(last_launch().grid) == blocks(full.grid));
  CHECK(log.count("cuOccupancyMaxActiveBlocksPerMultiprocessor failed for cc1d::causal_conv1d_fwd_kernel") == 1);
  CHECK(log.count("CAUSAL_CONV1D_GRID_WAVES does not apply to it") == 1);
}
