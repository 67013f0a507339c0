// NVRTC discovery over a tree of fake libnvrtc files built by gpu_tests.cmake: the search
// order, version/arch queries, de-duplication, every rejection, and the choice made from
// what was found. No real NVRTC is involved.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "jit/kernel_source.h"
#include "nvrtc/nvrtc_choice.h"
#include "nvrtc/nvrtc_compile.h"
#include "nvrtc/nvrtc_lib.h"

using namespace cc1d;

namespace {

const std::string kTree = CC1D_FAKE_TREE;

// Only the fake tree: no loaded-library probe, no system directories, no sonames.
NvrtcSearchConfig tree_config() {
  NvrtcSearchConfig c;
  c.explicit_path = kTree + "/explicit/libnvrtc.so.12";
  c.roots = {kTree + "/site"};
  c.toolkit_dirs = {{"CUDA_HOME", kTree + "/toolkit/lib64"},
                    {"CUDA_PATH", kTree + "/old/lib64"},
                    {"broken", kTree + "/broken/lib64"},
                    {"partial", kTree + "/partial/lib64"},
                    {"missing", kTree + "/does/not/exist"}};
  return c;
}

std::vector<NvrtcFacts> facts_of(const std::vector<NvrtcCandidate>& cands) {
  std::vector<NvrtcFacts> f;
  for (const auto& c : cands) f.push_back(c.facts);
  return f;
}

bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

}  // namespace

TEST_CASE("search order, versions and arch lists come from the libraries themselves") {
  const auto cands = discover_nvrtc(tree_config());
  std::vector<std::string> paths;
  for (const auto& c : cands) paths.push_back(c.facts.path);
  // explicit; site-packages cu13 then cuda_nvrtc; toolkit newest first (the libnvrtc.so dev
  // link resolves to libnvrtc.so.12 and is dropped, builtins are never candidates); old;
  // broken; partial. "missing" contributes nothing.
  const std::vector<std::string> want = {
      kTree + "/explicit/libnvrtc.so.12",          kTree + "/site/nvidia/cu13/lib/libnvrtc.so.13",
      kTree + "/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", kTree + "/toolkit/lib64/libnvrtc.so.13",
      kTree + "/toolkit/lib64/libnvrtc.so.12",     kTree + "/old/lib64/libnvrtc.so.11.1",
      kTree + "/broken/lib64/libnvrtc.so.12",      kTree + "/partial/lib64/libnvrtc.so.12"};
  CHECK(paths == want);
  REQUIRE(cands.size() == want.size());
  CHECK(cands[0].facts.origin == "CAUSAL_CONV1D_NVRTC");
  CHECK(cands[0].facts.version_string() == "12.1");
  CHECK(cands[1].facts.version_string() == "13.0");
  CHECK(cands[1].facts.archs == std::vector<int>{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121});
  CHECK(has(cands[1].facts.origin, "search root"));
  CHECK(cands[2].facts.version_string() == "12.4");
  CHECK(cands[3].facts.version_string() == "13.2");
  CHECK(cands[4].facts.version_string() == "12.8");
  CHECK(cands[4].facts.origin == "CUDA_HOME");
  for (int i = 0; i < 5; ++i) {
    CHECK(cands[i].facts.load_error.empty());
    CHECK(static_cast<bool>(cands[i].lib));
  }
  CHECK(has(cands[5].facts.load_error, "predates 11.2"));
  CHECK_FALSE(static_cast<bool>(cands[5].lib));
  CHECK(has(cands[6].facts.load_error, "dlopen failed"));
  CHECK(has(cands[7].facts.load_error, "lacks nvrtcCompileProgram"));
}

TEST_CASE("an explicit path that is missing is a rejected candidate, not a crash") {
  NvrtcSearchConfig c;
  c.explicit_path = kTree + "/nope/libnvrtc.so.13";
  const auto cands = discover_nvrtc(c);
  REQUIRE(cands.size() == 1);
  CHECK(has(cands[0].facts.load_error, "dlopen failed"));
  CHECK(has(cands[0].facts.load_error, "No such file"));
}

TEST_CASE("an NVRTC already loaded in the process is found by soname (RTLD_NOLOAD)") {
  NvrtcSearchConfig c;
  c.loaded_sonames = {"libnvrtc.so.11.2"};
  CHECK(discover_nvrtc(c).empty());  // not loaded yet: RTLD_NOLOAD must not load it
  void* h = dlopen((kTree + "/loaded/libnvrtc.so.11.2").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h != nullptr);
  const auto cands = discover_nvrtc(c);
  REQUIRE(cands.size() == 1);
  CHECK(cands[0].facts.path == kTree + "/loaded/libnvrtc.so.11.2");
  CHECK(has(cands[0].facts.origin, "already loaded"));
  CHECK(cands[0].facts.version_string() == "11.2");
}

TEST_CASE("sonames the loader cannot find are reported, not candidates") {
  NvrtcSearchConfig c;
  c.sonames = {"libnvrtc.so.99"};
  std::vector<std::string> not_found;
  CHECK(discover_nvrtc(c, &not_found).empty());
  REQUIRE(not_found.size() == 1);
  CHECK(has(not_found[0], "libnvrtc.so.99"));
}

