#include "core/env.h"

#include <cstdlib>
#include <string>

#include "core/log.h"

namespace cc1d {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  if (s != "1" && s != "true" && s != "yes" && s != "on")
    warn_once(std::string(name) + "-value:" + s, std::string(name) + "='" + s +
                                                     "' is not one of 1|0|true|false|yes|no|on|off; treating it as 1");
  return true;
}

unsigned env_count(const char* name, unsigned max) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  const std::string s(v);
  if (s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos) {
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    if (n <= max) return static_cast<unsigned>(n);
  }
  warn_once(std::string(name) + "-value:" + s, std::string(name) + "='" + s + "' is not a whole number from 0 to " +
                                                   std::to_string(max) + "; treating it as 0 (unset)");
  return 0;
}

}  // namespace cc1d
