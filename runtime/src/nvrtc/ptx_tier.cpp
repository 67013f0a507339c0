// ptx_tier.cpp — lookup, decompression and the driver link of the shipped PTX tier.
#include "nvrtc/ptx_tier.h"

#include <algorithm>
#include <cstdlib>

#include "core/env.h"
#include "core/error.h"
#include "jit/lz_codec.h"
#include "jit/precompile.h"
#include "nvrtc/cuda_driver.h"
#include "ops/op.h"

namespace cc1d {

namespace {

std::string index_key(const std::string& hash, const std::string& name, int arch) {
  return hash + '\n' + name + '\n' + std::to_string(arch);
}

// The first sm past the generation of virtual arch `arch`. Checked with ptxas (bench/RESULTS.md):
// compute_80 PTX gives the direct cubin's SASS on sm_80-90 but not sm_100; compute_100 on sm_103;
// compute_120 on sm_121.
int generation_end(int arch) { return arch < 100 ? 100 : (arch / 10 + 1) * 10; }

constexpr int kJitInputPtx = 1;       // CU_JIT_INPUT_PTX
constexpr int kJitErrorLog = 5;       // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBytes = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

}  // namespace

std::vector<std::string> ptx_tier_variants() {
  const std::string fp32 = kernel_type_name(CC1D_FLOAT32);
  std::vector<std::string> out;
  for (const OpEntry* op : all_ops()) {
    if (op->kernels == nullptr) continue;
    for (const std::string& k : filter_variants(op->kernels(), {}, {2, 3, 4})) {
      // Element types come first in every kernel template: x's, then the weight's when it has one.
      std::vector<std::string> types;
      for (const std::string& a : template_args(k))
        for (cc1d_dtype d : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
          if (a == kernel_type_name(d)) types.push_back(a);
      if (types.size() < 2 || types[1] == types[0] || types[1] == fp32) out.push_back(k);
    }
  }
  return out;
}

int ptx_set_for(const std::vector<int>& archs, int sm) {
  int best = 0;
  for (int a : archs)
    if (a <= sm && sm < generation_end(a)) best = std::max(best, a);
  return best;
}

PtxTier::PtxTier(const PtxPack& pack) : pack_(pack) {
  for (size_t i = 0; i < pack.count; ++i) {
    const ShippedPtx& e = pack.entries[i];
    index_[index_key(e.sources_hash, e.name, e.arch)].push_back(i);
    if (std::find(archs_.begin(), archs_.end(), e.arch) == archs_.end()) archs_.push_back(e.arch);
    const std::pair<int, std::string> v(e.nvrtc_version, e.nvrtc);
    if (std::find(nvrtcs_.begin(), nvrtcs_.end(), v) == nvrtcs_.end()) nvrtcs_.push_back(v);
  }
  std::sort(archs_.begin(), archs_.end());
  std::sort(nvrtcs_.begin(), nvrtcs_.end());
  for (auto& [key, list] : index_)
    std::sort(list.begin(), list.end(),
              [&](size_t a, size_t b) { return pack.entries[a].nvrtc_version > pack.entries[b].nvrtc_version; });
}

std::string PtxTier::refusal(int sm, int driver_version) const {
  if (pack_.count == 0) return "this libcc1d was built without it (no NVRTC at build time, or CC1D_PTX_TIER=OFF)";
  const char* env = std::getenv(kPtxTierEnv);
  if (env != nullptr && *env != '\0' && !env_flag(kPtxTierEnv))
    return std::string("turned off by ") + kPtxTierEnv;
  if (driver_version < nvrtcs_.front().first) {
    std::string made;
    for (const auto& v : nvrtcs_) made += (made.empty() ? "" : " and ") + v.second;
    return "its PTX is from NVRTC " + made + ", newer than this CUDA " + cuda_version_string(driver_version) +
           " driver can JIT";
  }
  if (ptx_set_for(archs_, sm) == 0) {
    std::string archs;
    for (int a : archs_) archs += (archs.empty() ? "" : ", ") + std::string("compute_") + std::to_string(a);
    return "it holds " + archs + ", none of which gives sm_" + std::to_string(sm) + " the SASS of its own cubin";
  }
  return "";
}

const ShippedPtx* PtxTier::find(const std::string& hash, const std::string& name, int sm, int driver_version) const {
  const int arch = ptx_set_for(archs_, sm);
  if (arch == 0) return nullptr;
  const auto it = index_.find(index_key(hash, name, arch));
  if (it == index_.end()) return nullptr;
  for (size_t i : it->second)
    if (pack_.entries[i].nvrtc_version <= driver_version) return &pack_.entries[i];
  return nullptr;
}

std::string PtxTier::ptx(const ShippedPtx& e) const {
  std::string out;
  if (uint64_t(e.offset) + e.size > pack_.blob_size ||
      !lz_decompress(reinterpret_cast<const char*>(pack_.blob) + e.offset, e.size, e.raw_size, &out))
    fail(CC1D_ERR_INTERNAL, std::string("the shipped PTX of ") + e.name +
                                " does not decompress: libcc1d is damaged; reinstall it, or set " + kPtxTierEnv +
                                "=0 to compile with NVRTC");
  return out;
}

std::string PtxTier::producer(const ShippedPtx& e, int driver_version) const {
  return "shipped PTX compute_" + std::to_string(e.arch) + " (NVRTC " + e.nvrtc + ") + CUDA " +
         cuda_version_string(driver_version) + " driver JIT";
}

std::string PtxTier::report_json() const {
  std::string archs, nvrtcs;
  for (int a : archs_) archs += (archs.empty() ? "" : ", ") + std::to_string(a);
  for (const auto& v : nvrtcs_) nvrtcs += (nvrtcs.empty() ? "\"" : ", \"") + v.second + "\"";
  return "{\"kernels\": " + std::to_string(pack_.count) + ", \"archs\": [" + archs + "], \"nvrtc\": [" + nvrtcs +
         "], \"bytes\": " + std::to_string(pack_.blob_size) + "}";
}

const PtxTier& shipped_ptx_tier() {
  static const PtxTier tier(shipped_ptx_pack());
  return tier;
}

std::string link_ptx(CudaDriver& driver, const std::string& ptx, const std::string& name) {
  const CudaExtraApi& api = driver.extra_api();
  char log[4096] = {};
  CUjit_option opts[] = {kJitErrorLog, kJitErrorLogBytes};
  void* vals[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log))};
  CUlinkState state = nullptr;
  driver.check(api.cuLinkCreate(2, opts, vals, &state), "cuLinkCreate for the shipped PTX of " + name);
  struct Destroy {
    const CudaExtraApi& api;
    CUlinkState s;
    ~Destroy() { api.cuLinkDestroy(s); }
  } destroy{api, state};
  // The size counts the terminating NUL, as the driver expects of PTX text.
  CUresult r = api.cuLinkAddData(state, kJitInputPtx, const_cast<char*>(ptx.c_str()), ptx.size() + 1,
                                 name.c_str(), 0, nullptr, nullptr);
  void* cubin = nullptr;
  size_t size = 0;
  if (r == kCudaSuccess) r = api.cuLinkComplete(state, &cubin, &size);
  if (r != kCudaSuccess || cubin == nullptr || size == 0)
    fail(CC1D_ERR_COMPILE, "the CUDA driver's JIT refused the shipped PTX of " + name + ": " + driver.describe(r) +
                               (log[0] ? std::string("; its log: ") + log : std::string()) + " (" +
                               kPtxTierEnv + "=0 skips the tier)");
  return std::string(static_cast<const char*>(cubin), size);  // the link state owns the cubin
}

}  // namespace cc1d
