// bench_overhead — warm per-call host overhead of cc1d_causal_conv1d_fwd (goal: < 5 us), and
// the decode step the Python update goal (< 20 us from the call to the result) leaves to C.
//
// On a machine without a GPU this measures, on a tiny problem:
//  1. the CPU backend: validation, dispatch and the (tiny) computation;
//  2. the NVRTC backend with the launch stubbed: validation, dispatch, planning, the kernel
//     lookup, context push/pop and a cuLaunchKernel that returns at once (the fake driver of
//     tests/fake_driver/ with CC1D_FAKE_EXECUTE=0, loaded through CAUSAL_CONV1D_CUDA_DRIVER
//     exactly like libcuda.so.1);
//  3. plan_fwd alone, the part of (2) that builds the launch;
//  4. cc1d_causal_conv1d_update on the cpu backend, batch 1, dim 4096, bf16, width 4, silu, with
//     Mamba's state (state_len 4), vLLM's (3) and a ring buffer of 16 (cache_seqlens, advanced
//     by one each call as in decoding, so every window position counts alike).
// With a GPU, run it with CAUSAL_CONV1D_CUDA_DRIVER unset and --real to time real launches.
// --smoke makes a few calls each: ctest's check (label bench) that every row still runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_tensor.h"
#include "bench_util.h"
#include "cc1d/cc1d.h"
#include "ops/fwd/fwd_op.h"

namespace {

bool g_smoke = false;  // --smoke: a few calls each, to check that every path still runs

// Median over `rounds` of the mean per-call time of `iters` calls, in microseconds.
template <typename F>
double time_us(F&& f, int iters = 20000, int rounds = 7) {
  if (g_smoke) iters = 20, rounds = 3;
  for (int i = 0; i < (g_smoke ? 5 : 1000); ++i) f();  // warm: compile, caches, branch predictors
  std::vector<double> r;
  for (int k = 0; k < rounds; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    r.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

double run_backend(int backend, int device, void* stream) {
  BenchTensor x(device, {1, 8, 16}), w(device, {8, 4}), b(device, {8}), out(device, {1, 8, 16});
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.bias = &b.t;
  a.out = &out.t;
  a.activation = CC1D_ACT_SILU;
  a.backend = backend;
  a.stream = stream;
  if (cc1d_causal_conv1d_fwd(&a) != CC1D_OK) {
    std::printf("  unavailable: %s\n", cc1d_last_error());
    return -1;
  }
  return time_us([&] { cc1d_causal_conv1d_fwd(&a); });
}

double run_update(int64_t state_len, bool ring) {
  const cc1d_dtype bf = CC1D_BFLOAT16;
  BenchTensor x(CC1D_DEVICE_CPU, {1, 4096}, bf), st(CC1D_DEVICE_CPU, {1, 4096, state_len}, bf),
      w(CC1D_DEVICE_CPU, {4096, 4}, bf), b(CC1D_DEVICE_CPU, {4096}, bf), out(CC1D_DEVICE_CPU, {1, 4096}, bf),
      seqlens(CC1D_DEVICE_CPU, {1}, CC1D_INT32);
  auto* pos = reinterpret_cast<int32_t*>(seqlens.data.data());
  *pos = 0;
  cc1d_update_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.conv_state = &st.t;
  a.weight = &w.t;
  a.bias = &b.t;
  a.out = &out.t;
  a.activation = CC1D_ACT_SILU;
  a.backend = CC1D_BACKEND_CPU;
  if (ring) a.cache_seqlens = &seqlens.t;
  if (cc1d_causal_conv1d_update(&a) != CC1D_OK) {
    std::printf("  update failed: %s\n", cc1d_last_error());
    return -1;
  }
  return time_us([&] {
    *pos = (*pos + 1) & 0xffff;
    cc1d_causal_conv1d_update(&a);
  }, 2000);
}

}  // namespace

int main(int argc, char** argv) {
  bool real = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--real")) real = true;
    else if (!std::strcmp(argv[i], "--smoke")) g_smoke = true;
    else {
      std::fprintf(stderr, "usage: %s [--real] [--smoke]\n", argv[0]);
      return 2;
    }
  }
#ifdef CC1D_BENCH_FAKE_DRIVER
  if (!real) {
    setenv("CAUSAL_CONV1D_CUDA_DRIVER", CC1D_BENCH_FAKE_DRIVER, 0);
    setenv("CC1D_FAKE_EXECUTE", "0", 0);  // the fake records the launch, runs nothing
  }
#endif
  setenv("CAUSAL_CONV1D_NUM_THREADS", "1", 0);
  std::printf("warm per-call host overhead, tiny problem (1, 8, 16), width 4, fp32, silu\n");
  const double cpu = run_backend(CC1D_BACKEND_CPU, CC1D_DEVICE_CPU, nullptr);
  std::printf("  cpu backend (dispatch + tiny compute):            %6.2f us\n", cpu);
  const double nv = run_backend(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, nullptr);
  if (nv >= 0)
    std::printf("  nvrtc backend, %s: %6.2f us\n",
                real ? "real launch (async)             " : "launch stubbed (fake driver)    ", nv);

  cc1d::FwdProblem pr;
  pr.batch = 1; pr.dim = 8; pr.seqlen = 16; pr.width = 4; pr.silu = true;
  pr.device_type = CC1D_DEVICE_CUDA;
  float dummy[1];
  for (cc1d::TensorRef* t : {&pr.x, &pr.weight, &pr.out}) t->given = true, t->data = dummy;
  pr.x.strides[0] = 128; pr.x.strides[1] = 16; pr.x.strides[2] = 1;
  pr.out.strides[0] = 128; pr.out.strides[1] = 16; pr.out.strides[2] = 1;
  pr.weight.strides[0] = 4; pr.weight.strides[1] = 1;
  volatile unsigned sink = 0;
  const double plan = time_us([&] { sink = sink + cc1d::plan_fwd(pr).grid[0]; });
  std::printf("  plan_fwd alone (params + kernel name):            %6.2f us\n", plan);
  const double update = run_update(4, false), short_rows = run_update(3, false);
  const double ring = run_update(16, true);
  std::printf("  update, cpu, batch 1, dim 4096 bf16, silu:         %6.2f us\n", update);
  std::printf("    the same, state_len 3 (vLLM's layout):           %6.2f us\n", short_rows);
  std::printf("    the same, a ring of 16 (cache_seqlens):          %6.2f us\n", ring);
  const bool ok = (cpu >= 0 && cpu < 5.0) && (nv < 0 || nv < 5.0);
  std::printf("goal < 5 us per call: %s\n", ok ? "met" : "NOT met");
  // A row that could not run is a broken bench, except the nvrtc one without a driver (no fake
  // driver built and no --real) or without an NVRTC.
#ifdef CC1D_BENCH_FAKE_DRIVER
  const bool nv_expected = true;
#else
  const bool nv_expected = real;
#endif
  if (cpu < 0 || update < 0 || short_rows < 0 || ring < 0) return 1;
  if (nv < 0 && nv_expected) return have_nvrtc() ? 1 : exit_without_nvrtc("bench_overhead", "the nvrtc backend's row needs an NVRTC");
  return 0;
}
