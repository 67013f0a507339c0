// api.cpp — the C entry points that belong to no op: versions, errors, names, the dispatch
// plan, logging, torch facts and the report. Each op's entry point lives with the op
// (ops/<op>/<op>_op.cpp); all of them go through guarded() (guard.h).
#include <cstring>
#include <string>

#include "api/guard.h"
#include "api/report.h"
#include "backends/backend.h"
#include "cc1d/cc1d.h"
#include "core/log.h"
#include "ops/op.h"

namespace cc1d {

namespace {
thread_local std::string t_last_error;
thread_local std::vector<std::string> t_plan_reasons;  // cc1d_candidate.reason storage
}  // namespace

cc1d_status set_last_error(cc1d_status status, const std::string& message) {
  t_last_error = message;
  log_line(CC1D_LOG_DEBUG, "{}", message);
  return status;
}

}  // namespace cc1d

using cc1d::guarded;

extern "C" {

CC1D_API uint32_t cc1d_abi_version(void) { return CC1D_ABI_VERSION; }

CC1D_API const char* cc1d_version(void) { return CC1D_VERSION_STRING; }

CC1D_API const char* cc1d_last_error(void) { return cc1d::t_last_error.c_str(); }

CC1D_API const char* cc1d_backend_name(int32_t backend) {
  for (const cc1d::BackendInfo& b : cc1d::backend_list())
    if (b.id == backend) return b.name;
  return nullptr;
}

CC1D_API const char* cc1d_op_name(int32_t op) {
  const cc1d::OpEntry* e = cc1d::find_op(op);
  return e != nullptr ? e->name : nullptr;
}

CC1D_API cc1d_status cc1d_plan_dispatch(int32_t op, int32_t backend, int32_t device_type, int32_t device_index,
                                        cc1d_plan* plan) {
  return guarded("cc1d_plan_dispatch", [&] {
    if (plan == nullptr) cc1d::fail(CC1D_ERR_NULL_POINTER, "cc1d_plan_dispatch: plan is NULL");
    if (plan->struct_size < sizeof(cc1d_plan))
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_plan_dispatch: plan->struct_size is " +
                                                std::to_string(plan->struct_size) + ", expected " +
                                                std::to_string(sizeof(cc1d_plan)) + " (set it to sizeof(cc1d_plan))");
    const cc1d::OpEntry* entry = cc1d::find_op(op);
    if (entry == nullptr)
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_plan_dispatch: op " + std::to_string(op) + " is not a cc1d_op");
    if (device_type != CC1D_DEVICE_CPU && device_type != CC1D_DEVICE_CUDA)
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_plan_dispatch: device_type must be 0 (cpu) or 1 (cuda), got " +
                                                std::to_string(device_type));
    const cc1d::DispatchPlan p =
        cc1d::plan_dispatch(*entry, backend, static_cast<cc1d_device_type>(device_type), device_index);
    auto& reasons = cc1d::t_plan_reasons;
    reasons.clear();
    for (const cc1d::Candidate& c : p.candidates) reasons.push_back(c.reason);
    plan->requested = p.requested;
    plan->source = p.source;
    plan->strict = p.strict ? 1 : 0;
    plan->count = static_cast<int32_t>(p.candidates.size());
    for (size_t i = 0; i < p.candidates.size() && i < CC1D_MAX_BACKENDS; ++i) {
      const cc1d::Candidate& c = p.candidates[i];
      plan->candidates[i] = cc1d_candidate{c.backend, c.available ? 1 : 0, c.host_copies ? 1 : 0,
                                           c.runs_in_host ? 1 : 0, reasons[i].c_str()};
    }
  });
}

CC1D_API cc1d_status cc1d_backend_available(int32_t backend, int32_t device_type, int32_t device_index) {
  return guarded("cc1d_backend_available", [&] {
    if (device_type != CC1D_DEVICE_CPU && device_type != CC1D_DEVICE_CUDA)
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_backend_available: device_type must be 0 (cpu) or 1 (cuda), got " +
                                                std::to_string(device_type));
    // Availability for the forward, the op every backend serves, on the device as given (no
    // host copies: a C caller passes the memory the backend reads).
    const cc1d::OpEntry& op = *cc1d::find_op(CC1D_OP_FWD);
    const auto type = static_cast<cc1d_device_type>(device_type);
    const cc1d::DispatchPlan plan = cc1d::plan_dispatch(op, backend, type, device_index);
    const cc1d::Candidate& c = plan.candidates.front();
    if (c.runs_in_host)
      cc1d::fail(CC1D_ERR_BACKEND_UNAVAILABLE, std::string("backend '") + cc1d::backend_name(c.backend) +
                                                   "' runs in the host framework (torch), not in libcc1d");
    const std::string why = cc1d::backend(c.backend).unavailable_reason(op, type, device_index);
    if (!why.empty()) cc1d::fail(CC1D_ERR_BACKEND_UNAVAILABLE, why);
  });
}

CC1D_API cc1d_status cc1d_set_log_callback(cc1d_log_fn fn, void* user) {
  return guarded("cc1d_set_log_callback", [&] { cc1d::set_log_callback(fn, user); });
}

CC1D_API cc1d_status cc1d_set_log_level(int32_t level) {
  return guarded("cc1d_set_log_level", [&] {
    if (level < CC1D_LOG_TRACE || level > CC1D_LOG_OFF)
      cc1d::fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_set_log_level: level must be 0 (trace) .. 5 (off), got " +
                                                std::to_string(level));
    cc1d::set_log_level(static_cast<cc1d_log_level>(level));
  });
}

CC1D_API int32_t cc1d_get_log_level(void) { return cc1d::log_level(); }

CC1D_API cc1d_status cc1d_set_torch_info(const char* torch_version, const char* torch_cuda_version,
                                         int32_t cxx11_abi) {
  return guarded("cc1d_set_torch_info", [&] {
    cc1d::set_torch_info(torch_version ? torch_version : "", torch_cuda_version ? torch_cuda_version : "", cxx11_abi);
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

}  // extern "C"
