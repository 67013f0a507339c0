// checked.h — overflow-checked 64-bit arithmetic for everything derived from caller-supplied
// shapes and strides (extents, spans, offsets, work counts). A descriptor whose numbers do not
// fit is rejected with an error, never wrapped into a small or negative value.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace cc1d {

// a * b, or throws CC1D_ERR_INVALID_ARGUMENT naming `what` (a literal: nothing is built unless it fails).
inline int64_t mul_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) +
                                        " overflows 64-bit arithmetic; the tensor is too large to address");
  return r;
}

// a + b, or throws CC1D_ERR_INVALID_ARGUMENT naming `what`.
inline int64_t add_checked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                                        " overflows 64-bit arithmetic; the tensor is too large to address");
  return r;
}

// ceil(a / b) for a >= 0, b > 0, without the a + b - 1 overflow.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

}  // namespace cc1d
