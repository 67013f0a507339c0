// log.h — the runtime's logger: to stderr ("[causal_conv1d] <level>: ...") or to the host's callback
// (cc1d_set_log_callback), level from CAUSAL_CONV1D_LOG_LEVEL (trace|debug|info|warn|error|off,
// default warn). log_line(level, "... {} ...", args...) fills each {} with the next argument (a
// string, an integer, or Fixed{x, n}: n decimals), building the line only when the level is on.
// spdlog is used in log.cpp alone, so including this header stays cheap.
#pragma once
#include <initializer_list>
#include <string>
#include <type_traits>

#include "cc1d/cc1d.h"

namespace cc1d {

// Whether lines at `level` are written (for a caller whose arguments are costly to compute).
bool log_enabled(cc1d_log_level level);
// Writes `line` as it is (no {} substitution).
void write_log(cc1d_log_level level, const std::string& line);

// `value` with `decimals` digits after the point, as printf's "%.*f" prints it.
std::string fixed_text(double value, int decimals);

// A log_line argument printed by fixed_text.
struct Fixed {
  double value;
  int decimals;
};

// The text of one log_line argument. A double needs Fixed; bool and char are refused, as
// std::to_string would print them as numbers.
inline const std::string& log_text(const std::string& s) { return s; }
inline std::string log_text(const char* s) { return s; }
inline std::string log_text(Fixed f) { return fixed_text(f.value, f.decimals); }
template <class T, class = std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value &&
                                            !std::is_same<T, char>::value>>
std::string log_text(T v) {
  return std::to_string(v);
}

// `pattern` with its n-th {} replaced by args[n].
std::string fill_pattern(const char* pattern, std::initializer_list<std::string> args);

template <class... Args>
void log_line(cc1d_log_level level, const char* pattern, const Args&... args) {
  if (log_enabled(level)) write_log(level, fill_pattern(pattern, {log_text(args)...}));
}

// Logs `message` at warn level once per process for each distinct `key`.
void warn_once(const std::string& key, const std::string& message);

// The callback and level of the C ABI (thread-safe).
void set_log_callback(cc1d_log_fn fn, void* user);
void set_log_level(cc1d_log_level level);
cc1d_log_level log_level();

}  // namespace cc1d
