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

// No NVRTC at all (CAUSAL_CONV1D_NVRTC=none): the tier alone serves the device. Its kernels run
// and match the reference; a kernel it lacks fails that call alone with CC1D_ERR_UNSUPPORTED
// (so a caller falls back for it), naming the kernel, the tier and why no NVRTC compiles it;
// the next call of a held kernel still runs; NVRTC is never loaded.
TEST_CASE("shipped PTX tier without any NVRTC") {
  clean_cache_dir();
  REQUIRE(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_OK);
  Problem p(0);
  ok(p);
  Problem mixed(0, CC1D_FLOAT16, CC1D_BFLOAT16);  // not in the tier
  mixed.out.fill_all(NAN);
  CHECK(mixed.run() == CC1D_ERR_UNSUPPORTED);
  const std::string m = cc1d_last_error();
  INFO(m);
  CHECK(has(m, "has no kernel for cc1d::causal_conv1d_fwd_kernel<cc1d::half_t, cc1d::bf16_t, 4"));
  CHECK(has(m, "the shipped PTX tier does not hold it"));
  CHECK(has(m, "CAUSAL_CONV1D_NVRTC=none"));
  CHECK(m.find('\n') == std::string::npos);
  bool untouched = true;  // nothing was written
  const int64_t n = static_cast<int64_t>(mixed.out.storage.size() / 2);  // fp16
  for (int64_t i = 0; i < n; ++i) untouched &= std::isnan(mixed.out.get(i));
  CHECK(untouched);
  Problem bf(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelLast);
  ok(bf);
  const std::string r = report();
  INFO(r);
  CHECK(origins(r, "shipped PTX") == 2);
  CHECK(has(r, "\"usable\": true, \"mode\": \"shipped PTX only\", \"target\": \"sm_90\", \"nvrtc\": \"\""));
  CHECK(has(r, "\"reason\": \"kernels only from the shipped PTX tier: CAUSAL_CONV1D_NVRTC=none"));
  CHECK(has(r, "\"nvrtc_candidates\": []"));
  CHECK_FALSE(nvrtc_mapped());
}

// No NVRTC, and the driver's JIT refuses the tier's PTX: no kernel at all for the device, so the
// backend is unavailable there (CC1D_ERR_BACKEND_UNAVAILABLE), with both reasons in one line.
TEST_CASE("shipped PTX tier refused without any NVRTC") {
  clean_cache_dir();
  for (int call = 0; call < 2; ++call) {
    Problem p(0);
    CHECK(p.run() == CC1D_ERR_BACKEND_UNAVAILABLE);
    const std::string m = cc1d_last_error();
    INFO(m);
    CHECK(has(m, "the shipped PTX tier was turned off (the CUDA driver's JIT refused the shipped PTX of "));
    CHECK(has(m, "CAUSAL_CONV1D_NVRTC=none"));
    CHECK(m.find('\n') == std::string::npos);
  }
  CHECK(requested_procs().count("cuLinkCreate") == 1);
}

// No NVRTC, on a device the tier does not serve (this build's tier holds compute_80 PTX, which
// does not give sm_100 its own SASS): unusable, and the reason names both.
TEST_CASE("no NVRTC and no tier") {
  CHECK(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_ERR_BACKEND_UNAVAILABLE);
  const std::string m = cc1d_last_error();
  INFO(m);
  CHECK(has(m, "sm_100"));
  CHECK(has(m, "CAUSAL_CONV1D_NVRTC=none"));
  CHECK(has(m, "; no precompiled tier holds its arch, and the shipped PTX tier cannot serve it: it holds compute_80"));
  CHECK(m.find('\n') == std::string::npos);
  Problem p;
  CHECK(p.run() == CC1D_ERR_BACKEND_UNAVAILABLE);
  CHECK(has(report(), "\"index\": 0, \"sm\": 100, \"usable\": false"));
}

// ---- a precompiled tier on a node without NVRTC ------------------------------------------------

// The fleet's build step (with NVRTC): the forward's fp32 width-4 variants for sm_90 into
// CC1D_TEST_TIER_OUT, with the targets file that a node without NVRTC reads. For nodes with
// CC1D_TEST_TIER_DRIVER's driver (default: one that runs the newest NVRTC found), whose NVRTC
// CC1D_TEST_TIER_COMPILER (a prefix) is then expected in the file.
TEST_CASE("precompile a tier for sm_90") {
  const char* out = std::getenv("CC1D_TEST_TIER_OUT");
  REQUIRE(out != nullptr);
  std::filesystem::remove_all(out);
  const int32_t arch = 90, op = CC1D_OP_FWD, dtype = CC1D_FLOAT32, width = 4;
  cc1d_precompile_args a{};
  a.struct_size = sizeof a;
  a.out_dir = out;
  a.archs = &arch, a.num_archs = 1;
  a.ops = &op, a.num_ops = 1;
  a.dtypes = &dtype, a.num_dtypes = 1;
  a.widths = &width, a.num_widths = 1;
  if (const char* d = std::getenv("CC1D_TEST_TIER_DRIVER")) a.driver_version = std::atoi(d);
  char* manifest = nullptr;
  REQUIRE_MESSAGE(cc1d_precompile(&a, &manifest) == CC1D_OK, std::string(cc1d_last_error()));
  cc1d_free(manifest);
  std::ifstream f(std::string(out) + "/targets-v1");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const char* compiler = std::getenv("CC1D_TEST_TIER_COMPILER");
  CHECK(has(text, std::string("\n90\tsm_90\t") + (compiler ? compiler : "NVRTC ")));
}

