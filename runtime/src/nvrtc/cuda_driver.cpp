#include "nvrtc/cuda_driver.h"

#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "core/log.h"

namespace cc1d {

namespace {

// cuGetProcAddress_v2 (CUDA 12.5+) and cuGetProcAddress (11.3+; 4 arguments).
using GetProcV2 = CUresult (*)(const char*, void**, int, uint64_t, int*);
using GetProcV1 = CUresult (*)(const char*, void**, int, uint64_t);

// The CUDA version whose entry-point signatures this file declares. None of them changed
// between 11.0 and 13.x; asking for 12.0 (or the driver's own version if older) keeps the
// driver from handing us a newer _vN with another signature.
constexpr int kApiVersion = 12000;

struct Resolver {
  const DynLib& lib;
  GetProcV2 v2 = nullptr;
  GetProcV1 v1 = nullptr;
  int version = kApiVersion;
  bool used_dlsym = false;

  // `name` without suffix; `exported` is the symbol a dlsym fallback uses (name or its _v2).
  void* get(const char* name, const char* exported) {
    void* p = nullptr;
    int status = 0;
    if (v2 != nullptr && v2(name, &p, version, 0, &status) == kCudaSuccess && p != nullptr) return p;
    p = nullptr;
    if (v1 != nullptr && v1(name, &p, version, 0) == kCudaSuccess && p != nullptr) return p;
    used_dlsym = true;
    return lib.symbol(exported);
  }
};

template <typename F>
bool resolve(Resolver& r, F& slot, const char* name, const char* exported,
             std::vector<std::string>* missing) {
  slot = reinterpret_cast<F>(r.get(name, exported));
  if (slot == nullptr) missing->push_back(name);
  return slot != nullptr;
}

// A resolver over `lib`: cuGetProcAddress_v2, else cuGetProcAddress, else plain dlsym.
Resolver make_resolver(const DynLib& lib, int driver_version) {
  Resolver r{lib};
  r.v2 = reinterpret_cast<GetProcV2>(lib.symbol("cuGetProcAddress_v2"));
  if (r.v2 == nullptr) r.v1 = reinterpret_cast<GetProcV1>(lib.symbol("cuGetProcAddress"));
  if (driver_version > 0 && driver_version < kApiVersion) r.version = driver_version;
  return r;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

const char* kInstallHint =
    "install the NVIDIA driver, or in a container run with the NVIDIA Container Toolkit "
    "(docker --gpus all) so libcuda.so.1 is mounted";

}  // namespace

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

CudaDriver::CudaDriver(std::shared_ptr<DynLib> lib, CudaDriverApi api, int version,
                       std::string resolver)
    : lib_(std::move(lib)), api_(api), version_(version), resolver_(std::move(resolver)) {
  lib_->keep_loaded();  // the driver owns threads and atexit handlers: never unmap it
}

// Names of the results this runtime reacts to, for drivers (the stub) that cannot name them.
const char* known_error_name(CUresult r) {
  switch (r) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case kCudaErrorStubLibrary: return "CUDA_ERROR_STUB_LIBRARY";
    case kCudaErrorInsufficientDriver: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case kCudaErrorNoDevice: return "CUDA_ERROR_NO_DEVICE";
    case kCudaErrorInvalidDevice: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case kCudaErrorNoBinaryForGpu: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case kCudaErrorUnsupportedPtxVersion: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case kCudaErrorStreamCaptureUnsupported: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case kCudaErrorStreamCaptureInvalidated: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    default: return nullptr;
  }
}

std::string CudaDriver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(r, &name) != kCudaSuccess) name = known_error_name(r);
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != kCudaSuccess) text = nullptr;
  std::string s = name != nullptr ? name : "CUDA error";
  s += " (" + std::to_string(r) + ")";
  if (text != nullptr) s += std::string(": ") + text;
  return s;
}

void CudaDriver::check(CUresult r, const std::string& what) const {
  if (r != kCudaSuccess) fail(CC1D_ERR_CUDA, what + ": " + describe(r));
}

