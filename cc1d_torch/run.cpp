// run.cpp — the plan walk of the libtorch op library (run.h), the notices, and torch's current
// CUDA stream.
#include "cc1d_torch/run.h"

#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "cc1d_torch/cc1d_torch.h"
#include "core/json.h"

namespace cc1d_torch {

namespace aten = cc1d::aten;

namespace {

constexpr const char* kStrictMarker = "(CAUSAL_CONV1D_STRICT=1 forbids the fallback.)";
std::mutex g_mu;
cc1d_torch_notice_fn g_notice = nullptr;
void* g_user = nullptr;
std::set<std::string> g_warned;                                 // stderr notices already shown
std::map<std::tuple<int32_t, int32_t, int>, std::string> g_broken;  // (backend, device) -> why it failed

std::string status_name(cc1d_status s) {
  static const char* const names[] = {"CC1D_OK", "CC1D_ERR_INVALID_ARGUMENT", "CC1D_ERR_INVALID_TYPE",
                                      "CC1D_ERR_NULL_POINTER", "CC1D_ERR_UNSUPPORTED",
                                      "CC1D_ERR_BACKEND_UNAVAILABLE", "CC1D_ERR_COMPILE", "CC1D_ERR_CUDA",
                                      "CC1D_ERR_BUFFER_TOO_SMALL", "CC1D_ERR_INTERNAL"};
  return s >= 0 && s <= CC1D_ERR_INTERNAL ? names[s] : "status " + std::to_string(s);
}

// A libcc1d call that failed: its status and message.
struct LibError {
  cc1d_status status;
  std::string message;
};

// `backend` is a name, optionally followed by "|<where the choice came from>".
std::string name_of(const std::string& backend) { return backend.substr(0, backend.find('|')); }
std::string source_of(const std::string& backend, const std::string& fallback) {
  const size_t bar = backend.find('|');
  return bar == std::string::npos ? fallback : backend.substr(bar + 1);
}

// `validating`: only for libcc1d's validation before the ATen reference, which computes in
// float64 too; libcc1d has no float64, so such a tensor is checked as float32 (its data unread).
cc1d_tensor describe(const char* name, const Tensor& t, bool validating) {
  cc1d_tensor d{};
  switch (t.scalar_type()) {
    case aten::ScalarType::Float: d.dtype = CC1D_FLOAT32; break;
    case aten::ScalarType::Half: d.dtype = CC1D_FLOAT16; break;
    case aten::ScalarType::BFloat16: d.dtype = CC1D_BFLOAT16; break;
    case aten::ScalarType::Int: d.dtype = CC1D_INT32; break;
    case aten::ScalarType::Double:
      if (validating) {
        d.dtype = CC1D_FLOAT32;
        break;
      }
      [[fallthrough]];
    default:
      fail(CC1D_ERR_INVALID_TYPE, std::string("argument '") + name + "' has a dtype libcc1d does not take; "
                                  "expected float32, float16 or bfloat16 (int32 for indices)");
  }
  if (t.dim() > CC1D_MAX_RANK)
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string("argument '") + name + "' has " + std::to_string(t.dim()) +
                                        " dimensions; at most " + std::to_string(CC1D_MAX_RANK));
  d.data = t.data_ptr();
  d.device_type = aten::place(t) == aten::Place::Cuda ? CC1D_DEVICE_CUDA : CC1D_DEVICE_CPU;
  d.device_index = aten::device_index(t);
  d.ndim = static_cast<int32_t>(t.dim());
  for (int i = 0; i < d.ndim; ++i) {
    d.shape[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

// torch's current CUDA stream on `device`, through the C shim of libtorch_cuda, looked up when a
// CUDA tensor arrives: linking it would make the library unloadable with a CPU-only torch.
void* current_stream(int device) {
  using Fn = int32_t (*)(int32_t, void**);
  static Fn fn = [] {
    void* h = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    return h == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(h, "aoti_torch_get_current_cuda_stream"));
  }();
  void* stream = nullptr;
  if (fn == nullptr || fn(device, &stream) != 0)
    throw LibError{CC1D_ERR_BACKEND_UNAVAILABLE,
                   "cc1d_torch cannot get torch's current CUDA stream (aoti_torch_get_current_cuda_stream of "
                   "libtorch_cuda.so is missing or failed); use a torch with it, or the Python package's ctypes path"};
  return stream;
}

std::string device_string(const Tensor& t) {
  const aten::Place p = aten::place(t);
  return p == aten::Place::Cpu ? "cpu" : "cuda:" + std::to_string(aten::device_index(t));
}

std::string serves(const std::string& name, const std::string& dev, bool host_copies) {
  if (name == "aten") return "the ATen reference on " + dev;
  if (name == "nvrtc") return "libcc1d NVRTC kernels on " + dev;
  return std::string(name == "cpu" ? "libcc1d CPU kernels" : "libcc1d emulator") +
         (host_copies ? ", copying the " + dev + " tensors to host memory and back" : "");
}

int32_t backend_id(const std::string& name) {
  if (name.empty()) return CC1D_BACKEND_AUTO;
  std::string names;
  for (int32_t i = 0; const char* n = cc1d_backend_name(i); ++i) {
    if (name == n) return i;
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  fail(CC1D_ERR_INVALID_ARGUMENT, "argument 'backend' must be \"\" or one of " + names + "; got '" + name + "'");
}

// Runs libcc1d on the call's tensors (or on host copies of them), throwing LibError on failure.
void run_lib(OpCall& call, int32_t backend, bool host_copies, void* stream) {
  std::vector<OptTensor> use;
  for (const Slot& s : call.slots) use.push_back(s.tensor && host_copies ? OptTensor(aten::to_cpu(*s.tensor)) : s.tensor);
  std::vector<cc1d_tensor> desc(use.size());
  std::vector<const cc1d_tensor*> ptrs(use.size(), nullptr);
  for (size_t i = 0; i < use.size(); ++i)
    if (use[i]) {
      desc[i] = describe(call.slots[i].name, *use[i], backend == CC1D_BACKEND_ATEN);
      ptrs[i] = &desc[i];
    }
  const cc1d_status s = call.run_lib(ptrs, backend, stream);
  if (s != CC1D_OK) throw LibError{s, cc1d_last_error()};
  if (host_copies)
    for (size_t i = 0; i < use.size(); ++i)
      if (call.slots[i].written && use[i]) aten::copy_(*call.slots[i].tensor, *use[i]);
}

// libcc1d validates every argument of a call for the "aten" backend, then declines to run it.
// (A call with nothing to compute, an empty batch say, is valid and returns CC1D_OK.)
void validate(OpCall& call) {
  try {
    run_lib(call, CC1D_BACKEND_ATEN, false, nullptr);
  } catch (const LibError& e) {
    if (e.status != CC1D_ERR_BACKEND_UNAVAILABLE) fail(e.status, e.message);
  }
}

}  // namespace

void fail(cc1d_status status, const std::string& message) {
  aten::raise("causal_conv1d: " + message + " [" + status_name(status) + "]");
}

void notify(int32_t kind, const std::string& key, const std::string& message) {
  cc1d_torch_notice_fn fn;
  void* user;
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    fn = g_notice;
    user = g_user;
    first = fn == nullptr && kind == CC1D_TORCH_NOTICE_FALLBACK && g_warned.insert(key).second;
  }
  if (fn != nullptr)  // outside the lock: the host's hook may wait for its own locks (Python's GIL)
    fn(kind, key.c_str(), message.c_str(), user);
  else if (first)
    std::fprintf(stderr, "%s\n", message.c_str());
}

void run(OpCall& call, const std::string& backend) {
  const Tensor& first = *call.slots.front().tensor;
  if (aten::place(first) == aten::Place::Other) fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_torch serves cpu and cuda tensors");
  const int dev_type = aten::place(first) == aten::Place::Cuda ? CC1D_DEVICE_CUDA : CC1D_DEVICE_CPU;
  const int dev_index = aten::device_index(first);
  const std::string dev = device_string(first);
  cc1d_plan plan{};
  plan.struct_size = sizeof plan;
  const cc1d_status planned = cc1d_plan_dispatch(call.op, backend_id(name_of(backend)), dev_type, dev_index, &plan);
  if (planned != CC1D_OK) fail(planned, cc1d_last_error());
  const std::string requested = cc1d_backend_name(plan.requested);
  const std::string source = plan.source == CC1D_SOURCE_ARGUMENT      ? source_of(backend, "argument backend=")
                             : plan.source == CC1D_SOURCE_ENVIRONMENT ? "CAUSAL_CONV1D_BACKEND"
                                                                      : "default";
  std::vector<std::pair<std::string, std::string>> failures;
  for (int i = 0; i < plan.count; ++i) {
    const cc1d_candidate& c = plan.candidates[i];
    const std::string name = cc1d_backend_name(c.backend);
    const auto key = std::make_tuple(c.backend, c.host_copies ? CC1D_DEVICE_CPU : dev_type, c.host_copies ? 0 : dev_index);
    std::string broken;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto it = g_broken.find(key);
      if (it != g_broken.end()) broken = it->second;
    }
    if (!c.available || !broken.empty()) {
      failures.emplace_back(name, broken.empty() ? std::string(c.reason) : broken);
      continue;
    }
    if (!failures.empty()) {
      std::string tried, k = name + "|" + std::to_string(dev_type);
      for (const auto& f : failures) {
        tried += (tried.empty() ? "" : "; ") + ("backend '" + f.first + "' cannot serve " + dev + ": " + f.second);
        k += "|" + f.first + ":" + f.second;
      }
      const std::string msg = "causal_conv1d: " + tried + ". Falling back to '" + name + "' (" +
                              serves(name, dev, c.host_copies) + "). Set CAUSAL_CONV1D_STRICT=1 to make this an "
                              "error, or pick a backend with backend= or CAUSAL_CONV1D_BACKEND.";
      if (plan.strict) aten::raise(msg + " " + kStrictMarker);
      notify(CC1D_TORCH_NOTICE_FALLBACK, k, msg);
    }
    try {
      if (c.runs_in_host) {
        validate(call);
        call.run_aten();
      } else {
        run_lib(call, c.backend, c.host_copies, !c.host_copies && dev_type == CC1D_DEVICE_CUDA ? current_stream(dev_index)
                                                                                             : nullptr);
      }
    } catch (const LibError& e) {
      const bool retryable = e.status == CC1D_ERR_UNSUPPORTED || e.status == CC1D_ERR_BACKEND_UNAVAILABLE ||
                             e.status == CC1D_ERR_COMPILE;
      if (e.status == CC1D_ERR_BACKEND_UNAVAILABLE || e.status == CC1D_ERR_COMPILE) {
        std::lock_guard<std::mutex> lock(g_mu);
        g_broken[key] = e.message;  // later calls neither retry nor warn again
      }
      if (plan.requested == CC1D_BACKEND_AUTO && retryable && i + 1 < plan.count) {
        failures.emplace_back(name, e.message);
        continue;
      }
      if (e.status == CC1D_ERR_BACKEND_UNAVAILABLE)
        fail(e.status, "backend '" + name + "' (requested by " + source + ") cannot serve " + dev + ": " + e.message);
      fail(e.status, e.message);
    }
    std::string reason;
    if (plan.requested != CC1D_BACKEND_AUTO) {
      reason = "requested by " + source + ": " + serves(name, dev, c.host_copies);
    } else if (failures.empty()) {
      reason = "auto: " + std::string(dev_type == CC1D_DEVICE_CUDA ? "cuda" : "cpu") + " tensors are served by " +
               serves(name, dev, c.host_copies);
    } else {
      reason = "auto: fell back to " + serves(name, dev, c.host_copies);
      for (const auto& f : failures) reason += "; '" + f.first + "' unavailable (" + f.second + ")";
    }
    std::string from = "[";
    for (const auto& f : failures)
      from += (from.size() > 1 ? ", [" : "[") + cc1d::json_quote(f.first) + ", " + cc1d::json_quote(f.second) + "]";
    notify(CC1D_TORCH_NOTICE_CHOICE, cc1d_op_name(call.op),
           "{\"op\": " + cc1d::json_quote(cc1d_op_name(call.op)) + ", \"backend\": " + cc1d::json_quote(name) +
               ", \"requested\": " + cc1d::json_quote(requested) + ", \"source\": " + cc1d::json_quote(source) +
               ", \"device\": " + cc1d::json_quote(dev) + ", \"reason\": " + cc1d::json_quote(reason) +
               ", \"fallback_from\": " + from + "], \"host_copies\": " + (c.host_copies ? "true" : "false") + "}");
    return;
  }
  std::string why;
  for (const auto& f : failures) why += (why.empty() ? "" : "; ") + ("'" + f.first + "': " + f.second);
  if (plan.requested != CC1D_BACKEND_AUTO)
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "backend '" + failures.front().first + "' (requested by " + source +
                                           ") cannot serve " + dev + ": " + failures.front().second);
  fail(CC1D_ERR_BACKEND_UNAVAILABLE, "no backend can serve " + dev + ": " + why);
}

}  // namespace cc1d_torch

extern "C" CC1D_TORCH_API void cc1d_torch_set_notice_callback(cc1d_torch_notice_fn fn, void* user) {
  std::lock_guard<std::mutex> lock(cc1d_torch::g_mu);
  cc1d_torch::g_notice = fn;
  cc1d_torch::g_user = user;
}
