// cache_stats.h — cache counters that outlive a process, for `causal-conv1d cache stats`.
//
// They live in the local cache, <cache dir>/kernels-v3/stats: one "scope<TAB>counter<TAB>value"
// line each, the scope being "local" or a read-only tier's path (a tier is never written, so
// its hits and bad entries are counted where this node keeps its own). Every process that
// looks up or stores adds its counts under an OFD lock on the file, in one write; a line that
// does not parse is dropped. Best effort: a counter update never fails a call.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace cc1d {

using StatCounts = std::map<std::string, std::map<std::string, uint64_t>>;  // scope -> counter -> n

// Adds `delta` to the file in `dir` (created 0600 when absent). Never throws.
void add_persistent_stats(const std::string& dir, const StatCounts& delta);

// The file's counts (empty when there is none).
StatCounts read_persistent_stats(const std::string& dir);

}  // namespace cc1d
