// test_bwd.cpp — the backward through the C ABI on the cpu backend: the grid against the float64
// reference (bwd_case.h), the workspace query and checks, an empty batch, and errors that name
// their argument and leave every output untouched. The emulate backend's grid is
// test_emulator_bwd.cpp.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "bwd_case.h"

using namespace cc1d_test;

namespace {

// A valid small call whose parts a test damages; checks that a failing call wrote nothing.
struct Fixture {
  BwdCase c{CC1D_FLOAT32, CC1D_BFLOAT16, 4, Layout::ChannelFirst, 2, 6, 40, true, true, true, true, true};
  std::mt19937 rng = test_rng(800);
  BwdRun r{c, rng};
  const std::vector<std::vector<unsigned char>> before{r.dx.storage, r.dweight.storage, r.dbias.storage,
                                                       r.dinit.storage};

  Fixture() { r.a.backend = CC1D_BACKEND_CPU; }

  void expect(cc1d_status status, std::initializer_list<const char*> fragments) {
    const cc1d_status got = cc1d_causal_conv1d_bwd(&r.a);
    const std::string msg = cc1d_last_error();
    INFO("message: " << msg);
    CHECK(got == status);
    for (const char* f : fragments) CHECK_MESSAGE(msg.find(f) != std::string::npos, "missing '" << f << "'");
    const std::vector<std::vector<unsigned char>> after{r.dx.storage, r.dweight.storage, r.dbias.storage,
                                                        r.dinit.storage};
    CHECK_MESSAGE(after == before, "a failing call wrote an output");
  }
};

}  // namespace

TEST_CASE("bwd cpu: the grid against the float64 reference") {
  std::mt19937 rng = test_rng(801);
  CHECK(run_bwd_grid(CC1D_BACKEND_CPU, rng, kMaxLen) == 9 * CC1D_MAX_WIDTH * kBwdGridKinds);
}

TEST_CASE("bwd cpu: every gradient alone, and none") {
  std::mt19937 rng = test_rng(802);
  for (int only = 0; only < 5; ++only)
    for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
      BwdCase c{CC1D_BFLOAT16, CC1D_FLOAT16, 3, layout, 3, 70, 300, true, true, true, true, true};
      c.dx = only == 0;
      c.dweight = only == 1;
      c.dbias = only == 2;
      c.dinit = only == 3;
      run_bwd_case(c, rng, CC1D_BACKEND_CPU);
    }
}

TEST_CASE("bwd cpu: channel-last in several channel tiles (a partial one last)") {
  // One batch of 300 channels: tiles of at least 128 channels, so two whole ones and 44.
  std::mt19937 rng = test_rng(805);
  for (int xdt : {CC1D_FLOAT32, CC1D_BFLOAT16})
    run_bwd_case(BwdCase{xdt, CC1D_FLOAT32, 4, Layout::ChannelLast, 1, 300, 150, true, true, false, true, true}, rng,
                 CC1D_BACKEND_CPU);
}

TEST_CASE("bwd cpu: channel-first short rows (channel-major tiles; runs of 6 steps or more transposed)") {
  // 53 channels: three whole blocks of 16 and a partial one; 5 steps stay below the transposes.
  std::mt19937 rng = test_rng(807);
  int i = 0;
  for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
    for (int64_t L : {5, 6, 21, 39})
      for (Layout layout : {Layout::ChannelFirst, Layout::View}) {
        const int width = 2 + i % 3;
        BwdCase c{xdt, CC1D_FLOAT32, width, layout, 2, 53, L, i % 2 == 0, i % 3 != 1, i % 4 == 3, i % 4 != 3, true};
        c.dx = i % 5 != 4;
        run_bwd_case(c, rng, CC1D_BACKEND_CPU);
        ++i;
      }
}

TEST_CASE("bwd cpu: seq_idx with long segments (fused passes per run) and short ones (plain loops)") {
  // Padding runs and ids that resume after them are in every row (random_segments).
  std::mt19937 rng = test_rng(806);
  for_each_segment_case([&](int i, Layout layout, int xdt, int width, int64_t D, int max_segment) {
    const int wdt = i % 3 == 0 ? CC1D_FLOAT32 : xdt;
    BwdCase c{xdt, wdt, width, layout, 2, D, kSegmentCaseLen, i % 2 == 0, i % 3 != 1, true, i % 4 < 2, i % 5 != 0};
    c.dinit = i % 6 != 1;
    c.max_segment = max_segment;
    run_bwd_case(c, rng, CC1D_BACKEND_CPU);
  });
}

TEST_CASE("bwd cpu: an empty batch has zero dweight and dbias") {
  std::mt19937 rng = test_rng(803);
  for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
    BwdRun r(BwdCase{CC1D_FLOAT32, CC1D_FLOAT32, 4, layout, 0, 5, 9, true, true, false, false, false}, rng);
    r.a.backend = CC1D_BACKEND_CPU;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd(&r.a) == CC1D_OK, cc1d_last_error());
    for (int64_t i = 0; i < 5 * 4; ++i) CHECK(r.dweight.get(i) == 0.0);
    for (int64_t i = 0; i < 5; ++i) CHECK(r.dbias.get(i) == 0.0);
  }
}

