// test_self_test.cpp — cc1d_self_test through the public C ABI: it passes where a backend
// works (cpu, emulate, and the nvrtc backend on the fake libcuda), reports an unwritten output
// as a failure, and fails with the backend's own reason where none can serve. One scenario per
// process (ctest passes --test-case and the fake driver's environment; see gpu_tests.cmake).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cc1d/cc1d.h"

namespace {

cc1d_self_test_result run_ok(int32_t backend, int32_t device_type) {
  cc1d_self_test_result r{};
  r.struct_size = sizeof r;
  const cc1d_status s = cc1d_self_test(backend, device_type, 0, &r);
  INFO("cc1d_last_error: " << std::string(cc1d_last_error()));
  REQUIRE(s == CC1D_OK);
  return r;
}

void check_passed(const cc1d_self_test_result& r, int32_t backend) {
  CHECK(r.backend == backend);
  CHECK(r.passed == 1);
  CHECK(r.elements == 2 * 96 * 300);
  CHECK(r.mismatches == 0);
  CHECK(r.max_abs_error <= r.tolerance * 10);  // |ref| <= ~9 here
  CHECK(r.max_abs_error > 0);                  // an fp32 result is never bit-exact with float64
  CHECK(r.runs == 5);
  CHECK(r.first_ms > 0);
  CHECK(r.median_ms > 0);
}

// Scenarios that compile exit 77 (ctest: skipped) when libcc1d finds no usable NVRTC at all.
void require_nvrtc() {
  std::string rep(1 << 20, '\0');
  size_t n = 0;
  if (cc1d_report(&rep[0], rep.size(), &n) == CC1D_OK && rep.find("\"error\": \"\"}") != std::string::npos) return;
  std::printf("SKIPPED: libcc1d found no usable NVRTC (see cc1d_report's nvrtc_candidates)\n");
  std::exit(77);
}

}  // namespace

TEST_CASE("cpu") { check_passed(run_ok(CC1D_BACKEND_AUTO, CC1D_DEVICE_CPU), CC1D_BACKEND_CPU); }

TEST_CASE("emulate") { check_passed(run_ok(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CPU), CC1D_BACKEND_EMULATE); }

TEST_CASE("fake gpu") {
  require_nvrtc();
  check_passed(run_ok(CC1D_BACKEND_AUTO, CC1D_DEVICE_CUDA), CC1D_BACKEND_NVRTC);
  // CC1D_TEST_NVRTC_MAJOR: the scenario is meant for one NVRTC (the NVRTC 12 wheel on a CUDA 12
  // driver, say): the choice rules must have picked it, and it compiled what ran.
  if (const char* major = std::getenv("CC1D_TEST_NVRTC_MAJOR")) {
    std::string rep(1 << 20, '\0');
    size_t n = 0;
    REQUIRE(cc1d_report(&rep[0], rep.size(), &n) == CC1D_OK);
    INFO(rep.substr(0, n));
    CHECK(rep.find(std::string("\"nvrtc_version\": \"") + major + ".") != std::string::npos);
  }
  // A second run finds the kernel loaded: its first call no longer compiles.
  const cc1d_self_test_result again = run_ok(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA);
  check_passed(again, CC1D_BACKEND_NVRTC);
}

TEST_CASE("unwritten output fails") {
  // CC1D_FAKE_EXECUTE=0: launches are accepted but not run, so the poisoned output stays NaN.
  require_nvrtc();
  const cc1d_self_test_result r = run_ok(CC1D_BACKEND_AUTO, CC1D_DEVICE_CUDA);
  CHECK(r.passed == 0);
  CHECK(r.mismatches == r.elements);
  CHECK(std::isnan(r.max_abs_error));
}

TEST_CASE("no gpu backend") {
  cc1d_self_test_result r{};
  r.struct_size = sizeof r;
  CHECK(cc1d_self_test(CC1D_BACKEND_AUTO, CC1D_DEVICE_CUDA, 0, &r) == CC1D_ERR_BACKEND_UNAVAILABLE);
  const std::string msg = cc1d_last_error();
  INFO(msg);
  CHECK(msg.find("/nonexistent/libcuda.so.1") != std::string::npos);
  CHECK(msg.find("install the NVIDIA driver") != std::string::npos);
}

TEST_CASE("bad arguments") {
  cc1d_self_test_result r{};
  CHECK(cc1d_self_test(CC1D_BACKEND_AUTO, CC1D_DEVICE_CPU, 0, nullptr) == CC1D_ERR_NULL_POINTER);
  r.struct_size = 4;
  CHECK(cc1d_self_test(CC1D_BACKEND_AUTO, CC1D_DEVICE_CPU, 0, &r) == CC1D_ERR_INVALID_ARGUMENT);
  CHECK(std::string(cc1d_last_error()).find("struct_size") != std::string::npos);
  r.struct_size = sizeof r;
  CHECK(cc1d_self_test(CC1D_BACKEND_AUTO, 7, 0, &r) == CC1D_ERR_INVALID_ARGUMENT);
  CHECK(cc1d_self_test(99, CC1D_DEVICE_CPU, 0, &r) == CC1D_ERR_INVALID_ARGUMENT);
}
