#include "platform/dynlib.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>

namespace cc1d {

namespace {

// dlerror() is per-thread state shared with the host program; read it once, right away.
std::string take_dlerror() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

std::string mapped_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    return real_path(map->l_name);
  return fallback;
}

}  // namespace

DynLib::DynLib(void* handle, std::string requested)
    : handle_(handle), requested_(std::move(requested)) {
  path_ = mapped_path(handle_, requested_);
}

DynLib::~DynLib() {
  if (handle_ != nullptr && !keep_) dlclose(handle_);
}

std::shared_ptr<DynLib> DynLib::open(const std::string& path, std::vector<LoadAttempt>* tried) {
  dlerror();  // clear a stale error left by someone else
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::string err = take_dlerror();
    // glibc prefixes the message with the path; the attempt already records it.
    if (err.compare(0, path.size() + 2, path + ": ") == 0) err.erase(0, path.size() + 2);
    if (tried != nullptr) tried->push_back({path, err});
    return nullptr;
  }
  if (tried != nullptr) tried->push_back({path, ""});
  return std::shared_ptr<DynLib>(new DynLib(h, path));
}

std::shared_ptr<DynLib> DynLib::open_loaded(const std::string& name) {
  dlerror();
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) {
    dlerror();  // not loaded is the normal case; do not leave it for the host to find
    return nullptr;
  }
  return std::shared_ptr<DynLib>(new DynLib(h, name));
}

void* DynLib::symbol(const char* name) const {
  dlerror();
  void* p = dlsym(handle_, name);
  if (p == nullptr) dlerror();
  return p;
}

std::string self_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&self_library_dir), &info) == 0 || info.dli_fname == nullptr)
    return "";
  const std::string file = real_path(info.dli_fname);
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash);
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

std::string format_attempts(const std::vector<LoadAttempt>& tried) {
  std::string s;
  for (const LoadAttempt& a : tried) {
    if (!s.empty()) s += "; ";
    s += a.path + ": " + (a.error.empty() ? std::string("loaded") : a.error);
  }
  return s;
}

}  // namespace cc1d