TEST_CASE("bwd: the workspace size, and the workspace checks") {
  std::mt19937 rng = test_rng(804);
  BwdCase c{CC1D_FLOAT16, CC1D_FLOAT32, 4, Layout::ChannelFirst, 3, 5, 5000, true, true, false, false, false};
  BwdRun r(c, rng);
  int64_t atomic = -1, deterministic = -1;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd_workspace(&r.a, &atomic) == CC1D_OK, cc1d_last_error());
  CHECK(atomic == 5 * (4 + 1));  // one row of (dim, width+1) sums
  r.a.deterministic = 1;
  REQUIRE(cc1d_causal_conv1d_bwd_workspace(&r.a, &deterministic) == CC1D_OK);
  CHECK(deterministic == 3 * 5 * 5 * (4 + 1));  // a row per (batch, segment): 5000 fp16 steps, 5 chunks
  r.a.dweight = r.a.dbias = nullptr;
  int64_t none = -1;
  REQUIRE(cc1d_causal_conv1d_bwd_workspace(&r.a, &none) == CC1D_OK);
  CHECK(none == 0);
  r.a.dweight = &r.dweight.t;
  CHECK(cc1d_causal_conv1d_bwd_workspace(&r.a, nullptr) == CC1D_ERR_NULL_POINTER);
  r.a.struct_size = 8;
  CHECK(cc1d_causal_conv1d_bwd_workspace(&r.a, &none) == CC1D_ERR_INVALID_ARGUMENT);
  CHECK(std::string(cc1d_last_error()).find("sizeof(cc1d_bwd_args)") != std::string::npos);
  CHECK(cc1d_causal_conv1d_bwd_workspace(nullptr, &none) == CC1D_ERR_NULL_POINTER);

  {  // too small
    Fixture f;
    HostTensor ws = HostTensor::contiguous(CC1D_FLOAT32, {3});
    f.r.a.workspace = &ws.t;
    f.expect(CC1D_ERR_INVALID_ARGUMENT, {"workspace", "holds 3 float32 elements", "need 30",
                                         "cc1d_causal_conv1d_bwd_workspace"});
  }
  {  // strided, wrong dtype
    Fixture f;
    HostTensor ws(CC1D_FLOAT32, {40}, {2});
    f.r.a.workspace = &ws.t;
    f.expect(CC1D_ERR_INVALID_ARGUMENT, {"workspace", "unit stride"});
    HostTensor half = HostTensor::contiguous(CC1D_FLOAT16, {40});
    f.r.a.workspace = &half.t;
    f.expect(CC1D_ERR_INVALID_TYPE, {"workspace", "float32", "float16"});
  }
  {  // CUDA tensors need one: libcc1d never allocates device memory
    Fixture f;
    for (HostTensor* t : {&f.r.x, &f.r.w, &f.r.bias, &f.r.seq, &f.r.init, &f.r.dout, &f.r.dfinal, &f.r.dx,
                          &f.r.dweight, &f.r.dbias, &f.r.dinit})
      t->t.device_type = CC1D_DEVICE_CUDA;
    f.expect(CC1D_ERR_INVALID_ARGUMENT, {"workspace", "required on CUDA tensors", "at least 30 elements"});
  }
  {  // overlapping an output
    Fixture f;
    cc1d_tensor inside{};
    inside.data = f.r.dx.t.data;
    inside.dtype = CC1D_FLOAT32;
    inside.ndim = 1;
    inside.shape[0] = 30;
    inside.strides[0] = 1;
    f.r.a.workspace = &inside;
    f.expect(CC1D_ERR_INVALID_ARGUMENT, {"overlaps"});
  }
}

TEST_CASE("bwd cpu: each argument's error names it, and nothing is written") {
  { Fixture f; f.r.a.dout = nullptr; f.expect(CC1D_ERR_NULL_POINTER, {"dout", "required"}); }
  { Fixture f; f.r.dout.t.shape[2] = 39; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dout", "(2, 6, 39)"}); }
  { Fixture f; f.r.dout.t.dtype = CC1D_FLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"dout", "float32", "float16"}); }
  { Fixture f; f.r.dfinal.t.shape[2] = 4; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dfinal_states", "width-1=3"}); }
  { Fixture f; f.r.dweight.t.dtype = CC1D_FLOAT32; f.expect(CC1D_ERR_INVALID_TYPE, {"dweight", "bfloat16"}); }
  { Fixture f; f.r.dbias.t.shape[0] = 5; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dbias", "(dim=6,)"}); }
  { Fixture f; f.r.dinit.t.dtype = CC1D_BFLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"dinitial_states", "float32"}); }
  { Fixture f; f.r.dx.t.strides[2] = 0; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dx", "stride 0"}); }
  { Fixture f; f.r.a.dx = &f.r.dout.t; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dx", "overlaps dout"}); }
  { Fixture f; f.r.a.dbias = &f.r.dweight.t; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"dbias", "expected a 1-D"}); }
  { Fixture f; f.r.a.deterministic = 2; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"deterministic", "got 2"}); }
  { Fixture f; f.r.a.activation = 5; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"activation", "got 5"}); }
  { Fixture f; f.r.a.struct_size = 8; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"sizeof(cc1d_bwd_args)"}); }
  { Fixture f; f.r.a.backend = 42; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"42"}); }
  CHECK(cc1d_causal_conv1d_bwd(nullptr) == CC1D_ERR_NULL_POINTER);
}
