// fake_driver_api.h — test_fake_driver.cpp's handle on the fake libcuda: its entry points
// through dlopen (Api), its environment (configure), a synthetic cubin (make_cubin), a session
// with a current context, and a lowered kernel name the emulator holds. No NVRTC needed.
#pragma once
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fake_driver/fake_cubin.h"
#include "tests/fake_driver/fake_cuda.h"

namespace cc1d_test {

using fake::make_cubin;

using Fn0 = int (*)();
struct Api {
  void* h = nullptr;
  template <typename F>
  F get(const char* name) {
    void* p = dlsym(h, name);
    REQUIRE_MESSAGE(p != nullptr, name);
    return reinterpret_cast<F>(p);
  }
  int (*init)(unsigned);
  int (*version)(int*);
  int (*count)(int*);
  int (*device)(int*, int);
  int (*attr)(int*, int, int);
  int (*name)(char*, int, int);
  int (*retain)(void**, int);
  int (*release)(int);
  int (*push)(void*);
  int (*pop)(void**);
  int (*load)(void**, const void*);
  int (*unload)(void*);
  int (*function)(void**, void*, const char*);
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
  int (*err_name)(int, const char**);
  int (*proc_v2)(const char*, void**, int, uint64_t, int*);
  int (*proc_v1)(const char*, void**, int, uint64_t);
  int (*mem_alloc)(unsigned long long*, size_t);
  int (*stream_sync)(void*);
  void (*counters)(cc1d_fake_counters*);
  void (*reset)();
  int (*last_launch)(cc1d_fake_launch*);
  const char* (*last_error)();
  void (*reconfigure)();
  long (*proc_requests)(const char*);
  const char* (*requested_proc)(int);
  Api() {
    h = dlopen(CC1D_FAKE_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(h != nullptr, dlerror());
    init = get<decltype(init)>("cuInit");
    version = get<decltype(version)>("cuDriverGetVersion");
    count = get<decltype(count)>("cuDeviceGetCount");
    device = get<decltype(device)>("cuDeviceGet");
    attr = get<decltype(attr)>("cuDeviceGetAttribute");
    name = get<decltype(name)>("cuDeviceGetName");
    retain = get<decltype(retain)>("cuDevicePrimaryCtxRetain");
    release = get<decltype(release)>("cuDevicePrimaryCtxRelease_v2");
    push = get<decltype(push)>("cuCtxPushCurrent_v2");
    pop = get<decltype(pop)>("cuCtxPopCurrent_v2");
    load = get<decltype(load)>("cuModuleLoadData");
    unload = get<decltype(unload)>("cuModuleUnload");
    function = get<decltype(function)>("cuModuleGetFunction");
    launch = get<decltype(launch)>("cuLaunchKernel");
    err_name = get<decltype(err_name)>("cuGetErrorName");
    proc_v2 = get<decltype(proc_v2)>("cuGetProcAddress_v2");
    proc_v1 = get<decltype(proc_v1)>("cuGetProcAddress");
    mem_alloc = get<decltype(mem_alloc)>("cuMemAlloc_v2");
    stream_sync = get<decltype(stream_sync)>("cuStreamSynchronize");
    counters = get<decltype(counters)>("cc1d_fake_get_counters");
    reset = get<decltype(reset)>("cc1d_fake_reset_counters");
    last_launch = get<decltype(last_launch)>("cc1d_fake_last_launch");
    last_error = get<decltype(last_error)>("cc1d_fake_last_error");
    reconfigure = get<decltype(reconfigure)>("cc1d_fake_reconfigure");
    proc_requests = get<decltype(proc_requests)>("cc1d_fake_proc_requests");
    requested_proc = get<decltype(requested_proc)>("cc1d_fake_requested_proc");
  }
};

inline Api& api() {
  static Api a;
  return a;
}

// Sets the fake's environment (unset: default) and re-reads it; cuInit must follow.
inline void configure(const char* sm, const char* devices = nullptr, const char* version = nullptr,
               const char* fault = nullptr) {
  auto set = [](const char* k, const char* v) { v ? setenv(k, v, 1) : unsetenv(k); };
  set("CC1D_FAKE_SM", sm);
  set("CC1D_FAKE_DEVICE_COUNT", devices);
  set("CC1D_FAKE_DRIVER_VERSION", version);
  set("CC1D_FAKE_FAULT", fault);
  for (const char* k : {"CC1D_FAKE_SM_COUNT", "CC1D_FAKE_DEVICES", "CC1D_FAKE_INIT_RESULT", "CC1D_FAKE_LAUNCH_RESULT",
                        "CC1D_FAKE_EXECUTE"})
    unsetenv(k);
  api().reconfigure();
}


// fp32, width 4, time_vec_silu
inline const char* kLowered = "_ZN4cc1d24causal_conv1d_fwd_kernelIffLi4ELi6EEEvNS_9FwdParamsE";

struct Session {  // cuInit + retained, current primary context of device 0
  void* ctx = nullptr;
  Session() {
    REQUIRE(api().init(0) == 0);
    REQUIRE(api().retain(&ctx, 0) == 0);
    REQUIRE(api().push(ctx) == 0);
  }
  ~Session() {
    void* popped = nullptr;
    api().pop(&popped);
    api().release(0);
  }
};

}  // namespace cc1d_test
