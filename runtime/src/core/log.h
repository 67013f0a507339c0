// log.h — the runtime's logger: spdlog, to stderr or to the host's callback
// (cc1d_set_log_callback), level from CAUSAL_CONV1D_LOG_LEVEL (trace|debug|info|warn|error|off,
// default warn). Lines on stderr start with "[causal_conv1d]".
#pragma once
#include <string>

#include <spdlog/spdlog.h>

#include "cc1d/cc1d.h"

namespace cc1d {

spdlog::logger& logger();

// Logs `message` at warn level once per process for each distinct `key`.
void warn_once(const std::string& key, const std::string& message);

// The callback and level of the C ABI (thread-safe).
void set_log_callback(cc1d_log_fn fn, void* user);
void set_log_level(cc1d_log_level level);
cc1d_log_level log_level();

}  // namespace cc1d
