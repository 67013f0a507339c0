// The NVRTC backend through the public C ABI, one scenario per process (the environment is read
// at first use; gpu_tests.cmake registers each test case as its own ctest with its environment).
// Without a GPU, the fake libcuda (tests/fake_driver/) stands in for libcuda.so.1: it checks
// what a real driver would (a current context, a cubin for the device's SM, the symbol in the
// image), counts every call and every name asked of cuGetProcAddress, so the launch path can be
// verified exactly, and runs each launch through the emulator on the tests' host buffers, so
// the results are checked too. NVRTC and kernels are real.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include "nvrtc_backend_support.h"

using namespace cc1d_test;

TEST_CASE("missing driver") {
  expect_unavailable({"/nonexistent/libcuda.so.1", "No such file", "install the NVIDIA driver"});
  CHECK(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CPU, 0) == CC1D_ERR_BACKEND_UNAVAILABLE);
  CHECK(has(cc1d_last_error(), "CUDA tensors only"));
  const std::string r = report();
  CHECK(has(r, "\"tried\": [{\"path\": \"/nonexistent/libcuda.so.1\""));
  CHECK(has(r, "\"nvrtc_candidates\": ["));
}

TEST_CASE("stub driver") {
  expect_unavailable({"stub library", "CUDA_ERROR_STUB_LIBRARY (34)", "stubs"});
  CHECK(has(report(), "\"cu_init\": 34"));
}

TEST_CASE("no device") {
  expect_unavailable({"no CUDA GPU visible", "CUDA_ERROR_NO_DEVICE (100)", "CUDA_VISIBLE_DEVICES"});
}

