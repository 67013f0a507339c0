#include "nvrtc/nvrtc_lib.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "nvrtc/nvrtc_memo.h"

namespace cc1d {

namespace {

std::mutex g_roots_mu;
std::vector<std::string> g_roots;

std::vector<std::string> split_path_list(const char* s) {
  std::vector<std::string> out;
  if (s == nullptr) return out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ':' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

// "libnvrtc.so.12.4" -> {12, 4}; "libnvrtc.so" -> {}; anything else (builtins, alt) -> false.
bool nvrtc_file_version(const std::string& name, std::vector<int>* version) {
  static const std::string prefix = "libnvrtc.so";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  version->clear();
  std::string rest = name.substr(prefix.size());
  if (rest.empty()) return true;
  if (rest[0] != '.') return false;
  for (const std::string& part : [&] {
         std::vector<std::string> parts;
         size_t start = 1;
         while (start <= rest.size()) {
           size_t dot = rest.find('.', start);
           if (dot == std::string::npos) dot = rest.size();
           parts.push_back(rest.substr(start, dot - start));
           start = dot + 1;
         }
         return parts;
       }()) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
    version->push_back(std::atoi(part.c_str()));
  }
  return true;
}

// libnvrtc files in dir, newest version first ("libnvrtc.so" last).
std::vector<std::string> nvrtc_files_in(const std::string& dir) {
  std::vector<std::pair<std::vector<int>, std::string>> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {};
  while (dirent* e = readdir(d)) {
    std::vector<int> v;
    if (nvrtc_file_version(e->d_name, &v)) found.emplace_back(v, e->d_name);
  }
  closedir(d);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(dir + "/" + f.second);
  return out;
}

template <typename F>
void bind_symbol(const DynLib& lib, F& slot, const char* name, std::vector<std::string>* missing) {
  slot = reinterpret_cast<F>(lib.symbol(name));
  if (slot == nullptr) missing->push_back(name);
}

}  // namespace

std::string NvrtcLib::error_string(nvrtcResult r) const {
  const char* s = api.nvrtcGetErrorString != nullptr ? api.nvrtcGetErrorString(r) : nullptr;
  return (s != nullptr ? std::string(s) : std::string("NVRTC error")) + " (" + std::to_string(r) + ")";
}

void NvrtcLib::load_builtins() const {
  // NVRTC opens its builtins by soname when it first compiles, and the loader's search need not
  // reach its directory: the CUDA 13.0 x86-64 wheel's libnvrtc has no RPATH (the aarch64 one's
  // $ORIGIN went unused under qemu). Without a toolkit in the loader's cache that fails ("failed
  // to open libnvrtc-builtins.so.13.0"), or takes another installation's copy. Loaded first, the
  // file beside it is the one that soname finds (torch preloads its wheels' too).
  std::call_once(builtins_once_, [&] {
    const std::string dir = lib->path().substr(0, lib->path().rfind('/') + 1);
    const std::string file = dir + "libnvrtc-builtins.so." + facts.version_string();
    if (dir.empty() || access(file.c_str(), F_OK) != 0) return;  // NVRTC finds its own, or says so
    std::vector<LoadAttempt> tried;
    builtins_ = DynLib::open(file, &tried);
    if (builtins_ != nullptr)
      builtins_->keep_loaded();
    else
      log_line(CC1D_LOG_DEBUG, "NVRTC {}: could not preload {}", lib->path(), format_attempts(tried));
  });
}

void add_nvrtc_search_roots(const std::vector<std::string>& roots) {
  std::lock_guard<std::mutex> lock(g_roots_mu);
  for (const auto& r : roots)
    if (!r.empty() && std::find(g_roots.begin(), g_roots.end(), r) == g_roots.end()) g_roots.push_back(r);
}

NvrtcSearchConfig default_nvrtc_search() {
  NvrtcSearchConfig c;
  if (const char* p = std::getenv("CAUSAL_CONV1D_NVRTC"); p != nullptr && *p != '\0') c.explicit_path = p;
  std::string word = c.explicit_path;
  for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (word == "none") {  // any case: "None" is what a Python user writes
    c.disabled = true;
    c.explicit_path.clear();
    return c;
  }
  c.loaded_sonames = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
  {
    std::lock_guard<std::mutex> lock(g_roots_mu);
    c.roots = g_roots;
  }
  for (auto& r : split_path_list(std::getenv("CAUSAL_CONV1D_NVRTC_SEARCH_PATH"))) c.roots.push_back(r);
  // An installed wheel lives in site-packages/causal_conv1d/lib: the NVIDIA wheels torch
  // depends on are in the same site-packages.
  const std::string self = self_library_dir();
  if (!self.empty()) {
    const std::string site = real_path(self + "/../..");
    c.roots.push_back(site);
  }
  if (const char* h = std::getenv("CUDA_HOME"); h != nullptr && *h != '\0')
    c.toolkit_dirs.emplace_back("CUDA_HOME", std::string(h) + "/lib64");
  if (const char* h = std::getenv("CUDA_PATH"); h != nullptr && *h != '\0')
    c.toolkit_dirs.emplace_back("CUDA_PATH", std::string(h) + "/lib64");
  c.toolkit_dirs.emplace_back("/usr/local/cuda", "/usr/local/cuda/lib64");
  c.sonames = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
  return c;
}

NvrtcCandidate probe_nvrtc(const std::string& path, const std::string& origin) {
  NvrtcCandidate c;
  c.facts.path = path;
  c.facts.origin = origin;
  std::vector<LoadAttempt> tried;
  std::shared_ptr<DynLib> lib = DynLib::open(path, &tried);
  if (lib == nullptr) {
    c.facts.load_error = "dlopen failed: " + tried.back().error;
    return c;
  }
  if (path.find('/') == std::string::npos) c.facts.path = lib->path();  // a soname: say which file
  auto nv = std::make_shared<NvrtcLib>();
  nv->lib = lib;
  NvrtcApi& a = nv->api;
  std::vector<std::string> missing;
  bind_symbol(*lib, a.nvrtcVersion, "nvrtcVersion", &missing);
  if (a.nvrtcVersion == nullptr) {
    c.facts.load_error = "not an NVRTC library (no nvrtcVersion)";
    return c;
  }
  if (a.nvrtcVersion(&c.facts.major, &c.facts.minor) != kNvrtcSuccess) {
    c.facts.load_error = "nvrtcVersion failed";
    return c;
  }
  bind_symbol(*lib, a.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs", &missing);
  bind_symbol(*lib, a.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs", &missing);
  if (!missing.empty()) {
    c.facts.load_error = "NVRTC " + c.facts.version_string() +
                         " predates 11.2 (no nvrtcGetSupportedArchs); too old to ask which SMs it supports";
    return c;
  }
  bind_symbol(*lib, a.nvrtcGetErrorString, "nvrtcGetErrorString", &missing);
  bind_symbol(*lib, a.nvrtcCreateProgram, "nvrtcCreateProgram", &missing);
  bind_symbol(*lib, a.nvrtcDestroyProgram, "nvrtcDestroyProgram", &missing);
  bind_symbol(*lib, a.nvrtcCompileProgram, "nvrtcCompileProgram", &missing);
  bind_symbol(*lib, a.nvrtcGetPTXSize, "nvrtcGetPTXSize", &missing);
  bind_symbol(*lib, a.nvrtcGetPTX, "nvrtcGetPTX", &missing);
  bind_symbol(*lib, a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", &missing);
  bind_symbol(*lib, a.nvrtcGetCUBIN, "nvrtcGetCUBIN", &missing);
  bind_symbol(*lib, a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", &missing);
  bind_symbol(*lib, a.nvrtcGetProgramLog, "nvrtcGetProgramLog", &missing);
  bind_symbol(*lib, a.nvrtcAddNameExpression, "nvrtcAddNameExpression", &missing);
  bind_symbol(*lib, a.nvrtcGetLoweredName, "nvrtcGetLoweredName", &missing);
  if (!missing.empty()) {
    std::string names;
    for (auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    c.facts.load_error = "NVRTC " + c.facts.version_string() + " lacks " + names;
    return c;
  }
  int n = 0;
  if (a.nvrtcGetNumSupportedArchs(&n) != kNvrtcSuccess || n <= 0 || n > 1024) {
    c.facts.load_error = "nvrtcGetNumSupportedArchs failed";
    return c;
  }
  c.facts.archs.resize(n);
  if (a.nvrtcGetSupportedArchs(c.facts.archs.data()) != kNvrtcSuccess) {
    c.facts.archs.clear();
    c.facts.load_error = "nvrtcGetSupportedArchs failed";
    return c;
  }
  std::sort(c.facts.archs.begin(), c.facts.archs.end());
  lib->keep_loaded();  // NVRTC may own threads/TLS; once usable, never unmap it
  nv->facts = c.facts;
  c.lib = nv;
  return c;
}

std::shared_ptr<NvrtcLib> load_nvrtc(const NvrtcCandidate& c) {
  if (c.lib != nullptr) return c.lib;
  const NvrtcCandidate now = probe_nvrtc(c.facts.path, c.facts.origin);
  std::string why = now.facts.load_error;
  if (why.empty() && (now.facts.version() != c.facts.version() || now.facts.archs != c.facts.archs))
    why = "it is now NVRTC " + now.facts.version_string() + " with other SMs than the remembered " +
          c.facts.version_string() + "'s";
  if (!why.empty())
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "NVRTC " + c.facts.path + " (" + c.facts.origin + "), chosen from the facts "
         "remembered in " + NvrtcMemo::kFileName + " of the kernel cache's directory, does not load as they say: " +
         why + ". Run `causal-conv1d cache clear` (or delete that file), or set CAUSAL_CONV1D_NVRTC to the NVRTC "
         "to use");
  return now.lib;
}

std::vector<NvrtcCandidate> discover_nvrtc(const NvrtcSearchConfig& cfg, std::vector<std::string>* not_found,
                                           NvrtcMemo* memo) {
  std::vector<NvrtcCandidate> out;
  std::set<std::string> seen;  // real paths
  // dlopen(soname) gives a library of that soname already in the process. One this discovery
  // loaded is where a process without the memo would land too, so its resolution is remembered;
  // one loaded before (torch's) depends on the process, so it is not.
  std::set<std::string> loaded_before;
  for (const auto& soname : cfg.sonames)
    if (memo != nullptr && DynLib::open_loaded(soname) != nullptr) loaded_before.insert(soname);
  auto consider = [&](const std::string& path, const std::string& origin, bool loaded) {
    const bool is_name = path.find('/') == std::string::npos;
    if (!seen.insert(is_name ? path : real_path(path)).second) return;
    const bool searched = is_name && memo != nullptr && loaded_before.count(path) == 0;
    NvrtcCandidate c;
    std::string file = is_name ? "" : real_path(path);
    if (searched && memo->resolved(path, &file) && !seen.insert(file).second) return;
    if (memo != nullptr && !loaded && !file.empty() && memo->facts(file, &c.facts)) {
      c.facts.path = is_name ? file : path;
      c.facts.origin = origin;
    } else {
      c = probe_nvrtc(path, origin);
      if (is_name && c.facts.load_error.compare(0, 13, "dlopen failed") == 0) {
        if (not_found != nullptr) not_found->push_back(path + ": " + c.facts.load_error);
        return;  // the loader has no such library: not a candidate
      }
      if (memo != nullptr && c.lib != nullptr) {
        if (searched) memo->remember_resolution(path, real_path(c.facts.path));
        memo->remember(real_path(c.facts.path), c.facts);
      }
      // A soname resolved by the loader: skip it if that file was already a candidate.
      if (is_name && !seen.insert(real_path(c.facts.path)).second) return;
    }
    log_line(CC1D_LOG_DEBUG, "NVRTC candidate {} ({}): {}{}", c.facts.path, origin,
             c.facts.load_error.empty() ? "NVRTC " + c.facts.version_string() : c.facts.load_error,
             c.lib == nullptr && c.facts.load_error.empty() ? " (remembered; not loaded)" : "");
    out.push_back(std::move(c));
  };
  if (cfg.disabled) {
    if (not_found != nullptr) not_found->push_back(kNoNvrtcReason);
    return out;
  }
  if (!cfg.explicit_path.empty()) consider(cfg.explicit_path, "CAUSAL_CONV1D_NVRTC", false);
  for (const auto& soname : cfg.loaded_sonames) {
    std::shared_ptr<DynLib> lib = DynLib::open_loaded(soname);
    if (lib != nullptr) consider(lib->path(), "already loaded (" + soname + ")", true);
  }
  for (const auto& root : cfg.roots)
    for (const char* sub : {"", "/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib"})
      for (const auto& f : nvrtc_files_in(root + sub)) consider(f, "search root " + root, false);
  for (const auto& [origin, dir] : cfg.toolkit_dirs)
    for (const auto& f : nvrtc_files_in(dir)) consider(f, origin, false);
  for (const auto& soname : cfg.sonames) consider(soname, "soname", false);
  if (memo != nullptr) memo->save();
  return out;
}

}  // namespace cc1d
