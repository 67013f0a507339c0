// test_fake_driver_e2e_child.cpp — scenarios run in a child process by test_fake_driver_e2e.cpp.
// Each uses only libcc1d's C ABI on "CUDA" tensors (host memory: the fake driver's device
// memory), with the nvrtc backend, and prints what the parent checks as "KEY value" lines.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_fake_driver_e2e.h"
#include "test_support.h"
#include "tests/fake_driver/fake_cuda.h"

using namespace cc1d_test;

namespace {

struct Problem {
  int xdt, wdt, width;
  Layout layout;
  int64_t B, D, L;
  bool bias, silu, seq, init, fin;
  HostTensor x, w, b, s, i, out, f;

  void make(std::mt19937& rng) {
    x = make_x(xdt, B, D, L, layout);
    x.randomize(rng);
    w = HostTensor::contiguous(wdt, {D, width});
    w.randomize(rng, 0.5);
    b = HostTensor::contiguous(wdt, {D});
    b.randomize(rng);
    s = HostTensor::contiguous(CC1D_INT32, {B, L});
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t t = 0; t < L; ++t) s.set(s.off({bb, t}), t % 11 < 2 ? -1 : t / 13);
    i = HostTensor::contiguous(xdt, {B, D, width - 1});
    i.randomize(rng);
    out = make_x(xdt, B, D, L, layout);
    out.fill_all(NAN);
    f = HostTensor::contiguous(xdt, {B, D, width - 1});
    f.fill_all(NAN);
    for (HostTensor* t : {&x, &w, &b, &s, &i, &out, &f}) t->t.device_type = CC1D_DEVICE_CUDA;
  }

  cc1d_status run(void* stream) {
    cc1d_fwd_args a{};
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.weight = &w.t;
    a.bias = bias ? &b.t : nullptr;
    a.seq_idx = seq ? &s.t : nullptr;
    a.initial_states = init ? &i.t : nullptr;
    a.out = &out.t;
    a.final_states = fin ? &f.t : nullptr;
    a.activation = silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
    a.backend = CC1D_BACKEND_NVRTC;
    a.stream = stream;
    return cc1d_causal_conv1d_fwd(&a);
  }

  // "" or the first mismatch against the float64 reference.
  std::string check() const {
    RefInputs in;
    in.x = &x;
    in.w = &w;
    in.bias = bias ? &b : nullptr;
    in.seq = seq ? &s : nullptr;
    in.init = init ? &i : nullptr;
    in.silu = silu;
    std::vector<double> want_out, want_fin;
    reference_fwd(in, want_out, want_fin);
    std::string d = compare(out, want_out, tolerance(xdt));
    if (d.empty() && fin) d = compare(f, want_fin, tolerance(xdt));
    return d;
  }

  bool untouched() const {
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t c = 0; c < D; ++c)
        for (int64_t t = 0; t < L; ++t)
          if (!std::isnan(out.get(out.off({bb, c, t})))) return false;
    return true;
  }

  std::string describe() const {
    return std::string(cc1d_test_dtype(xdt)) + "/" + cc1d_test_dtype(wdt) + " W=" + std::to_string(width) +
           (layout == Layout::ChannelLast ? " channel-last" : " channel-first") + " L=" + std::to_string(L);
  }
  static const char* cc1d_test_dtype(int d) { return d == CC1D_FLOAT32 ? "f32" : d == CC1D_FLOAT16 ? "f16" : "bf16"; }
};

void print_report() {
  size_t needed = 0;
  cc1d_report(nullptr, 0, &needed);
  std::string buf(needed, '\0');
  if (cc1d_report(&buf[0], buf.size(), &needed) != CC1D_OK) buf = "report failed";
  buf.resize(std::strlen(buf.c_str()));
  for (char& ch : buf)
    if (ch == '\n') ch = ' ';
  std::printf("REPORT %s\n", buf.c_str());
}

Problem graph_problem() { return Problem{CC1D_FLOAT32, CC1D_FLOAT32, 4, Layout::ChannelFirst, 2, 3, 50, false, true, false, false, false}; }

