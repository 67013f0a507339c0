// error.h — the exception type used inside libcc1d. It never crosses the C boundary:
// api/guard.h turns it into a cc1d_status and the thread-local message.
#pragma once
#include <stdexcept>
#include <string>

#include "cc1d/cc1d.h"

namespace cc1d {

class Error : public std::runtime_error {
 public:
  Error(cc1d_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  cc1d_status status() const noexcept { return status_; }

 private:
  cc1d_status status_;
};

[[noreturn]] inline void fail(cc1d_status status, const std::string& message) {
  throw Error(status, message);
}

}  // namespace cc1d
