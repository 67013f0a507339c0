// test_fake_driver.cpp — the fake libcuda itself, called directly through dlopen: devices and
// versions from the environment (one SM per device too), cuGetProcAddress and the names it is
// asked for, context rules, the image checks a real driver makes (cubin SM, PTX ISA),
// lowered-name lookup, launches run by the emulator or only recorded, forced init/launch
// results, the fault switches and the counters. Kernel images are synthetic ELF/PTX here (no
// NVRTC needed; fake_driver_api.h); test_fake_driver_e2e.cpp feeds it real NVRTC cubins through
// the real runtime.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver_api.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"
#include "test_support.h"
#include "tests/fake_driver/fake_cuda.h"

using namespace cc1d_test;

TEST_CASE("devices, SM and driver version come from the environment") {
  configure("86", "2", "12040");
  setenv("CC1D_FAKE_SM_COUNT", "7", 1);
  api().reconfigure();
  int v = 0, n = 0, d = -1, major = 0, minor = 0, sms = 0;
  CHECK(api().version(&v) == 0);  // works before cuInit, like the real driver
  CHECK(v == 12040);
  CHECK(api().count(&n) == FAKE_CUDA_ERROR_NOT_INITIALIZED);
  REQUIRE(api().init(0) == 0);
  CHECK(api().count(&n) == 0);
  CHECK(n == 2);
  CHECK(api().device(&d, 1) == 0);
  CHECK(d == 1);
  CHECK(api().device(&d, 2) == FAKE_CUDA_ERROR_INVALID_DEVICE);
  CHECK(api().attr(&major, 75, 1) == 0);
  CHECK(api().attr(&minor, 76, 1) == 0);
  CHECK(api().attr(&sms, 16, 0) == 0);
  CHECK(major * 10 + minor == 86);
  CHECK(sms == 7);
  char name[128];
  CHECK(api().name(name, sizeof name, 0) == 0);
  CHECK(std::string(name).find("sm_86") != std::string::npos);
}

TEST_CASE("cuGetProcAddress_v2 resolves the unversioned names the runtime asks for") {
  configure("90");
  void* p = nullptr;
  int status = -1;
  CHECK(api().proc_v2("cuCtxPushCurrent", &p, 12000, 0, &status) == 0);
  CHECK(status == 0);
  CHECK(p == dlsym(api().h, "cuCtxPushCurrent_v2"));
  CHECK(api().proc_v2("cuLaunchKernel", &p, 12000, 0, &status) == 0);
  CHECK(p == dlsym(api().h, "cuLaunchKernel"));
  CHECK(api().proc_v2("cuMemAlloc_v2", &p, 12000, 0, &status) == FAKE_CUDA_ERROR_NOT_FOUND);
  CHECK(status == 1);
  CHECK(p == nullptr);
  CHECK(api().proc_v2("cuNoSuchThing", &p, 12000, 0, &status) == FAKE_CUDA_ERROR_NOT_FOUND);
}

