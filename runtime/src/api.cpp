// api.cpp — the C boundary. Every entry point catches everything, stores a thread-local
// message and returns a status: no exception, abort or exit ever leaves libcc1d.
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "backend.h"
#include "cc1d/cc1d.h"
#include "env_report.h"
#include "error.h"
#include "log.h"

namespace {

thread_local std::string t_last_error;

cc1d_status set_error(cc1d_status st, const std::string& msg) {
  t_last_error = msg;
  cc1d::logger().debug("{}", msg);
  return st;
}

template <typename F>
cc1d_status guarded(const char* where, F&& body) {
  try {
    body();
    return CC1D_OK;
  } catch (const cc1d::Error& e) {
    return set_error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(CC1D_ERR_INTERNAL, std::string(where) + ": out of host memory");
  } catch (const std::exception& e) {
    return set_error(CC1D_ERR_INTERNAL, std::string(where) + ": internal error: " + e.what() +
                                            " (please report this with CAUSAL_CONV1D_LOG_LEVEL=debug output)");
  } catch (...) {
    return set_error(CC1D_ERR_INTERNAL, std::string(where) + ": unknown internal error (please report this)");
  }
}

}  // namespace

extern "C" {

CC1D_API uint32_t cc1d_abi_version(void) { return CC1D_ABI_VERSION; }

CC1D_API const char* cc1d_version(void) { return CC1D_VERSION_STRING; }

CC1D_API const char* cc1d_last_error(void) { return t_last_error.c_str(); }

CC1D_API cc1d_status cc1d_causal_conv1d_fwd(const cc1d_fwd_args* args) {
  return guarded("cc1d_causal_conv1d_fwd", [&] {
    const cc1d::FwdProblem p = cc1d::validate_fwd(args);
    if (p.batch == 0 || p.dim == 0) return;  // nothing to compute
    const cc1d_backend id = cc1d::resolve_backend(static_cast<cc1d_backend>(args->backend), p.device_type);
    cc1d::Backend& b = cc1d::backend(id);
    b.check_available(p.device_type, p.device_index);
    b.fwd(p, args->stream);
  });
}

CC1D_API cc1d_status cc1d_set_torch_info(const char* torch_version, const char* torch_cuda_version,
                                         int32_t cxx11_abi) {
  return guarded("cc1d_set_torch_info", [&] {
    cc1d::set_torch_info(torch_version ? torch_version : "", torch_cuda_version ? torch_cuda_version : "",
                         cxx11_abi);
  });
}

CC1D_API cc1d_status cc1d_report(char* buf, size_t buf_size, size_t* needed) {
  return guarded("cc1d_report", [&] {
    const std::string json = cc1d::report_json();
    if (needed) *needed = json.size() + 1;
    if (!buf || buf_size < json.size() + 1)
      cc1d::fail(CC1D_ERR_BUFFER_TOO_SMALL, "cc1d_report: buffer of " + std::to_string(buf_size) +
                                                " bytes is too small; " + std::to_string(json.size() + 1) +
                                                " are needed (see *needed)");
    std::memcpy(buf, json.c_str(), json.size() + 1);
  });
}

CC1D_API cc1d_status cc1d_backend_available(int32_t backend, int32_t device_type, int32_t device_index) {
  return guarded("cc1d_backend_available", [&] {
    if (device_type != CC1D_DEVICE_CPU && device_type != CC1D_DEVICE_CUDA)
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_backend_available: device_type must be 0 (cpu) or 1 (cuda), got " +
                                                std::to_string(device_type));
    const auto dt = static_cast<cc1d_device_type>(device_type);
    const cc1d_backend id = cc1d::resolve_backend(static_cast<cc1d_backend>(backend), dt);
    cc1d::backend(id).check_available(dt, device_index);
  });
}

}  // extern "C"
