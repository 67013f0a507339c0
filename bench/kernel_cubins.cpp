// kernel_cubins — compiles kernel variants to cubins exactly as the nvrtc backend does (the
// runtime's compile_kernel and nvrtc_options, the embedded or CAUSAL_CONV1D_KERNEL_DIR sources)
// and writes them out for static analysis (bench/sass_profile.py reads them).
//
//   kernel_cubins --out DIR [--arch 80,90,100] [--profile-set [--match TEXT] | name-expression ...]
//   (--match "A|B": the families whose label contains A or B)
// --profile-set: one variant per kernel family (each op's paths x each x dtype, width 4, weight
// of x's dtype), labelled "fwd time_vec bf16", or those whose label contains TEXT; without names
// or it: every kernel of every op.
// Writes DIR/<n>.sm_<arch>.cubin and DIR/manifest.tsv: file, arch, threads per block, dynamic
// shared memory bytes of a launch (what the planner asks for: the backward's time layouts),
// compile ms, lowered name, label, name expression.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "jit/kernel_source.h"
#include "kernels_src/bwd_params.h"
#include "kernels_src/fwd_params.h"
#include "kernels_src/update_params.h"
#include "kernels_src/varlen_params.h"
#include "nvrtc/nvrtc_compile.h"
#include "nvrtc/nvrtc_lib.h"
#include "ops/bwd/bwd_kernels.h"
#include "ops/fwd/fwd_kernels.h"
#include "ops/op.h"
#include "ops/update/update_kernels.h"
#include "ops/varlen/varlen_kernels.h"

using namespace cc1d;

namespace {

std::vector<int> parse_archs(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (p == nullptr) break;
    ++p;
  }
  return out;
}

// Threads per block of a kernel, from its op's launch geometry constants.
int block_threads(const std::string& name) {
  if (name.find("causal_conv1d_fwd_kernel") != std::string::npos) return kFwdThreads;
  if (name.find("causal_conv1d_update_kernel") != std::string::npos) return kUpdateThreads;
  if (name.find("causal_conv1d_varlen_states_kernel") != std::string::npos) return kVarlenThreads;
  if (name.find("causal_conv1d_bwd_") != std::string::npos) return kBwdThreads;
  return 0;  // unknown: the profile reports no occupancy
}

struct Variant {
  std::string label, name;
  int dynamic_smem = 0;  // bytes a launch of it asks for (as the planner sizes it)
};

