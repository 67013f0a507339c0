// cache_admin.h — `causal-conv1d cache path|stats|list|verify|clear` (cc1d_cache_command): the
// local kernel cache and each read-only tier of the environment, described as JSON.
//
//  path    where each lives, and its state (trust, writability); for a tier, its targets
//          (tier_targets.h: what a node without a compiler loads from it)
//  stats   entries, bytes and temp files on disk, and the counters every process added to the
//          local cache's stats file (cache_stats.h): hits, misses, corrupt, writes, evictions
//  list    every entry: key, file, bytes, mtime, kernel, target, compiler, whether it verifies
//  verify  checks every entry; bad local entries (and temp files of killed writers) are
//          removed, bad tier entries are reported only: a tier is never written
//  clear   removes every local entry and abandoned temp file, and the toolchains' facts files
//          (cache_fs.h, is_facts_file); tiers are untouched, the lock and stats files stay
// verify and clear act on a local cache in a usable state only (read-write or full).
#pragma once
#include <string>

namespace cc1d {

// command: a cc1d_cache_cmd. Throws CC1D_ERR_INVALID_ARGUMENT for another value.
std::string cache_command_json(int command);

}  // namespace cc1d
