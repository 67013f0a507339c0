#include "nvrtc/nvrtc_choice.h"

#include <algorithm>
#include <cstdlib>

#include "core/json.h"

namespace cc1d {

namespace {

std::string cuda_str(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string archs_str(const std::vector<int>& archs) {
  if (archs.empty()) return "none";
  return "sm_" + std::to_string(archs.front()) + "..sm_" + std::to_string(archs.back());
}

// Minimum Linux driver branch per CUDA major (prior-art §2), for actionable messages.
std::string driver_hint(int major) {
  switch (major) {
    case 11: return " (driver >= 450)";
    case 12: return " (driver >= 525)";
    case 13: return " (driver >= 580)";
    default: return "";
  }
}

// The PyPI wheel that ships an NVRTC for a driver of this CUDA major.
std::string pip_hint(int driver_major) {
  if (driver_major >= 13) return "pip install " + nvrtc_wheel(driver_major) + " (CUDA 13 wheels)";
  if (driver_major == 12 || driver_major == 11) return "pip install " + nvrtc_wheel(driver_major);
  return "update the NVIDIA driver";
}

// Higher is better: torch's CUDA major first, then the newest version, then search order.
bool better(const NvrtcFacts& a, int ia, const NvrtcFacts& b, int ib, int torch_major) {
  const bool ta = torch_major > 0 && a.major == torch_major;
  const bool tb = torch_major > 0 && b.major == torch_major;
  if (ta != tb) return ta;
  if (a.version() != b.version()) return a.version() > b.version();
  return ia < ib;
}

}  // namespace

std::string nvrtc_wheel(int major) {
  return major >= 13 ? "nvidia-cuda-nvrtc" : "nvidia-cuda-nvrtc-cu" + std::to_string(major);
}

std::string NvrtcFacts::version_string() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

const char* code_kind_name(CodeKind k) { return k == CodeKind::Cubin ? "cubin" : "ptx"; }

int parse_cuda_major(const std::string& version) {
  if (version.empty() || version[0] < '0' || version[0] > '9') return 0;
  return std::atoi(version.c_str());
}

NvrtcChoice choose_nvrtc(const std::vector<NvrtcFacts>& cands, int driver_version, int device_sm,
                         int torch_major) {
  NvrtcChoice ch;
  const int n = (int)cands.size();
  const int driver_major = driver_version / 1000;
  std::vector<int> eligible;
  for (int i = 0; i < n; ++i) {
    const NvrtcFacts& c = cands[i];
    CandidateDecision d{c.path, c.origin, c.load_error.empty() ? c.version_string() : "", c.archs,
                        false, ""};
    if (!c.load_error.empty()) {
      d.reason = "rejected: " + c.load_error;
    } else if (c.major > driver_major) {
      d.reason = "rejected: NVRTC " + c.version_string() + " makes CUDA " + std::to_string(c.major) +
                 " binaries but the driver supports CUDA " + cuda_str(driver_version) +
                 "; update the NVIDIA driver" + driver_hint(c.major);
    } else {
      eligible.push_back(i);
    }
    ch.decisions.push_back(std::move(d));
  }

  // Rule 2: a cubin for the exact SM.
  int best = -1;
  for (int i : eligible) {
    const auto& a = cands[i].archs;
    if (std::find(a.begin(), a.end(), device_sm) == a.end()) continue;
    if (best < 0 || better(cands[i], i, cands[best], best, torch_major)) best = i;
  }
  if (best >= 0) {
    ch.ok = true;
    ch.index = best;
    ch.kind = CodeKind::Cubin;
    ch.target_arch = device_sm;
    ch.reason = "NVRTC " + cands[best].version_string() + " (" + cands[best].path +
                ") compiles sm_" + std::to_string(device_sm) + " cubins";
    if (torch_major > 0 && cands[best].major == torch_major)
      ch.reason += ", matching torch's CUDA " + std::to_string(torch_major);
  } else {
    // Rule 3: PTX for the highest arch at or below the device, if the driver can JIT it.
    int best_arch = 0;
    for (int i : eligible) {
      if (cands[i].version() > driver_version) continue;
      int arch = 0;
      for (int a : cands[i].archs)
        if (a <= device_sm && a > arch) arch = a;
      if (arch == 0) continue;
      if (best < 0 || better(cands[i], i, cands[best], best, torch_major)) {
        best = i;
        best_arch = arch;
      }
    }
    if (best >= 0) {
      ch.ok = true;
      ch.index = best;
      ch.kind = CodeKind::Ptx;
      ch.target_arch = best_arch;
      ch.reason = "no NVRTC supports sm_" + std::to_string(device_sm) + "; NVRTC " +
                  cands[best].version_string() + " (" + cands[best].path + ") emits compute_" +
                  std::to_string(best_arch) + " PTX for the driver (CUDA " +
                  cuda_str(driver_version) + ") to JIT";
    }
  }

  // Reasons for every eligible candidate not chosen.
  for (int i : eligible) {
    CandidateDecision& d = ch.decisions[i];
    const NvrtcFacts& c = cands[i];
    if (i == ch.index) {
      d.accepted = true;
      d.reason = std::string("accepted: ") + code_kind_name(ch.kind) + " for " +
                 (ch.kind == CodeKind::Cubin ? "sm_" : "compute_") + std::to_string(ch.target_arch);
      continue;
    }
    const bool has_sm = std::find(c.archs.begin(), c.archs.end(), device_sm) != c.archs.end();
    bool any_below = false;
    for (int a : c.archs) any_below = any_below || a <= device_sm;
    const bool ptx_ok = any_below && c.version() <= driver_version;
    const std::string chosen = ch.ok ? cands[ch.index].path : std::string();
    const bool torch_pref = torch_major > 0 && ch.ok && cands[ch.index].major == torch_major &&
                            c.major != torch_major;
    const std::string why_pref = torch_pref ? "it matches torch's CUDA " + std::to_string(torch_major)
                                            : std::string("it is newer or earlier in the search order");
    if (has_sm) {
      d.reason = "usable (cubin), but " + chosen + " is preferred: " + why_pref;
    } else if (ptx_ok) {
      d.reason = "lacks sm_" + std::to_string(device_sm) + "; could emit PTX, but " + chosen +
                 (ch.kind == CodeKind::Cubin ? " makes a cubin, which needs no driver JIT"
                                             : " is preferred: " + why_pref);
    } else if (!any_below) {
      d.reason = "rejected: NVRTC " + c.version_string() + " supports " + archs_str(c.archs) +
                 ", nothing at or below the device's sm_" + std::to_string(device_sm);
    } else {
      d.reason = "rejected: NVRTC " + c.version_string() + " lacks sm_" + std::to_string(device_sm) +
                 " (supports " + archs_str(c.archs) + ") and its PTX (CUDA " + c.version_string() +
                 ") is newer than the driver's CUDA " + cuda_str(driver_version) + " can JIT";
    }
  }

  if (!ch.ok) {
    std::string why;
    for (const CandidateDecision& d : ch.decisions)
      why += (why.empty() ? "" : "; ") + d.path + ": " + d.reason.substr(d.reason.find(':') + 2);
    if (cands.empty()) why = "no libnvrtc found";
    ch.reason = "no usable NVRTC for sm_" + std::to_string(device_sm) + " with a CUDA " +
                cuda_str(driver_version) + " driver (" + why + "); " + pip_hint(driver_major) +
                ", or set CAUSAL_CONV1D_NVRTC to a libnvrtc.so the driver supports";
  }
  return ch;
}

std::string decisions_json(const std::vector<CandidateDecision>& decisions) {
  std::string j = "[";
  for (size_t i = 0; i < decisions.size(); ++i) {
    const CandidateDecision& d = decisions[i];
    std::string archs = "[";
    for (size_t k = 0; k < d.archs.size(); ++k) archs += (k ? ", " : "") + std::to_string(d.archs[k]);
    archs += "]";
    j += std::string(i ? ", " : "") + "{\"path\": " + json_quote(d.path) +
         ", \"origin\": " + json_quote(d.origin) + ", \"version\": " + json_quote(d.version) +
         ", \"archs\": " + archs + ", \"accepted\": " + (d.accepted ? "true" : "false") +
         ", \"reason\": " + json_quote(d.reason) + "}";
  }
  return j + "]";
}

}  // namespace cc1d
