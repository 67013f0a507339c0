// The shipped PTX tier end to end on the fake libcuda, one scenario per process (gpu_tests.cmake):
// the first call of a kernel the tier holds links its PTX with the driver's JIT (the fake's
// cuLink* check it as a driver would and give a cubin for the device's SM), runs it through the
// emulator against the float64 reference, and leaves the cubin in the disk cache; each reason
// to refuse the tier sends the kernel to NVRTC instead, and says why in the report.
#include "nvrtc_backend_support.h"

using namespace cc1d_test;

namespace {

// The report's compile records with this origin.
size_t origins(const std::string& report, const char* origin) {
  return occurrences(report, std::string("\"origin\": \"") + origin + "\"");
}

void require_tier_built(const std::string& r) {
  INFO(r.substr(0, 2000));
  REQUIRE_MESSAGE(has(r, "\"ptx_tier\": {\"kernels\": "), "the report lacks the tier");
  REQUIRE_MESSAGE(!has(r, "\"ptx_tier\": {\"kernels\": 0,"), "this libcc1d was built without the tier");
}

}  // namespace

TEST_CASE("shipped PTX tier serves a first call") {
  clean_cache_dir();
  require_tier_built(report());
  Problem p(0);  // fp32, width 4, weights fp32: in the tier
  ok(p);
  Problem p1(1);  // an sm_86 device: the same compute_80 PTX, its own cubin
  ok(p1);
  CHECK(last_launch().context_device == 1);
  Problem bf(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelLast);
  ok(bf);
  Problem mixed(0, CC1D_FLOAT16, CC1D_BFLOAT16);  // a weight of another 16-bit type: NVRTC
  ok(mixed);
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "shipped PTX") == 3);
  CHECK(origins(r, "compiled") == 1);
  CHECK(has(r, "\"writes\": 4"));  // the tier's cubins are cached like NVRTC's
  CHECK(occurrences(r, "\"ptx_tier\": \"serves\"") == 2);
  CHECK(requested_procs().count("cuLinkCreate") == 1);
  // The tier's cubin, not PTX, was loaded: nothing left for the driver to JIT at load.
  CHECK(count("ptx_loads") == 0);
}

TEST_CASE("shipped PTX tier from the disk cache") {
  Problem p(0);
  ok(p);
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "disk cache") == 1);
  CHECK(origins(r, "shipped PTX") == 0);
  CHECK(requested_procs().count("cuLinkCreate") == 0);  // never even resolved
}

// A process that finds the NVRTC facts its predecessor left beside the cache (nvrtc_memo.h), and
// a first call the tier holds: NVRTC is never loaded.
TEST_CASE("shipped PTX tier without loading NVRTC") {
  clean_cache_dir();  // the kernels go, the facts stay
  Problem bf(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelLast);
  ok(bf);
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "shipped PTX") == 1);
  CHECK(has(r, "\"loaded\": false"));
  CHECK_FALSE(has(r, "\"loaded\": true"));
  CHECK_FALSE(nvrtc_mapped());
}

// CC1D_TEST_TIER_REFUSAL: what the report must say (the device's reason, or "serves" when the
// tier serves the device but not this kernel).
TEST_CASE("shipped PTX tier refused") {
  clean_cache_dir();
  const char* why = std::getenv("CC1D_TEST_TIER_REFUSAL");
  REQUIRE(why != nullptr);
  Problem p(0);
  ok(p);
  const std::string r = report();
  INFO(r);
  CHECK(has(r, why));
  CHECK(origins(r, "shipped PTX") == 0);
  CHECK(origins(r, "compiled") == 1);
}

TEST_CASE("shipped PTX tier the driver refuses") {
  clean_cache_dir();
  Problem p(0);
  ok(p);  // the fake's linker refuses the PTX: NVRTC compiles the kernel, the call succeeds
  Problem cl(0, CC1D_FLOAT32, CC1D_FLOAT32, Layout::ChannelLast);
  ok(cl);  // and the tier stays off for the device
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "shipped PTX") == 0);
  CHECK(origins(r, "compiled") == 2);
  CHECK(has(r, "\"ptx_tier\": \"turned off: the CUDA driver's JIT refused the shipped PTX of "));
  CHECK(has(r, "CUDA_ERROR_INVALID_PTX (218)"));
  CHECK(has(r, "the fake's link fault switch"));
}

// A backward call's three kernels (zero, main, finalize), linked side by side, then the channel
// layout's main kernel: every one from the tier, each checked against the float64 reference.
TEST_CASE("bwd launch from the shipped PTX tier") {
  clean_cache_dir();
  std::mt19937 rng = test_rng(79);
  for (bool deterministic : {false, true})
    for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast})
      bwd_on_device(bwd_case(layout, deterministic), rng);
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "shipped PTX") == 4);
  CHECK(origins(r, "compiled") == 0);
  CHECK(has(r, "\"writes\": 4"));
  CHECK(count("cuModuleLoadData") == 4);
}
