// test_varlen.cpp — the varlen-states op through the C ABI: the cpu and emulate backends against
// the float64 reference (varlen_case.h), the planner's choice of the 16-byte path, the kernel's
// clamping of cu_seqlens values it cannot validate (CUDA tensors), and errors that name the
// argument and leave out untouched. Links cc1d_static to reach the planner and the emulator.
#include <doctest/doctest.h>

#include <string>

#include "fallback/emulator/emu_types.h"
#include "fallback/emulator/kernel_registry.h"
#include "fallback/emulator/launch.h"
#include "ops/varlen/varlen_op.h"
#include "varlen_case.h"

using namespace cc1d_test;

namespace {

bool emulate_available() { return cc1d_backend_available(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CPU, 0) == CC1D_OK; }

// A valid small call whose parts a test damages; checks the status, the message and that out
// was not touched.
struct Fixture {
  VarlenCase c{CC1D_FLOAT32, 4, 8, 3, VarlenX::Rows, VarlenOut::Upstream, false, 2};  // cu_seqlens[0] >= 2
  std::mt19937 rng = test_rng(1200);
  VarlenRun r{c, rng};
  std::vector<unsigned char> out_before = r.out.storage;  // all NaN

  void expect(int backend, cc1d_status status, std::initializer_list<const char*> fragments) {
    r.a.backend = backend;
    const cc1d_status got = cc1d_causal_conv1d_varlen_states(&r.a);
    const std::string msg = cc1d_last_error();
    INFO("message: " << msg);
    CHECK(got == status);
    for (const char* f : fragments) CHECK_MESSAGE(msg.find(f) != std::string::npos, "missing '" << f << "'");
    CHECK_MESSAGE(r.out.storage == out_before, "a failing call wrote out");
  }
};

void bad_values(int backend) {
  { Fixture f; f.r.cu.set(1, f.r.cu_at(0) - 1); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"cu_seqlens[1] is", "below cu_seqlens[0]", "non-decreasing"}); }
  { Fixture f; f.r.cu.set(4, static_cast<double>(f.r.total + 1)); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"cu_seqlens[4]", "total_tokens = x.shape[0]"}); }
  { Fixture f; f.r.cu.set(0, -1); f.expect(backend, CC1D_ERR_INVALID_ARGUMENT, {"cu_seqlens[0] is -1", "[0, total_tokens"}); }
}

}  // namespace

TEST_CASE("varlen cpu: the grid against the float64 reference") { run_varlen_grid(1100, varlen_through_c_abi(CC1D_BACKEND_CPU)); }

TEST_CASE("varlen cpu: a batch large enough for the thread pool") {
  std::mt19937 rng = test_rng(1101);
  check_varlen_case(VarlenCase{CC1D_BFLOAT16, 300, 512, 4}, rng, varlen_through_c_abi(CC1D_BACKEND_CPU));
  check_varlen_case(VarlenCase{CC1D_FLOAT32, 200, 300, 5, VarlenX::ChannelMajor, VarlenOut::Contiguous}, rng,
                    varlen_through_c_abi(CC1D_BACKEND_CPU));
}

TEST_CASE("varlen emulate: the grid against the float64 reference, every kernel variant") {
  REQUIRE_MESSAGE(emulate_available(), cc1d_last_error());
  run_varlen_grid(1102, varlen_through_c_abi(CC1D_BACKEND_EMULATE));
  for (const std::string& name : cc1d::all_varlen_kernels()) {
    const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(name);
    REQUIRE_MESSAGE(k != nullptr, name);
    CHECK_MESSAGE(cc1d::emu::host_kernel_launches(*k) > 0, name << " never ran");
  }
}

