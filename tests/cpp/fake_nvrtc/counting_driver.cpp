// counting_driver.cpp — a tiny stand-in for libcuda.so.1 used by the NVRTC backend's tests and
// the overhead benchmark on machines without a GPU. It runs nothing: it checks what it is
// given the way the real driver would (a current context, a cubin for the device's SM or PTX
// for an SM at or below it, a symbol present in the image), records every call, and can be
// told (environment, read at cuInit) to fail in the ways real drivers fail.
//
//   CC1D_FAKE_INIT_RESULT      cuInit's result (default 0; 34 = stub, 100 = no device)
//   CC1D_FAKE_DEVICES          comma-separated SMs, one per device (default "90")
//   CC1D_FAKE_DRIVER_VERSION   cuDriverGetVersion (default 13000)
//   CC1D_FAKE_LAUNCH_RESULT    cuLaunchKernel's result (default 0)
//
// Counters are read with fake_count("launch") etc.; fake_last_launch() returns the last launch.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/src/cubin_elf.h"
#include "kernels_src/fwd_params.h"

namespace {

struct Ctx { int device; };
struct Module { int device; std::string image; };
struct Func { Module* module; std::string name; };

std::once_flag g_init_once;
int g_init_result = 0;
int g_version = 13000;
int g_launch_result = 0;
std::vector<int> g_sms;
Ctx g_ctx[16];
thread_local std::vector<Ctx*> t_stack;
std::mutex g_mu;
std::map<std::string, long> g_counts;

void count(const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_counts[what];
}

void read_env() {
  std::call_once(g_init_once, [] {
    if (const char* v = std::getenv("CC1D_FAKE_INIT_RESULT")) g_init_result = std::atoi(v);
    if (const char* v = std::getenv("CC1D_FAKE_DRIVER_VERSION")) g_version = std::atoi(v);
    if (const char* v = std::getenv("CC1D_FAKE_LAUNCH_RESULT")) g_launch_result = std::atoi(v);
    std::string devs = std::getenv("CC1D_FAKE_DEVICES") ? std::getenv("CC1D_FAKE_DEVICES") : "90";
    for (size_t pos = 0; pos < devs.size();) {
      size_t comma = devs.find(',', pos);
      if (comma == std::string::npos) comma = devs.size();
      g_sms.push_back(std::atoi(devs.substr(pos, comma - pos).c_str()));
      pos = comma + 1;
    }
    for (int i = 0; i < 16; ++i) g_ctx[i].device = i;
  });
}

bool ready() { return g_init_result == 0 && !g_sms.empty(); }

// Bytes an ELF64 image spans: the furthest of its section and program header tables, which
// the toolchain places last. (The driver, like us, gets no size with cuModuleLoadData.)
size_t elf_size(const void* image) {
  const unsigned char* b = static_cast<const unsigned char*>(image);
  auto u = [&](int off, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= (uint64_t)b[off + i] << (8 * i);
    return v;
  };
  const uint64_t sh = u(0x28, 8) + u(0x3A, 2) * u(0x3C, 2);
  const uint64_t ph = u(0x20, 8) + u(0x36, 2) * u(0x38, 2);
  return (size_t)(sh > ph ? sh : ph);
}

// ".target sm_XY" of PTX text, or -1.
int ptx_target(const char* text) {
  const char* t = std::strstr(text, ".target sm_");
  return t ? std::atoi(t + 11) : -1;
}

}  // namespace

extern "C" {

struct FakeLaunch {
  unsigned grid[3], block[3], shared;
  void* stream;
  cc1d::FwdParams params;
  char function[256];
};
static FakeLaunch g_last;

__attribute__((visibility("default"))) long fake_count(const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_counts.find(what);
  return it == g_counts.end() ? 0 : it->second;
}
__attribute__((visibility("default"))) FakeLaunch fake_last_launch() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last;
}

#define API extern "C" __attribute__((visibility("default"))) int

