// registry.cpp — owns the backends and resolves CC1D_BACKEND_AUTO.
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backend.h"
#include "error.h"
#include "log.h"

namespace cc1d {

namespace {

// Stands in for a backend that is not compiled into this build.
class MissingBackend final : public Backend {
 public:
  MissingBackend(cc1d_backend id, const char* name, std::string why)
      : id_(id), name_(name), why_(std::move(why)) {}
  cc1d_backend id() const override { return id_; }
  const char* name() const override { return name_; }
  void check_available(cc1d_device_type, int) override { fail(CC1D_ERR_BACKEND_UNAVAILABLE, why_); }
  void fwd(const FwdProblem&, void*) override { fail(CC1D_ERR_BACKEND_UNAVAILABLE, why_); }
  std::string report_json() override { return "{\"compiled_in\": false}"; }

 private:
  cc1d_backend id_;
  const char* name_;
  std::string why_;
};

struct Registry {
  std::array<std::unique_ptr<Backend>, 4> backends;
  Registry() {
    backends[CC1D_BACKEND_CPU] = make_cpu_backend();
    backends[CC1D_BACKEND_NVRTC] = make_nvrtc_backend();
#ifdef CC1D_WITH_EMULATOR
    backends[CC1D_BACKEND_EMULATE] = make_emulate_backend();
#else
    backends[CC1D_BACKEND_EMULATE] = std::make_unique<MissingBackend>(
        CC1D_BACKEND_EMULATE, "emulate",
        "the emulate backend is not compiled into this libcc1d (built with CC1D_BUILD_EMULATOR=OFF); "
        "rebuild with -DCC1D_BUILD_EMULATOR=ON");
#endif
  }
};

Registry& registry() {
  static Registry r;  // thread-safe initialisation (C++11 magic statics)
  return r;
}

// CAUSAL_CONV1D_BACKEND, read once. "aten" is a Python-only backend: here it means auto.
cc1d_backend env_backend() {
  static const cc1d_backend value = [] {
    const char* v = std::getenv("CAUSAL_CONV1D_BACKEND");
    if (!v || !*v || !std::strcmp(v, "auto") || !std::strcmp(v, "aten")) return CC1D_BACKEND_AUTO;
    for (int id = CC1D_BACKEND_CPU; id <= CC1D_BACKEND_EMULATE; ++id)
      if (!std::strcmp(v, backend_name(static_cast<cc1d_backend>(id)))) return static_cast<cc1d_backend>(id);
    warn_once("env-backend", std::string("CAUSAL_CONV1D_BACKEND='") + v +
                                 "' is not one of auto|cpu|nvrtc|emulate|aten; using auto");
    return CC1D_BACKEND_AUTO;
  }();
  return value;
}

}  // namespace

const char* backend_name(cc1d_backend id) {
  switch (id) {
    case CC1D_BACKEND_AUTO: return "auto";
    case CC1D_BACKEND_CPU: return "cpu";
    case CC1D_BACKEND_NVRTC: return "nvrtc";
    case CC1D_BACKEND_EMULATE: return "emulate";
  }
  return "unknown";
}

Backend& backend(cc1d_backend id) {
  if (id <= CC1D_BACKEND_AUTO || id > CC1D_BACKEND_EMULATE)
    fail(CC1D_ERR_INVALID_ARGUMENT, "backend id " + std::to_string(id) + " is not 1..3");
  return *registry().backends[id];
}

cc1d_backend resolve_backend(cc1d_backend requested, cc1d_device_type device_type) {
  if (requested != CC1D_BACKEND_AUTO) return requested;
  const cc1d_backend env = env_backend();
  if (env != CC1D_BACKEND_AUTO) return env;
  return device_type == CC1D_DEVICE_CUDA ? CC1D_BACKEND_NVRTC : CC1D_BACKEND_CPU;
}

}  // namespace cc1d