TEST_CASE("varlen emulate: the kernel clamps cu_seqlens values it cannot check (CUDA tensors)") {
  // Validation reads host values, so the kernel's clamping is reached by changing them after it.
  REQUIRE_MESSAGE(emulate_available(), cc1d_last_error());
  std::mt19937 rng = test_rng(1103);
  for (int dt = 0; dt < 3; ++dt) {
    for (VarlenOut ol : {VarlenOut::Upstream, VarlenOut::Contiguous}) {
      VarlenRun r(VarlenCase{dt, 5, 16, 4, VarlenX::Rows, ol}, rng);
      const cc1d::VarlenProblem p = cc1d::validate_varlen(&r.a);
      const int64_t T = r.total;
      const int32_t bad[6] = {-5, static_cast<int32_t>(T) + 9, 2, 1, static_cast<int32_t>(T) - 1, 1 << 30};
      for (int i = 0; i < 6; ++i) r.cu.set(i, bad[i]);
      const cc1d::KernelLaunch l = cc1d::plan_varlen(p);
      const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(l.kernel);
      REQUIRE(k != nullptr);
      cc1d::emu::launch_host_kernel(*k, dim3(l.grid[0], l.grid[1], l.grid[2]), dim3(l.block[0], l.block[1], l.block[2]),
                                    0, l.params.data(), l.params.size(), cc1d::emu::options_from_env());
      // Clamped as documented: end to [0, T], begin to [0, end] (a decreasing pair is empty).
      for (int64_t b = 0; b < 5; ++b) {
        const int64_t end = std::clamp<int64_t>(bad[b + 1], 0, T);
        const int64_t begin = std::max(std::clamp<int64_t>(bad[b], 0, end), end - 4);
        for (int64_t d = 0; d < 16; ++d)
          for (int64_t s = 0; s < 4; ++s) {
            const int64_t t = end - 4 + s;
            const double want = t >= begin ? r.x.get(r.x.off({t, d})) : 0.0;
            REQUIRE_MESSAGE(r.out.get(r.out.off({b, d, s})) == want, "b=" << b << " d=" << d << " s=" << s);
          }
      }
    }
  }
}

TEST_CASE("varlen: the 16-byte path is planned exactly when every access is aligned") {
  std::mt19937 rng = test_rng(1104);
  auto plan = [](VarlenRun& r) { return cc1d::plan_varlen(cc1d::validate_varlen(&r.a)).kernel; };
  for (int dt = 0; dt < 3; ++dt) {
    const int n = dt == CC1D_FLOAT32 ? 4 : 8;  // elements per 16 bytes
    VarlenRun up(VarlenCase{dt, 3, 8 * n, 4}, rng);
    CHECK(plan(up) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), true));
    VarlenRun padded(VarlenCase{dt, 3, 2 * n, 4, VarlenX::Padded}, rng);
    CHECK(plan(padded) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), true));
    VarlenRun odd(VarlenCase{dt, 3, 8 * n + 1, 4}, rng);  // dim not a multiple of the vector
    CHECK(plan(odd) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), false));
    VarlenRun cf(VarlenCase{dt, 3, 8 * n, 4, VarlenX::Rows, VarlenOut::Contiguous}, rng);  // out's dim stride != 1
    CHECK(plan(cf) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), false));
    VarlenRun every(VarlenCase{dt, 3, 8 * n, 4, VarlenX::EveryOther}, rng);
    CHECK(plan(every) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), false));
    // x starting one element into its buffer, with at least one token (an empty x is never read,
    // so any pointer may take the vector path: 1 draw in 2000 of random lengths had none).
    VarlenRun shifted(VarlenCase{dt, 3, 8 * n, 4, VarlenX::Rows, VarlenOut::Upstream, false, 1}, rng);
    shifted.x.t.data = static_cast<char*>(shifted.x.t.data) + dtype_size(dt);  // only planned, never run
    CHECK(plan(shifted) == cc1d::varlen_kernel_name(static_cast<cc1d_dtype>(dt), false));
  }
  // The launch: one thread per vector along dim, state slots on y, sequences on z.
  VarlenRun r(VarlenCase{CC1D_FLOAT16, 7, 8 * 300, 3}, rng);
  const cc1d::KernelLaunch l = cc1d::plan_varlen(cc1d::validate_varlen(&r.a));
  CHECK(l.grid[0] == 3);  // 300 vectors / 128 threads
  CHECK(l.grid[1] == 3);
  CHECK(l.grid[2] == 7);
}

