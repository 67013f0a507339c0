// backend.h — what every backend implements, the one list of backends, and the dispatch policy.
//
// Backends are op-agnostic: a backend says whether it can serve an op on a device (with the
// reason when it cannot), and runs it: the cpu backend calls op.cpu(problem), the kernel-running
// backends (nvrtc, emulate) run the launches of op.plan(problem, workspace) in order. Which backend serves a call is decided in
// one place, plan_dispatch(), which the C entry points and the host frameworks (through
// cc1d_plan_dispatch) both follow.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "ops/op.h"

namespace cc1d {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual cc1d_backend id() const = 0;
  // "" when this backend can run `op` for tensors on that device now; else the reason, saying
  // what was tried and how to fix it. Throws CC1D_ERR_INVALID_ARGUMENT for a device that does
  // not exist.
  virtual std::string unavailable_reason(const OpEntry& op, cc1d_device_type type, int device_index) = 0;
  // Runs a validated problem. `stream` is the caller's stream for GPU tensors. Throws
  // CC1D_ERR_BACKEND_UNAVAILABLE when it turns out it cannot (a module the driver rejects).
  virtual void run(const OpEntry& op, const Problem& problem, void* stream) = 0;
  // A JSON object describing this backend's state, for cc1d_report.
  virtual std::string report_json() = 0;
};

// Factories, one per backend folder.
std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_nvrtc_backend();
std::unique_ptr<Backend> make_emulate_backend();

// The one list of backends: every id, name and property comes from here.
struct BackendInfo {
  cc1d_backend id;
  const char* name;
  std::unique_ptr<Backend> (*make)();  // null: not run by libcc1d (auto, aten)
  bool host_memory;                    // reads host memory: device tensors need host copies
  const char* description;
};
const std::vector<BackendInfo>& backend_list();
const char* backend_name(int32_t id);  // "unknown" for an id not in the list
Backend& backend(cc1d_backend id);     // a backend libcc1d runs (throws otherwise)
void check_backend_id(int32_t id);     // throws CC1D_ERR_INVALID_ARGUMENT outside the list

struct Candidate {
  cc1d_backend backend;
  bool available = false;
  bool host_copies = false;   // device tensors must be copied to the host and back by the caller
  bool runs_in_host = false;  // run by the host framework (aten), not by libcc1d
  std::string reason;
};

struct DispatchPlan {
  cc1d_backend requested = CC1D_BACKEND_AUTO;  // after CAUSAL_CONV1D_BACKEND
  cc1d_source source = CC1D_SOURCE_DEFAULT;
  bool strict = false;                         // CAUSAL_CONV1D_STRICT
  std::vector<Candidate> candidates;           // in the order to try
};

// The policy: which backends to try for `op` on a device, in order, and why each can or cannot
// serve. `requested` AUTO defers to CAUSAL_CONV1D_BACKEND (read on every call), then to the
// default order. Throws CC1D_ERR_INVALID_ARGUMENT for an id outside the list.
DispatchPlan plan_dispatch(const OpEntry& op, int32_t requested, cc1d_device_type type, int device_index);

// Runs a validated problem as a C caller asked: the first candidate libcc1d can run itself
// (never aten, never host copies). Throws CC1D_ERR_BACKEND_UNAVAILABLE with every reason when
// none can.
void dispatch(const OpEntry& op, const Problem& problem, int32_t requested, void* stream);

}  // namespace cc1d
