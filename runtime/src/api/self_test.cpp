// self_test.cpp — cc1d_self_test: one forward through a backend on one device, compared with a
// float64 reference computed here, and timed. `causal-conv1d doctor` runs it per device to show
// that compile, load, launch and the result all work where it runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "api/guard.h"
#include "nvrtc/cuda_driver.h"
#include "ops/op.h"

namespace cc1d {

namespace {

// The case: fp32, bias, silu, width 4, channel-first; long enough for several blocks.
constexpr int64_t kB = 2, kD = 96, kL = 300, kW = 4;
constexpr int kTimedRuns = 5;
constexpr double kTolerance = 1e-4;  // times (|ref| + 1): fp32 accumulation, a fast-math silu

struct Inputs {
  std::vector<float> x, w, b;
};

Inputs make_inputs() {
  std::mt19937 rng(0x5e1f7e57u);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Inputs in;
  for (auto* v : {&in.x, &in.w, &in.b}) v->resize(v == &in.x ? kB * kD * kL : v == &in.w ? kD * kW : kD);
  for (auto* v : {&in.x, &in.w, &in.b}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  return in;
}

std::vector<double> reference(const Inputs& in) {
  std::vector<double> y(kB * kD * kL);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t c = 0; c < kD; ++c)
      for (int64_t t = 0; t < kL; ++t) {
        double acc = in.b[c];
        for (int64_t k = 0; k < kW; ++k) {
          const int64_t s = t - kW + 1 + k;
          if (s >= 0) acc += double(in.w[c * kW + k]) * in.x[(b * kD + c) * kL + s];
        }
        y[(b * kD + c) * kL + t] = acc / (1.0 + std::exp(-acc));
      }
  return y;
}

cc1d_tensor describe(void* data, cc1d_device_type type, int index, std::vector<int64_t> shape) {
  cc1d_tensor t{};
  t.data = data;
  t.dtype = CC1D_FLOAT32;
  t.device_type = type;
  t.device_index = type == CC1D_DEVICE_CPU ? 0 : index;
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

// Where the tensors live: host vectors, or device memory through the CUDA driver.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual void* upload(const std::vector<float>& host) = 0;  // a copy the backend can read
  virtual void download(std::vector<float>& host, const void* data) = 0;
  virtual void synchronize() = 0;
};

class HostMemory final : public Memory {
 public:
  void* upload(const std::vector<float>& host) override {
    blocks_.push_back(host);
    return blocks_.back().data();
  }
  void download(std::vector<float>& host, const void* data) override {
    std::copy_n(static_cast<const float*>(data), host.size(), host.begin());
  }
  void synchronize() override {}

 private:
  std::vector<std::vector<float>> blocks_;
};

class CudaMemory final : public Memory {
 public:
  explicit CudaMemory(int ordinal) : probe_(probe_cuda_driver()) {
    if (probe_.driver == nullptr || !probe_.reason.empty()) fail(CC1D_ERR_BACKEND_UNAVAILABLE, probe_.reason);
    drv_ = probe_.driver.get();
    mem_ = &drv_->extra_api();
    ctx_ = drv_->primary_context(ordinal);
  }
  ~CudaMemory() override {
    try {
      ContextGuard g(*drv_, ctx_);
      for (CUdeviceptr p : blocks_) mem_->cuMemFree(p);
    } catch (const Error&) {  // a context that cannot be made current: nothing to free into
    }
  }
  void* upload(const std::vector<float>& host) override {
    ContextGuard g(*drv_, ctx_);
    CUdeviceptr p = 0;
    drv_->check(mem_->cuMemAlloc(&p, host.size() * sizeof(float)), "self-test: cuMemAlloc");
    blocks_.push_back(p);
    drv_->check(mem_->cuMemcpyHtoD(p, host.data(), host.size() * sizeof(float)), "self-test: cuMemcpyHtoD");
    return reinterpret_cast<void*>(p);
  }
  void download(std::vector<float>& host, const void* data) override {
    ContextGuard g(*drv_, ctx_);
    drv_->check(mem_->cuMemcpyDtoH(host.data(), reinterpret_cast<CUdeviceptr>(data), host.size() * sizeof(float)),
                "self-test: cuMemcpyDtoH");
  }
  void synchronize() override {
    ContextGuard g(*drv_, ctx_);
    drv_->check(mem_->cuCtxSynchronize(), "self-test: cuCtxSynchronize");
  }

