// The shipped PTX tier's parts without a driver: which set serves which SM, lookup and
// decompression over a pack made here (so the sanitizer build, which embeds none, runs them
// too), the variant list, and the embedded pack checked against what NVRTC makes of the
// embedded sources now: the same PTX, lowered names and digests, entry for entry.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "jit/hash.h"
#include "kernels_src/bwd_params.h"
#include "kernels_src/fwd_params.h"
#include "jit/kernel_source.h"
#include "jit/lz_codec.h"
#include "nvrtc/nvrtc_compile.h"
#include "nvrtc/nvrtc_lib.h"
#include "nvrtc/ptx_tier.h"
#include "ops/op.h"

using namespace cc1d;

namespace {

struct EnvGuard {  // sets (or unsets, for nullptr) a variable for the guard's lifetime
  std::string name, old;
  bool had;
  EnvGuard(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    v ? setenv(n, v, 1) : unsetenv(n);
  }
  ~EnvGuard() { had ? setenv(name.c_str(), old.c_str(), 1) : unsetenv(name.c_str()); }
};

// A pack made as the build makes one: two kernels' "PTX" from NVRTC 13.0 at compute_80, one at
// compute_100, and the first again from NVRTC 12.9 at compute_80.
struct TestPack {
  std::vector<std::string> texts = {std::string(3000, 'a') + ".entry k0(\n", ".entry k1(" + std::string(777, 'x'),
                                    ".target sm_100\n.entry k0(", ".version 8.8\n.entry k0("};
  std::string blob;
  std::vector<ShippedPtx> entries;
  PtxPack pack{};
  TestPack() {
    const char* names[] = {"k<0>", "k<1>", "k<0>", "k<0>"};
    const int archs[] = {80, 80, 100, 80};
    const char* nvrtc[] = {"13.0", "13.0", "13.0", "12.9"};
    const int versions[] = {13000, 13000, 13000, 12090};
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string z = lz_compress(texts[i]);
      entries.push_back(ShippedPtx{"h0", names[i], "_lowered", "digest", archs[i], nvrtc[i], versions[i],
                                   uint32_t(blob.size()), uint32_t(z.size()), uint32_t(texts[i].size())});
      blob += z;
    }
    pack = PtxPack{entries.data(), entries.size(), reinterpret_cast<const unsigned char*>(blob.data()), blob.size()};
  }
};

// NVRTC names internal-linkage symbols after the compiling process ("_ZN44_INTERNAL_00000000_9_op_fwd_cu_
// 2c5c67a4_60384cc1d..."): the one part of its PTX that differs between two compiles.
std::string without_internal_ids(const std::string& ptx) {
  static const std::regex id("[0-9]+_INTERNAL_[0-9a-f]+_[0-9]+_[A-Za-z0-9_]+?_cu_[0-9a-f]{8}_[0-9]+");
  return std::regex_replace(ptx, id, "INTERNAL");
}

}  // namespace

TEST_CASE("each SM is served by the set of its generation or by none") {
  const std::vector<int> only80 = {80};
  const std::map<int, int> want80 = {{75, 0}, {80, 80}, {86, 80}, {87, 80}, {89, 80}, {90, 80}, {100, 0}, {120, 0}};
  for (const auto& [sm, arch] : want80) CHECK_MESSAGE(ptx_set_for(only80, sm) == arch, "sm_" << sm);
  const std::vector<int> three = {80, 100, 120};
  const std::map<int, int> want3 = {{90, 80}, {100, 100}, {103, 100}, {110, 0}, {120, 120}, {121, 120}, {130, 0}};
  for (const auto& [sm, arch] : want3) CHECK_MESSAGE(ptx_set_for(three, sm) == arch, "sm_" << sm);
}

