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

std::string tier_targets_text(const std::vector<JitDevice>& devices) {
  std::string t = std::string(kHeader) + "\n";
  for (const JitDevice& d : devices) {
    if (!d.usable || !plain(d.target) || !plain(d.compiler) || d.min_driver <= 0) continue;
    std::string line =
        std::to_string(d.arch) + "\t" + d.target + "\t" + d.compiler + "\t" + std::to_string(d.min_driver);
    bool ok = true;
    for (const std::string& o : d.options) ok &= plain(o), line += "\t" + o;
    if (ok) t += line + "\n";
  }
  return t;
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
