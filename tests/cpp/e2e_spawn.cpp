#include "e2e_spawn.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_fake_driver_e2e.h"

namespace fs = std::filesystem;

std::string g_self;

std::string Child::line(const std::string& key) const {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.compare(0, key.size() + 1, key + " ") == 0) return l.substr(key.size() + 1);
  return "";
}

int Child::count(const std::string& prefix) const {
  int n = 0;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) n += l.compare(0, prefix.size(), prefix) == 0;
  return n;
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Started start_child(const std::string& scenario, const Env& env) {
  Started s;
  const fs::path dir = fs::temp_directory_path();
  s.out_path = (dir / "cc1d_e2e_outXXXXXX").string();
  s.err_path = (dir / "cc1d_e2e_errXXXXXX").string();
  const int ofd = mkstemp(&s.out_path[0]);
  const int efd = mkstemp(&s.err_path[0]);
  if (ofd < 0 || efd < 0) {  // also used from main(), outside any test case: no REQUIRE here
    s.error = "cannot create temporary files in " + dir.string();
    return s;
  }
  s.pid = fork();
  if (s.pid == 0) {
    for (const char* k : {"CC1D_FAKE_SM", "CC1D_FAKE_DEVICE_COUNT", "CC1D_FAKE_DRIVER_VERSION", "CC1D_FAKE_FAULT",
                          "CC1D_FAKE_DEVICES", "CC1D_FAKE_INIT_RESULT", "CC1D_FAKE_LAUNCH_RESULT", "CC1D_FAKE_EXECUTE",
                          "CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT", "CAUSAL_CONV1D_NVRTC",
                          "CAUSAL_CONV1D_CACHE_PATH", "CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT", "CC1D_TEST_START_FILE"})
      unsetenv(k);
    setenv("CAUSAL_CONV1D_CUDA_DRIVER", CC1D_FAKE_DRIVER_PATH, 1);
    setenv("CAUSAL_CONV1D_EMULATE_CHECK", "1", 1);
    setenv("CAUSAL_CONV1D_LOG_LEVEL", "info", 1);
    // In the sanitizer job, no leak check in the children: LeakSanitizer's tracer reads a bogus
    // dynamic-TLS block of the dlopen()ed NVRTC at exit and crashes ("Tracer caught signal 11",
    // google/sanitizers#1353), every time in some children (the module_load fault's, since the
    // NVRTC facts changed the order of discovery's dlopen calls), which fails them. AddressSanitizer
    // and UBSan still check every child; the in-process nvrtc_backend scenarios check the same
    // paths for leaks.
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string opts = asan != nullptr ? asan : "";
    if (!opts.empty()) opts += ':';
    setenv("ASAN_OPTIONS", (opts + "detect_leaks=0").c_str(), 1);
    for (const auto& kv : env) kv.second.empty() ? unsetenv(kv.first.c_str()) : setenv(kv.first.c_str(), kv.second.c_str(), 1);
    dup2(ofd, 1);
    dup2(efd, 2);
    execl(g_self.c_str(), g_self.c_str(), "--child", scenario.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(ofd);
  close(efd);
  if (s.pid < 0) s.error = "fork failed";
  return s;
}

Child finish_child(const Started& s) {
  Child c;
  if (s.pid < 0) {
    c.err = s.error;
    return c;
  }
  int status = 0;
  waitpid(s.pid, &status, 0);
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.out = slurp(s.out_path);
  c.err = slurp(s.err_path);
  unlink(s.out_path.c_str());
  unlink(s.err_path.c_str());
  return c;
}

std::string explain(const Child& c) {
  return "exit " + std::to_string(c.exit_code) + "\nstdout:\n" + c.out + "\nstderr:\n" + c.err;
}

CacheDir::CacheDir() {
  path = (fs::temp_directory_path() / "cc1d_e2e_cacheXXXXXX").string();
  REQUIRE(mkdtemp(&path[0]) != nullptr);
}

CacheDir::~CacheDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}