TEST_CASE("contexts: retained, pushed and popped like primary contexts") {
  configure("90", "2");
  REQUIRE(api().init(0) == 0);
  void* ctx = nullptr;
  void* module = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  CHECK(api().load(&module, img.data()) == FAKE_CUDA_ERROR_INVALID_CONTEXT);  // none current
  void* popped = nullptr;
  CHECK(api().pop(&popped) == FAKE_CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(api().retain(&ctx, 1) == 0);
  CHECK(api().push(ctx) == 0);
  CHECK(api().pop(&popped) == 0);
  CHECK(popped == ctx);
  CHECK(api().release(1) == 0);
  CHECK(api().push(ctx) == FAKE_CUDA_ERROR_INVALID_CONTEXT);  // released to 0: inactive
  CHECK(api().release(1) == FAKE_CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("cuModuleLoadData checks the image as a real driver does") {
  struct Load {
    const char* device_sm;
    std::string image;
    const char* version;
    int want;
  };
  const std::string ptx90 = std::string(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry ") + kLowered +
                            "(\n.param .align 8 .b8 p[256])\n{ ret; }\n";
  const std::string ptx100 = ".version 9.0\n.target sm_100\n.visible .entry k(\n)\n{ ret; }\n";
  const Load cases[] = {
      {"90", make_cubin(90, {kLowered}), nullptr, 0},
      {"90", make_cubin(80, {kLowered}), nullptr, FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU},
      {"86", make_cubin(80, {kLowered}), nullptr, 0},  // same major, lower minor: binary compatible
      {"80", make_cubin(86, {kLowered}), nullptr, FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU},
      {"120", make_cubin(90, {kLowered}), nullptr, FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU},
      {"90", make_cubin(90, {kLowered}, 7), nullptr, 0},  // the pre-CUDA-13 header layout
      {"90", std::string("junk that is no kernel image") + std::string(1, '\0'), nullptr,
       FAKE_CUDA_ERROR_INVALID_IMAGE},
      {"90", ptx90, nullptr, 0},
      {"90", ptx90, "12040", FAKE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION},  // PTX 9.0 needs CUDA 13
      {"90", ptx100, nullptr, FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU},
  };
  for (const Load& c : cases) {
    configure(c.device_sm, nullptr, c.version);
    Session s;
    void* module = nullptr;
    CAPTURE(c.device_sm);
    CAPTURE(c.want);
    const int r = api().load(&module, c.image.data());
    CHECK_MESSAGE(r == c.want, api().last_error());
    if (r == 0) CHECK(api().unload(module) == 0);
  }
  configure("90", nullptr, nullptr, "module_load");
  Session s;
  void* module = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  CHECK(api().load(&module, img.data()) == FAKE_CUDA_ERROR_INVALID_IMAGE);
  CHECK(std::string(api().last_error()).find("fault switch") != std::string::npos);
}

TEST_CASE("a simulated CUDA-graph capture refuses module loads where a real driver does") {
  auto begin = api().get<int (*)(int)>("cc1d_fake_begin_capture");
  auto end = api().get<int (*)()>("cc1d_fake_end_capture");
  auto exchange = api().get<int (*)(int*)>("cuThreadExchangeStreamCaptureMode");
  enum { kGlobal = 0, kThreadLocal = 1, kRelaxed = 2 };
  configure("90");
  Session s;
  const std::string img = make_cubin(90, {kLowered});
  // A load in `thread_mode` from this thread (or another one), during a capture this thread began
  // in `capture_mode`: the load's result, and end's.
  auto attempt = [&](int capture_mode, int thread_mode, bool load_here) {
    std::pair<int, int> got{-1, -1};
    auto load = [&] {
      void* ctx = s.ctx;
      REQUIRE(api().push(ctx) == 0);  // a context is current per thread
      int mode = thread_mode;
      REQUIRE(exchange(&mode) == 0);
      void* module = nullptr;
      got.first = api().load(&module, img.data());
      if (got.first == 0) CHECK(api().unload(module) == 0);
      REQUIRE(exchange(&mode) == 0);
      CHECK(mode == thread_mode);
      void* popped = nullptr;
      api().pop(&popped);
    };
    REQUIRE(begin(capture_mode) == 0);
    if (load_here)
      load();
    else
      std::thread(load).join();
    got.second = end();
    return got;
  };
  const std::pair<int, int> refused{FAKE_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, FAKE_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED};
  const std::pair<int, int> allowed{0, 0};
  CHECK(attempt(kGlobal, kGlobal, true) == refused);         // torch's default: the capturing thread
  CHECK(attempt(kGlobal, kThreadLocal, true) == refused);
  CHECK(attempt(kGlobal, kRelaxed, true) == allowed);        // what the runtime does around a load
  CHECK(attempt(kGlobal, kGlobal, false) == refused);        // a global capture reaches other threads
  CHECK(attempt(kGlobal, kThreadLocal, false) == allowed);   // ... unless they opt out
  CHECK(attempt(kThreadLocal, kGlobal, false) == allowed);   // a thread-local one does not
  CHECK(attempt(kThreadLocal, kGlobal, true) == refused);
  CHECK(attempt(kRelaxed, kGlobal, true) == allowed);
  CHECK(std::string(api().last_error()).find("not permitted while a stream is capturing") != std::string::npos);
  // No capture: loads run; begin/end pair up; the modes are checked.
  void* module = nullptr;
  CHECK(api().load(&module, img.data()) == 0);
  CHECK(api().unload(module) == 0);
  CHECK(end() == 1);
  CHECK(begin(3) == 1);
  int bad = 7;
  CHECK(exchange(&bad) == FAKE_CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("cuModuleGetFunction finds host instantiations by NVRTC's lowered name") {
  configure("90");
  Session s;
  void* module = nullptr;
  const std::string img = make_cubin(90, {kLowered, "_Z3foov"});
  REQUIRE(api().load(&module, img.data()) == 0);
  void* f = nullptr;
  CHECK(api().function(&f, module, kLowered) == 0);
  CHECK(f != nullptr);
  // In the image but not a kernel the emulator has; not in the image at all.
  CHECK(api().function(&f, module, "_Z3foov") == FAKE_CUDA_ERROR_NOT_FOUND);
  CHECK(std::string(api().last_error()).find("no host instantiation") != std::string::npos);
  CHECK(api().function(&f, module, "_ZN4cc1d24causal_conv1d_fwd_kernelIffLi3ELi0EEEvNS_9FwdParamsE") ==
        FAKE_CUDA_ERROR_NOT_FOUND);
  CHECK(std::string(api().last_error()).find("has no entry") != std::string::npos);
  CHECK(api().unload(module) == 0);
  CHECK(api().unload(module) == FAKE_CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE("cuLaunchKernel runs the launch through the emulator, and only launches") {
  configure("90");
  Session s;
  std::mt19937 rng = cc1d_test::test_rng(110);
  HostTensor x = make_x(CC1D_FLOAT32, 2, 3, 50, Layout::ChannelFirst);
  x.randomize(rng);
  HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {3, 4});
  w.randomize(rng);
  HostTensor out = make_x(CC1D_FLOAT32, 2, 3, 50, Layout::ChannelFirst);
  out.fill_all(NAN);
  for (HostTensor* t : {&x, &w, &out}) t->t.device_type = CC1D_DEVICE_CUDA;  // "device" memory is host memory
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.out = &out.t;
  a.activation = CC1D_ACT_SILU;
  const cc1d::KernelLaunch plan = cc1d::plan_fwd(cc1d::validate_fwd(&a));
  REQUIRE(plan.kernel == "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 6>");  // rows of 50: a peeled head

  void* module = nullptr;
  void* f = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  REQUIRE(api().load(&module, img.data()) == 0);
  REQUIRE(api().function(&f, module, kLowered) == 0);
  cc1d::FwdParams params;
  REQUIRE(plan.params.size() == sizeof params);
  std::memcpy(&params, plan.params.data(), sizeof params);
  void* args[] = {&params};
  void* stream = reinterpret_cast<void*>(0x5eed);
  api().reset();
  REQUIRE_MESSAGE(api().launch(f, plan.grid[0], plan.grid[1], 1, plan.block[0], 1, 1, plan.shared_bytes, stream, args, nullptr) == 0,
                  api().last_error());
  CHECK(reference_diff(out, x, w, nullptr, true) == "");
  cc1d_fake_launch last{};
  REQUIRE(api().last_launch(&last) == 1);
  CHECK(std::string(last.kernel) == kLowered);
  CHECK(last.grid[0] == plan.grid[0]);
  CHECK(last.block[0] == plan.block[0]);
  CHECK(last.stream == stream);
  CHECK(last.context_device == 0);
  cc1d_fake_counters c{};
  api().counters(&c);
  CHECK(c.launch == 1);
  CHECK(c.mem_alloc + c.mem_free + c.memcpy + c.memset + c.synchronize == 0);

  cc1d::FwdParams recorded{};
  REQUIRE(last.params_bytes == sizeof recorded);
  std::memcpy(&recorded, last.params, sizeof recorded);
  CHECK(std::memcmp(&recorded, &params, sizeof recorded) == 0);  // the parameter as launched
  CHECK(c.ptx_loads == 0);

  // What a real driver refuses.
  CHECK(api().launch(f, 1, 1, 1, 2048, 1, 1, 0, nullptr, args, nullptr) == FAKE_CUDA_ERROR_INVALID_VALUE);
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 64 * 1024, nullptr, args, nullptr) == FAKE_CUDA_ERROR_INVALID_VALUE);
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr) == FAKE_CUDA_ERROR_INVALID_VALUE);
  void* popped = nullptr;
  REQUIRE(api().pop(&popped) == 0);
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr) == FAKE_CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(api().push(popped) == 0);
  REQUIRE(api().unload(module) == 0);
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr) == FAKE_CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE("the launch fault fails without running") {
  configure("90", nullptr, nullptr, "launch");
  Session s;
  void* module = nullptr;
  void* f = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  REQUIRE(api().load(&module, img.data()) == 0);
  REQUIRE(api().function(&f, module, kLowered) == 0);
  cc1d::FwdParams params{};
  void* args[] = {&params};
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr) == FAKE_CUDA_ERROR_LAUNCH_FAILED);
  const char* n = nullptr;
  CHECK(api().err_name(FAKE_CUDA_ERROR_LAUNCH_FAILED, &n) == 0);
  CHECK(std::string(n) == "CUDA_ERROR_LAUNCH_FAILED");
  CHECK(api().err_name(123456, &n) == FAKE_CUDA_ERROR_INVALID_VALUE);
  CHECK(n == nullptr);
  api().unload(module);
}

