// The NVRTC backend through the public C ABI, one scenario per process (the environment is read
// at first use; gpu_tests.cmake registers each test case as its own ctest with its environment).
// Without a GPU, the fake libcuda (tests/fake_driver/) stands in for libcuda.so.1: it checks
// what a real driver would (a current context, a cubin for the device's SM, the symbol in the
// image), counts every call and every name asked of cuGetProcAddress, so the launch path can be
// verified exactly, and runs each launch through the emulator on the tests' host buffers, so
// the results are checked too. NVRTC and kernels are real.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kernels_src/fwd_params.h"
#include "bwd_case.h"
#include "test_support.h"
#include "update_case.h"
#include "varlen_case.h"
#include "tests/fake_driver/fake_cuda.h"

using namespace cc1d_test;

namespace {

// The entry points libcc1d may resolve: its own list (cuda_api.def).
const char* const kAllowedProcs[] = {
#define CC1D_CUDA_FN(name, sym, ret, params) #name,
#include "runtime/src/nvrtc/cuda_api.def"
#undef CC1D_CUDA_FN
};

void* fake_driver() {
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

cc1d_fake_counters raw_counters() {
  cc1d_fake_counters c{};
  hook<void (*)(cc1d_fake_counters*)>("cc1d_fake_get_counters")(&c);
  return c;
}

// Every counter by name, so that a test can require that nothing but the expected ones moved.
std::map<std::string, long> counters() {
  const cc1d_fake_counters c = raw_counters();
  return {{"cuInit", c.init}, {"cuGetProcAddress", c.get_proc_address},
          {"cuGetProcAddress_v2", c.get_proc_address_v2}, {"unknown_symbol", c.proc_not_found},
          {"cuDevicePrimaryCtxRetain", c.ctx_retain}, {"cuDevicePrimaryCtxRelease", c.ctx_release},
          {"cuCtxPushCurrent", c.ctx_push}, {"cuCtxPopCurrent", c.ctx_pop}, {"cuModuleLoadData", c.module_load},
          {"cuModuleUnload", c.module_unload}, {"cuModuleGetFunction", c.get_function},
          {"cuLaunchKernel", c.launch}, {"ptx_loads", c.ptx_loads}, {"mem_alloc", c.mem_alloc},
          {"mem_free", c.mem_free}, {"memcpy", c.memcpy}, {"memset", c.memset}, {"synchronize", c.synchronize}};
}

long count(const char* what) {
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

FakeLaunch last_launch() {
  cc1d_fake_launch l{};
  REQUIRE(hook<int (*)(cc1d_fake_launch*)>("cc1d_fake_last_launch")(&l) == 1);
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
std::map<std::string, long> requested_procs() {
  auto name = hook<const char* (*)(int)>("cc1d_fake_requested_proc");
  auto times = hook<long (*)(const char*)>("cc1d_fake_proc_requests");
  std::map<std::string, long> m;
  for (int i = 0; name(i) != nullptr; ++i) m[name(i)] = times(name(i));
  CHECK(static_cast<long>(m.size()) == times(nullptr));
  return m;
}

void clean_cache_dir() {
  const char* d = std::getenv("CAUSAL_CONV1D_CACHE_DIR");
  REQUIRE(d != nullptr);
  std::filesystem::remove_all(d);
}

std::string report() {
  size_t n = 0;
  CHECK(cc1d_report(nullptr, 0, &n) == CC1D_ERR_BUFFER_TOO_SMALL);
  std::string s(n, '\0');
  REQUIRE(cc1d_report(&s[0], s.size(), &n) == CC1D_OK);
  s.resize(n - 1);
  return s;
}

bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

size_t occurrences(const std::string& s, const std::string& frag) {
  size_t n = 0;
  for (size_t at = s.find(frag); at != std::string::npos; at = s.find(frag, at + 1)) ++n;
  return n;
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
    RefInputs in;
    in.x = &x;
    in.w = &w;
    in.bias = &bias;
    in.silu = true;
    std::vector<double> want, fin;
    reference_fwd(in, want, fin);
    return compare(out, want, tolerance(static_cast<int>(x.t.dtype)));
  }
};

// Runs and requires success, showing the library's message otherwise, and the right output.
void ok(Problem& p) {
  p.out.fill_all(NAN);
  const cc1d_status s = p.run();
  INFO("cc1d_last_error: " << std::string(cc1d_last_error()));
  REQUIRE(s == CC1D_OK);
  CHECK(p.verify() == "");
}

// whole_backend: the driver itself is unusable (else only device 0 is).
void expect_unavailable(std::initializer_list<const char*> fragments, bool whole_backend = true) {
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
BwdCase bwd_case(Layout layout, bool deterministic) {
  BwdCase c{CC1D_BFLOAT16, CC1D_FLOAT32, 4, layout, 2, 24, layout == Layout::ChannelFirst ? 1024 : 1030,
            true, true, true, true, true};
  c.deterministic = deterministic;
  return c;
}

// One backward call on "device" memory (the caller's workspace) through the nvrtc backend,
// checked against the float64 reference.
void bwd_on_device(const BwdCase& c, std::mt19937& rng) {
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

}  // namespace

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
  Problem bf(0, CC1D_BFLOAT16, CC1D_FLOAT32);
  ok(bf);
  ok(bf);
  // Rows of 100 bf16 are 200 bytes, not a multiple of 16: the generic path.
  CHECK(has(last_launch().function,
            "causal_conv1d_fwd_kernelINS_6bf16_tEfLi4ELi" + std::to_string(cc1d::kFwdPathTime) + "E"));
  CHECK(count("cuModuleLoadData") == 3);
  CHECK(count("cuLaunchKernel") == 5);
  const std::string r = report();
  CHECK(has(r, "\"mode\": \"cubin\""));
  CHECK(has(r, "\"target\": \"sm_90\""));
  CHECK(has(r, "\"writes\": 3"));
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
  CHECK(has(r, "\"origin\": \"compiled\""));
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

// The disk cache scenarios' calls: a forward (one kernel) and a backward (three, compiled in one
// program). Returns the report.
namespace {
std::string forward_and_backward() {
  Problem p;
  ok(p);
  std::mt19937 rng = test_rng(80);
  bwd_on_device(bwd_case(Layout::ChannelFirst, false), rng);
  return report();
}
}  // namespace

// The warm process finds each kernel in its own entry, the backward's three included.
TEST_CASE("disk cache cold") {
  clean_cache_dir();
  const std::string r = forward_and_backward();
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 4);
  CHECK(occurrences(r, "\"program_kernels\": 3") == 3);
  CHECK(has(r, "\"writes\": 4"));
}

TEST_CASE("disk cache warm") {
  const std::string r = forward_and_backward();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"disk cache\"") == 4);
  CHECK(has(r, "\"misses\": 0"));
  CHECK(has(r, "\"writes\": 0"));
  CHECK_FALSE(has(r, "\"origin\": \"compiled\""));
  CHECK(count("cuModuleLoadData") == 4);
}

// Kernel sources whose bwd.cuh alone was edited, over the cold scenario's cache: an op's entries
// are keyed by its own files, so the forward's still serves and the backward's three compile.
TEST_CASE("disk cache after another op's edit") {
  const std::string r = forward_and_backward();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"disk cache\"") == 1);
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 3);
  CHECK(has(r, "\"writes\": 3"));
  // The report gives each op's digest (its cache keys'): 64 hex digits, one per op.
  const auto digest = [&](const char* op) {
    const size_t at = r.find(std::string("\"") + op + "\": \"", r.find("\"ops\": {"));
    return at == std::string::npos ? std::string() : r.substr(at + std::strlen(op) + 5, 64);
  };
  CHECK(digest("fwd").find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(digest("fwd").size() == 64);
  CHECK(digest("bwd").size() == 64);
  CHECK(digest("fwd") != digest("bwd"));
}

