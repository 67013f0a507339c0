// fake_driver.cpp — the entry points of the fake libcuda that libcc1d uses: initialisation,
// devices, primary contexts, modules, launches and error strings. See fake_cuda.h.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_api.h"
#include "fallback/emulator/kernel_registry.h"
#include "runtime/src/core/gpu_limits.h"

namespace fake {

namespace {

struct Context {
  int device = 0;
  int refcount = 0;
};
struct Module {
  Context* ctx = nullptr;
  Image image;
};
struct Function {
  Module* module = nullptr;
  std::string name;
  const cc1d::emu::HostKernel* kernel = nullptr;
};

std::mutex g_mu;
Context g_contexts[kMaxDevices];
std::set<Module*> g_modules;
std::set<Function*> g_functions;
thread_local std::vector<Context*> t_stack;

bool valid_context(Context* c) {
  return c >= g_contexts && c < g_contexts + config().devices() && c->refcount > 0;
}

Context* current() { return t_stack.empty() ? nullptr : t_stack.back(); }

struct ErrorText {
  int code;
  const char* name;
  const char* text;
};
const ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(int code) {
  for (const ErrorText& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

}  // namespace

int current_device() { return current() == nullptr ? -1 : current()->device; }

}  // namespace fake

using fake::config;
using fake::counters;
using fake::failed;

FAKE_EXPORT CUresult cuInit(unsigned flags) {
  ++counters().init;
  if (config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (flags != 0) return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuInit: flags must be 0");
  if (const int r = config().init_result) {
    fake::set_initialized(false);
    return failed(r, "cuInit: CC1D_FAKE_INIT_RESULT=" + std::to_string(r) + " (or the no_device fault switch)");
  }
  if (config().devices() <= 0) {
    fake::set_initialized(false);
    return failed(FAKE_CUDA_ERROR_NO_DEVICE, "cuInit: no device (CC1D_FAKE_DEVICE_COUNT=0 or CC1D_FAKE_DEVICES empty)");
  }
  fake::set_initialized(true);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (version == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  *version = config().version;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (count == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  *count = config().devices();
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(int* device, int ordinal) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (device == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (!config().has_device(ordinal))
    return failed(FAKE_CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet: no device " + std::to_string(ordinal));
  *device = ordinal;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (value == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (!config().has_device(device)) return FAKE_CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case 1: *value = cc1d::kMaxBlockThreads; return FAKE_CUDA_SUCCESS;   // MAX_THREADS_PER_BLOCK
    case 8: *value = cc1d::kMaxDefaultShared; return FAKE_CUDA_SUCCESS;  // MAX_SHARED_MEMORY_PER_BLOCK
    case 10: *value = 32; return FAKE_CUDA_SUCCESS;      // WARP_SIZE
    case 16: *value = config().sm_count; return FAKE_CUDA_SUCCESS;
    case 75: *value = config().sms[device] / 10; return FAKE_CUDA_SUCCESS;
    case 76: *value = config().sms[device] % 10; return FAKE_CUDA_SUCCESS;
    default:
      return failed(FAKE_CUDA_ERROR_INVALID_VALUE,
                    "cuDeviceGetAttribute: attribute " + std::to_string(attribute) + " is not modelled by the fake");
  }
}

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, int device) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (bytes == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (!config().has_device(device)) return FAKE_CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<size_t>(config().memory_mib) << 20;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, int device) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (name == nullptr || len <= 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (!config().has_device(device)) return FAKE_CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "cc1d fake GPU (sm_%d, emulated)", config().sms[device]);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().ctx_retain;
  if (ctx == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (!config().has_device(device)) return FAKE_CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  fake::g_contexts[device].device = device;
  ++fake::g_contexts[device].refcount;
  *ctx = &fake::g_contexts[device];
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().ctx_release;
  if (!config().has_device(device)) return FAKE_CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (fake::g_contexts[device].refcount <= 0)
    return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease: not retained");
  --fake::g_contexts[device].refcount;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(void* ctx) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().ctx_push;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  auto* c = static_cast<fake::Context*>(ctx);
  if (!fake::valid_context(c))
    return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent: not a retained primary context");
  fake::t_stack.push_back(c);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().ctx_pop;
  if (fake::t_stack.empty()) return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuCtxPopCurrent: no current context");
  if (ctx != nullptr) *ctx = fake::t_stack.back();
  fake::t_stack.pop_back();
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(void** module, const void* image) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().module_load;
  if (module == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  fake::Context* ctx = fake::current();
  if (ctx == nullptr) return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuModuleLoadData: no current context");
  if (config().module_load_fault) return failed(FAKE_CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: fault switch");
  if (CUresult r = fake::refuse_if_capturing("cuModuleLoadData")) return r;
  auto m = std::make_unique<fake::Module>();
  m->ctx = ctx;
  std::string why;
  if (CUresult r = fake::read_image(image, &m->image, &why)) return failed(r, why);
  // Checked against the SM of the current context's device: on a mixed machine, a cubin built
  // for another device's SM must be refused.
  if (CUresult r = fake::check_image_runs(m->image, config().sms[ctx->device], config().version, &why))
    return failed(r, why);
  if (m->image.ptx) ++counters().ptx_loads;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  *module = m.get();
  fake::g_modules.insert(m.release());
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleUnload(void* module) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().module_unload;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  auto* m = static_cast<fake::Module*>(module);
  if (fake::g_modules.erase(m) == 0) return failed(FAKE_CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: unknown module");
  for (auto it = fake::g_functions.begin(); it != fake::g_functions.end();) {
    if ((*it)->module == m) {
      delete *it;
      it = fake::g_functions.erase(it);
    } else {
      ++it;
    }
  }
  delete m;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().get_function;
  if (function == nullptr || name == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  auto* m = static_cast<fake::Module*>(module);
  if (fake::g_modules.count(m) == 0) return failed(FAKE_CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: unknown module");
  if (!fake::image_has_entry(m->image, name))
    return failed(FAKE_CUDA_ERROR_NOT_FOUND, std::string("cuModuleGetFunction: the image has no entry ") + name);
  const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel_lowered(name);
  if (k == nullptr)
    return failed(FAKE_CUDA_ERROR_NOT_FOUND, std::string("cuModuleGetFunction: ") + name + " (" +
                                                 cc1d::emu::name_expression_from_lowered(name) +
                                                 ") has no host instantiation in the emulator");
  auto* f = new fake::Function{m, name, k};
  fake::g_functions.insert(f);
  *function = f;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* function, int block_size,
                                                                  size_t dynamic_shared) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (blocks == nullptr || block_size <= 0 || block_size > cc1d::kMaxBlockThreads ||
      dynamic_shared > cc1d::kMaxDefaultShared)
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: invalid arguments");
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (fake::g_functions.count(static_cast<fake::Function*>(function)) == 0)
    return failed(FAKE_CUDA_ERROR_INVALID_HANDLE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: unknown function");
  if (config().blocks_per_sm < 0)
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuOccupancyMaxActiveBlocksPerMultiprocessor: CC1D_FAKE_BLOCKS_PER_SM < 0");
  *blocks = config().blocks_per_sm;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  ++counters().launch;
  fake::Function* f = static_cast<fake::Function*>(function);
  fake::Context* ctx = fake::current();
  {
    std::lock_guard<std::mutex> lock(fake::g_mu);
    if (fake::g_functions.count(f) == 0) return failed(FAKE_CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel: unknown function");
    if (ctx == nullptr || ctx != f->module->ctx)
      return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernel: the function's context is not current");
  }
  if (params == nullptr || extra != nullptr)
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: pass kernelParams (extra is not modelled)");
  const unsigned long long threads = 1ull * bx * by * bz;
  if (threads == 0 || threads > cc1d::kMaxBlockThreads || bz > cc1d::kMaxBlockZ || gx == 0 || gy == 0 || gz == 0 ||
      gy > cc1d::kMaxGridYZ || gz > cc1d::kMaxGridYZ || gx > cc1d::kMaxGridX)
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: invalid grid or block dimensions");
  if (shared > cc1d::kMaxDefaultShared)
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel: more than 48 KiB of dynamic shared memory "
                                                 "without cuFuncSetAttribute");
  if (const int r = config().launch_result)
    return failed(r, "cuLaunchKernel: CC1D_FAKE_LAUNCH_RESULT=" + std::to_string(r) + " (or the launch fault switch)");
  if (config().execute) {
    try {
      cc1d::emu::launch_host_kernel(*f->kernel, dim3(gx, gy, gz), dim3(bx, by, bz), shared, params[0],
                                    f->kernel->param_bytes, cc1d::emu::options_from_env());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[fake libcuda] launch of %s failed: %s\n", f->kernel->name.c_str(), e.what());
      return failed(FAKE_CUDA_ERROR_LAUNCH_FAILED, std::string("cuLaunchKernel: ") + e.what());
    }
  }
  cc1d_fake_launch rec{};
  std::snprintf(rec.kernel, sizeof rec.kernel, "%s", f->name.c_str());
  rec.grid[0] = gx, rec.grid[1] = gy, rec.grid[2] = gz;
  rec.block[0] = bx, rec.block[1] = by, rec.block[2] = bz;
  rec.shared_bytes = shared;
  rec.stream = stream;
  rec.context_device = ctx->device;
  // The parameter as the kernel received it, so tests can check what the runtime planned.
  rec.params_bytes = static_cast<unsigned>(f->kernel->param_bytes);
  if (params[0] != nullptr) std::memcpy(rec.params, params[0], std::min(sizeof rec.params, f->kernel->param_bytes));
  fake::record_launch(rec);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  if (config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (str == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  const fake::ErrorText* e = fake::find_error(error);
  *str = e != nullptr ? e->name : nullptr;
  return e != nullptr ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  if (config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (str == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  const fake::ErrorText* e = fake::find_error(error);
  *str = e != nullptr ? e->text : nullptr;
  return e != nullptr ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_INVALID_VALUE;
}
