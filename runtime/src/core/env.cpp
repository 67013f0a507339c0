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

}  // namespace cc1d
