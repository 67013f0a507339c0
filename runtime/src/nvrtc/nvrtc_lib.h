// nvrtc_lib.h — NVRTC loaded at run time: the function table, and the discovery of every
// libnvrtc the process could use (each asked for its version and supported archs).
//
// Nothing is hard-coded about which NVRTC supports which SM: each candidate is asked
// (nvrtcVersion, nvrtcGetSupportedArchs), then nvrtc_choice.h picks one per device.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "platform/dynlib.h"
#include "nvrtc/nvrtc_choice.h"

namespace cc1d {

using nvrtcResult = int;
struct _nvrtcProgram;
using nvrtcProgram = _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;
constexpr nvrtcResult kNvrtcBuiltinFailure = 7;  // NVRTC_ERROR_BUILTIN_OPERATION_FAILURE

struct NvrtcApi {
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram, const char*) = nullptr;
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram, const char*, const char**) = nullptr;
};

// A loaded, usable NVRTC.
struct NvrtcLib {
  std::shared_ptr<DynLib> lib;
  NvrtcApi api;
  NvrtcFacts facts;
  std::string error_string(nvrtcResult r) const;
  // Loads libnvrtc-builtins.so.X.Y from lib's directory, once, before the first compile.
  void load_builtins() const;

 private:
  mutable std::once_flag builtins_once_;
  mutable std::shared_ptr<DynLib> builtins_;  // null: none beside lib
};

struct NvrtcCandidate {
  NvrtcFacts facts;
  // null when facts.load_error is set, and when discovery took the facts from the memo (the
  // library is not loaded until load_nvrtc()).
  std::shared_ptr<NvrtcLib> lib;
};

// Where to look, in this order. Each field can be emptied, so tests can search only a tree
// of fake libraries.
struct NvrtcSearchConfig {
  bool disabled = false;                   // CAUSAL_CONV1D_NVRTC=none: nothing is searched
  std::string explicit_path;               // CAUSAL_CONV1D_NVRTC
  std::vector<std::string> loaded_sonames; // RTLD_NOLOAD probes (an NVRTC torch already loaded)
  // Roots such as site-packages: each root itself, root/nvidia/cu13/lib and
  // root/nvidia/cuda_nvrtc/lib are searched (the PyPI wheel layouts).
  std::vector<std::string> roots;
  std::vector<std::pair<std::string, std::string>> toolkit_dirs;  // {origin, dir}
  std::vector<std::string> sonames;        // last resort: the dynamic loader's own search
};

// The default search: CAUSAL_CONV1D_NVRTC; loaded libnvrtc.so.13/.12/.11.2; the roots added by
// add_nvrtc_search_roots(), then CAUSAL_CONV1D_NVRTC_SEARCH_PATH (':'-separated), then the
// site-packages holding this libcc1d; $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64;
// then the sonames libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.11.2. CAUSAL_CONV1D_NVRTC=none
// searches nothing (kNoNvrtcReason): kernels then come only from the caches and the shipped PTX tier.
NvrtcSearchConfig default_nvrtc_search();
constexpr const char* kNoNvrtcReason = "CAUSAL_CONV1D_NVRTC=none: no NVRTC is searched for";

// Roots (e.g. torch's site-packages) consulted by default_nvrtc_search(). Thread-safe; only
// affects discoveries that start afterwards.
void add_nvrtc_search_roots(const std::vector<std::string>& roots);

class NvrtcMemo;

// Queries every candidate, de-duplicated by real path, in search order. Sonames the loader
// cannot find are not candidates; they are appended to *not_found when given. With a memo
// (nvrtc_memo.h), a file it knows is not loaded (lib stays null), one it does not know is loaded,
// asked and remembered, and the memo is saved.
std::vector<NvrtcCandidate> discover_nvrtc(const NvrtcSearchConfig& config,
                                           std::vector<std::string>* not_found = nullptr, NvrtcMemo* memo = nullptr);

// The library of a candidate whose facts came from the memo, loaded now; it must answer as the
// memo said. Throws CC1D_ERR_BACKEND_UNAVAILABLE (the file no longer loads, or answers otherwise).
std::shared_ptr<NvrtcLib> load_nvrtc(const NvrtcCandidate& c);

// Loads one library and asks it for its facts (used by discovery and tests).
NvrtcCandidate probe_nvrtc(const std::string& path, const std::string& origin);

}  // namespace cc1d