// Scenarios that compile (CC1D_TEST_NEEDS_NVRTC=1) exit 77 (ctest: skipped) when the library
// finds no usable NVRTC at all; the report is exactly what the backend itself discovered.
int main(int argc, char** argv) {
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

TEST_CASE("update launch") {
  // The decode-step update through the real NVRTC and the fake driver, on "device" memory,
  // against the float64 reference; the launch path allocates, copies and synchronises nothing.
  clean_cache_dir();
  std::mt19937 rng = test_rng(77);
  for (bool circular : {false, true}) {
    UpdateCase c{CC1D_BFLOAT16, CC1D_FLOAT32, 4, 5, 40, 3, 6, circular, true, true, false, true, true};
    UpdateRun r(c, rng);
    std::vector<double> want_out, want_state;
    r.reference(c, want_out, want_state);
    for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.state, &r.cache, &r.indices, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
    r.a.backend = CC1D_BACKEND_NVRTC;
    r.a.stream = reinterpret_cast<void*>(0x77);
    REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, cc1d_last_error());
    for (int64_t i = 0; i < c.B * c.D * c.L; ++i) {
      const int64_t b = i / (c.D * c.L), d = (i / c.L) % c.D, t = i % c.L;
      const double got = r.out.get(r.out.off({b, d, t}));
      REQUIRE_MESSAGE(std::fabs(got - want_out[i]) <= tolerance(c.xdt) * (1 + std::fabs(want_out[i])), i);
    }
    for (int64_t p = 0; p < r.pool; ++p)
      for (int64_t d = 0; d < c.D; ++d)
        for (int64_t s = 0; s < c.state_len; ++s)
          REQUIRE(r.state.get(r.state.off({p, d, s})) == want_state[(p * c.D + d) * c.state_len + s]);
  }
  CHECK(count("cuLaunchKernel") == 2);
  CHECK(count("cuModuleLoadData") == 1);
  for (const char* k : {"mem_alloc", "mem_free", "memcpy", "memset", "synchronize"}) CHECK(count(k) == 0);
  cc1d_fake_launch l{};
  REQUIRE(hook<int (*)(cc1d_fake_launch*)>("cc1d_fake_last_launch")(&l) == 1);
  CHECK(has(l.kernel, "causal_conv1d_update_kernel"));
  CHECK(l.stream == reinterpret_cast<void*>(0x77));

  // On device memory libcc1d does not read index values: an index out of range is a padding
  // row for the kernel (outputs 0, nothing written), never a write outside conv_state.
  UpdateCase c{CC1D_FLOAT32, CC1D_FLOAT32, 3, 3, 8, 1, 4, false, true, false, false, false, false};
  UpdateRun r(c, rng);
  r.indices.set(0, 1000);
  const std::vector<unsigned char> state_before = r.state.storage;
  std::vector<double> want_out, want_state;
  r.reference(c, want_out, want_state);  // the reference skips the row whose index is out of range
  for (HostTensor* t : {&r.x, &r.w, &r.bias, &r.state, &r.cache, &r.indices, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
  r.a.backend = CC1D_BACKEND_NVRTC;
  REQUIRE_MESSAGE(cc1d_causal_conv1d_update(&r.a) == CC1D_OK, cc1d_last_error());
  for (int64_t d = 0; d < c.D; ++d) CHECK(r.out.get(r.out.off({0, d, 0})) == 0.0);
  for (int64_t p = 0; p < r.pool; ++p)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t s = 0; s < c.state_len; ++s)
        REQUIRE(r.state.get(r.state.off({p, d, s})) == want_state[(p * c.D + d) * c.state_len + s]);
}

TEST_CASE("varlen launch") {
  // The varlen states through the real NVRTC and the fake driver, on "device" memory: the
  // 16-byte and the scalar kernels against the float64 reference; then cu_seqlens values that
  // host validation would refuse (libcc1d does not read device values), which the kernel clamps.
  clean_cache_dir();
  std::mt19937 rng = test_rng(79);
  auto on_device = [](VarlenRun& r) {
    for (HostTensor* t : {&r.x, &r.cu, &r.out}) t->t.device_type = CC1D_DEVICE_CUDA;
    r.a.backend = CC1D_BACKEND_NVRTC;
    r.a.stream = reinterpret_cast<void*>(0x79);
    REQUIRE_MESSAGE(cc1d_causal_conv1d_varlen_states(&r.a) == CC1D_OK, cc1d_last_error());
  };
  check_varlen_case(VarlenCase{CC1D_BFLOAT16, 9, 64, 3}, rng, on_device);
  check_varlen_case(VarlenCase{CC1D_FLOAT32, 5, 13, 4, VarlenX::ChannelMajor, VarlenOut::Contiguous}, rng, on_device);
  CHECK(count("cuLaunchKernel") == 2);
  for (const char* k : {"mem_alloc", "mem_free", "memcpy", "memset", "synchronize"}) CHECK(count(k) == 0);
  cc1d_fake_launch l{};
  REQUIRE(hook<int (*)(cc1d_fake_launch*)>("cc1d_fake_last_launch")(&l) == 1);
  CHECK(has(l.kernel, "causal_conv1d_varlen_states_kernel"));
  CHECK(l.stream == reinterpret_cast<void*>(0x79));

  VarlenRun r(VarlenCase{CC1D_FLOAT16, 3, 16, 4}, rng);
  const int64_t T = r.total;
  const int32_t bad[4] = {-3, static_cast<int32_t>(T) + 100, 1, static_cast<int32_t>(T)};
  for (int i = 0; i < 4; ++i) r.cu.set(i, bad[i]);
  on_device(r);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t end = std::clamp<int64_t>(bad[b + 1], 0, T);
    const int64_t begin = std::max(std::clamp<int64_t>(bad[b], 0, end), end - 4);
    for (int64_t d = 0; d < 16; ++d)
      for (int64_t s = 0; s < 4; ++s) {
        const int64_t t = end - 4 + s;
        REQUIRE(r.out.get(r.out.off({b, d, s})) == (t >= begin ? r.x.get(r.x.off({t, d})) : 0.0));
      }
  }
}

