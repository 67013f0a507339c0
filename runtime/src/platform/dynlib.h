// dynlib.h — the only place in libcc1d that calls dlopen/dlsym/dlerror.
//
// libcc1d links no CUDA library: the driver and NVRTC are found at run time, so one wheel
// works with any driver/toolkit and imports fine on machines without a GPU. Every path tried
// is recorded with its dlerror(), so "unavailable" messages can say exactly what happened.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace cc1d {

// One dlopen attempt: the name or path asked for and the outcome ("" = loaded).
struct LoadAttempt {
  std::string path;
  std::string error;
};

class DynLib {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL). Appends the attempt to *tried when given.
  // Returns null on failure (the dlerror() text is in the attempt).
  static std::shared_ptr<DynLib> open(const std::string& path, std::vector<LoadAttempt>* tried);
  // The library if one with this name/soname is already loaded in the process
  // (RTLD_NOLOAD), else null. Never loads anything new.
  static std::shared_ptr<DynLib> open_loaded(const std::string& name);

  ~DynLib();
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;

  // dlsym; null when absent.
  void* symbol(const char* name) const;
  // The file the loader actually mapped (resolved from the link map), or the requested name.
  const std::string& path() const { return path_; }
  const std::string& requested() const { return requested_; }
  // Keeps the library mapped at process exit: libraries that register atexit handlers or
  // threads (the CUDA driver, NVRTC) must not be dlclose()d while others may still use them.
  void keep_loaded() { keep_ = true; }

 private:
  DynLib(void* handle, std::string requested);
  void* handle_;
  std::string requested_;
  std::string path_;
  bool keep_ = false;
};

// Directory holding the loaded libcc1d (or the executable it is linked into), from dladdr;
// "" if unknown. Used to find the PyPI NVIDIA wheels next to the installed package.
std::string self_library_dir();

// realpath(), or the input when it cannot be resolved.
std::string real_path(const std::string& path);

// "a: err; b: err" — for one-line messages.
std::string format_attempts(const std::vector<LoadAttempt>& tried);

}  // namespace cc1d