// A node whose NVRTC is not the one the tier was precompiled with (NVRTC 13.0 here, NVRTC 12.9's
// tier from CAUSAL_CONV1D_CACHE_PATH): the tier's image of a kernel stands in for a compile when
// this driver loads it (CC1D_TEST_STAND_IN=1), and only then; a kernel the tier lacks compiles,
// or with the shipped PTX tier on (CC1D_TEST_SHIPPED=1) comes from there, after the stand-in.
TEST_CASE("precompiled tier from another NVRTC") {
  clean_cache_dir();
  const char* expect = std::getenv("CC1D_TEST_STAND_IN");
  const bool stand_in = expect != nullptr && std::string(expect) == "1";
  const bool shipped = std::getenv("CC1D_TEST_SHIPPED") != nullptr;
  Problem p(0);  // fp32, width 4: in the tier
  ok(p);
  Problem bf(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelLast);  // not in the tier
  ok(bf);
  const std::string r = report();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"tier ") == (stand_in ? 1 : 0));
  CHECK(origins(r, "shipped PTX") == (shipped ? 1 : 0));
  CHECK(origins(r, "compiled") == (stand_in ? 0 : 1) + (shipped ? 0 : 1));
  CHECK(has(r, "\"usable\": true, \"mode\": \"cubin\", \"target\": \"sm_90\""));
  CHECK_FALSE(has(r, "\"nvrtc_version\": \"12.9\""));  // the node's own choice is another NVRTC
  // The report says which of the tier's targets serve the device, and why not.
  CHECK(has(r, "\"target\": \"sm_90\", \"compiler\": \"NVRTC 12.9\", \"min_driver\": \"12.0\", \"use\": " +
                   std::string(stand_in ? "\"stands in\"" : "\"needs a CUDA 12.0 driver\"")));
  // A look for a stand-in counts no miss in the tier: only the lookup of what was then made does.
  CHECK(has(r, stand_in ? "\"hits\": 1, \"misses\": 1, \"corrupt\": 0}]"
                        : "\"hits\": 0, \"misses\": 2, \"corrupt\": 0}]"));
}

// A node with no NVRTC (CAUSAL_CONV1D_NVRTC=none) and that tier (CAUSAL_CONV1D_CACHE_PATH): its
// sm_90 device takes the tier's keys, so the precompiled kernel loads; a kernel the tier lacks
// fails that call alone (UNSUPPORTED); its sm_80 device, which no tier covers (the shipped PTX
// tier is off here), is unusable. CC1D_TEST_SHIPPED=1: the shipped PTX tier is on too, and serves
// what the precompiled one lacks.
TEST_CASE("precompiled tier without any NVRTC") {
  clean_cache_dir();
  const bool shipped = std::getenv("CC1D_TEST_SHIPPED") != nullptr;
  REQUIRE(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 0) == CC1D_OK);
  Problem p(0);
  ok(p);
  Problem bf(0, CC1D_BFLOAT16, CC1D_BFLOAT16, Layout::ChannelLast);
  if (shipped) {
    ok(bf);
  } else {
    CHECK(bf.run() == CC1D_ERR_UNSUPPORTED);
    const std::string m = cc1d_last_error();
    INFO(m);
    CHECK(has(m, "neither its precompiled tier nor the shipped PTX tier holds it"));
    CHECK(has(m, "CAUSAL_CONV1D_NVRTC=none"));
    CHECK(cc1d_backend_available(CC1D_BACKEND_NVRTC, CC1D_DEVICE_CUDA, 1) == CC1D_ERR_BACKEND_UNAVAILABLE);
    CHECK(has(cc1d_last_error(), "no precompiled tier holds its arch, and the shipped PTX tier cannot serve it"));
  }
  const std::string r = report();
  INFO(r);
  CHECK(occurrences(r, "\"origin\": \"tier ") == 1);
  CHECK(origins(r, "shipped PTX") == (shipped ? 1 : 0));
  CHECK(origins(r, "compiled") == 0);
  CHECK(has(r, "\"usable\": true, \"mode\": \"precompiled\", \"target\": \"sm_90\", \"nvrtc\": \"\""));
  CHECK(has(r, "\"reason\": \"kernels only from the precompiled tier "));
  CHECK(has(r, "\"use\": \"own keys\"}], \"decisions\""));
  CHECK_FALSE(nvrtc_mapped());
}
