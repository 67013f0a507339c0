// test_update.cpp — the decode-step update through the C ABI: every backend that runs on host
// memory against the float64 reference (update_case.h), errors that leave everything untouched,
// and token-by-token decoding equal to one forward with final states.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "update_case.h"

using namespace cc1d_test;

namespace {

// A valid small call whose parts a test damages; reports whether state and out stayed untouched.
struct Fixture {
  UpdateCase c{CC1D_FLOAT32, CC1D_FLOAT32, 4, 3, 8, 2, 5, true, true, false, false, true, true};
  std::mt19937 rng = test_rng(900);
  UpdateRun r{c, rng};
  std::vector<unsigned char> state_before = r.state.storage;

  void expect(int backend, cc1d_status status, std::initializer_list<const char*> fragments) {
    r.a.backend = backend;
    const cc1d_status got = cc1d_causal_conv1d_update(&r.a);
    const std::string msg = cc1d_last_error();
    INFO("message: " << msg);
    CHECK(got == status);
    for (const char* f : fragments) CHECK_MESSAGE(msg.find(f) != std::string::npos, "missing '" << f << "'");
    CHECK_MESSAGE(r.state.storage == state_before, "a failing call changed conv_state");
    for (int64_t i = 0; i < static_cast<int64_t>(r.out.storage.size() / 4); ++i)
      REQUIRE_MESSAGE(std::isnan(r.out.get(i)), "a failing call wrote out");
  }
};

void bad_values(int backend) {
  { Fixture f; f.r.indices.set(0, static_cast<double>(f.r.pool)); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"conv_state_indices[0]", "pool"}); }
  { Fixture f; f.r.indices.set(0, 2); f.r.indices.set(2, 2); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"conv_state_indices", "twice"}); }
  { Fixture f; f.r.cache.set(2, -1); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"cache_seqlens[2]", ">= 0"}); }
}

}  // namespace

TEST_CASE("update cpu: the grid against the float64 reference") { run_update_grid(CC1D_BACKEND_CPU); }

TEST_CASE("update cpu: the decode step (one token) of every dtype pair, width, mode and state length") {
  // The cpu backend's decode paths: Mamba's layout (shift mode, state_len == width: the SIMD
  // kernel for widths 2, 4 and 8) and, on rows contiguous along time, every other state length
  // (vLLM's width-1, longer ones) in both modes; D spans two channel runs. State rows channel-last
  // take the general path (the grid above).
  std::mt19937 rng = test_rng(902);
  for (int xdt = 0; xdt < 3; ++xdt)
    for (int wdt = 0; wdt < 3; ++wdt)
      for (int W = 1; W <= CC1D_MAX_WIDTH; ++W)
        for (int64_t S : {int64_t(W - 1), int64_t(W), int64_t(W + 3)})
          for (bool circular : {false, true})
            for (bool x_2d : {true, false}) {
              if (S < 1) continue;
              const bool gather = (W + S) % 2 == 0;
              run_update_case(UpdateCase{xdt, wdt, W, 3, 600, 1, S, circular, gather, false, x_2d, true, W % 3 != 0},
                              rng, CC1D_BACKEND_CPU);
            }
}

TEST_CASE("update cpu: batch 1 on the general paths (the taps staged a run of channels at a time)") {
  // At batch 1 the pool converts each run's taps as it takes the run (StagedTaps): 600 channels
  // are a whole run and a partial one. Longer states (decode_step), channel-last states and 12
  // tokens (taps), every dtype pair, with and without bias.
  std::mt19937 rng = test_rng(903);
  int i = 0;
  for (int xdt = 0; xdt < 3; ++xdt)
    for (int wdt = 0; wdt < 3; ++wdt)
      for (int kind = 0; kind < 3; ++kind, ++i) {
        const int W = 3 + i % 2;
        const int64_t L = kind == 2 ? 12 : 1;
        run_update_case(UpdateCase{xdt, wdt, W, 1, 600, L, W + 3, i % 4 == 1, false, kind == 1, false, i % 3 != 0,
                                   i % 2 == 0},
                        rng, CC1D_BACKEND_CPU);
      }
}

TEST_CASE("update cpu: state rows strided along time and channels (the decode step's general shift)") {
  // Neither channel-last nor contiguous along time: the decode step's element-wise shift and its
  // window at a time stride of 2, in both modes, with state lengths of width-1, width and more.
  std::mt19937 rng = test_rng(904);
  int i = 0;
  for (int xdt = 0; xdt < 3; ++xdt)
    for (int W : {2, 4})
      for (int64_t S : {int64_t(W - 1), int64_t(W), int64_t(W + 3)})
        for (bool circular : {false, true}) {
          UpdateCase c{xdt, i % 3, W, 2, 70, 1, S, circular, i % 2 == 0, false, i % 3 == 0, true, i % 2 == 1};
          c.state_strided = true;
          run_update_case(c, rng, CC1D_BACKEND_CPU);
          ++i;
        }
}

TEST_CASE("update cpu: tokens as rows of channels (every width, state layout and length, strided out)") {
  // The route of any width or dtype pair without a decode kernel, and of 6 tokens or more: the
  // state's steps and x's tokens as rows of channels through the forward's channel-last kernel.
  // States of width-1, width, 16 and 21 steps (a ring's rows of 21 take the general taps), rows
  // back to back or channel-last, shift and ring, 1 to 37 tokens (beyond 16 x split in blocks,
  // the last overlapping), 600 channels (a run and a partial one), padding slots, out's channels
  // strided.
  std::mt19937 rng = test_rng(905);
  int i = 0;
  for (int W = 1; W <= CC1D_MAX_WIDTH; ++W)
    for (int64_t S : {int64_t(W - 1), int64_t(W), int64_t(16), int64_t(21)})
      for (int64_t L : {1, 2, 6, 16, 20, 37}) {
        if (S < 1) continue;
        const int xdt = i % 3, wdt = (i / 3) % 3;
        UpdateCase c{xdt, wdt, W, 3, 600, L, S, i % 2 == 1, true, i % 4 >= 2, L == 1 && i % 3 == 0, i % 5 != 0, true};
        c.x_tokens = i % 6 == 1;
        c.out_strided = !c.x_tokens;
        run_update_case(c, rng, CC1D_BACKEND_CPU);
        ++i;
      }
}