TEST_CASE("a tier finds decompresses and refuses as its pack says") {
  EnvGuard on(kPtxTierEnv, nullptr);
  TestPack t;
  const PtxTier tier(t.pack);
  CHECK(tier.size() == 4);
  const ShippedPtx* e = tier.find("h0", "k<1>", 86, 13000);
  REQUIRE(e != nullptr);
  CHECK(tier.ptx(*e) == t.texts[1]);
  CHECK(tier.ptx(*tier.find("h0", "k<0>", 90, 13020)) == t.texts[0]);   // the newest NVRTC the driver runs
  CHECK(tier.ptx(*tier.find("h0", "k<0>", 90, 12090)) == t.texts[3]);   // a CUDA 12.9 driver: NVRTC 12.9's
  CHECK(tier.ptx(*tier.find("h0", "k<0>", 100, 13000)) == t.texts[2]);  // Blackwell: its own set
  CHECK(tier.find("h0", "k<0>", 90, 12080) == nullptr);  // older than both NVRTCs
  CHECK(tier.find("h0", "k<1>", 90, 12090) == nullptr);  // NVRTC 12.9 did not make this one
  CHECK(tier.find("h1", "k<1>", 90, 13000) == nullptr);  // other sources
  CHECK(tier.find("h0", "k<2>", 90, 13000) == nullptr);  // not held
  CHECK(tier.find("h0", "k<1>", 100, 13000) == nullptr);  // held for compute_80 only
  CHECK(tier.find("h0", "k<0>", 75, 13000) == nullptr);
  CHECK(tier.producer(*e, 13020) == "shipped PTX compute_80 (NVRTC 13.0) + CUDA 13.2 driver JIT");
  CHECK(tier.producer(*tier.find("h0", "k<0>", 90, 12090), 12090) ==
        "shipped PTX compute_80 (NVRTC 12.9) + CUDA 12.9 driver JIT");
  CHECK(tier.report_json() == "{\"kernels\": 4, \"archs\": [80, 100], \"nvrtc\": [\"12.9\", \"13.0\"], \"bytes\": " +
                                  std::to_string(t.blob.size()) + "}");

  CHECK(tier.refusal(90, 13000) == "");
  CHECK(tier.refusal(90, 12090) == "");
  CHECK(tier.refusal(100, 13020) == "");
  CHECK(tier.refusal(90, 12080) == "its PTX is from NVRTC 12.9 and 13.0, newer than this CUDA 12.8 driver can JIT");
  CHECK(tier.refusal(120, 13000) ==
        "it holds compute_80, compute_100, none of which gives sm_120 the SASS of its own cubin");
  {
    EnvGuard off(kPtxTierEnv, "0");
    CHECK(tier.refusal(90, 13000) == "turned off by CAUSAL_CONV1D_PTX_TIER");
  }
  {
    EnvGuard empty(kPtxTierEnv, "");  // empty: the default, on
    CHECK(tier.refusal(90, 13000) == "");
  }
  const PtxPack none{nullptr, 0, nullptr, 0};
  CHECK(PtxTier(none).refusal(90, 13000).find("built without it") != std::string::npos);
}

TEST_CASE("damaged pack bytes are an error that says what to do") {
  TestPack t;
  t.entries[1].raw_size += 1;  // the stream no longer gives exactly this many bytes
  t.entries[0].offset = static_cast<uint32_t>(t.blob.size());  // past the blob's end
  const PtxTier tier(t.pack);
  for (const char* name : {"k<0>", "k<1>"}) {
    try {
      tier.ptx(*tier.find("h0", name, 90, 13000));
      FAIL("no error for " << name);
    } catch (const Error& e) {
      CHECK(e.status() == CC1D_ERR_INTERNAL);
      CHECK(std::string(e.what()).find("CAUSAL_CONV1D_PTX_TIER=0") != std::string::npos);
    }
  }
}

