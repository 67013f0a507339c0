// cpu_cache.cpp — see cpu_cache.h.
#include "platform/cpu_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace cc1d {

namespace {

// The largest data or unified cache in sysfs, 0 if none is listed.
size_t sysfs_cache_bytes() {
  size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream type(dir + "type"), size(dir + "size");
    std::string t, s;
    if (!(type >> t) || !(size >> s)) continue;
    if (t != "Data" && t != "Unified") continue;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
    const unsigned long long unit = *end == 'K' ? 1ull << 10 : *end == 'M' ? 1ull << 20 : *end == 'G' ? 1ull << 30 : 1;
    if (n * unit > best) best = static_cast<size_t>(n * unit);
  }
  return best;
}

}  // namespace

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    size_t n = sysfs_cache_bytes();
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)  // glibc
    if (n == 0) n = static_cast<size_t>(std::max(sysconf(_SC_LEVEL3_CACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE)));
#endif
    return n > 0 ? n : size_t(32) << 20;
  }();
  return bytes;
}

}  // namespace cc1d