TEST_CASE("update emulate: the grid against the float64 reference") {
  REQUIRE_MESSAGE(cc1d_backend_available(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CPU, 0) == CC1D_OK, cc1d_last_error());
  run_update_grid(CC1D_BACKEND_EMULATE);
}

TEST_CASE("update cpu: out-of-range or duplicated indices and negative cache_seqlens fail, nothing written") {
  bad_values(CC1D_BACKEND_CPU);
}

TEST_CASE("update emulate: the same index checks on host memory") { bad_values(CC1D_BACKEND_EMULATE); }

TEST_CASE("update cpu: each argument's error names it") {
  const int cpu = CC1D_BACKEND_CPU;
  { Fixture f; f.r.a.conv_state = &f.r.x.t; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state"}); }
  { Fixture f; f.r.state.t.shape[2] = 2; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state", "width-1 or more=3", "(6, 8, 2)"}); }
  { Fixture f; f.r.a.conv_state_indices = nullptr; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state", "6 rows", "batch 3"}); }
  { Fixture f; f.r.state.t.dtype = CC1D_FLOAT16; f.expect(cpu, CC1D_ERR_INVALID_TYPE, {"conv_state", "float32", "float16"}); }
  { Fixture f; f.r.indices.t.dtype = CC1D_FLOAT32; f.expect(cpu, CC1D_ERR_INVALID_TYPE, {"conv_state_indices", "int32"}); }
  { Fixture f; f.r.cache.t.shape[0] = 2; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"cache_seqlens", "(batch=3,)", "(2,)"}); }
  { Fixture f; f.r.state.t.device_type = CC1D_DEVICE_CUDA; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state", "device of x"}); }
  { Fixture f; f.r.out.t.shape[2] = 3; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "(3, 8, 3)"}); }
  { Fixture f; f.r.state.t.strides[0] = 0; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state", "stride 0"}); }
  {
    Fixture f;  // an out that lies inside conv_state's memory
    cc1d_tensor inside = f.r.out.t;
    inside.data = f.r.state.t.data;
    f.r.a.out = &inside;
    f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"conv_state: overlaps out"});
  }
  { Fixture f; f.r.a.struct_size = 8; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"sizeof(cc1d_update_args)"}); }
  { Fixture f; f.r.a.activation = 3; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"activation", "got 3"}); }
  CHECK(cc1d_causal_conv1d_update(nullptr) == CC1D_ERR_NULL_POINTER);
}

TEST_CASE("update cpu: decoding token by token equals one forward with final states") {
  std::mt19937 rng = test_rng(901);
  for (int W : {1, 2, 4, 7}) {
    for (int xdt : {CC1D_FLOAT32, CC1D_BFLOAT16}) {
      CAPTURE(W);
      CAPTURE(xdt);
      const int64_t B = 2, D = 9, L = 13;
      HostTensor x = HostTensor::contiguous(xdt, {B, D, L});
      x.randomize(rng);
      HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {D, W});
      w.randomize(rng, 0.5);
      HostTensor out = HostTensor::contiguous(xdt, {B, D, L}), fin = HostTensor::contiguous(xdt, {B, D, W - 1});
      out.fill_all(NAN);
      fin.fill_all(NAN);
      cc1d_fwd_args f{};
      f.struct_size = sizeof f;
      f.x = &x.t;
      f.weight = &w.t;
      f.out = &out.t;
      f.final_states = &fin.t;
      f.activation = CC1D_ACT_SILU;
      f.backend = CC1D_BACKEND_CPU;
      REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&f) == CC1D_OK, cc1d_last_error());

      HostTensor state = HostTensor::contiguous(xdt, {B, D, std::max(W - 1, 1)});
      state.fill_all(0.0);
      HostTensor step_x = HostTensor::contiguous(xdt, {B, D}), step_out = HostTensor::contiguous(xdt, {B, D});
      for (int64_t t = 0; t < L; ++t) {
        for (int64_t b = 0; b < B; ++b)
          for (int64_t d = 0; d < D; ++d) step_x.set(step_x.off({b, d}), x.get(x.off({b, d, t})));
        step_out.fill_all(NAN);
        cc1d_update_args u{};
        u.struct_size = sizeof u;
        u.x = &step_x.t;
        u.conv_state = &state.t;
        u.weight = &w.t;
        u.out = &step_out.t;
        u.activation = CC1D_ACT_SILU;
        u.backend = CC1D_BACKEND_CPU;
        REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&u) == CC1D_OK, cc1d_last_error());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t d = 0; d < D; ++d) {
            const double a = step_out.get(step_out.off({b, d})), e = out.get(out.off({b, d, t}));
            REQUIRE_MESSAGE(std::fabs(a - e) <= tolerance(xdt) * (1 + std::fabs(e)), "t=" << t << ": " << a << " vs " << e);
          }
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t d = 0; d < D; ++d)
          for (int j = 0; j < W - 1; ++j)
            CHECK(state.get(state.off({b, d, j})) == fin.get(fin.off({b, d, j})));
    }
  }
}