TEST_CASE("varlen cpu: bad cu_seqlens values fail before anything is written") { bad_values(CC1D_BACKEND_CPU); }

TEST_CASE("varlen emulate: the same value checks on host memory") {
  REQUIRE_MESSAGE(emulate_available(), cc1d_last_error());
  bad_values(CC1D_BACKEND_EMULATE);
}

TEST_CASE("varlen cpu: each argument's error names it") {
  const int cpu = CC1D_BACKEND_CPU;
  { Fixture f; f.r.x.t.ndim = 3; f.r.x.t.shape[2] = 1; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"x", "2-D", "got 3-D"}); }
  { Fixture f; f.r.x.t.dtype = CC1D_INT32; f.expect(cpu, CC1D_ERR_INVALID_TYPE, {"x", "float32, float16 or bfloat16", "int32"}); }
  { Fixture f; f.r.cu.t.dtype = CC1D_FLOAT32; f.expect(cpu, CC1D_ERR_INVALID_TYPE, {"cu_seqlens", "int32", "float32"}); }
  { Fixture f; f.r.cu.t.shape[0] = 0; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"cu_seqlens", "batch", "got -1"}); }
  { Fixture f; f.r.cu.t.shape[0] = 3; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "(batch=2, dim=8, state_len)", "(4, 8, 3)"}); }
  { Fixture f; f.r.out.t.shape[1] = 7; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "dim=8", "(4, 7, 3)"}); }
  { Fixture f; f.r.out.t.shape[2] = 0; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "state_len (out.shape[2]) must be in 1..1048576", "got 0"}); }
  { Fixture f; f.r.out.t.shape[2] = CC1D_MAX_VARLEN_STATE_LEN + 1; f.r.out.t.strides[0] = 1; f.r.out.t.strides[1] = 0; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "state_len", "1048577"}); }
  { Fixture f; f.r.out.t.dtype = CC1D_FLOAT16; f.expect(cpu, CC1D_ERR_INVALID_TYPE, {"out", "x's dtype", "float16"}); }
  { Fixture f; f.r.out.t.strides[0] = 0; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out", "stride 0"}); }
  { Fixture f; f.r.cu.t.device_type = CC1D_DEVICE_CUDA; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"cu_seqlens", "device of x"}); }
  { Fixture f; f.r.a.cu_seqlens = nullptr; f.expect(cpu, CC1D_ERR_NULL_POINTER, {"cu_seqlens", "required"}); }
  {
    Fixture f;  // an out that lies inside x's memory
    cc1d_tensor inside = f.r.out.t;
    inside.data = f.r.x.t.data;
    inside.shape[0] = 1;
    inside.shape[2] = 1;
    f.r.cu.t.shape[0] = 2;
    f.r.a.out = &inside;
    f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"out: overlaps x"});
  }
  { Fixture f; f.r.a.struct_size = 8; f.expect(cpu, CC1D_ERR_INVALID_ARGUMENT, {"sizeof(cc1d_varlen_states_args)"}); }
  { Fixture f; f.r.a.backend = 42; f.expect(42, CC1D_ERR_INVALID_ARGUMENT, {"42"}); }
  CHECK(cc1d_causal_conv1d_varlen_states(nullptr) == CC1D_ERR_NULL_POINTER);
}

TEST_CASE("varlen: an empty batch or dim writes nothing and succeeds on every backend") {
  for (int backend : {CC1D_BACKEND_CPU, CC1D_BACKEND_AUTO}) {
    std::mt19937 rng = test_rng(1105);
    VarlenRun r(VarlenCase{CC1D_FLOAT32, 0, 8, 3}, rng);
    r.a.backend = backend;
    CHECK_MESSAGE(cc1d_causal_conv1d_varlen_states(&r.a) == CC1D_OK, cc1d_last_error());
  }
}