TEST_CASE("the tier's variants are widths 2 to 4 with weights of x's dtype or fp32") {
  const std::vector<std::string> v = ptx_tier_variants();
  // Per op: (x, weight) pairs fp32/fp32, fp16/fp16, fp16/fp32, bf16/bf16, bf16/fp32 = 5, times 3 widths,
  // times the paths (forward 9, backward 7, update 1); the backward's finalize (3) and zeroing (1)
  // kernels and varlen's 6 have no width.
  CHECK(v.size() == 5 * 3 * (kFwdNumPaths + kBwdNumLayouts + 1) + 3 + 1 + 6);
  std::map<std::string, int> seen;
  for (const std::string& k : v) {
    ++seen[k];
    for (const char* bad : {", 1, ", ", 5, ", ", 6, ", ", 7, ", ", 8, ", "cc1d::half_t, cc1d::bf16_t",
                            "cc1d::bf16_t, cc1d::half_t", "float, cc1d::half_t", "float, cc1d::bf16_t"})
      CHECK_MESSAGE(k.find(bad) == std::string::npos, k);
    CHECK_MESSAGE(find_kernel_op(k) != nullptr, k);
  }
  CHECK(seen.size() == v.size());  // no duplicates
  CHECK(seen.count("cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, cc1d::bf16_t, 4, 6>") == 1);
  CHECK(seen.count("cc1d::causal_conv1d_update_kernel<cc1d::bf16_t, float, 4>") == 1);
  CHECK(seen.count("cc1d::causal_conv1d_bwd_finalize_kernel<float>") == 1);
}

TEST_CASE("the embedded pack is what NVRTC makes of the embedded sources") {
  EnvGuard src("CAUSAL_CONV1D_KERNEL_DIR", nullptr);
  const PtxPack& pack = shipped_ptx_pack();
  std::vector<NvrtcCandidate> found = discover_nvrtc(default_nvrtc_search());
  if (const char* nv12 = std::getenv("CC1D_TEST_NVRTC12")) found.push_back(probe_nvrtc(nv12, "test"));
  if (pack.count == 0) {
#ifdef CC1D_TEST_PTX_TIER_BUILT
    // The build makes the tier with any NVRTC it finds: an empty pack means it found none.
    for (const NvrtcCandidate& c : found) CHECK_MESSAGE(!c.lib, "built without a tier, yet " << c.facts.path);
#endif
    return;
  }
  const PtxTier tier(pack);
  const KernelSources all = load_kernel_sources();
  std::map<std::string, std::string> hash_of_file;
  std::map<std::string, std::vector<int>> archs_of;  // per NVRTC
  for (size_t i = 0; i < pack.count; ++i) {
    const ShippedPtx& e = pack.entries[i];
    const char* file = kernel_file_of(*find_kernel_op(e.name));
    if (!hash_of_file.count(file)) hash_of_file[file] = op_kernel_sources(all, file).hash;
    CHECK_MESSAGE(e.sources_hash == hash_of_file[file], e.name);
    const std::string ptx = tier.ptx(e);
    CHECK_MESSAGE(sha256_hex(ptx) == e.digest, e.name);
    std::vector<int>& archs = archs_of[e.nvrtc];
    if (std::find(archs.begin(), archs.end(), e.arch) == archs.end()) archs.push_back(e.arch);
  }
  size_t sets = 0;
  for (const auto& [nvrtc, archs] : archs_of) sets += archs.size();
  CHECK(pack.count == ptx_tier_variants().size() * sets);
  // NVRTC now, on a sample (every 11th entry: each op, path and NVRTC appears): the same bytes.
  for (size_t i = 0; i < pack.count; i += 11) {
    const ShippedPtx& e = pack.entries[i];
    INFO(std::string(e.name) << " compute_" << e.arch << " NVRTC " << e.nvrtc);
    std::shared_ptr<NvrtcLib> nvrtc;
    for (const NvrtcCandidate& c : found)
      if (c.lib && c.facts.version_string() == e.nvrtc) nvrtc = c.lib;
    REQUIRE_MESSAGE(static_cast<bool>(nvrtc), "no NVRTC " << e.nvrtc << " here to compare the pack with");
    CompiledImage now = compile_kernel(*nvrtc, op_kernel_sources(all, kernel_file_of(*find_kernel_op(e.name))),
                                       e.name, CodeKind::Ptx, e.arch);
    while (!now.image.empty() && now.image.back() == '\0') now.image.pop_back();
    CHECK(without_internal_ids(now.image) == without_internal_ids(tier.ptx(e)));
    CHECK(now.lowered_name == e.lowered);
  }
}