 private:
  DriverProbe probe_;
  CudaDriver* drv_ = nullptr;
  const CudaExtraApi* mem_ = nullptr;
  CUcontext ctx_ = nullptr;
  std::vector<CUdeviceptr> blocks_;
};

// The backend an AUTO call would run in libcc1d itself (as dispatch() picks it).
cc1d_backend resolve_backend(int32_t backend, cc1d_device_type type, int index) {
  const DispatchPlan plan = plan_dispatch(*find_op(CC1D_OP_FWD), backend, type, index);
  std::string why;
  for (const Candidate& c : plan.candidates) {
    if (c.available && !c.runs_in_host && !c.host_copies) return c.backend;
    why += (why.empty() ? "" : "; ") + c.reason;
  }
  fail(CC1D_ERR_BACKEND_UNAVAILABLE, "no backend libcc1d runs can serve this device: " + why);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void self_test(int32_t backend, int32_t device_type, int32_t device_index, cc1d_self_test_result* r) {
  if (r == nullptr) fail(CC1D_ERR_NULL_POINTER, "cc1d_self_test: result is NULL");
  if (r->struct_size < sizeof(cc1d_self_test_result))
    fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_self_test: result->struct_size is " + std::to_string(r->struct_size) +
                                        ", expected " + std::to_string(sizeof(cc1d_self_test_result)));
  if (device_type != CC1D_DEVICE_CPU && device_type != CC1D_DEVICE_CUDA)
    fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_self_test: device_type must be 0 (cpu) or 1 (cuda), got " +
                                        std::to_string(device_type));
  const auto type = static_cast<cc1d_device_type>(device_type);
  const cc1d_backend id = resolve_backend(backend, type, device_index);

  const Inputs in = make_inputs();
  std::unique_ptr<Memory> mem;
  if (type == CC1D_DEVICE_CUDA)
    mem = std::make_unique<CudaMemory>(device_index);
  else
    mem = std::make_unique<HostMemory>();
  std::vector<float> out(kB * kD * kL, std::nanf(""));  // poisoned: an unwritten output fails
  void* x = mem->upload(in.x);
  void* w = mem->upload(in.w);
  void* b = mem->upload(in.b);
  void* y = mem->upload(out);
  const cc1d_tensor tx = describe(x, type, device_index, {kB, kD, kL});
  const cc1d_tensor tw = describe(w, type, device_index, {kD, kW});
  const cc1d_tensor tb = describe(b, type, device_index, {kD});
  const cc1d_tensor ty = describe(y, type, device_index, {kB, kD, kL});
  cc1d_fwd_args args{};
  args.struct_size = sizeof args;
  args.x = &tx;
  args.weight = &tw;
  args.bias = &tb;
  args.out = &ty;
  args.activation = CC1D_ACT_SILU;
  args.backend = id;

  auto call = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const cc1d_status s = cc1d_causal_conv1d_fwd(&args);
    if (s != CC1D_OK) fail(s, cc1d_last_error());
    mem->synchronize();
    return ms_since(t0);
  };
  r->backend = id;
  r->first_ms = call();  // compiles (or loads from the cache) on a JIT backend
  mem->download(out, y);
  std::vector<double> times;
  for (int i = 0; i < kTimedRuns; ++i) times.push_back(call());
  std::sort(times.begin(), times.end());
  r->median_ms = times[times.size() / 2];
  r->runs = kTimedRuns;

  const std::vector<double> ref = reference(in);
  r->elements = static_cast<int64_t>(ref.size());
  r->mismatches = 0;
  r->max_abs_error = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double(out[i]) - ref[i]);
    if (!(err <= kTolerance * (std::fabs(ref[i]) + 1.0))) ++r->mismatches;  // NaN counts
    r->max_abs_error = std::isnan(err) ? err : std::max(r->max_abs_error, err);
  }
  r->tolerance = kTolerance;
  r->passed = r->mismatches == 0 ? 1 : 0;
}

}  // namespace

}  // namespace cc1d

extern "C" CC1D_API cc1d_status cc1d_self_test(int32_t backend, int32_t device_type, int32_t device_index,
                                               cc1d_self_test_result* result) {
  return cc1d::guarded("cc1d_self_test", [&] { cc1d::self_test(backend, device_type, device_index, result); });
}
