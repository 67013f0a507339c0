// cpu_cache.h — the size of the last-level CPU cache this core shares, which decides when the cpu
// backend writes an output around the caches (fallback/cpu/stream_out.h).
#pragma once
#include <cstddef>

namespace cc1d {

// Bytes of the largest data or unified cache of CPU 0 as Linux lists it
// (/sys/devices/system/cpu/cpu0/cache/index*/size: the cache this core shares, e.g. an AMD CCD's
// 32 MiB L3, where glibc's sysconf reports the socket's 256); else the C library's L3 or L2; else
// 32 MiB. Read once.
size_t last_level_cache_bytes();

}  // namespace cc1d