TEST_CASE("launch") {
  clean_cache_dir();
  REQUIRE(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_OK);
  Problem p;
  ok(p);
  auto c = counters();
  CHECK(c["cuLaunchKernel"] == 1);
  CHECK(c["cuModuleLoadData"] == 1);
  CHECK(c["cuModuleGetFunction"] == 1);
  CHECK(c["cuDevicePrimaryCtxRetain"] == 1);
  CHECK(c["cuCtxPushCurrent"] == c["cuCtxPopCurrent"]);
  CHECK(c["unknown_symbol"] == 0);
  CHECK(c["cuGetProcAddress_v2"] >= 16);  // resolved through cuGetProcAddress_v2 ...
  CHECK(c["cuGetProcAddress"] == c["cuGetProcAddress_v2"]);  // ... only
  for (const char* k : {"mem_alloc", "mem_free", "memcpy", "memset", "synchronize"}) {
    INFO(k);
    CHECK(c[k] == 0);
  }
  // Each allowed entry point asked for, and nothing else: never alloc/copy/sync entry points.
  const auto procs = requested_procs();
  for (const char* name : kAllowedProcs) CHECK_MESSAGE(procs.count(name) == 1, "never asked for " << name);
  for (const auto& [name, times] : procs) {
    const bool allowed = std::any_of(std::begin(kAllowedProcs), std::end(kAllowedProcs),
                                     [&](const char* a) { return name == a; });
    CHECK_MESSAGE(allowed, "asked cuGetProcAddress for " << name << " (" << times << "x)");
    // Independently of the list: a launch path that CUDA graphs can capture never allocates,
    // copies or synchronises (cuMem*; cuDeviceTotalMem only reads the device's size).
    for (const char* banned : {"cuMem", "Synchronize", "Alloc", "Free"})
      CHECK_MESSAGE(name.find(banned) == std::string::npos, "the runtime asked for " << name);
  }
  const FakeLaunch l = last_launch();
  CHECK(l.stream == reinterpret_cast<void*>(0x1234));
  CHECK(l.context_device == 0);
  CHECK(l.block[0] == 128);
  CHECK(l.block[1] == 1);
  CHECK(l.grid[1] == p.x.t.shape[0]);  // one grid row per batch
  CHECK(l.grid[0] >= 1);
  CHECK(l.shared == 0);
  CHECK(l.params.x == p.x.t.data);
  CHECK(l.params.weight == p.w.t.data);
  CHECK(l.params.bias == p.bias.t.data);
  CHECK(l.params.out == p.out.t.data);
  CHECK(l.params.seq_idx == nullptr);
  CHECK(l.params.batch == 2);
  CHECK(l.params.dim == 64);
  CHECK(l.params.seqlen == 100);
  CHECK(l.params.silu == 1);
  CHECK(l.params.x_stride[2] == 1);
  // Channel-first, aligned rows, silu: the vector path (its name ends in the path number).
  const std::string vec_silu = "Li" + std::to_string(cc1d::kFwdPathTimeVecSilu) + "E";
  CHECK(has(l.function, "causal_conv1d_fwd_kernelIffLi4E" + vec_silu));

  // Warm call: only push, launch, pop. No module work, no new symbols, nothing else.
  ok(p);
  auto c2 = counters();
  CHECK(c2.size() == c.size());
  CHECK(requested_procs() == procs);
  for (auto& [k, v] : c2) {
    INFO(k);
    const long expected = c[k] + (k == "cuLaunchKernel" || k == "cuCtxPushCurrent" || k == "cuCtxPopCurrent" ? 1 : 0);
    CHECK(v == expected);
  }
  // Another layout and dtype pair: new variants, each compiled and loaded once.
  Problem cl(0, CC1D_FLOAT32, CC1D_FLOAT32, Layout::ChannelLast);
  ok(cl);
  CHECK(has(last_launch().function,
            "causal_conv1d_fwd_kernelIffLi4ELi" + std::to_string(cc1d::kFwdPathChannelVecSilu) + "E"));
  CHECK(last_launch().params.x_stride[1] == 1);
  // Rows of 100 bf16 are 200 bytes, not a multiple of 16, but x's and out's rows start at the
  // same offsets mod 16: the vector path, which peels each row's unaligned head.
  Problem bf(0, CC1D_BFLOAT16, CC1D_FLOAT32);
  ok(bf);
  CHECK(has(last_launch().function, "causal_conv1d_fwd_kernelINS_6bf16_tEfLi4E" + vec_silu));
  // x's rows 206 elements apart, out's 100: their offsets mod 16 differ, so the generic path.
  Problem odd(0, CC1D_BFLOAT16, CC1D_FLOAT32, Layout::View);
  odd.out = HostTensor::contiguous(CC1D_BFLOAT16, {2, 64, 100});
  odd.out.t.device_type = CC1D_DEVICE_CUDA;
  ok(odd);
  ok(odd);
  CHECK(has(last_launch().function,
            "causal_conv1d_fwd_kernelINS_6bf16_tEfLi4ELi" + std::to_string(cc1d::kFwdPathTime) + "E"));
  CHECK(count("cuModuleLoadData") == 4);
  CHECK(count("cuLaunchKernel") == 6);
  const std::string r = report();
  CHECK(has(r, "\"mode\": \"cubin\""));
  CHECK(has(r, "\"target\": \"sm_90\""));
  CHECK(has(r, "\"writes\": 4"));
  CHECK(has(r, "\"origin\": \"compiled\""));
  CHECK(has(r, "\"name\": \"cc1d fake GPU (sm_90, emulated)\""));
  CHECK(has(r, "\"resolver\": \"cuGetProcAddress_v2\""));
}

TEST_CASE("two devices") {
  clean_cache_dir();
  Problem p0(0), p1(1);
  REQUIRE(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 1) == CC1D_OK);
  ok(p0);
  CHECK(count("cuDevicePrimaryCtxRetain") == 1);  // device 1 untouched so far: no context there
  ok(p1);  // the fake refuses a cubin whose SM differs from the current context's device
  CHECK(count("cuModuleLoadData") == 2);
  CHECK(count("cuDevicePrimaryCtxRetain") == 2);
  const std::string r = report();
  CHECK(has(r, "\"index\": 1, \"sm\": 80, \"usable\": true, \"mode\": \"cubin\", \"target\": \"sm_80\""));
  CHECK(has(r, "\"name\": \"cc1d fake GPU (sm_80, emulated)\""));
  CHECK(last_launch().params.out == p1.out.t.data);
  CHECK(last_launch().context_device == 1);
  Problem p2(2);
  CHECK(p2.run() == CC1D_ERR_INVALID_ARGUMENT);
  CHECK(has(cc1d_last_error(), "device 2 does not exist"));
  Problem mixed(0);
  mixed.w.t.device_index = 1;
  CHECK(mixed.run() == CC1D_ERR_INVALID_ARGUMENT);
}

