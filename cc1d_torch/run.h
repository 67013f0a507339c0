// run.h — one call of an op as the libtorch op library runs it: libcc1d's dispatch plan
// (cc1d_plan_dispatch) walked in order, as the Python package's _dispatch.run does. A candidate
// runs libcc1d on the tensors (CUDA work on torch's current stream), on host copies of them, or
// the ATen reference (fallback/aten/); every fallback is announced once per reason or, with
// CAUSAL_CONV1D_STRICT=1, refused; the choice is recorded for the host (last_backend()).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "fallback/aten/aten.h"

namespace cc1d_torch {

using cc1d::aten::OptTensor;
using cc1d::aten::Tensor;

// One tensor argument, by its field name in the op's C argument struct.
struct Slot {
  const char* name;
  OptTensor tensor;  // absent optional arguments stay empty
  bool written;      // an output or an in-out state
};

struct OpCall {
  cc1d_op op;
  std::vector<Slot> slots;
  // Calls the op's libcc1d entry point; `t` holds one descriptor per slot (null where absent).
  std::function<cc1d_status(const std::vector<const cc1d_tensor*>& t, int32_t backend, void* stream)> run_lib;
  std::function<void()> run_aten;  // the ATen reference, writing the slots' tensors
};

// Runs `call` with the first candidate that can serve it. `backend` is "" (auto: the per-call
// choice is left to CAUSAL_CONV1D_BACKEND and the default order) or a backend name.
void run(OpCall& call, const std::string& backend);

// Raises "causal_conv1d: <message> [<status name>]": libcc1d's status as a tag the host maps
// to its exception types.
[[noreturn]] void fail(cc1d_status status, const std::string& message);

// The host's hook (cc1d_torch_set_notice_callback), and stderr without one.
void notify(int32_t kind, const std::string& key, const std::string& message);

}  // namespace cc1d_torch