int scenario_one() {
  std::mt19937 rng = cc1d_test::test_rng(111);
  Problem p = graph_problem();
  p.make(rng);
  const cc1d_status avail = cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0);
  std::printf("AVAILABLE %d %s\n", avail, avail == CC1D_OK ? "" : cc1d_last_error());
  const cc1d_status st = p.run(nullptr);
  std::printf("STATUS %d %s\n", st, st == CC1D_OK ? "" : cc1d_last_error());
  std::printf("UNTOUCHED %d\n", p.untouched() ? 1 : 0);
  if (st == CC1D_OK) {
    const std::string d = p.check();
    std::printf("RESULT %s\n", d.empty() ? "ok" : d.c_str());
  }
  print_report();
  return 0;
}

void (*counters_fn())(cc1d_fake_counters*) {
  void* h = dlopen(std::getenv("CAUSAL_CONV1D_CUDA_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  return reinterpret_cast<void (*)(cc1d_fake_counters*)>(dlsym(h, "cc1d_fake_get_counters"));
}

int scenario_graph() {
  std::mt19937 rng = cc1d_test::test_rng(112);
  Problem p = graph_problem();
  p.make(rng);
  if (p.run(nullptr) != CC1D_OK) {
    std::printf("STATUS %d %s\n", 1, cc1d_last_error());
    return 1;
  }
  auto get = counters_fn();
  void* h = dlopen(std::getenv("CAUSAL_CONV1D_CUDA_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
  if (get == nullptr || h == nullptr) {
    std::printf("ERROR the fake driver is not the loaded libcuda\n");
    return 1;
  }
  auto reset = reinterpret_cast<void (*)()>(dlsym(h, "cc1d_fake_reset_counters"));
  auto last = reinterpret_cast<int (*)(cc1d_fake_launch*)>(dlsym(h, "cc1d_fake_last_launch"));
  cc1d_fake_counters warm{}, steady{};
  get(&warm);
  reset();
  void* stream = reinterpret_cast<void*>(0x1234);
  for (int k = 0; k < 5; ++k) {
    p.out.fill_all(NAN);
    if (p.run(stream) != CC1D_OK) {
      std::printf("STATUS 1 %s\n", cc1d_last_error());
      return 1;
    }
  }
  get(&steady);
  std::printf("TOTAL alloc=%ld free=%ld memcpy=%ld memset=%ld sync=%ld\n", warm.mem_alloc + steady.mem_alloc,
              warm.mem_free + steady.mem_free, warm.memcpy + steady.memcpy, warm.memset + steady.memset,
              warm.synchronize + steady.synchronize);
  std::printf("STEADY launch=%ld push=%ld pop=%ld load=%ld get_function=%ld alloc=%ld memcpy=%ld memset=%ld sync=%ld\n",
              steady.launch, steady.ctx_push, steady.ctx_pop, steady.module_load, steady.get_function,
              steady.mem_alloc, steady.memcpy, steady.memset, steady.synchronize);
  cc1d_fake_launch l{};
  if (last(&l) == 1)
    std::printf("LAST stream=%p grid=%u,%u,%u block=%u,%u,%u shared=%u kernel=%s\n", l.stream, l.grid[0], l.grid[1],
                l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes, l.kernel);
  const std::string d = p.check();
  std::printf("RESULT %s\n", d.empty() ? "ok" : d.c_str());
  return 0;
}

// The first call (compile, module load, launch) made while the caller captures a CUDA graph in
// torch's default mode (global), as a first use inside torch.cuda.graph would.
int scenario_capture() {
  std::mt19937 rng = cc1d_test::test_rng(114);
  Problem p = graph_problem();
  p.make(rng);
  void* h = dlopen(std::getenv("CAUSAL_CONV1D_CUDA_DRIVER"), RTLD_NOW);
  auto begin = h ? reinterpret_cast<int (*)(int)>(dlsym(h, "cc1d_fake_begin_capture")) : nullptr;
  auto end = h ? reinterpret_cast<int (*)()>(dlsym(h, "cc1d_fake_end_capture")) : nullptr;
  auto mode = h ? reinterpret_cast<int (*)()>(dlsym(h, "cc1d_fake_capture_mode")) : nullptr;
  if (begin == nullptr || end == nullptr || mode == nullptr || begin(0) != 0) {
    std::printf("ERROR the fake driver's capture hooks are missing\n");
    return 1;
  }
  const cc1d_status st = p.run(reinterpret_cast<void*>(0x1234));
  const std::string why = st == CC1D_OK ? "" : cc1d_last_error();
  const int ended = end();
  std::printf("CAPTURE status=%d end=%d mode=%d%s%s\n", st, ended, mode(), why.empty() ? "" : " ", why.c_str());
  const std::string d = st == CC1D_OK ? p.check() : "not run";
  std::printf("RESULT %s\n", d.empty() ? "ok" : d.c_str());
  return 0;
}

std::vector<Problem> fwd_cases(bool all) {
  std::vector<Problem> cases;
  if (!all) {
    cases.push_back({CC1D_FLOAT32, CC1D_FLOAT32, 4, Layout::ChannelFirst, 1, 3, 1100, true, true, true, true, true});
    cases.push_back({CC1D_FLOAT32, CC1D_FLOAT32, 4, Layout::ChannelLast, 2, 5, 70, true, true, true, true, true});
    cases.push_back({CC1D_BFLOAT16, CC1D_FLOAT16, 2, Layout::ChannelFirst, 2, 3, 40, true, false, true, true, true});
    cases.push_back({CC1D_FLOAT16, CC1D_BFLOAT16, 7, Layout::ChannelLast, 2, 4, 37, false, true, false, true, true});
    return cases;
  }
  const int dts[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (int xdt : dts)
    for (int wdt : dts) {  // every dtype pair, both thread mappings, every option
      cases.push_back({xdt, wdt, 4, Layout::ChannelFirst, 1, 3, 1100, true, true, true, true, true});
      cases.push_back({xdt, wdt, 3, Layout::ChannelLast, 2, 5, 70, true, true, true, true, true});
    }
  for (int width = 1; width <= 8; ++width) {  // every width, both thread mappings
    cases.push_back({CC1D_BFLOAT16, CC1D_FLOAT32, width, Layout::ChannelFirst, 2, 3, 40, width % 2 == 0, true, false,
                     true, true});
    cases.push_back({CC1D_FLOAT16, CC1D_BFLOAT16, width, Layout::ChannelLast, 2, 4, 37, true, width % 2 == 1, true,
                     false, true});
  }
  return cases;
}

// all: kE2eCases cases; else kE2eSmallCases.
int scenario_fwd(bool all) {
  std::mt19937 rng = cc1d_test::test_rng(113);
  std::vector<Problem> cases = fwd_cases(all);
  for (Problem& p : cases) {
    p.make(rng);
    const cc1d_status st = p.run(nullptr);
    if (st != CC1D_OK) {
      std::printf("CASE FAIL %s: status %d: %s\n", p.describe().c_str(), st, cc1d_last_error());
      continue;
    }
    const std::string d = p.check();
    std::printf("CASE %s %s%s%s\n", d.empty() ? "OK" : "FAIL", p.describe().c_str(), d.empty() ? "" : ": ", d.c_str());
  }
  print_report();
  return 0;
}

}  // namespace

int e2e_child_main(const char* scenario) {
  // CC1D_TEST_START_FILE: wait for it to appear, so that many children start together.
  if (const char* go = std::getenv("CC1D_TEST_START_FILE"))
    for (int i = 0; i < 60000 && access(go, F_OK) != 0; ++i) usleep(1000);
  const std::string s = scenario;
  if (s == "report") {
    print_report();
    return 0;
  }
  if (s == "one") return scenario_one();
  if (s == "graph") return scenario_graph();
  if (s == "capture") return scenario_capture();
  if (s == "fwd") return scenario_fwd(true);
  if (s == "fwd-small") return scenario_fwd(false);
  std::fprintf(stderr, "unknown scenario %s\n", scenario);
  return 2;
}
