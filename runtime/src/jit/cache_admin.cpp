#include "jit/cache_admin.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "cc1d/cc1d.h"
#include "core/error.h"
#include "core/json.h"
#include "jit/cache_fs.h"
#include "jit/image_cache.h"
#include "jit/tier_targets.h"

namespace cc1d {

namespace {

struct Place {
  bool local;
  std::string dir, entries, state, problem;
};

std::string num(uint64_t v) { return std::to_string(v); }

std::string seconds(const timespec& t) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%03ld", (long long)t.tv_sec, t.tv_nsec / 1000000);
  return buf;
}

// One entry file, read and verified as a lookup would.
struct Checked {
  bool ok = false;
  std::string why;
  EntryMeta meta;
};

Checked check(const Place& p, const DirFile& f) {
  Checked c;
  std::string bytes;
  CompiledImage image;
  const ReadResult r = read_entry_file(f.path, !p.local, &bytes, &c.why);
  if (r == ReadResult::Absent) c.why = "removed while being read";
  c.ok = r == ReadResult::Ok && decode_cache_entry(bytes, f.digest(), &image, &c.why, &c.meta);
  return c;
}

std::string counters_json(const StatCounts& all, const std::string& scope, bool local) {
  auto it = all.find(scope);
  std::string j = "{";
  const char* names[] = {"hits", "misses", "corrupt", "writes", "evictions"};
  for (size_t i = 0; i < (local ? 5u : 3u); ++i) {
    uint64_t v = 0;
    if (it != all.end() && it->second.count(names[i])) v = it->second.at(names[i]);
    j += std::string(i ? ", " : "") + json_quote(names[i]) + ": " + num(v);
  }
  return j + "}";
}

std::string place_json(const Place& p, int command, const StatCounts& counters, uint64_t max_bytes) {
  std::string j = "{\"dir\": " + json_quote(p.dir) + ", \"entries_dir\": " + json_quote(p.entries) +
                  ", \"state\": " + json_quote(p.state) + ", \"problem\": " + json_quote(p.problem);
  if (p.local) j += ", \"max_bytes\": " + num(max_bytes);
  if (p.dir.empty()) return j + "}";
  if (!p.local && command == CC1D_CACHE_PATH) {  // what a node without a compiler takes from it
    std::string targets;
    for (const TierTarget& t : read_tier_targets({p.dir}))
      targets += std::string(targets.empty() ? "" : ", ") + "{\"arch\": " + std::to_string(t.arch) +
                 ", \"target\": " + json_quote(t.target) + ", \"compiler\": " + json_quote(t.compiler) +
                 ", \"min_driver\": " + std::to_string(t.min_driver) + "}";
    j += ", \"targets\": [" + targets + "]";
  }
  const bool manage = p.local && (p.state == "read-write" || p.state == "full");
  const time_t now = time(nullptr);
  uint64_t entries = 0, bytes = 0, temps = 0, temp_bytes = 0, ok = 0, bad = 0, removed = 0, removed_bytes = 0;
  std::string items;
  for (const DirFile& f : list_dir(p.entries)) {
    if (f.temp) {
      if ((command == CC1D_CACHE_VERIFY || command == CC1D_CACHE_CLEAR) && manage && temp_abandoned(f, now) &&
          unlink(f.path.c_str()) == 0) {
        ++removed;
        removed_bytes += f.size;
      } else {
        ++temps;
        temp_bytes += f.size;
      }
      continue;
    }
    if (command == CC1D_CACHE_CLEAR && manage) {
      if (unlink(f.path.c_str()) == 0) {
        ++removed;
        removed_bytes += f.size;
        continue;
      }
    }
    ++entries;
    bytes += f.size;
    if (command != CC1D_CACHE_LIST && command != CC1D_CACHE_VERIFY) continue;
    const Checked c = check(p, f);
    c.ok ? ++ok : ++bad;
    const bool remove = !c.ok && command == CC1D_CACHE_VERIFY && manage && unlink(f.path.c_str()) == 0;
    if (remove) {
      ++removed;
      removed_bytes += f.size;
    }
    if (command == CC1D_CACHE_VERIFY && c.ok) continue;  // verify lists the bad ones
    items += std::string(items.empty() ? "" : ", ") + "{\"key\": " + json_quote(f.digest()) + ", \"file\": " +
             json_quote(f.path) + ", \"bytes\": " + num(f.size) + ", \"mtime\": " + seconds(f.mtime) +
             ", \"ok\": " + (c.ok ? "true" : "false") + ", \"problem\": " + json_quote(c.why) +
             ", \"removed\": " + (remove ? "true" : "false") + ", \"kernel\": " +
             json_quote(c.meta.name_expression) + ", \"target\": " + json_quote(c.meta.target) +
             ", \"compiler\": " + json_quote(c.meta.compiler) + "}";
  }
  j += ", \"entries\": " + num(entries) + ", \"bytes\": " + num(bytes) + ", \"temp_files\": " + num(temps) +
       ", \"temp_bytes\": " + num(temp_bytes);
  if (command == CC1D_CACHE_STATS) j += ", \"counters\": " + counters_json(counters, p.local ? "local" : p.dir, p.local);
  if (command == CC1D_CACHE_LIST || command == CC1D_CACHE_VERIFY)
    j += ", \"ok\": " + num(ok) + ", \"bad\": " + num(bad) + ", \"items\": [" + items + "]";
  if (command == CC1D_CACHE_VERIFY || command == CC1D_CACHE_CLEAR)
    j += ", \"removed\": " + num(removed) + ", \"removed_bytes\": " + num(removed_bytes);
  if (command == CC1D_CACHE_CLEAR && p.local) {
    std::string facts;
    if (manage)
      for (const std::string& f : facts_files(p.dir))
        if (unlink(f.c_str()) == 0) facts += std::string(facts.empty() ? "" : ", ") + json_quote(f);
    j += ", \"removed_facts\": [" + facts + "]";
  }
  return j + "}";
}

}  // namespace

std::string cache_command_json(int command) {
  static const char* const names[] = {"path", "stats", "list", "verify", "clear"};
  if (command < CC1D_CACHE_PATH || command > CC1D_CACHE_CLEAR)
    fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_cache_command: command must be 0 (path) .. 4 (clear), got " +
                                        std::to_string(command));
  const CacheConfig config = CacheConfig::from_env();
  ImageCache local(config);  // for its state only: it creates nothing
  const Place lp{true, config.dir, local.entries_dir(), local.state(), local.problem()};
  const StatCounts counters =
      lp.state == "off" || lp.state == "untrusted" ? StatCounts{} : read_persistent_stats(lp.entries);
  std::string j = "{\"command\": " + json_quote(names[command]) + ", \"local\": " +
                  place_json(lp, command, counters, config.max_bytes) + ", \"tiers\": [";
  for (size_t i = 0; i < config.tiers.size(); ++i) {
    Place t{false, config.tiers[i], config.tiers[i] + "/" + kEntriesSubdir, "read-only", local.tier_problem(i)};
    if (!t.problem.empty()) t.state = t.problem.find("does not exist") != std::string::npos ? "absent" : "untrusted";
    j += std::string(i ? ", " : "") + place_json(t, command, counters, 0);
  }
  return j + "]}";
}

}  // namespace cc1d
