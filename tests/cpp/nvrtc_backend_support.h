// nvrtc_backend_support.h — what the NVRTC backend scenarios (test_nvrtc_backend*.cpp) share:
// the fake driver's hooks and counters, the report, and a forward and a backward problem on
// "device" memory run through the nvrtc backend and checked against the float64 reference.
#pragma once
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels_src/fwd_params.h"
#include "bwd_case.h"
#include "test_support.h"
#include "update_case.h"
#include "varlen_case.h"
#include "tests/fake_driver/fake_cuda.h"

namespace cc1d_test {

// The entry points libcc1d may resolve: its own list (cuda_api.def).
const char* const kAllowedProcs[] = {
#define CC1D_CUDA_FN(name, sym, ret, params) #name,
#include "runtime/src/nvrtc/cuda_api.def"
#undef CC1D_CUDA_FN
};

inline void* fake_driver() {
  const char* path = std::getenv("CC1D_TEST_FAKE_DRIVER");
  REQUIRE(path != nullptr);
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // the copy libcc1d loaded
  REQUIRE_MESSAGE(h != nullptr, "libcc1d did not load the fake driver");
  return h;
}

template <typename F>
F hook(const char* name) {
  void* fn = dlsym(fake_driver(), name);
  REQUIRE_MESSAGE(fn != nullptr, name);
  return reinterpret_cast<F>(fn);
}

inline cc1d_fake_counters raw_counters() {
  cc1d_fake_counters c{};
  hook<void (*)(cc1d_fake_counters*)>("cc1d_fake_get_counters")(&c);
  return c;
}

// Every counter by name, so that a test can require that nothing but the expected ones moved.
inline std::map<std::string, long> counters() {
  const cc1d_fake_counters c = raw_counters();
  return {{"cuInit", c.init}, {"cuGetProcAddress", c.get_proc_address},
          {"cuGetProcAddress_v2", c.get_proc_address_v2}, {"unknown_symbol", c.proc_not_found},
          {"cuDevicePrimaryCtxRetain", c.ctx_retain}, {"cuDevicePrimaryCtxRelease", c.ctx_release},
          {"cuCtxPushCurrent", c.ctx_push}, {"cuCtxPopCurrent", c.ctx_pop}, {"cuModuleLoadData", c.module_load},
          {"cuModuleUnload", c.module_unload}, {"cuModuleGetFunction", c.get_function},
          {"cuLaunchKernel", c.launch}, {"ptx_loads", c.ptx_loads}, {"mem_alloc", c.mem_alloc},
          {"mem_free", c.mem_free}, {"memcpy", c.memcpy}, {"memset", c.memset}, {"synchronize", c.synchronize}};
}

inline long count(const char* what) {
  const auto c = counters();
  auto it = c.find(what);
  REQUIRE_MESSAGE(it != c.end(), what);
  return it->second;
}

// The last successful launch, with its FwdParams as the kernel received them.
struct FakeLaunch {
  unsigned grid[3], block[3], shared;
  void* stream;
  int context_device;  // the device whose context was current
  cc1d::FwdParams params;
  std::string function;
};

// The fake driver's record of the last successful launch, as it keeps it.
inline cc1d_fake_launch raw_last_launch() {
  cc1d_fake_launch l{};
  REQUIRE(hook<int (*)(cc1d_fake_launch*)>("cc1d_fake_last_launch")(&l) == 1);
  return l;
}

inline FakeLaunch last_launch() {
  const cc1d_fake_launch l = raw_last_launch();
  static_assert(sizeof(cc1d::FwdParams) <= sizeof l.params, "cc1d_fake_launch.params is too small");
  REQUIRE(l.params_bytes == sizeof(cc1d::FwdParams));
  FakeLaunch out{};
  std::memcpy(out.grid, l.grid, sizeof out.grid);
  std::memcpy(out.block, l.block, sizeof out.block);
  out.shared = l.shared_bytes;
  out.stream = l.stream;
  out.context_device = l.context_device;
  std::memcpy(&out.params, l.params, sizeof out.params);
  out.function = l.kernel;
  return out;
}

// The distinct names libcc1d asked of cuGetProcAddress(_v2), and how often each.
inline std::map<std::string, long> requested_procs() {
  auto name = hook<const char* (*)(int)>("cc1d_fake_requested_proc");
  auto times = hook<long (*)(const char*)>("cc1d_fake_proc_requests");
  std::map<std::string, long> m;
  for (int i = 0; name(i) != nullptr; ++i) m[name(i)] = times(name(i));
  CHECK(static_cast<long>(m.size()) == times(nullptr));
  return m;
}

// Empties the scenario's kernel cache: its entries go; the NVRTC facts that this process's
// discovery left beside them (nvrtc_memo.h) stay, as a later process would find them.
inline void clean_cache_dir() {
  const char* d = std::getenv("CAUSAL_CONV1D_CACHE_DIR");
  REQUIRE(d != nullptr);
  std::filesystem::remove_all(std::string(d) + "/kernels-v3");
}

inline std::string report() {
  size_t n = 0;
  CHECK(cc1d_report(nullptr, 0, &n) == CC1D_ERR_BUFFER_TOO_SMALL);
  std::string s(n, '\0');
  REQUIRE(cc1d_report(&s[0], s.size(), &n) == CC1D_OK);
  s.resize(n - 1);
  return s;
}

inline bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

// Whether any libnvrtc is mapped in this process.
inline bool nvrtc_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (has(line, "/libnvrtc.so")) return true;
  return false;
}

