// backend.h — the interface every backend implements, and the registry that dispatches.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "fwd_problem.h"

namespace cc1d {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual cc1d_backend id() const = 0;
  virtual const char* name() const = 0;
  // Throws Error(CC1D_ERR_BACKEND_UNAVAILABLE, reason) when it cannot serve that device.
  // The reason says what was tried and how to fix it.
  virtual void check_available(cc1d_device_type device_type, int device_index) = 0;
  // Runs a validated problem. `stream` is a CUstream for CUDA tensors.
  virtual void fwd(const FwdProblem& problem, void* stream) = 0;
  // A JSON object (no trailing newline) describing this backend's state, for cc1d_report.
  virtual std::string report_json() { return "{}"; }
};

// Factories, one per backend. A backend not compiled in returns a backend whose
// check_available always fails with the reason.
std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_nvrtc_backend();
std::unique_ptr<Backend> make_emulate_backend();

// The process-wide registry (created on first use, thread-safe).
Backend& backend(cc1d_backend id);
// AUTO resolved from CAUSAL_CONV1D_BACKEND and the device type.
cc1d_backend resolve_backend(cc1d_backend requested, cc1d_device_type device_type);
const char* backend_name(cc1d_backend id);

}  // namespace cc1d
