// log.h — the runtime's logger: spdlog, to stderr, level from CAUSAL_CONV1D_LOG_LEVEL
// (trace|debug|info|warn|error|off, default warn). Lines start with "[causal_conv1d]".
#pragma once
#include <string>

#include <spdlog/spdlog.h>

namespace cc1d {

spdlog::logger& logger();

// Logs `message` at warn level once per process for each distinct `key`.
void warn_once(const std::string& key, const std::string& message);

}  // namespace cc1d