inline size_t occurrences(const std::string& s, const std::string& frag) {
  size_t n = 0;
  for (size_t at = s.find(frag); at != std::string::npos; at = s.find(frag, at + 1)) ++n;
  return n;
}

// The launch path allocated, copied and synchronised nothing (what CUDA-graph capture needs),
// and the last launch ran a kernel whose name holds `kernel`, on the caller's `stream`.
inline void check_graph_safe_launch(const char* kernel, void* stream) {
  for (const char* k : {"mem_alloc", "mem_free", "memcpy", "memset", "synchronize"}) CHECK(count(k) == 0);
  const cc1d_fake_launch l = raw_last_launch();
  CHECK(has(l.kernel, kernel));
  CHECK(l.stream == stream);
}

// A forward problem on "CUDA" device `dev`: random inputs in host memory, which the fake
// driver's emulated launch reads and writes as device memory; out starts as NaN.
struct Problem {
  HostTensor x, w, bias, out;
  cc1d_fwd_args a{};
  Problem(int dev = 0, int xdt = CC1D_FLOAT32, int wdt = CC1D_FLOAT32, Layout layout = Layout::ChannelFirst,
          int64_t B = 2, int64_t D = 64, int64_t L = 100, int W = 4)
      : x(make_x(xdt, B, D, L, layout)),
        w(HostTensor::contiguous(wdt, {D, W})),
        bias(HostTensor::contiguous(wdt, {D})),
        out(make_x(xdt, B, D, L, layout)) {
    std::mt19937 rng = test_rng(static_cast<unsigned>(1000 * dev + 10 * xdt + wdt));
    for (HostTensor* t : {&x, &w, &bias}) t->randomize(rng, 0.5);
    out.fill_all(NAN);
    for (HostTensor* t : {&x, &w, &bias, &out}) {
      t->t.device_type = CC1D_DEVICE_CUDA;
      t->t.device_index = dev;
    }
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.weight = &w.t;
    a.bias = &bias.t;
    a.out = &out.t;
    a.activation = CC1D_ACT_SILU;
    a.backend = CC1D_BACKEND_NVRTC;
    a.stream = reinterpret_cast<void*>(0x1234);
  }
  cc1d_status run() { return cc1d_causal_conv1d_fwd(&a); }
  // "" when out matches the float64 reference, else the first mismatch.
  std::string verify() const {
    return reference_diff(out, x, w, &bias, true);
  }
};

// Runs and requires success, showing the library's message otherwise, and the right output.
inline void ok(Problem& p) {
  p.out.fill_all(NAN);
  const cc1d_status s = p.run();
  INFO("cc1d_last_error: " << std::string(cc1d_last_error()));
  REQUIRE(s == CC1D_OK);
  CHECK(p.verify() == "");
}

// whole_backend: the driver itself is unusable (else only device 0 is).
inline void expect_unavailable(std::initializer_list<const char*> fragments, bool whole_backend = true) {
  CHECK(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_ERR_BACKEND_UNAVAILABLE);
  std::string msg = cc1d_last_error();
  INFO("message: " << msg);
  for (const char* f : fragments) CHECK_MESSAGE(has(msg, f), "missing '" << f << "'");
  CHECK(msg.find('\n') == std::string::npos);  // one line
  Problem p;
  CHECK(p.run() == CC1D_ERR_BACKEND_UNAVAILABLE);
  CHECK(std::string(cc1d_last_error()) == msg);
  const std::string r = report();
  if (whole_backend)
    CHECK(has(r, "\"nvrtc\": {\"compiled_in\": true, \"available\": false"));
  else
    CHECK(has(r, "\"index\": 0, \"sm\": 30, \"usable\": false"));
}

// A backward problem with every input and output, 2 x 24 x ~1024 bf16 (fp32 weights).
inline BwdCase bwd_case(Layout layout, bool deterministic) {
  BwdCase c{CC1D_BFLOAT16, CC1D_FLOAT32, 4, layout, 2, 24, layout == Layout::ChannelFirst ? 1024 : 1030,
            true, true, true, true, true};
  c.deterministic = deterministic;
  return c;
}

// One backward call on "device" memory (the caller's workspace) through the nvrtc backend,
// checked against the float64 reference.
inline void bwd_on_device(const BwdCase& c, std::mt19937& rng) {
  BwdRun r(c, rng);
  int64_t n = 0;
  REQUIRE(cc1d_causal_conv1d_bwd_workspace(&r.a, &n) == CC1D_OK);
  HostTensor ws = HostTensor::contiguous(CC1D_FLOAT32, {n});
  for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.seq, &r.init, &r.dout, &r.dfinal, &r.dx, &r.dweight, &r.dbias,
                        &r.dinit, &ws})
    t->t.device_type = CC1D_DEVICE_CUDA;
  r.a.workspace = &ws.t;
  r.a.backend = CC1D_BACKEND_NVRTC;
  r.a.stream = reinterpret_cast<void*>(0x78);
  INFO(describe(c));
  REQUIRE_MESSAGE(cc1d_causal_conv1d_bwd(&r.a) == CC1D_OK, std::string(cc1d_last_error()));
  check_bwd(r, r.reference());
}

}  // namespace cc1d_test
