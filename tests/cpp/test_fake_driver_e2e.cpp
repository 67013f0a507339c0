// test_fake_driver_e2e.cpp — the REAL GPU path of libcc1d (nvrtc backend: NVRTC compile ->
// cubin cache -> cuModuleLoadData -> cuLaunchKernel) against the fake libcuda, whose launches
// run in the kernel emulator. Only the public C ABI of the shared libcc1d is used.
//
// The runtime probes the driver once per process, so every scenario runs in a child process
// (this binary re-executed with --child <scenario>) with its own environment: the fake's SM,
// driver version and fault switches, a private CAUSAL_CONV1D_CACHE_DIR. Exits 77 (ctest: skipped)
// when no usable NVRTC exists on this machine, saying so.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "e2e_spawn.h"
#include "test_fake_driver_e2e.h"

namespace fs = std::filesystem;

namespace {

int g_min_nvrtc_major = 0;  // smallest CUDA major among the usable NVRTCs

}  // namespace

TEST_CASE("the real runtime on the fake: NVRTC cubins, emulated launches, results match the reference") {
  // Every dtype pair and width on sm_90; a few variants on an sm_80 and an sm_120 device.
  for (const char* sm : {"90", "80", "120"}) {
    CacheDir cache;
    CAPTURE(sm);
    const bool all = std::string(sm) == "90";
    const Child c = spawn(all ? "fwd" : "fwd-small", {{"CC1D_FAKE_SM", sm}, {"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
    INFO(explain(c));
    REQUIRE(c.exit_code == 0);
    CHECK(c.count("CASE ") == (all ? kE2eCases : kE2eSmallCases));
    CHECK(c.count("CASE ") == c.count("CASE OK "));
    // Every variant was compiled for exactly this device's SM (the fake rejects anything else).
    CHECK(c.line("REPORT").find(std::string("\"target\": \"sm_") + sm + "\"") != std::string::npos);
  }
}

TEST_CASE("CUDA-graph safety: the launch path never allocates, copies or synchronises") {
  CacheDir cache;
  const Child c = spawn("graph", {{"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
  INFO(explain(c));
  REQUIRE(c.exit_code == 0);
  // Over the whole process (probe, compile, load and launches).
  CHECK(c.line("TOTAL") == "alloc=0 free=0 memcpy=0 memset=0 sync=0");
  // After the first call: each further call is exactly one launch in a pushed/popped context.
  CHECK(c.line("STEADY") == "launch=5 push=5 pop=5 load=0 get_function=0 alloc=0 memcpy=0 memset=0 sync=0");
  // 3 rows of one 1024-step segment each, a warp per segment: one block per batch row.
  CHECK(c.line("LAST") == std::string("stream=0x1234 grid=1,2,1 block=128,1,1 shared=0 kernel=") + kGraphLowered);
}

TEST_CASE("CUDA-graph capture: a first call inside the caller's capture loads its module and keeps the capture valid") {
  CacheDir cache;  // empty: the call compiles and loads inside the capture
  const Child c = spawn("capture", {{"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
  INFO(explain(c));
  REQUIRE(c.exit_code == 0);
  // The load ran in relaxed mode, the capture stayed valid, and the thread's mode is back to global.
  CHECK(c.line("CAPTURE") == "status=0 end=0 mode=0");
  CHECK(c.line("RESULT") == "ok");
}

TEST_CASE("an old driver makes the nvrtc backend unavailable, with the reason") {
  REQUIRE(g_min_nvrtc_major > 0);
  // CUDA (major - 1).8, as the driver writes it (12080): older than every NVRTC found, and than
  // every NVRTC that made the shipped PTX tier (the newest of the previous major, 12.9, at most).
  const std::string old = std::to_string((g_min_nvrtc_major - 1) * 1000 + 80);
  CacheDir cache;
  const Child c = spawn("one", {{"CC1D_FAKE_DRIVER_VERSION", old}, {"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
  INFO(explain(c));
  REQUIRE(c.exit_code == 0);
  CHECK(c.line("AVAILABLE").rfind("5 ", 0) == 0);
  CHECK(c.line("STATUS").rfind("5 ", 0) == 0);  // CC1D_ERR_BACKEND_UNAVAILABLE
  CHECK(c.line("STATUS").find("update the NVIDIA driver") != std::string::npos);
  CHECK(c.line("UNTOUCHED") == "1");
}

TEST_CASE("fault switches surface as the right status and message") {
  struct Fault {
    Env env;
    int status;
    const char* text;
  };
  const Fault faults[] = {
      {{{"CC1D_FAKE_FAULT", "no_device"}}, 5, "no CUDA GPU visible"},
      {{{"CC1D_FAKE_DEVICE_COUNT", "0"}}, 5, "no CUDA GPU visible"},
      {{{"CC1D_FAKE_FAULT", "stub"}}, 5, "stub"},
      {{{"CC1D_FAKE_FAULT", "module_load"}}, 5, "CUDA_ERROR_INVALID_IMAGE"},  // callers fall back
      {{{"CC1D_FAKE_FAULT", "launch"}}, 7, "CUDA_ERROR_LAUNCH_FAILED"},
  };
  for (const Fault& f : faults) {
    CacheDir cache;
    Env env = f.env;
    env.push_back({"CAUSAL_CONV1D_CACHE_DIR", cache.path});
    const Child c = spawn("one", env);
    INFO(explain(c));
    CAPTURE(f.text);
    REQUIRE(c.exit_code == 0);
    CHECK(c.line("STATUS").rfind(std::to_string(f.status) + " ", 0) == 0);
    CHECK(c.line("STATUS").find(f.text) != std::string::npos);
    CHECK(c.line("UNTOUCHED") == "1");  // nothing written on failure
  }
}

TEST_CASE("a second process finds every cubin in the disk cache and compiles nothing") {
  // Made by NVRTC, or by the driver from the shipped PTX tier (when this build embeds one).
  for (const char* tier : {"0", "1"}) {
    CAPTURE(tier);
    CacheDir cache;
    const Env env = {{"CAUSAL_CONV1D_CACHE_DIR", cache.path},
                     {"CAUSAL_CONV1D_PTX_TIER", tier}};
    const Child first = spawn("one", env);
    INFO(explain(first));
    REQUIRE(first.exit_code == 0);
    REQUIRE(first.line("STATUS") == "0 ");
    const bool shipped = std::string(tier) == "1" && first.line("REPORT").find("\"ptx_tier\": {\"kernels\": 0,") ==
                                                          std::string::npos;
    const std::string made = shipped ? "\"origin\": \"shipped PTX\"" : "\"origin\": \"compiled\"";
    CHECK(first.line("REPORT").find(made) != std::string::npos);
    const Child second = spawn("one", env);
    INFO(explain(second));
    REQUIRE(second.exit_code == 0);
    REQUIRE(second.line("STATUS") == "0 ");
    CHECK(second.line("REPORT").find("\"origin\": \"disk cache\"") != std::string::npos);
    CHECK(second.line("REPORT").find(made) == std::string::npos);
    CHECK(second.line("RESULT") == "ok");
  }
}

int main(int argc, char** argv) {
  g_self = fs::canonical("/proc/self/exe").string();
  if (argc >= 3 && std::string(argv[1]) == "--child") return e2e_child_main(argv[2]);
  // Which NVRTCs does the runtime see here? Without one the GPU path cannot be exercised.
  const Child probe = spawn("report", {{"CAUSAL_CONV1D_CACHE_DIR", "off"}});
  const std::string report = probe.line("REPORT");
  if (probe.exit_code != 0 || report.find("\"nvrtc_candidates\"") == std::string::npos) {
    std::printf("FAILED: the report child did not produce a report (%s)\n", explain(probe).c_str());
    return 1;  // a broken runtime must fail here, not be mistaken for a machine without NVRTC
  }
  const size_t from = report.find("\"nvrtc_candidates\"");
  const size_t to = report.find("\"nvrtc_not_found\"");
  if (from != std::string::npos && to != std::string::npos) {
    const std::string cands = report.substr(from, to - from);
    const std::regex version("\"version\": \"([0-9]+)\\.[0-9]+\"");
    for (std::sregex_iterator it(cands.begin(), cands.end(), version), end; it != end; ++it) {
      const int major = std::stoi((*it)[1]);
      if (g_min_nvrtc_major == 0 || major < g_min_nvrtc_major) g_min_nvrtc_major = major;
    }
  }
  if (g_min_nvrtc_major == 0) {
    std::printf("SKIPPED: no usable libnvrtc on this machine, so the nvrtc backend cannot be exercised "
                "(report: %s)\n", report.empty() ? probe.err.c_str() : report.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
