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

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_fake_driver_e2e.h"

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

namespace {

struct Child {
  int exit_code = -1;
  std::string out, err;
  // The value after "KEY " on the first line starting with it ("" if none).
  std::string line(const std::string& key) const {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (l.compare(0, key.size() + 1, key + " ") == 0) return l.substr(key.size() + 1);
    return "";
  }
  int count(const std::string& prefix) const {
    int n = 0;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) n += l.compare(0, prefix.size(), prefix) == 0;
    return n;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string g_self;

// Runs this binary with --child <scenario>; `env` is applied on top of the fake's defaults
// (an empty value unsets).
Child spawn(const std::string& scenario, const Env& env) {
  const fs::path dir = fs::temp_directory_path();
  std::string out_path = (dir / "cc1d_e2e_outXXXXXX").string(), err_path = (dir / "cc1d_e2e_errXXXXXX").string();
  const int ofd = mkstemp(&out_path[0]);
  const int efd = mkstemp(&err_path[0]);
  if (ofd < 0 || efd < 0) {  // also used from main(), outside any test case: no REQUIRE here
    Child failed;
    failed.err = "cannot create temporary files in " + dir.string();
    return failed;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    for (const char* k : {"CC1D_FAKE_SM", "CC1D_FAKE_DEVICE_COUNT", "CC1D_FAKE_DRIVER_VERSION", "CC1D_FAKE_FAULT",
                          "CC1D_FAKE_DEVICES", "CC1D_FAKE_INIT_RESULT", "CC1D_FAKE_LAUNCH_RESULT", "CC1D_FAKE_EXECUTE",
                          "CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT", "CAUSAL_CONV1D_NVRTC"})
      unsetenv(k);
    setenv("CAUSAL_CONV1D_CUDA_DRIVER", CC1D_FAKE_DRIVER_PATH, 1);
    setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
    setenv("CAUSAL_CONV1D_LOG_LEVEL", "info", 1);
    for (const auto& kv : env) kv.second.empty() ? unsetenv(kv.first.c_str()) : setenv(kv.first.c_str(), kv.second.c_str(), 1);
    dup2(ofd, 1);
    dup2(efd, 2);
    execl(g_self.c_str(), g_self.c_str(), "--child", scenario.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(ofd);
  close(efd);
  Child c;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.out = slurp(out_path);
  c.err = slurp(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return c;
}

struct CacheDir {
  std::string path;
  CacheDir() {
    path = (fs::temp_directory_path() / "cc1d_e2e_cacheXXXXXX").string();
    REQUIRE(mkdtemp(&path[0]) != nullptr);
  }
  ~CacheDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string explain(const Child& c) { return "exit " + std::to_string(c.exit_code) + "\nstdout:\n" + c.out + "\nstderr:\n" + c.err; }

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
  CHECK(c.line("LAST") == std::string("stream=0x1234 grid=3,2,1 block=128,1,1 shared=0 kernel=") + kGraphLowered);
}

TEST_CASE("an old driver makes the nvrtc backend unavailable, with the reason") {
  REQUIRE(g_min_nvrtc_major > 0);
  const std::string old = std::to_string((g_min_nvrtc_major - 1) * 1000 + 800);
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
  CacheDir cache;
  const Child first = spawn("one", {{"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
  INFO(explain(first));
  REQUIRE(first.exit_code == 0);
  REQUIRE(first.line("STATUS") == "0 ");
  CHECK(first.line("REPORT").find("\"origin\": \"compiled\"") != std::string::npos);
  const Child second = spawn("one", {{"CAUSAL_CONV1D_CACHE_DIR", cache.path}});
  INFO(explain(second));
  REQUIRE(second.exit_code == 0);
  REQUIRE(second.line("STATUS") == "0 ");
  CHECK(second.line("REPORT").find("\"origin\": \"disk cache\"") != std::string::npos);
  CHECK(second.line("REPORT").find("\"origin\": \"compiled\"") == std::string::npos);
  CHECK(second.line("RESULT") == "ok");
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
