// nvrtc_choice.h — which NVRTC compiles for a device, and how (cubin or PTX). Pure logic
// over plain facts, so every rule is unit-tested without loading any library.
//
// Rules (prior-art §2):
//  1. A candidate is eligible only if it loaded and the driver supports its CUDA major
//     (a binary of CUDA N needs a driver of CUDA >= N.0; a newer same-major NVRTC is fine
//     for cubins, which the driver does not recompile).
//  2. If an eligible candidate lists the device's SM: compile a cubin for sm_XY. Among those,
//     prefer the CUDA major torch was built with (torch already ships it), then the newest.
//  3. Else emit PTX for compute_ZW (the highest arch the candidate supports at or below the
//     device SM), only if the driver's CUDA version >= the NVRTC version (the driver's JIT
//     rejects newer PTX with CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
//  4. Else nothing is usable: the reason lists every candidate's rejection.
#pragma once
#include <string>
#include <vector>

namespace cc1d {

// What discovery learnt about one libnvrtc.
struct NvrtcFacts {
  std::string path;        // the file (or name) tried
  std::string origin;      // where the search found it, e.g. "CUDA_HOME", "site-packages"
  std::string load_error;  // "" when it loaded and has every entry point
  int major = 0, minor = 0;
  std::vector<int> archs;  // nvrtcGetSupportedArchs, e.g. {75, 80, ..., 121}
  int version() const { return major * 1000 + minor * 10; }  // comparable to the driver's
  std::string version_string() const;
};

enum class CodeKind { Cubin, Ptx };
const char* code_kind_name(CodeKind k);  // "cubin" / "ptx"
// The PyPI package that ships NVRTC `major`: nvidia-cuda-nvrtc (13 on), nvidia-cuda-nvrtc-cu12, -cu11.
std::string nvrtc_wheel(int major);

struct CandidateDecision {
  std::string path, origin, version;
  std::vector<int> archs;
  bool accepted = false;
  std::string reason;
};

struct NvrtcChoice {
  bool ok = false;
  int index = -1;              // into the candidate list
  CodeKind kind = CodeKind::Cubin;
  int target_arch = 0;         // sm_XY for a cubin, compute_XY for PTX
  std::string reason;          // why this one, or (when !ok) why none
  std::vector<CandidateDecision> decisions;  // one per candidate, in search order
};

// driver_version: cuDriverGetVersion (e.g. 12040). device_sm: e.g. 90.
// torch_cuda_major: torch.version.cuda's major, 0 if unknown or CPU-only.
NvrtcChoice choose_nvrtc(const std::vector<NvrtcFacts>& candidates, int driver_version,
                         int device_sm, int torch_cuda_major);

// "12.4" -> 12; "" or junk -> 0.
int parse_cuda_major(const std::string& version);

// JSON array of the decisions.
std::string decisions_json(const std::vector<CandidateDecision>& decisions);

}  // namespace cc1d
