// tier_targets.cpp — targets-v1 of a precompiled tier: written by precompile, read by a node
// whose toolchain has no compiler for its device.
#include "jit/tier_targets.h"

#include <cstdlib>

#include "jit/cache_fs.h"

namespace cc1d {

namespace {

constexpr const char* kHeader = "cc1d precompile targets 1";
constexpr size_t kMaxBytes = 64 << 10;

bool plain(const std::string& s) { return !s.empty() && s.find_first_of("\t\n") == std::string::npos; }

int parse_int(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(s.c_str());
}

}  // namespace

std::vector<TierTarget> merged_tier_targets(const std::vector<JitDevice>& devices, const std::string& dir) {
  std::vector<TierTarget> out;
  for (const JitDevice& d : devices)
    if (d.usable && d.min_driver > 0) out.push_back(TierTarget{"", d.arch, d.min_driver, d.target, d.compiler, d.options});
  for (const TierTarget& old : read_tier_targets({dir})) {
    bool known = false;
    for (const TierTarget& t : out) known |= t.same_keys(old);
    if (!known) out.push_back(old);
  }
  return out;
}

std::string tier_targets_text(const std::vector<TierTarget>& targets) {
  std::string text = std::string(kHeader) + "\n";
  for (const TierTarget& t : targets) {
    if (!plain(t.target) || !plain(t.compiler) || t.min_driver <= 0) continue;
    std::string line =
        std::to_string(t.arch) + "\t" + t.target + "\t" + t.compiler + "\t" + std::to_string(t.min_driver);
    bool ok = true;
    for (const std::string& o : t.options) ok &= plain(o), line += "\t" + o;
    if (ok) text += line + "\n";
  }
  return text;
}

std::vector<TierTarget> read_tier_targets(const std::vector<std::string>& tiers) {
  std::vector<TierTarget> out;
  for (const std::string& tier : tiers) {
    const std::string text = read_trusted_file(tier, kTierTargetsFile, true, kMaxBytes);
    const std::vector<std::string> lines = split_fields(text, '\n');
    if (lines.empty() || lines[0] != kHeader) continue;
    for (size_t i = 1; i < lines.size(); ++i) {
      const std::vector<std::string> f = split_fields(lines[i], '\t');
      if (f.size() < 4) continue;
      TierTarget t{tier, parse_int(f[0]), parse_int(f[3]), f[1], f[2], {f.begin() + 4, f.end()}};
      if (t.arch > 0 && t.min_driver > 0 && !t.target.empty() && !t.compiler.empty()) out.push_back(std::move(t));
    }
  }
  return out;
}

const TierTarget* find_tier_target(const std::vector<TierTarget>& targets, int arch, int driver_version) {
  for (const TierTarget& t : targets)
    if (t.arch == arch && t.min_driver <= driver_version) return &t;
  return nullptr;
}

}  // namespace cc1d