TEST_CASE("no device, and the stub library") {
  configure("90", nullptr, nullptr, "no_device");
  int n = -1;
  CHECK(api().init(0) == FAKE_CUDA_ERROR_NO_DEVICE);
  CHECK(api().count(&n) == FAKE_CUDA_ERROR_NOT_INITIALIZED);
  configure("90", "0");
  CHECK(api().init(0) == FAKE_CUDA_ERROR_NO_DEVICE);

  configure("90", nullptr, nullptr, "stub");
  int v = 0;
  const char* s = nullptr;
  void* p = nullptr;
  unsigned long long dptr = 0;
  CHECK(api().init(0) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  CHECK(api().version(&v) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  CHECK(api().count(&n) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  CHECK(api().err_name(0, &s) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  CHECK(api().proc_v2("cuInit", &p, 12000, 0, nullptr) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  CHECK(api().mem_alloc(&dptr, 16) == FAKE_CUDA_ERROR_STUB_LIBRARY);
  configure("90");
}

TEST_CASE("allocation and synchronisation entry points are counted") {
  configure("90");
  REQUIRE(api().init(0) == 0);
  api().reset();
  unsigned long long dptr = 0;
  CHECK(api().mem_alloc(&dptr, 64) == 0);
  CHECK(api().stream_sync(nullptr) == 0);
  CHECK(api().stream_sync(nullptr) == 0);
  cc1d_fake_counters c{};
  api().counters(&c);
  CHECK(c.mem_alloc == 1);
  CHECK(c.synchronize == 2);
  api().reset();
  api().counters(&c);
  CHECK(c.mem_alloc == 0);
  CHECK(c.synchronize == 0);
  std::free(reinterpret_cast<void*>(dptr));
}

TEST_CASE("CC1D_FAKE_DEVICES: one SM per device, over CC1D_FAKE_SM and CC1D_FAKE_DEVICE_COUNT") {
  configure("86", "3");
  setenv("CC1D_FAKE_DEVICES", "90,80", 1);
  api().reconfigure();
  REQUIRE(api().init(0) == 0);
  int n = 0, major = 0, minor = 0;
  CHECK(api().count(&n) == 0);
  CHECK(n == 2);
  char name[128];
  for (int dev : {0, 1}) {
    CAPTURE(dev);
    CHECK(api().attr(&major, 75, dev) == 0);
    CHECK(api().attr(&minor, 76, dev) == 0);
    CHECK(major * 10 + minor == (dev == 0 ? 90 : 80));
    CHECK(api().name(name, sizeof name, dev) == 0);
    CHECK(std::string(name).find(dev == 0 ? "sm_90" : "sm_80") != std::string::npos);
  }
  CHECK(api().attr(&major, 75, 2) == FAKE_CUDA_ERROR_INVALID_DEVICE);
  // Images are checked against the SM of the current context's device.
  const std::string sm80 = make_cubin(80, {kLowered}), sm90 = make_cubin(90, {kLowered});
  void* ctx[2] = {nullptr, nullptr};
  void* module = nullptr;
  void* popped = nullptr;
  for (int dev : {0, 1}) {
    CAPTURE(dev);
    REQUIRE(api().retain(&ctx[dev], dev) == 0);
    REQUIRE(api().push(ctx[dev]) == 0);
    CHECK(api().load(&module, (dev == 0 ? sm80 : sm90).data()) == FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU);
    REQUIRE(api().load(&module, (dev == 0 ? sm90 : sm80).data()) == 0);
    CHECK(api().unload(module) == 0);
    CHECK(api().pop(&popped) == 0);
    CHECK(api().release(dev) == 0);
  }
  setenv("CC1D_FAKE_DEVICES", "", 1);  // set but empty: no device at all
  api().reconfigure();
  CHECK(api().init(0) == FAKE_CUDA_ERROR_NO_DEVICE);
  configure("90");
}

TEST_CASE("CC1D_FAKE_INIT_RESULT and CC1D_FAKE_LAUNCH_RESULT") {
  configure("90", nullptr, nullptr, "no_device");
  setenv("CC1D_FAKE_INIT_RESULT", "35", 1);  // the variable wins over the fault shorthand
  api().reconfigure();
  int n = 0;
  CHECK(api().init(0) == 35);
  CHECK(api().count(&n) == FAKE_CUDA_ERROR_NOT_INITIALIZED);
  CHECK(std::string(api().last_error()).find("CC1D_FAKE_INIT_RESULT=35") != std::string::npos);

  configure("90");
  setenv("CC1D_FAKE_LAUNCH_RESULT", "700", 1);
  api().reconfigure();
  Session s;
  void* module = nullptr;
  void* f = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  REQUIRE(api().load(&module, img.data()) == 0);
  REQUIRE(api().function(&f, module, kLowered) == 0);
  cc1d::FwdParams params{};  // all null: it must not run
  void* args[] = {&params};
  api().reset();
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr) == 700);
  // Still checked first, as the real driver validates before it fails asynchronously.
  CHECK(api().launch(f, 1, 1, 1, 2048, 1, 1, 0, nullptr, args, nullptr) == FAKE_CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  CHECK(api().err_name(700, &name) == 0);
  CHECK(std::string(name) == "CUDA_ERROR_ILLEGAL_ADDRESS");
  cc1d_fake_counters c{};
  api().counters(&c);
  CHECK(c.launch == 2);
  CHECK(api().unload(module) == 0);
  configure("90");
}

TEST_CASE("CC1D_FAKE_EXECUTE=0 checks and records a launch, and runs nothing") {
  configure("90");
  setenv("CC1D_FAKE_EXECUTE", "0", 1);
  api().reconfigure();
  Session s;
  HostTensor x = make_x(CC1D_FLOAT32, 1, 3, 20, Layout::ChannelFirst);
  HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {3, 4});
  HostTensor out = make_x(CC1D_FLOAT32, 1, 3, 20, Layout::ChannelFirst);
  out.fill_all(NAN);
  for (HostTensor* t : {&x, &w, &out}) t->t.device_type = CC1D_DEVICE_CUDA;
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.out = &out.t;
  const cc1d::KernelLaunch plan = cc1d::plan_fwd(cc1d::validate_fwd(&a));
  void* module = nullptr;
  void* f = nullptr;
  const std::string img = make_cubin(90, {kLowered});
  REQUIRE(api().load(&module, img.data()) == 0);
  REQUIRE(api().function(&f, module, kLowered) == 0);
  cc1d::FwdParams params;
  REQUIRE(plan.params.size() == sizeof params);
  std::memcpy(&params, plan.params.data(), sizeof params);
  void* args[] = {&params};
  REQUIRE(api().launch(f, plan.grid[0], plan.grid[1], 1, plan.block[0], 1, 1, 0, reinterpret_cast<void*>(0x77), args, nullptr) == 0);
  CHECK(std::isnan(out.get(0)));  // untouched
  cc1d_fake_launch last{};
  REQUIRE(api().last_launch(&last) == 1);
  CHECK(last.stream == reinterpret_cast<void*>(0x77));
  REQUIRE(last.params_bytes == sizeof params);
  CHECK(std::memcmp(last.params, &params, sizeof params) == 0);
  CHECK(api().launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr) == FAKE_CUDA_ERROR_INVALID_VALUE);
  CHECK(api().unload(module) == 0);
  configure("90");
}

TEST_CASE("cuGetProcAddress records every name it is asked for; PTX loads are counted") {
  configure("90");
  REQUIRE(api().init(0) == 0);
  api().reset();
  void* p = nullptr;
  int status = -1;
  CHECK(api().proc_v2("cuInit", &p, 12000, 0, &status) == 0);
  CHECK(api().proc_v2("cuInit", &p, 12000, 0, &status) == 0);
  CHECK(api().proc_v2("cuMemAlloc_v2", &p, 12000, 0, &status) == FAKE_CUDA_ERROR_NOT_FOUND);
  CHECK(api().proc_v1("cuMemAlloc", &p, 12000, 0) == 0);  // served, and recorded as asked
  CHECK(api().proc_requests("cuInit") == 2);
  CHECK(api().proc_requests("cuMemAlloc") == 1);
  CHECK(api().proc_requests("cuLaunchKernel") == 0);
  CHECK(api().proc_requests(nullptr) == 3);
  CHECK(std::string(api().requested_proc(0)) == "cuInit");
  CHECK(std::string(api().requested_proc(1)) == "cuMemAlloc_v2");
  CHECK(std::string(api().requested_proc(2)) == "cuMemAlloc");
  CHECK(api().requested_proc(3) == nullptr);
  CHECK(api().requested_proc(-1) == nullptr);
  cc1d_fake_counters c{};
  api().counters(&c);
  CHECK(c.get_proc_address == 4);
  CHECK(c.get_proc_address_v2 == 3);
  CHECK(c.proc_not_found == 1);

  Session s;
  const std::string ptx = std::string(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry ") + kLowered +
                          "(\n.param .align 8 .b8 p[256])\n{ ret; }\n";
  const std::string cubin = make_cubin(90, {kLowered});
  void* m1 = nullptr;
  void* m2 = nullptr;
  REQUIRE(api().load(&m1, ptx.c_str()) == 0);
  REQUIRE(api().load(&m2, cubin.data()) == 0);
  api().counters(&c);
  CHECK(c.module_load == 2);
  CHECK(c.ptx_loads == 1);
  CHECK(api().unload(m1) == 0);
  CHECK(api().unload(m2) == 0);
  api().reset();
  CHECK(api().proc_requests(nullptr) == 0);
  CHECK(api().requested_proc(0) == nullptr);
}
