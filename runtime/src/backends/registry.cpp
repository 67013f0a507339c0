// registry.cpp — the list of backends and the dispatch policy (the only place that reads
// CAUSAL_CONV1D_BACKEND and CAUSAL_CONV1D_STRICT).
#include <cctype>
#include <cstdlib>

#include "backends/backend.h"
#include "core/env.h"
#include "core/error.h"

namespace cc1d {

const std::vector<BackendInfo>& backend_list() {
  static const std::vector<BackendInfo> list = {
      {CC1D_BACKEND_AUTO, "auto", nullptr, false, "the default order for the tensors' device"},
      {CC1D_BACKEND_CPU, "cpu", make_cpu_backend, true, "native multi-threaded C++ kernels"},
      {CC1D_BACKEND_NVRTC, "nvrtc", make_nvrtc_backend, false, "kernels_src compiled by NVRTC for the device"},
      {CC1D_BACKEND_EMULATE, "emulate", make_emulate_backend, true, "kernels_src run on the host by the emulator"},
      {CC1D_BACKEND_ATEN, "aten", nullptr, false, "the host framework's reference (torch ops)"},
  };
  return list;
}

const char* backend_name(int32_t id) {
  for (const BackendInfo& b : backend_list())
    if (b.id == id) return b.name;
  return "unknown";
}

namespace {

const BackendInfo* find_info(int32_t id) {
  for (const BackendInfo& b : backend_list())
    if (b.id == id) return &b;
  return nullptr;
}

std::string known_names() {
  std::string s;
  for (const BackendInfo& b : backend_list()) s += (s.empty() ? "" : "|") + std::string(b.name);
  return s;
}

struct Registry {
  std::vector<std::unique_ptr<Backend>> backends;  // by id; null where libcc1d runs nothing
  Registry() {
    for (const BackendInfo& b : backend_list()) {
      if (backends.size() <= static_cast<size_t>(b.id)) backends.resize(b.id + 1);
      if (b.make != nullptr) backends[b.id] = b.make();
    }
  }
};

Registry& registry() {
  // Never destroyed: backends hold driver state that must outlive static destructors.
  static Registry* r = new Registry();
  return *r;
}

// CAUSAL_CONV1D_BACKEND (case and surrounding spaces ignored), AUTO when unset; an unknown name
// is an error, so a typo never silently picks another backend.
cc1d_backend env_backend() {
  const char* v = std::getenv("CAUSAL_CONV1D_BACKEND");
  std::string s = v != nullptr ? v : "";
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.empty()) return CC1D_BACKEND_AUTO;
  for (const BackendInfo& info : backend_list())
    if (s == info.name) return info.id;
  fail(CC1D_ERR_INVALID_ARGUMENT, std::string("CAUSAL_CONV1D_BACKEND='") + v + "' is not one of " + known_names() +
                                      "; fix it or unset it");
}

Candidate assess(const OpEntry& op, cc1d_backend id, cc1d_device_type type, int index) {
  const BackendInfo& info = *find_info(id);
  Candidate c;
  c.backend = id;
  if (info.make == nullptr) {  // aten
    c.runs_in_host = true;
    c.available = true;
    c.reason = std::string(info.name) + ": " + info.description;
    return c;
  }
  c.host_copies = info.host_memory && type != CC1D_DEVICE_CPU;
  c.reason = backend(id).unavailable_reason(op, c.host_copies ? CC1D_DEVICE_CPU : type, c.host_copies ? 0 : index);
  c.available = c.reason.empty();
  if (c.available) c.reason = std::string(info.name) + ": " + info.description + (c.host_copies ? ", through host copies" : "");
  return c;
}

}  // namespace

Backend& backend(cc1d_backend id) {
  Registry& r = registry();
  if (id < 0 || static_cast<size_t>(id) >= r.backends.size() || r.backends[id] == nullptr)
    fail(CC1D_ERR_INTERNAL, std::string("backend '") + backend_name(id) + "' is not run by libcc1d");
  return *r.backends[id];
}

void check_backend_id(int32_t id) {
  if (find_info(id) == nullptr)
    fail(CC1D_ERR_INVALID_ARGUMENT, "backend: expected a cc1d_backend 0.." + std::to_string(backend_list().size() - 1) +
                                        " (" + known_names() + "), got " + std::to_string(id));
}

DispatchPlan plan_dispatch(const OpEntry& op, int32_t requested, cc1d_device_type type, int index) {
  check_backend_id(requested);
  DispatchPlan plan;
  plan.strict = env_flag("CAUSAL_CONV1D_STRICT");
  plan.requested = static_cast<cc1d_backend>(requested);
  plan.source = CC1D_SOURCE_ARGUMENT;
  if (plan.requested == CC1D_BACKEND_AUTO) {
    plan.requested = env_backend();
    plan.source = plan.requested == CC1D_BACKEND_AUTO ? CC1D_SOURCE_DEFAULT : CC1D_SOURCE_ENVIRONMENT;
  }
  std::vector<cc1d_backend> order;
  if (plan.requested != CC1D_BACKEND_AUTO)
    order = {plan.requested};
  else if (type == CC1D_DEVICE_CUDA)
    order = {CC1D_BACKEND_NVRTC, CC1D_BACKEND_ATEN, CC1D_BACKEND_CPU};
  else
    order = {CC1D_BACKEND_CPU, CC1D_BACKEND_ATEN};
  for (cc1d_backend id : order) plan.candidates.push_back(assess(op, id, type, index));
  return plan;
}

void dispatch(const OpEntry& op, const Problem& problem, int32_t requested, void* stream) {
  const DispatchPlan plan = plan_dispatch(op, requested, problem.device_type, problem.device_index);
  std::vector<std::string> why;
  for (const Candidate& c : plan.candidates) {
    if (c.available && !c.runs_in_host && !c.host_copies) {
      backend(c.backend).run(op, problem, stream);
      return;
    }
    if (!c.available)
      why.push_back(c.reason);
    else if (c.runs_in_host)
      why.push_back(std::string("the ") + backend_name(c.backend) +
                    " backend runs in the host framework (torch), not in libcc1d");
    else  // reads host memory: its own words about device tensors
      why.push_back(backend(c.backend).unavailable_reason(op, problem.device_type, problem.device_index));
  }
  if (why.size() == 1) fail(CC1D_ERR_BACKEND_UNAVAILABLE, why.front());
  std::string all;
  for (const std::string& w : why) all += (all.empty() ? "" : "; ") + w;
  fail(CC1D_ERR_BACKEND_UNAVAILABLE, std::string("no backend libcc1d runs can serve op '") + op.name + "' here: " + all);
}

}  // namespace cc1d
