// guard.h — the C boundary: every entry point runs its body through guarded(), which catches
// everything, stores the thread-local message and returns a status. No exception, abort or
// exit ever leaves libcc1d.
#pragma once
#include <string>

#include "backends/backend.h"
#include "cc1d/cc1d.h"
#include "core/error.h"

namespace cc1d {

// Records `message` as this thread's cc1d_last_error() and returns `status`.
cc1d_status set_last_error(cc1d_status status, const std::string& message);

template <typename F>
cc1d_status guarded(const char* where, F&& body) noexcept {
  try {
    body();
    return CC1D_OK;
  } catch (const Error& e) {
    return set_last_error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return set_last_error(CC1D_ERR_INTERNAL, std::string(where) + ": out of host memory");
  } catch (const std::exception& e) {
    return set_last_error(CC1D_ERR_INTERNAL, std::string(where) + ": internal error: " + e.what() +
                                                 " (please report this with CAUSAL_CONV1D_LOG_LEVEL=debug output)");
  } catch (...) {
    return set_last_error(CC1D_ERR_INTERNAL, std::string(where) + ": unknown internal error (please report this)");
  }
}

// The whole of an op's C entry point: validate (nothing is written before this returns), then
// dispatch to the backend the caller asked for.
template <typename Args, typename Problem>
cc1d_status run_entry_point(const char* where, const OpEntry& op, const Args* args,
                            Problem (*validate)(const Args*)) noexcept {
  return guarded(where, [&] {
    const Problem problem = validate(args);
    if (problem.nothing_to_do) return check_backend_id(args->backend);
    dispatch(op, problem, args->backend, args->stream);
  });
}

}  // namespace cc1d
