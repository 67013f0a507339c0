// ptx_tier.h — the shipped PTX tier: PTX of the common kernel variants, made by NVRTC when
// libcc1d was built and embedded compressed, so that a first call on a GPU it serves pays only
// the driver's PTX JIT (ptxas: about a third of an NVRTC compile) instead of NVRTC's front end,
// optimizer and ptxas.
//
// What it serves (the build decides; runtime/tools/ptx_pack.cpp writes the pack):
//  - the variants of widths 2-4 whose weight is x's dtype or fp32, of every op;
//  - for each virtual arch built (CC1D_PTX_TIER_ARCHS: the wheel's 80, 100 and 120, a cmake
//    build's 80), the devices of its generation (ptx_set_for): there its PTX gives the same SASS
//    as a direct cubin (measured: bench/RESULTS.md, "The shipped PTX tier, built");
//  - only kernels of the embedded sources (an entry is keyed by its op's source digest, so
//    CAUSAL_CONV1D_KERNEL_DIR misses it) and only on a driver at least as new as the NVRTC that
//    made it (a driver cannot JIT a newer PTX ISA). A build may make the tier with several
//    NVRTCs (CC1D_PTX_TIER_NVRTC): a driver gets the newest one's PTX it can run.
// The driver's linker turns the PTX into a cubin (cuLink*), so the disk cache keeps the cubin
// and the next process loads it in about a millisecond, as for an NVRTC compile.
// CAUSAL_CONV1D_PTX_TIER=0 turns it off (every kernel then compiles with NVRTC).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace cc1d {

class CudaDriver;

constexpr const char* kPtxTierEnv = "CAUSAL_CONV1D_PTX_TIER";

// One kernel's PTX in the pack.
struct ShippedPtx {
  const char* sources_hash;  // its op's op_kernel_sources() hash, as in the cache keys
  const char* name;          // the name expression
  const char* lowered;       // NVRTC's lowered (mangled) name of it
  const char* digest;        // SHA-256 of the PTX text: part of the cache key of its cubin
  int arch;                  // compute_<arch>
  const char* nvrtc;         // the NVRTC that made it, e.g. "13.0"
  int nvrtc_version;         // the same as the driver writes it (13000): the oldest driver it serves
  uint32_t offset, size;     // its compressed bytes (lz_codec.h) in the blob
  uint32_t raw_size;         // the PTX text's length
};

// The embedded pack (generated at build time), or an empty one (count 0). A kernel may be there
// once per NVRTC the build used (CC1D_PTX_TIER_NVRTC): the newest a driver can run serves it.
struct PtxPack {
  const ShippedPtx* entries;
  size_t count;
  const unsigned char* blob;
  size_t blob_size;
};
const PtxPack& shipped_ptx_pack();

// The variants the tier holds, in registry order: every op's kernels of widths 2-4 (or of no
// width) whose weight, if they name one, is x's dtype or fp32.
std::vector<std::string> ptx_tier_variants();

// The virtual arch in `archs` whose PTX serves a device of `sm`, or 0: the highest arch <= sm
// within its generation (an arch below 100 serves up to sm_99; 100 and above, its own major).
int ptx_set_for(const std::vector<int>& archs, int sm);

class PtxTier {
 public:
  explicit PtxTier(const PtxPack& pack);
  // "" when the tier may serve a device of `sm` on a driver of `driver_version` (13000 = 13.0),
  // else why not, in a few words ("turned off by CAUSAL_CONV1D_PTX_TIER=0", ...).
  std::string refusal(int sm, int driver_version) const;
  // The entry of kernel `name` of sources `hash` for a device of `sm` on a driver of
  // `driver_version`: of those it can run, the newest NVRTC's; nullptr if none.
  const ShippedPtx* find(const std::string& hash, const std::string& name, int sm, int driver_version) const;
  // Its PTX text. Throws Error(CC1D_ERR_INTERNAL) if the embedded bytes do not decompress.
  std::string ptx(const ShippedPtx& e) const;
  // What made a cubin from it: its cache key's compiler, e.g. "shipped PTX compute_80 (NVRTC
  // 13.0) + CUDA 13.0 driver JIT".
  std::string producer(const ShippedPtx& e, int driver_version) const;
  size_t size() const { return pack_.count; }
  // JSON object: {"kernels": N, "archs": [80], "nvrtc": ["12.9", "13.0"], "bytes": B}.
  std::string report_json() const;

 private:
  const PtxPack& pack_;
  std::vector<int> archs_;
  std::vector<std::pair<int, std::string>> nvrtcs_;  // (version, "13.0"), oldest first
  // hash '\n' name '\n' arch -> its entries, newest NVRTC first
  std::unordered_map<std::string, std::vector<size_t>> index_;
};

// The tier over shipped_ptx_pack(), indexed on first use (the first CUDA call, not at load).
const PtxTier& shipped_ptx_tier();

// Links `ptx` into a cubin for the current context's device with the driver's JIT (cuLink*).
// Throws Error(CC1D_ERR_COMPILE) with the driver's error log when it refuses.
std::string link_ptx(CudaDriver& driver, const std::string& ptx, const std::string& name);

}  // namespace cc1d