// The families the static profile covers (bench/sass_budget.json names them by label).
std::vector<Variant> profile_set() {
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  const char* dtype_names[] = {"fp32", "fp16", "bf16"};
  std::vector<Variant> v;
  for (int path = 0; path < kFwdNumPaths; ++path)
    for (int i = 0; i < 3; ++i)
      v.push_back({std::string("fwd ") + fwd_path_name(path) + " " + dtype_names[i],
                   fwd_kernel_name(dtypes[i], dtypes[i], 4, path)});
  for (int i = 0; i < 3; ++i)
    v.push_back({std::string("update ") + dtype_names[i], update_kernel_name(dtypes[i], dtypes[i], 4)});
  for (int i = 0; i < 3; ++i) {
    v.push_back({std::string("varlen scalar ") + dtype_names[i], varlen_kernel_name(dtypes[i], false)});
    v.push_back({std::string("varlen_vec ") + dtype_names[i], varlen_kernel_name(dtypes[i], true)});
  }
  // The backward's main kernel per layout (time layouts: the shared tiles the planner sizes),
  // then the finalize kernel per weight dtype and the zeroing kernel.
  for (int layout = 0; layout < kBwdNumLayouts; ++layout)
    for (int i = 0; i < 3; ++i)
      v.push_back({std::string("bwd ") + bwd_layout_name(layout) + " " + dtype_names[i],
                   bwd_kernel_name(dtypes[i], dtypes[i], 4, layout), bwd_smem_bytes(layout, dtype_size(dtypes[i]), 4)});
  for (int i = 0; i < 3; ++i)
    v.push_back({std::string("bwd finalize ") + dtype_names[i], bwd_finalize_kernel_name(dtypes[i])});
  v.push_back({"bwd zero fp32", kBwdZeroKernel});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<int> archs = {80, 90, 100};
  std::vector<Variant> names;
  std::string match;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--arch") && i + 1 < argc) archs = parse_archs(argv[++i]);
    else if (!std::strcmp(argv[i], "--profile-set")) names = profile_set();
    else if (!std::strcmp(argv[i], "--match") && i + 1 < argc) match = argv[++i];
    else if (argv[i][0] != '-') names.push_back({argv[i], argv[i]});
    else {
      std::fprintf(stderr, "usage: %s --out DIR [--arch 80,90,100] [--profile-set [--match TEXT] | name-expression ...]\n",
                   argv[0]);
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "kernel_cubins: --out DIR is required\n");
    return 2;
  }
  if (!match.empty()) {
    // "A|B": a label containing any of the alternatives.
    std::vector<std::string> alternatives;
    for (size_t at = 0;;) {
      const size_t bar = match.find('|', at);
      alternatives.push_back(match.substr(at, bar - at));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    std::vector<Variant> kept;
    for (const Variant& v : names)
      for (const std::string& a : alternatives)
        if (v.label.find(a) != std::string::npos) {
          kept.push_back(v);
          break;
        }
    names = kept;
    if (names.empty()) {
      std::fprintf(stderr, "kernel_cubins: no kernel family matches '%s'\n", match.c_str());
      return 2;
    }
  }
  if (names.empty())
    for (const OpEntry* op : all_ops())
      if (op->kernels != nullptr)
        for (const std::string& n : op->kernels()) names.push_back({n, n});

  const auto cands = discover_nvrtc(default_nvrtc_search());
  std::vector<NvrtcFacts> facts;
  for (const auto& c : cands) facts.push_back(c.facts);
  mkdir(dir.c_str(), 0755);
  const std::string manifest_path = dir + "/manifest.tsv";
  FILE* manifest = std::fopen(manifest_path.c_str(), "w");
  if (manifest == nullptr) {
    std::perror(manifest_path.c_str());
    return 1;
  }
  const KernelSources all_src = load_kernel_sources();  // each kernel compiles from its op's, as at run time
  int failures = 0;
  for (int arch : archs) {
    const NvrtcChoice ch = choose_nvrtc(facts, 99000, arch, 0);
    if (!ch.ok || ch.kind != CodeKind::Cubin) {
      std::fprintf(stderr, "kernel_cubins: no NVRTC builds sm_%d cubins here: %s\n", arch, ch.reason.c_str());
      return 77;
    }
    const NvrtcLib& nvrtc = *cands[ch.index].lib;
    for (size_t i = 0; i < names.size(); ++i) {
      try {
        const CompiledImage img =
            compile_kernel(nvrtc, kernel_sources_of(all_src, names[i].name), names[i].name, CodeKind::Cubin, arch);
        const std::string file = std::to_string(i) + ".sm_" + std::to_string(arch) + ".cubin";
        FILE* f = std::fopen((dir + "/" + file).c_str(), "wb");
        if (f == nullptr || std::fwrite(img.image.data(), 1, img.image.size(), f) != img.image.size()) {
          std::perror(file.c_str());
          return 1;
        }
        std::fclose(f);
        std::fprintf(manifest, "%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\n", file.c_str(), arch,
                     block_threads(names[i].name), names[i].dynamic_smem, img.ms, img.lowered_name.c_str(), names[i].label.c_str(), names[i].name.c_str());
      } catch (const Error& e) {
        std::fprintf(stderr, "kernel_cubins: %s\n", e.what());
        ++failures;
      }
    }
    std::printf("NVRTC %s, sm_%d: %zu kernel(s)\n", nvrtc.facts.version_string().c_str(), arch, names.size());
  }
  std::fclose(manifest);
  return failures == 0 ? 0 : 1;
}