TEST_CASE("bwd launch") {
  // The backward through the real NVRTC and the fake driver, on "device" memory with the
  // caller's workspace, in both modes and both walks (time_seq: seq_idx is set; channel),
  // against the float64 reference; the launch path allocates, copies and synchronises nothing.
  clean_cache_dir();
  std::mt19937 rng = test_rng(78);
  long launches = 0;
  for (bool deterministic : {false, true})
    for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
      bwd_on_device(bwd_case(layout, deterministic), rng);
      launches += deterministic ? 2 : 3;  // (zero,) main, finalize
    }
  CHECK(count("cuLaunchKernel") == launches);
  for (const char* k : {"mem_alloc", "mem_free", "memcpy", "memset", "synchronize"}) CHECK(count(k) == 0);
  cc1d_fake_launch l{};
  REQUIRE(hook<int (*)(cc1d_fake_launch*)>("cc1d_fake_last_launch")(&l) == 1);
  CHECK(has(l.kernel, "causal_conv1d_bwd_finalize_kernel"));
  CHECK(l.stream == reinterpret_cast<void*>(0x78));
  // The first call's three kernels (zero, main, finalize) were compiled in one NVRTC program,
  // the channel layout's main kernel alone by the second call; each kernel has its own entry
  // and module, and the deterministic calls compiled nothing new.
  const std::string r = report();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"compiled\", \"program_kernels\": 3") == 3);
  CHECK(occurrences(r, "\"origin\": \"compiled\", \"program_kernels\": 1") == 1);
  CHECK(occurrences(r, "\"origin\": \"compiled\"") == 4);
  CHECK(has(r, "\"writes\": 4"));
  CHECK(count("cuModuleLoadData") == 4);
}
