// cuda_driver.h — the CUDA driver API, loaded at run time, declared here by hand.
//
// No toolkit header is needed to build libcc1d, and nothing links libcuda: a wheel built
// once imports on any machine, and says why the GPU path is unavailable instead of failing
// to load. Only the entry points listed in cuda_api.def are resolved; the launch path
// uses no allocation, copy or synchronisation call.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "platform/dynlib.h"

namespace cc1d {

// Opaque driver types, ABI-identical to cuda.h's.
using CUresult = int;
using CUdevice = int;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUdeviceptr = unsigned long long;
using CUjit_option = int;  // an enum in cuda.h
struct CUlinkState_st;
using CUlinkState = CUlinkState_st*;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNotInitialized = 3;
constexpr CUresult kCudaErrorStubLibrary = 34;
constexpr CUresult kCudaErrorInsufficientDriver = 35;
constexpr CUresult kCudaErrorNoDevice = 100;
constexpr CUresult kCudaErrorInvalidDevice = 101;
constexpr CUresult kCudaErrorNoBinaryForGpu = 209;
constexpr CUresult kCudaErrorUnsupportedPtxVersion = 222;
constexpr CUresult kCudaErrorStreamCaptureUnsupported = 900;
constexpr CUresult kCudaErrorStreamCaptureInvalidated = 901;

constexpr int kAttrSmCount = 16;    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// The function table: exactly the entry points of cuda_api.def.
struct CudaDriverApi {
#define CC1D_CUDA_FN(name, sym, ret, params) ret(*name) params = nullptr;
#include "nvrtc/cuda_api.def"
#undef CC1D_CUDA_FN
};

// Entry points off the launch path (cuda_extra_api.def): device memory for the self-test, the
// PTX linker for the shipped-PTX tier.
struct CudaExtraApi {
#define CC1D_CUDA_FN(name, sym, ret, params) ret(*name) params = nullptr;
#include "nvrtc/cuda_extra_api.def"
#undef CC1D_CUDA_FN
};

class CudaDriver {
 public:
  CudaDriver(std::shared_ptr<DynLib> lib, CudaDriverApi api, int version, std::string resolver);
  const CudaDriverApi& api() const { return api_; }
  // cuDriverGetVersion, e.g. 12040 for a driver supporting CUDA 12.4.
  int version() const { return version_; }
  const std::string& path() const { return lib_->path(); }
  // How the entry points were resolved: "cuGetProcAddress_v2", "cuGetProcAddress" or "dlsym".
  const std::string& resolver() const { return resolver_; }
  // "CUDA_ERROR_INVALID_IMAGE (200): device kernel image is invalid".
  std::string describe(CUresult r) const;
  // Throws Error(CC1D_ERR_CUDA, "<what>: <describe(r)>") unless r is success.
  void check(CUresult r, const std::string& what) const;
  // The device's primary context (the one torch and the runtime API use), retained on first
  // use and kept for the life of the process. Thread-safe.
  CUcontext primary_context(int ordinal);
  // The entry points of cuda_extra_api.def, resolved on first call (the launch path never asks
  // for them). Throws CC1D_ERR_BACKEND_UNAVAILABLE naming any the driver lacks. Thread-safe.
  const CudaExtraApi& extra_api();

 private:
  std::shared_ptr<DynLib> lib_;
  CudaDriverApi api_;
  int version_;
  std::string resolver_;
  std::mutex ctx_mu_;
  std::vector<CUcontext> contexts_;
  std::once_flag extra_once_;
  CudaExtraApi extra_;
  std::string extra_missing_;
};

// Outcome of loading the driver: a usable driver, or the one-line reason it is unavailable.
struct DriverProbe {
  std::shared_ptr<CudaDriver> driver;  // null when unavailable
  std::string requested;               // the path or soname loaded
  std::vector<LoadAttempt> tried;
  CUresult init_result = -1;           // cuInit's result (-1: never called)
  std::string reason;                  // "" when available
};

// Loads CAUSAL_CONV1D_CUDA_DRIVER if set, else "libcuda.so.1" (never "libcuda.so", which is
// the toolkit's stub in most images), resolves the table and calls cuInit(0).
DriverProbe probe_cuda_driver();
DriverProbe probe_cuda_driver_at(const std::string& path);

// Makes `ctx` current on this thread for the guard's lifetime (push/pop, so a caller's own
// current context is restored).
class ContextGuard {
 public:
  ContextGuard(const CudaDriver& driver, CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  const CudaDriver& driver_;
};

// This thread in CU_STREAM_CAPTURE_MODE_RELAXED for the guard's lifetime, then back to its own
// mode. A first call may load a module while the caller captures a CUDA graph (torch's default
// capture mode, global, refuses cuModuleLoadData and invalidates the capture); loading a module
// enqueues nothing, so allowing it keeps the captured graph valid.
class RelaxedCaptureGuard {
 public:
  explicit RelaxedCaptureGuard(const CudaDriver& driver);
  ~RelaxedCaptureGuard();
  RelaxedCaptureGuard(const RelaxedCaptureGuard&) = delete;
  RelaxedCaptureGuard& operator=(const RelaxedCaptureGuard&) = delete;

 private:
  const CudaDriver& driver_;
  int previous_;
  bool swapped_;
};

// "12.4" from 12040.
std::string cuda_version_string(int version);

}  // namespace cc1d
