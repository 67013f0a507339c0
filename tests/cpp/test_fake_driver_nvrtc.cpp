// test_fake_driver_nvrtc.cpp — the fake libcuda fed REAL NVRTC output: one program holding every
// forward variant (as PTX, which skips ptxas: every lowered name NVRTC gives must resolve to
// the emulator's instantiation of the same name expression and to an entry of the module),
// cubins for the wrong SM (rejected with 209 as a real driver would), and PTX (target SM and
// ISA version checked against the device and driver). Exits 77 (ctest: skipped) when
// this machine has no usable NVRTC.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nvrtc/nvrtc_compile.h"
#include "fallback/emulator/kernel_registry.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_lib.h"
#include "tests/fake_driver/fake_cuda.h"

namespace {

std::shared_ptr<cc1d::NvrtcLib> g_nvrtc;

struct Program {
  std::string image;
  std::vector<std::string> lowered;  // per name expression
};

// One NVRTC program instantiating every name in `names`, compiled for `target` (e.g. "sm_90").
Program compile_all(const std::vector<std::string>& names, const std::string& target) {
  const cc1d::NvrtcApi& api = g_nvrtc->api;
  const cc1d::KernelSources src = cc1d::load_kernel_sources();
  std::vector<const char*> hdata, hnames;
  for (size_t i = 0; i < src.header_names.size(); ++i) {
    hdata.push_back(src.header_sources[i].c_str());
    hnames.push_back(src.header_names[i].c_str());
  }
  cc1d::nvrtcProgram prog = nullptr;
  REQUIRE(api.nvrtcCreateProgram(&prog, src.main_source.c_str(), src.main_name.c_str(), (int)hdata.size(),
                                 hdata.data(), hnames.data()) == 0);
  for (const std::string& n : names) REQUIRE(api.nvrtcAddNameExpression(prog, n.c_str()) == 0);
  const std::string arch = "-arch=" + target;
  const char* opts[] = {arch.c_str(), "-std=c++17"};
  const int rc = api.nvrtcCompileProgram(prog, 2, opts);
  if (rc != 0) {
    size_t n = 0;
    api.nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    api.nvrtcGetProgramLog(prog, &log[0]);
    FAIL("NVRTC failed: " << log);
  }
  Program p;
  size_t size = 0;
  const bool ptx = target.compare(0, 8, "compute_") == 0;
  REQUIRE((ptx ? api.nvrtcGetPTXSize(prog, &size) : api.nvrtcGetCUBINSize(prog, &size)) == 0);
  p.image.assign(size, '\0');
  REQUIRE((ptx ? api.nvrtcGetPTX(prog, &p.image[0]) : api.nvrtcGetCUBIN(prog, &p.image[0])) == 0);
  for (const std::string& n : names) {
    const char* lowered = nullptr;
    REQUIRE(api.nvrtcGetLoweredName(prog, n.c_str(), &lowered) == 0);
    p.lowered.push_back(lowered);
  }
  api.nvrtcDestroyProgram(&prog);
  return p;
}

struct Fake {
  void* h = dlopen(CC1D_FAKE_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
  template <typename F>
  F get(const char* name) {
    void* p = dlsym(h, name);
    REQUIRE_MESSAGE(p != nullptr, name);
    return reinterpret_cast<F>(p);
  }
  void* ctx = nullptr;
  // Configures the fake as a device of `sm` on driver `version`, initialised, context current.
  void start(const char* sm, const char* version = "13000") {
    setenv("CC1D_FAKE_SM", sm, 1);
    setenv("CC1D_FAKE_DRIVER_VERSION", version, 1);
    get<void (*)()>("cc1d_fake_reconfigure")();
    REQUIRE(get<int (*)(unsigned)>("cuInit")(0) == 0);
    REQUIRE(get<int (*)(void**, int)>("cuDevicePrimaryCtxRetain")(&ctx, 0) == 0);
    REQUIRE(get<int (*)(void*)>("cuCtxPushCurrent_v2")(ctx) == 0);
  }
  void stop() {
    for (void* m : loaded) get<int (*)(void*)>("cuModuleUnload")(m);
    loaded.clear();
    void* popped = nullptr;
    get<int (*)(void**)>("cuCtxPopCurrent_v2")(&popped);
    get<int (*)(int)>("cuDevicePrimaryCtxRelease_v2")(0);
  }
  // Loads and, when it loaded, unloads again at stop() (ASan checks for leaks).
  std::vector<void*> loaded;
  int load(void** module, const std::string& image) {
    const int r = get<int (*)(void**, const void*)>("cuModuleLoadData")(module, image.data());
    if (r == 0) loaded.push_back(*module);
    return r;
  }
};

}  // namespace

TEST_CASE("every lowered name of a real NVRTC program of every forward variant resolves to the matching host kernel") {
  const std::vector<std::string> names = cc1d::all_fwd_kernels();
  REQUIRE(names.size() == 9 * CC1D_MAX_WIDTH * cc1d::kFwdNumPaths);
  const Program p = compile_all(names, "compute_90");  // PTX: same lowered names, no ptxas time
  Fake fake;
  REQUIRE(fake.h != nullptr);
  fake.start("90");
  void* module = nullptr;
  REQUIRE_MESSAGE(fake.load(&module, p.image) == 0, fake.get<const char* (*)()>("cc1d_fake_last_error")());
  auto get_function = fake.get<int (*)(void**, void*, const char*)>("cuModuleGetFunction");
  for (size_t i = 0; i < names.size(); ++i) {
    CAPTURE(names[i]);
    CAPTURE(p.lowered[i]);
    CHECK(cc1d::emu::name_expression_from_lowered(p.lowered[i].c_str()) == names[i]);
    void* f = nullptr;
    CHECK(get_function(&f, module, p.lowered[i].c_str()) == 0);
  }
  fake.stop();
}

TEST_CASE("a real cubin for another SM is rejected with CUDA_ERROR_NO_BINARY_FOR_GPU") {
  const std::vector<std::string> one = {"cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>"};
  const Program sm80 = compile_all(one, "sm_80");
  const Program sm90 = compile_all(one, "sm_90");
  Fake fake;
  void* module = nullptr;
  fake.start("90");
  CHECK(fake.load(&module, sm80.image) == FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU);
  CHECK(std::string(fake.get<const char* (*)()>("cc1d_fake_last_error")()).find("sm_80") != std::string::npos);
  CHECK(fake.load(&module, sm90.image) == 0);
  fake.stop();
  fake.start("86");  // sm_80 code runs on sm_86 (same major), sm_90 code does not
  CHECK(fake.load(&module, sm80.image) == 0);
  CHECK(fake.load(&module, sm90.image) == FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU);
  fake.stop();
}

TEST_CASE("real PTX loads where the driver can JIT it and is refused by an older driver") {
  const std::vector<std::string> one = {"cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 3, 1>"};
  const Program ptx = compile_all(one, "compute_90");
  Fake fake;
  void* module = nullptr;
  fake.start("90");
  REQUIRE(fake.load(&module, ptx.image) == 0);
  void* f = nullptr;
  CHECK(fake.get<int (*)(void**, void*, const char*)>("cuModuleGetFunction")(&f, module, ptx.lowered[0].c_str()) == 0);
  fake.stop();
  fake.start("120");  // PTX for compute_90 JIT-compiles for a newer SM
  CHECK(fake.load(&module, ptx.image) == 0);
  fake.stop();
  fake.start("80");
  CHECK(fake.load(&module, ptx.image) == FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU);
  fake.stop();
  fake.start("90", "12080");  // NVRTC's PTX ISA is newer than a CUDA 12.8 driver knows
  if (g_nvrtc->facts.major >= 13) CHECK(fake.load(&module, ptx.image) == FAKE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  fake.stop();
}

int main(int argc, char** argv) {
  std::vector<std::string> not_found;
  for (cc1d::NvrtcCandidate& c : cc1d::discover_nvrtc(cc1d::default_nvrtc_search(), &not_found))
    if (c.lib != nullptr && c.facts.load_error.empty()) {
      g_nvrtc = c.lib;
      break;
    }
  if (g_nvrtc == nullptr) {
    std::printf("SKIPPED: no usable libnvrtc on this machine (needed to produce real cubins)\n");
    return 77;
  }
  std::printf("NVRTC %s at %s\n", g_nvrtc->facts.version_string().c_str(), g_nvrtc->facts.path.c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
