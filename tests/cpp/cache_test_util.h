// cache_test_util.h — helpers of the kernel cache's unit tests: fresh directories, keys, made-up
// images (random bytes: no NVRTC needed), files, captured log lines, and running a step in a
// child process with a deadline (so that a hang fails the test instead of stalling it).
#pragma once
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cc1d/cc1d.h"
#include "jit/image_cache.h"
#include "test_support.h"

namespace cache_test {

using cc1d_test::LogCapture;  // test_support.h

using namespace cc1d;

// The temporary directories this process made, removed when it exits (not by a forked child,
// which shares them with its parent).
struct TempDirs {
  const pid_t owner = getpid();
  std::vector<std::string> dirs;
  ~TempDirs() {
    if (getpid() != owner) return;
    for (const std::string& d : dirs) {
      std::error_code ec;
      std::filesystem::permissions(d, std::filesystem::perms::owner_all, ec);
      std::filesystem::remove_all(d, ec);
    }
  }
};

// A path in a fresh temporary directory (the path itself does not exist yet).
inline std::string fresh_dir(const char* tag) {
  static TempDirs made;
  char tmpl[] = "/tmp/cc1d_cache_test_XXXXXX";
  const char* d = mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  made.dirs.push_back(d);
  return std::string(d) + "/" + tag;
}

inline CacheKey key(const std::string& variant = "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>") {
  return CacheKey{"srchash", variant, "sm_90", "NVRTC 13.0", {"-arch=sm_90", "-std=c++17"}, CC1D_ABI_VERSION};
}

// A made-up image of `bytes` random bytes.
inline CompiledImage random_kernel(size_t bytes, uint32_t salt) {
  std::mt19937 rng = cc1d_test::test_rng(salt);
  CompiledImage k;
  k.image.resize(bytes);
  for (char& c : k.image) c = static_cast<char>(rng());
  k.lowered_name = "_Z6kernelv";
  k.target = "sm_90";
  return k;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Runs `step` in a child process: "" when it returned true within `seconds`, else what went
// wrong ("timed out" when it had to be killed).
inline std::string in_child(double seconds, const std::function<bool()>& step) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(step() ? 0 : 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "timed out";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "the step failed";
  return "killed by signal " + std::to_string(WTERMSIG(status));
}

}  // namespace cache_test
