#include "log.h"

#include <cstdlib>
#include <mutex>
#include <set>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace cc1d {

namespace {
spdlog::level::level_enum level_from_env() {
  const char* v = std::getenv("CAUSAL_CONV1D_LOG_LEVEL");
  if (!v || !*v) return spdlog::level::warn;
  auto level = spdlog::level::from_str(v);  // unknown names map to off
  if (level == spdlog::level::off && std::string(v) != "off") return spdlog::level::warn;
  return level;
}
}  // namespace

spdlog::logger& logger() {
  // A private logger, not registered globally, so a host program's spdlog is untouched.
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(spdlog::color_mode::never);
    auto* l = new spdlog::logger("causal_conv1d", sink);
    l->set_pattern("[causal_conv1d] %l: %v");
    l->set_level(level_from_env());
    return l;
  }();
  return *instance;
}

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  logger().warn("{}", message);
}

}  // namespace cc1d