TEST_CASE("roots injected at run time are searched with the wheel layouts") {
  add_nvrtc_search_roots({kTree + "/site"});
  setenv("CAUSAL_CONV1D_NVRTC_SEARCH_PATH", (kTree + "/toolkit/lib64:" + kTree + "/old/lib64").c_str(), 1);
  setenv("CAUSAL_CONV1D_NVRTC", (kTree + "/explicit/libnvrtc.so.12").c_str(), 1);
  const NvrtcSearchConfig c = default_nvrtc_search();
  unsetenv("CAUSAL_CONV1D_NVRTC_SEARCH_PATH");
  unsetenv("CAUSAL_CONV1D_NVRTC");
  CHECK(c.explicit_path == kTree + "/explicit/libnvrtc.so.12");
  REQUIRE(c.roots.size() >= 3);
  CHECK(c.roots[0] == kTree + "/site");
  CHECK(c.roots[1] == kTree + "/toolkit/lib64");
  CHECK(c.roots[2] == kTree + "/old/lib64");
  CHECK(c.toolkit_dirs.back().second == "/usr/local/cuda/lib64");
  CHECK(c.sonames == std::vector<std::string>{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"});
  // Only the tree parts of that search, so the result does not depend on this machine.
  NvrtcSearchConfig tree;
  tree.explicit_path = c.explicit_path;
  tree.roots = {c.roots[0], c.roots[1], c.roots[2]};
  const auto cands = discover_nvrtc(tree);
  REQUIRE(cands.size() == 6);
  CHECK(cands[1].facts.path == kTree + "/site/nvidia/cu13/lib/libnvrtc.so.13");
  CHECK(cands[3].facts.path == kTree + "/toolkit/lib64/libnvrtc.so.13");
}

TEST_CASE("CAUSAL_CONV1D_NVRTC=none, in any case, searches for nothing and says why") {
  for (const char* v : {"none", "None", "NONE"}) {
    CAPTURE(v);
    setenv("CAUSAL_CONV1D_NVRTC", v, 1);
    const NvrtcSearchConfig c = default_nvrtc_search();
    unsetenv("CAUSAL_CONV1D_NVRTC");
    CHECK(c.disabled);
    CHECK(c.explicit_path.empty());
    CHECK((c.roots.empty() && c.toolkit_dirs.empty() && c.sonames.empty() && c.loaded_sonames.empty()));
    std::vector<std::string> not_found;
    CHECK(discover_nvrtc(c, &not_found).empty());
    CHECK(not_found == std::vector<std::string>{kNoNvrtcReason});
  }
}

TEST_CASE("choices over the discovered tree") {
  const auto facts = facts_of(discover_nvrtc(tree_config()));
  SUBCASE("CUDA 13 driver, sm_90, torch cu13: the newest CUDA 13 NVRTC (toolkit 13.2) makes a cubin") {
    const auto ch = choose_nvrtc(facts, 13000, 90, 13);
    REQUIRE(ch.ok);
    CHECK(facts[ch.index].version_string() == "13.2");
    CHECK(ch.kind == CodeKind::Cubin);
  }
  SUBCASE("CUDA 13 driver, sm_90, torch cu12: the newest CUDA 12 NVRTC (12.8)") {
    const auto ch = choose_nvrtc(facts, 13000, 90, 12);
    REQUIRE(ch.ok);
    CHECK(facts[ch.index].version_string() == "12.8");
  }
  SUBCASE("CUDA 12.4 driver: CUDA 13 NVRTCs rejected, sm_120 cubin from 12.8") {
    const auto ch = choose_nvrtc(facts, 12040, 120, 13);
    REQUIRE(ch.ok);
    CHECK(facts[ch.index].version_string() == "12.8");
    CHECK(ch.kind == CodeKind::Cubin);
    CHECK(has(ch.decisions[1].reason, "driver supports CUDA 12.4"));
    CHECK(has(ch.decisions[3].reason, "driver supports CUDA 12.4"));
  }
  SUBCASE("CUDA 12.4 driver, future sm_130: PTX only from NVRTCs not newer than 12.4") {
    const auto ch = choose_nvrtc(facts, 12040, 130, 0);
    REQUIRE(ch.ok);
    CHECK(ch.kind == CodeKind::Ptx);
    CHECK(facts[ch.index].version_string() == "12.4");
    CHECK(ch.target_arch == 90);
  }
  SUBCASE("CUDA 11.8 driver: nothing eligible, and the reason lists every candidate") {
    const auto ch = choose_nvrtc(facts, 11080, 86, 0);
    CHECK_FALSE(ch.ok);
    for (const auto& f : facts) CHECK(has(ch.reason, f.path));
    CHECK(has(ch.reason, "pip install nvidia-cuda-nvrtc-cu11"));
  }
}

TEST_CASE("an NVRTC that cannot load its builtins says so, and what to do, instead of blaming the source") {
  const NvrtcCandidate c = probe_nvrtc(kTree + "/nobuiltins/lib64/libnvrtc.so.13", "test");
  REQUIRE_MESSAGE(static_cast<bool>(c.lib), c.facts.load_error);
  try {
    compile_kernel(*c.lib, load_kernel_sources(), "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>", CodeKind::Cubin, 90);
    FAIL("expected a compile error");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(e.status() == CC1D_ERR_COMPILE);
    CHECK(has(m, "failed to open libnvrtc-builtins.so.13.0"));  // NVRTC's log
    CHECK(has(m, "could not use its builtins library (libnvrtc-builtins.so.13.0), which belongs beside " + kTree +
                     "/nobuiltins/lib64/libnvrtc.so.13"));
    CHECK(has(m, "pip install 'nvidia-cuda-nvrtc==13.0.*'"));
    CHECK(has(m, "CAUSAL_CONV1D_NVRTC"));
    CHECK_FALSE(has(m, "Fix the kernel source"));
  }
}