TEST_CASE("concurrent first calls") {
  clean_cache_dir();
  auto burst = [](int dev) {
    std::vector<std::thread> threads;
    std::vector<cc1d_status> st(8, CC1D_ERR_INTERNAL);
    std::vector<std::string> diff(8);
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&st, &diff, t, dev] {
        Problem p(dev);
        st[t] = p.run();
        diff[t] = p.verify();
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 8; ++t) {
      CHECK(st[t] == CC1D_OK);
      CHECK(diff[t] == "");
    }
  };
  burst(0);
  CHECK(count("cuModuleLoadData") == 1);  // eight first calls, one compile and one load
  CHECK(count("cuLaunchKernel") == 8);
  burst(1);  // same SM on another device: loaded there, compiled nowhere
  CHECK(count("cuModuleLoadData") == 2);
  const std::string r = report();
  // Made by NVRTC, or (CC1D_TEST_MADE_BY) by the driver from the shipped PTX tier.
  const char* made = std::getenv("CC1D_TEST_MADE_BY");
  CHECK(has(r, std::string("\"origin\": \"") + (made ? made : "compiled") + "\""));
  CHECK(has(r, "\"origin\": \"memory cache\""));
  CHECK(has(r, "\"writes\": 1"));
}

TEST_CASE("compile error") {
  clean_cache_dir();
  Problem p;
  for (int attempt = 0; attempt < 2; ++attempt) {  // a failure is reported again, never cached
    CHECK(p.run() == CC1D_ERR_COMPILE);
    const std::string m = cc1d_last_error();
    INFO(m);
    CHECK(has(m, "fwd.cuh("));
    CHECK(has(m, "error"));
    CHECK(has(m, "broken_kernels"));
    CHECK(has(m, "cc1d::causal_conv1d_fwd_kernel<float, float, 4, " + std::to_string(cc1d::kFwdPathTimeVecSilu) + ">"));
  }
  CHECK(count("cuModuleLoadData") == 0);
  CHECK(has(report(), "\"writes\": 0"));
}

TEST_CASE("future SM gets PTX") {
  clean_cache_dir();
  Problem p;
  ok(p);
  CHECK(count("ptx_loads") == 1);
  const std::string r = report();
  CHECK(has(r, "\"mode\": \"ptx\", \"target\": \"compute_"));
}

TEST_CASE("SM below every NVRTC") {
  expect_unavailable({"device 0", "sm_30", "nothing at or below"}, false);
}

TEST_CASE("driver older than NVRTC") {
  // An 11.4 driver: CUDA 12/13 NVRTCs are ineligible. If this machine also has a CUDA 11
  // NVRTC, it must be the one chosen; otherwise the reason says to update the driver.
  if (cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_OK) {
    CHECK(has(report(), "\"nvrtc_version\": \"11."));
  } else {
    const std::string m = cc1d_last_error();
    INFO(m);
    CHECK(has(m, "driver supports CUDA 11.4"));
    CHECK(has(m, "update the NVIDIA driver"));
  }
}

TEST_CASE("launch error") {
  Problem p;
  CHECK(p.run() == CC1D_ERR_CUDA);
  const std::string m = cc1d_last_error();
  CHECK(has(m, "cuLaunchKernel"));
  CHECK(has(m, "CUDA_ERROR_LAUNCH_FAILED (719)"));
  CHECK(count("cuLaunchKernel") == 1);  // the driver was reached and said no
}

// Scenarios that compile (CC1D_TEST_NEEDS_NVRTC=1) exit 77 (ctest: skipped) when the library
// finds no usable NVRTC at all; the report is exactly what the backend itself discovered.
// CC1D_TEST_FRESH_CACHE=1 (a scenario whose directory later ones use): the cache directory is
// emptied before the library probes, so what they find there, NVRTC's facts included, is this
// run's and not an earlier build's.
int main(int argc, char** argv) {
  const char* fresh = std::getenv("CC1D_TEST_FRESH_CACHE");
  const char* dir = std::getenv("CAUSAL_CONV1D_CACHE_DIR");
  if (fresh != nullptr && std::string(fresh) == "1" && dir != nullptr) std::filesystem::remove_all(dir);
  const char* needs = std::getenv("CC1D_TEST_NEEDS_NVRTC");
  std::string rep(1 << 20, '\0');
  size_t n = 0;
  if (cc1d_report(&rep[0], rep.size(), &n) != CC1D_OK) rep.clear();
  if (needs != nullptr && std::string(needs) == "1" && !has(rep, "\"error\": \"\"}")) {
    std::printf("SKIPPED: libcc1d found no usable NVRTC (see cc1d_report's nvrtc_candidates)\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
