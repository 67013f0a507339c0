// tier_targets.h — what `causal-conv1d precompile` compiled for, kept in its output directory
// (a read-only tier) as <tier>/targets-v1, so that a node with no usable compiler can still use
// the tier: it takes the target, compiler identity and options of its arch from there, which
// make the exact cache keys of the tier's entries.
//
// One line per arch after a header: arch, target, compiler, the oldest driver that loads its
// images, then the options, tab-separated. Read under the cache's trust rule (cache_fs.h); a
// damaged or foreign file gives no targets.
#pragma once
#include <string>
#include <vector>

#include "jit/toolchain.h"

namespace cc1d {

constexpr const char* kTierTargetsFile = "targets-v1";

struct TierTarget {
  std::string tier;  // the directory it came from ("" for a precompile's own devices)
  int arch = 0;
  int min_driver = 0;
  std::string target, compiler;
  std::vector<std::string> options;
  bool same_keys(const TierTarget& o) const {
    return arch == o.arch && min_driver == o.min_driver && target == o.target && compiler == o.compiler &&
           options == o.options;
  }
};

// A precompile's targets: its usable devices', then those `dir`'s targets-v1 already holds from
// earlier runs (other archs, or other drivers' choices), so that their entries stay reachable.
std::vector<TierTarget> merged_tier_targets(const std::vector<JitDevice>& devices, const std::string& dir);

// The text of targets-v1 (a target whose fields hold a tab or a newline is left out).
std::string tier_targets_text(const std::vector<TierTarget>& targets);

// Every target of every tier, in tier order (the first tier's first).
std::vector<TierTarget> read_tier_targets(const std::vector<std::string>& tiers);

// The first target for a device of `arch` whose images a driver of `driver_version` loads, or null.
const TierTarget* find_tier_target(const std::vector<TierTarget>& targets, int arch, int driver_version);

}  // namespace cc1d
