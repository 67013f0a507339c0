// test_emulator_asan.cpp — built and registered only with CC1D_SANITIZE=ON: an out-of-bounds access
// from an emulated GPU thread, to shared or to global memory, is reported by AddressSanitizer.
// Each overrun runs in a child process (this binary re-executed), which ASan must abort.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fallback/emulator/launch.h"
#include "test_emulator_kernels.h"

namespace {

std::string g_self;

// "shared": 33 floats written into a 32-float CC1D_SHARED_ARRAY; "dynamic": a block of 32
// threads with dynamic shared memory for 31 floats; "global": the last thread reads one float
// past a heap buffer; "ok": everything in bounds.
int child(const std::string& what) {
  cc1d::emu::Launch l;
  l.grid = dim3(2);
  l.block = dim3(32);
  if (what == "shared") {
    std::vector<float> out(33);
    float* p = out.data();
    int n = 33;
    void* args[] = {&p, &n};
    l.kernel = "shared_overrun";
    l.fn = emu_kernels::shared_overrun;
    l.args = args;
    cc1d::emu::launch(l, {});
  } else {
    const size_t elems = what == "global" ? 63 : 64;  // the kernel reads 64
    std::vector<float> in(elems, 1.f), out(64);
    const float* pi = in.data();
    float* po = out.data();
    void* args[] = {&pi, &po};
    l.kernel = "reverse_dynamic_shared";
    l.fn = emu_kernels::reverse_dynamic_shared;
    l.args = args;
    l.dynamic_shared = (what == "dynamic" ? 31 : 32) * sizeof(float);
    cc1d::emu::launch(l, {});
  }
  std::printf("finished\n");
  return 0;
}

struct Result {
  int code;
  std::string err;
};

Result spawn(const std::string& what) {
  const std::string err_path = (std::filesystem::temp_directory_path() / ("cc1d_asan_" + what + std::to_string(getpid()))).string();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(err_path.c_str(), "w", stderr)) _exit(126);
    execl(g_self.c_str(), g_self.c_str(), "--child", what.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::remove(err_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ss.str()};
}

}  // namespace

TEST_CASE("an in-bounds kernel runs clean under ASan") {
  const Result r = spawn("ok");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("AddressSanitizer") == std::string::npos);
}

TEST_CASE("a static shared-memory overrun in an emulated thread is an ASan error") {
  const Result r = spawn("shared");
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
  CHECK(r.err.find("WRITE of size 4") != std::string::npos);
  CHECK(r.err.find("static_shared") != std::string::npos);  // allocated as the block's shared memory
}

TEST_CASE("a dynamic shared-memory overrun in an emulated thread is an ASan error") {
  const Result r = spawn("dynamic");
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
  CHECK(r.err.find("WRITE of size 4") != std::string::npos);
  CHECK(r.err.find("124-byte region") != std::string::npos);  // exactly the launch's 31 floats
}

TEST_CASE("a global-memory overrun in an emulated thread is an ASan error") {
  const Result r = spawn("global");
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
  CHECK(r.err.find("READ of size 4") != std::string::npos);
}

int main(int argc, char** argv) {
  g_self = std::filesystem::canonical("/proc/self/exe").string();
  if (argc >= 3 && std::string(argv[1]) == "--child") return child(argv[2]);
  doctest::Context context(argc, argv);
  return context.run();
}
