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
#include <thread>
#include <vector>

#include "nvrtc/nvrtc_compile.h"
#include "fallback/emulator/kernel_registry.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_lib.h"
#include "test_support.h"
#include "tests/fake_driver/fake_cuda.h"

namespace {

std::shared_ptr<cc1d::NvrtcLib> g_nvrtc;

// One NVRTC program of the forward's sources (as the runtime compiles them) instantiating every
// name in `names`, for `target`: "sm_90" (a cubin) or "compute_90" (PTX).
cc1d::CompiledProgram compile_all(const std::vector<std::string>& names, const std::string& target) {
  const bool ptx = target.compare(0, 8, "compute_") == 0;
  const cc1d::KernelSources fwd = cc1d::op_kernel_sources(cc1d::load_kernel_sources(), cc1d::kFwdOp.kernel_file);
  return cc1d::compile_kernels(*g_nvrtc, fwd, names, ptx ? cc1d::CodeKind::Ptx : cc1d::CodeKind::Cubin,
                               std::atoi(target.c_str() + (ptx ? 8 : 3)));
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
  const std::vector<std::string> all = cc1d::all_fwd_kernels();
  REQUIRE(all.size() == 9 * CC1D_MAX_WIDTH * cc1d::kFwdNumPaths);
  // The sanitizer job checks every 7th name (each path, width and dtype pair still appears):
  // the NVRTC compile it waits on is not instrumented, and the release job checks all 576.
  std::vector<std::string> names;
  for (size_t i = 0; i < all.size(); i += cc1d_test::kSanitized ? 7 : 1) names.push_back(all[i]);
  // Two programs (PTX: same lowered names, no ptxas time), compiled on two threads.
  const size_t half = names.size() / 2;
  const std::vector<std::string> parts[2] = {{names.begin(), names.begin() + half}, {names.begin() + half, names.end()}};
  cc1d::CompiledProgram programs[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      try {
        programs[i] = compile_all(parts[i], "compute_90");
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  Fake fake;
  REQUIRE(fake.h != nullptr);
  fake.start("90");
  auto get_function = fake.get<int (*)(void**, void*, const char*)>("cuModuleGetFunction");
  for (int i = 0; i < 2; ++i) {
    REQUIRE_MESSAGE(errors[i].empty(), errors[i]);
    const cc1d::CompiledProgram& p = programs[i];
    void* module = nullptr;
    REQUIRE_MESSAGE(fake.load(&module, p.image) == 0, fake.get<const char* (*)()>("cc1d_fake_last_error")());
    for (size_t j = 0; j < parts[i].size(); ++j) {
      CAPTURE(parts[i][j]);
      CAPTURE(p.lowered_names[j]);
      CHECK(cc1d::emu::name_expression_from_lowered(p.lowered_names[j].c_str()) == parts[i][j]);
      void* f = nullptr;
      CHECK(get_function(&f, module, p.lowered_names[j].c_str()) == 0);
    }
  }
  fake.stop();
}

TEST_CASE("a real cubin for another SM is rejected with CUDA_ERROR_NO_BINARY_FOR_GPU") {
  const std::vector<std::string> one = {"cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>"};
  const cc1d::CompiledProgram sm80 = compile_all(one, "sm_80");
  const cc1d::CompiledProgram sm90 = compile_all(one, "sm_90");
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
  const cc1d::CompiledProgram ptx = compile_all(one, "compute_90");
  Fake fake;
  void* module = nullptr;
  fake.start("90");
  REQUIRE(fake.load(&module, ptx.image) == 0);
  void* f = nullptr;
  CHECK(fake.get<int (*)(void**, void*, const char*)>("cuModuleGetFunction")(&f, module, ptx.lowered_names[0].c_str()) == 0);
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
