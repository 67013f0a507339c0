// TEMPORARY (lead): weak stand-in until runtime/src/nvrtc_backend.cpp lands. Delete then.
#include "backend.h"
#include "error.h"
namespace cc1d {
namespace {
class Placeholder final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_NVRTC; }
  const char* name() const override { return "nvrtc"; }
  void check_available(cc1d_device_type, int) override { fail(CC1D_ERR_BACKEND_UNAVAILABLE, "nvrtc backend not built yet"); }
  void fwd(const FwdProblem&, void*) override { fail(CC1D_ERR_BACKEND_UNAVAILABLE, "nvrtc backend not built yet"); }
};
}  // namespace
__attribute__((weak)) std::unique_ptr<Backend> make_nvrtc_backend() { return std::make_unique<Placeholder>(); }
}  // namespace cc1d