CUcontext CudaDriver::primary_context(int ordinal) {
  std::lock_guard<std::mutex> lock(ctx_mu_);
  if (ordinal < 0) fail(CC1D_ERR_INVALID_ARGUMENT, "CUDA device index " + std::to_string(ordinal) + " is negative");
  if ((size_t)ordinal >= contexts_.size()) contexts_.resize(ordinal + 1, nullptr);
  if (contexts_[ordinal] != nullptr) return contexts_[ordinal];
  CUdevice dev = 0;
  check(api_.cuDeviceGet(&dev, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  CUcontext ctx = nullptr;
  // Retained for the life of the process (released never): unloading at exit would race
  // with the driver's own teardown, and torch keeps the same context alive anyway.
  check(api_.cuDevicePrimaryCtxRetain(&ctx, dev),
        "cuDevicePrimaryCtxRetain(device " + std::to_string(ordinal) + ")");
  contexts_[ordinal] = ctx;
  return ctx;
}

const CudaExtraApi& CudaDriver::extra_api() {
  std::call_once(extra_once_, [this] {
    Resolver r = make_resolver(*lib_, version_);
    std::vector<std::string> missing;
#define CC1D_CUDA_FN(name, sym, ret, params) resolve(r, extra_.name, #name, #sym, &missing);
#include "nvrtc/cuda_extra_api.def"
#undef CC1D_CUDA_FN
    extra_missing_ = join(missing);
  });
  if (!extra_missing_.empty())
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "CUDA driver " + path() + " lacks " + extra_missing_ +
                                           "; update the NVIDIA driver");
  return extra_;
}

ContextGuard::ContextGuard(const CudaDriver& driver, CUcontext ctx) : driver_(driver) {
  driver_.check(driver_.api().cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
}

ContextGuard::~ContextGuard() {
  CUcontext popped = nullptr;
  driver_.api().cuCtxPopCurrent(&popped);  // cannot fail once the push succeeded
}

constexpr int kCaptureModeRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED

RelaxedCaptureGuard::RelaxedCaptureGuard(const CudaDriver& driver) : driver_(driver), previous_(kCaptureModeRelaxed) {
  // If the swap fails the thread keeps its mode, and a load refused by a capture says so.
  swapped_ = driver_.api().cuThreadExchangeStreamCaptureMode(&previous_) == kCudaSuccess;
}

RelaxedCaptureGuard::~RelaxedCaptureGuard() {
  if (swapped_) driver_.api().cuThreadExchangeStreamCaptureMode(&previous_);
}

DriverProbe probe_cuda_driver() {
  const char* env = std::getenv("CAUSAL_CONV1D_CUDA_DRIVER");
  return probe_cuda_driver_at(env != nullptr && *env != '\0' ? env : "libcuda.so.1");
}

DriverProbe probe_cuda_driver_at(const std::string& path) {
  DriverProbe out;
  out.requested = path;
  std::shared_ptr<DynLib> lib = DynLib::open(path, &out.tried);
  if (lib == nullptr) {
    out.reason = "CUDA driver library not found (tried " + format_attempts(out.tried) + "); " +
                 kInstallHint;
    return out;
  }
  // cuDriverGetVersion works before cuInit and tells which signatures to ask for.
  CudaDriverApi api;
  api.cuDriverGetVersion = reinterpret_cast<decltype(api.cuDriverGetVersion)>(lib->symbol("cuDriverGetVersion"));
  int version = 0;
  if (api.cuDriverGetVersion == nullptr || api.cuDriverGetVersion(&version) != kCudaSuccess) version = 0;
  Resolver r = make_resolver(*lib, version);

  std::vector<std::string> missing;
#define CC1D_CUDA_FN(name, sym, ret, params) resolve(r, api.name, #name, #sym, &missing);
#include "nvrtc/cuda_api.def"
#undef CC1D_CUDA_FN
  if (!missing.empty()) {
    out.reason = "CUDA driver " + lib->path() + " lacks " + join(missing) +
                 " (a driver older than CUDA 11, or not a CUDA driver); update the NVIDIA driver";
    return out;
  }
  const std::string resolver = r.v2 != nullptr ? (r.used_dlsym ? "cuGetProcAddress_v2+dlsym" : "cuGetProcAddress_v2")
                               : r.v1 != nullptr ? (r.used_dlsym ? "cuGetProcAddress+dlsym" : "cuGetProcAddress")
                                                 : "dlsym";
  auto driver = std::make_shared<CudaDriver>(lib, api, version, resolver);

  out.init_result = api.cuInit(0);
  if (out.init_result == kCudaErrorStubLibrary) {
    out.reason = "CUDA driver " + lib->path() + " is the toolkit's stub library (cuInit: " +
                 driver->describe(out.init_result) + "), not a real driver; remove the stubs directory "
                 "from LD_LIBRARY_PATH and " + kInstallHint;
    return out;
  }
  if (out.init_result == kCudaErrorNoDevice) {
    out.reason = "no CUDA GPU visible (cuInit: " + driver->describe(out.init_result) +
                 "); check nvidia-smi, CUDA_VISIBLE_DEVICES, or the container's --gpus option";
    return out;
  }
  if (out.init_result == kCudaErrorInsufficientDriver) {
    out.reason = "the NVIDIA kernel module does not match " + lib->path() + " (cuInit: " +
                 driver->describe(out.init_result) + "); reboot or reinstall the driver";
    return out;
  }
  if (out.init_result != kCudaSuccess) {
    out.reason = "cuInit failed in " + lib->path() + ": " + driver->describe(out.init_result) +
                 "; check nvidia-smi and the driver installation";
    return out;
  }
  int v = 0;
  if (api.cuDriverGetVersion(&v) == kCudaSuccess && v > 0 && v != version) {
    driver = std::make_shared<CudaDriver>(lib, api, v, resolver);
  } else if (version <= 0) {
    out.reason = "cuDriverGetVersion failed in " + lib->path() + "; check the driver installation";
    return out;
  }
  out.driver = driver;
  log_line(CC1D_LOG_DEBUG, "CUDA driver {} (CUDA {}) loaded from {} via {}", out.requested,
           cuda_version_string(driver->version()), driver->path(), resolver);
  return out;
}

}  // namespace cc1d