API cuInit(unsigned) { read_env(); count("cuInit"); return g_init_result; }
API cuDriverGetVersion(int* v) { read_env(); *v = g_version; return 0; }
API cuDeviceGetCount(int* n) { count("cuDeviceGetCount"); if (!ready()) return 3; *n = (int)g_sms.size(); return 0; }
API cuDeviceGet(int* d, int i) { if (!ready()) return 3; if (i < 0 || i >= (int)g_sms.size()) return 101; *d = i; return 0; }
API cuDeviceGetAttribute(int* v, int attr, int d) {
  if (!ready()) return 3;
  if (d < 0 || d >= (int)g_sms.size()) return 101;
  switch (attr) {
    case 75: *v = g_sms[d] / 10; return 0;
    case 76: *v = g_sms[d] % 10; return 0;
    case 16: *v = 132; return 0;
    default: return 1;
  }
}
API cuDeviceGetName(char* name, int len, int d) {
  if (!ready()) return 3;
  std::string n = "Fake GPU sm_" + std::to_string(g_sms[d]);
  std::strncpy(name, n.c_str(), len);
  return 0;
}
API cuDevicePrimaryCtxRetain(Ctx** c, int d) {
  count("cuDevicePrimaryCtxRetain");
  if (!ready()) return 3;
  if (d < 0 || d >= (int)g_sms.size()) return 101;
  *c = &g_ctx[d];
  return 0;
}
API cuDevicePrimaryCtxRelease_v2(int) { count("cuDevicePrimaryCtxRelease"); return 0; }
API cuCtxPushCurrent_v2(Ctx* c) { count("cuCtxPushCurrent"); if (!c) return 201; t_stack.push_back(c); return 0; }
API cuCtxPopCurrent_v2(Ctx** c) {
  count("cuCtxPopCurrent");
  if (t_stack.empty()) return 201;
  if (c) *c = t_stack.back();
  t_stack.pop_back();
  return 0;
}
API cuModuleLoadData(Module** m, const void* image) {
  count("cuModuleLoadData");
  if (t_stack.empty()) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  const int dev = t_stack.back()->device;
  std::string bytes;
  const int sm = cc1d::cubin_sm(image, 64);  // the ELF64 header is all cubin_sm reads
  if (sm > 0) {
    if (sm != g_sms[dev]) return 209;  // CUDA_ERROR_NO_BINARY_FOR_GPU
    bytes.assign(static_cast<const char*>(image), elf_size(image));  // to find symbol names
  } else if (cc1d::looks_like_ptx(image, std::strlen(static_cast<const char*>(image)))) {
    const int target = ptx_target(static_cast<const char*>(image));
    if (target < 0 || target > g_sms[dev]) return 209;
    bytes = static_cast<const char*>(image);
    count("ptx_loads");
  } else {
    return 200;  // CUDA_ERROR_INVALID_IMAGE
  }
  *m = new Module{dev, bytes};
  return 0;
}
API cuModuleUnload(Module* m) { count("cuModuleUnload"); delete m; return 0; }
API cuModuleGetFunction(Func** f, Module* m, const char* name) {
  count("cuModuleGetFunction");
  if (!m) return 400;
  if (m->image.find(name) == std::string::npos) return 500;  // CUDA_ERROR_NOT_FOUND
  *f = new Func{m, name};
  return 0;
}
API cuLaunchKernel(Func* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  count("cuLaunchKernel");
  if (t_stack.empty()) return 201;
  if (!f || !params || extra) return 1;
  if (t_stack.back()->device != f->module->device) return 400;  // wrong context for the module
  if (g_launch_result != 0) return g_launch_result;
  std::lock_guard<std::mutex> lock(g_mu);
  g_last = FakeLaunch{{gx, gy, gz}, {bx, by, bz}, shared, stream, *static_cast<cc1d::FwdParams*>(params[0]), {0}};
  std::strncpy(g_last.function, f->name.c_str(), sizeof g_last.function - 1);
  return 0;
}
API cuGetErrorName(int r, const char** s) {
  switch (r) {
    case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 209: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return 0;
    case 700: *s = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
    default: *s = "CUDA_ERROR_FAKE"; return 0;
  }
}
API cuGetErrorString(int, const char** s) { *s = "reported by the counting fake driver"; return 0; }

// Only the entry points libcc1d may use are served; any other request is counted, so a test
// can prove the runtime never asks for allocation, copy or synchronisation calls.
API cuGetProcAddress_v2(const char* name, void** pfn, int, uint64_t, int* status) {
  static const std::map<std::string, void*> table = {
      {"cuInit", (void*)&cuInit}, {"cuDriverGetVersion", (void*)&cuDriverGetVersion},
      {"cuDeviceGetCount", (void*)&cuDeviceGetCount}, {"cuDeviceGet", (void*)&cuDeviceGet},
      {"cuDeviceGetAttribute", (void*)&cuDeviceGetAttribute}, {"cuDeviceGetName", (void*)&cuDeviceGetName},
      {"cuDevicePrimaryCtxRetain", (void*)&cuDevicePrimaryCtxRetain},
      {"cuDevicePrimaryCtxRelease", (void*)&cuDevicePrimaryCtxRelease_v2},
      {"cuCtxPushCurrent", (void*)&cuCtxPushCurrent_v2}, {"cuCtxPopCurrent", (void*)&cuCtxPopCurrent_v2},
      {"cuModuleLoadData", (void*)&cuModuleLoadData}, {"cuModuleUnload", (void*)&cuModuleUnload},
      {"cuModuleGetFunction", (void*)&cuModuleGetFunction}, {"cuLaunchKernel", (void*)&cuLaunchKernel},
      {"cuGetErrorString", (void*)&cuGetErrorString}, {"cuGetErrorName", (void*)&cuGetErrorName}};
  count("cuGetProcAddress_v2");
  auto it = table.find(name);
  if (it == table.end()) {
    count("unknown_symbol");
    if (status) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    *pfn = nullptr;
    return 500;
  }
  *pfn = it->second;
  if (status) *status = 0;
  return 0;
}

}  // extern "C"
