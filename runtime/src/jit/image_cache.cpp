#include "jit/image_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "jit/cache_fs.h"

namespace cc1d {

namespace {

constexpr const char* kLocal = "local";  // the stats scope of the local cache
constexpr uint64_t kMaxCacheMb = (~0ull >> 20);  // 2^44-1: the largest whose bytes fit in 64 bits

const char* disk_name(int d) {
  static const char* const names[] = {"off", "untrusted", "unavailable", "read-only", "full", "read-write"};
  return names[d];
}

}  // namespace

struct ImageCache::Tier {
  std::string root, entries;
  std::once_flag checked;
  std::string problem;  // "" when usable
  std::atomic<uint64_t> hits{0}, misses{0}, corrupt{0};
};

// ---- configuration from the environment ---------------------------------------------------

std::string CacheConfig::default_dir() {
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_DIR");
  if (env != nullptr && *env != '\0') return std::string(env) == "off" ? "" : std::string(env);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/causal-conv1d/kernels";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* pw = getpwuid(getuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  return home != nullptr && *home != '\0' ? std::string(home) + "/.cache/causal-conv1d/kernels" : "";
}

uint64_t CacheConfig::default_max_bytes() {
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_MAX_MB");
  if (env == nullptr || *env == '\0') return kDefaultCacheMaxBytes;
  const std::string v = env;
  errno = 0;
  const unsigned long long mb = std::strtoull(env, nullptr, 10);
  if (v.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE || mb > kMaxCacheMb) {
    warn_once("cache-max-mb:" + v, "CAUSAL_CONV1D_CACHE_MAX_MB='" + v + "' is not a number of MiB from 0 (no cap) to " +
                                  std::to_string(kMaxCacheMb) + "; using the default, " +
                                  std::to_string(kDefaultCacheMaxBytes >> 20));
    return kDefaultCacheMaxBytes;
  }
  return (uint64_t)mb << 20;
}

std::vector<std::string> CacheConfig::default_tiers() {
  std::vector<std::string> tiers;
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_PATH");
  const std::string v = env != nullptr ? env : "";
  for (size_t start = 0; start <= v.size();) {
    size_t end = v.find(':', start);
    if (end == std::string::npos) end = v.size();
    const std::string t = v.substr(start, end - start);
    if (!t.empty() && t[0] != '/')
      warn_once("cache-path:" + t, "CAUSAL_CONV1D_CACHE_PATH: '" + t + "' is not an absolute path; it is skipped");
    else if (!t.empty())
      tiers.push_back(t);
    start = end + 1;
  }
  return tiers;
}

CacheConfig CacheConfig::from_env() {
  CacheConfig c;
  c.dir = default_dir();
  c.max_bytes = default_max_bytes();
  c.tiers = default_tiers();
  c.lock_timeout_s = default_lock_timeout_s();
  return c;
}

// ---- the cache ------------------------------------------------------------------------------

ImageCache::ImageCache(CacheConfig config) : config_(std::move(config)) {
  for (const std::string& root : config_.tiers) {
    tiers_.push_back(std::make_unique<Tier>());
    tiers_.back()->root = root;
    tiers_.back()->entries = root + "/" + kEntriesSubdir;
  }
}

ImageCache::ImageCache(std::string dir, uint64_t max_bytes) : ImageCache([&] {
    CacheConfig c;
    c.dir = std::move(dir);
    c.max_bytes = max_bytes;
    return c;
  }()) {}

ImageCache::~ImageCache() = default;

std::string ImageCache::entries_dir() const {
  return config_.dir.empty() ? "" : config_.dir + "/" + kEntriesSubdir;
}

std::string ImageCache::entry_path(const CacheKey& key) const {
  return config_.dir.empty() ? "" : entries_dir() + "/" + key.digest() + kEntrySuffix;
}

void ImageCache::untrusted(const std::string& dir, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    problem_ = dir + " " + why;
  }
  disk_ = Disk::Untrusted;
  warn_once("cache-untrusted:" + dir,
            "kernel cache directory " + dir + " " + why + "; it is not used, so kernels are compiled and kept in "
            "memory only. Whatever is in a kernel cache runs on the GPU, so the directory must be yours and "
            "writable by you alone: `chmod go-w` it (and `chown` it to you), or point CAUSAL_CONV1D_CACHE_DIR at "
            "a directory of your own (or 'off')");
}

void ImageCache::unavailable(const std::string& why) {
  ++errors_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    problem_ = why;
  }
  disk_ = Disk::Unavailable;
  warn_once("cache-unavailable:" + config_.dir,
            "kernel cache directory " + why + "; compiled kernels are kept in memory only for this process. "
            "Set CAUSAL_CONV1D_CACHE_DIR to a writable directory, or to 'off' to silence this");
}

void ImageCache::open_local() {
  if (config_.dir.empty()) return;  // Off
  std::string why;
  switch (check_dir(config_.dir, false, &why)) {
    case DirCheck::Absent: disk_ = Disk::ReadWrite; return;  // created (private) by the first store
    case DirCheck::Unreadable: return unavailable(config_.dir + " " + why);
    case DirCheck::Untrusted: return untrusted(config_.dir, why);
    case DirCheck::Ok: break;
  }
  switch (check_dir(entries_dir(), false, &why)) {
    case DirCheck::Absent: break;
    case DirCheck::Unreadable: return unavailable(entries_dir() + " " + why);
    case DirCheck::Untrusted: return untrusted(entries_dir(), why);
    case DirCheck::Ok: break;
  }
  const bool writable = faccessat(AT_FDCWD, config_.dir.c_str(), W_OK, AT_EACCESS) == 0 &&
                        (faccessat(AT_FDCWD, entries_dir().c_str(), W_OK, AT_EACCESS) == 0 || errno == ENOENT);
  disk_ = writable ? Disk::ReadWrite : Disk::ReadOnly;
}

ImageCache::Disk ImageCache::disk() {
  std::call_once(open_once_, [this] { open_local(); });
  return disk_.load();
}

std::string ImageCache::state() { return disk_name((int)disk()); }

std::string ImageCache::problem() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problem_;
}

std::string ImageCache::tier_problem(size_t i) {
  Tier& t = *tiers_.at(i);
  tier_usable(t);
  return t.problem;
}

bool ImageCache::ensure_local_dir() {
  const Disk d = disk();
  if (d == Disk::ReadOnly)
    warn_once("cache-read-only:" + config_.dir, "kernel cache directory " + config_.dir + " is read-only: it serves the "
              "kernels it holds, and new ones are kept in memory only for this process. Set "
              "CAUSAL_CONV1D_CACHE_DIR to a writable directory to keep them");
  if (d != Disk::ReadWrite && d != Disk::Full) return false;
  if (!make_dirs(entries_dir(), config_.shared ? 0755 : 0700)) {
    unavailable("cannot create " + entries_dir() + ": " + std::strerror(errno));
    return false;
  }
  // What is there now may not be what we made (a race with another creator).
  for (const std::string& dir : {config_.dir, entries_dir()}) {
    std::string why;
    if (check_dir(dir, false, &why) == DirCheck::Ok) continue;
    untrusted(dir, why);
    return false;
  }
  return true;
}

void ImageCache::remember(const std::string& digest, const CompiledImage& image) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_[digest] = image;
}

bool ImageCache::local_readable() {
  const Disk d = disk();
  return d == Disk::ReadOnly || d == Disk::Full || d == Disk::ReadWrite;
}

bool ImageCache::load_local(const std::string& digest, CompiledImage* out, StatCounts* delta) {
  if (!local_readable()) return false;
  const std::string path = entries_dir() + "/" + digest + kEntrySuffix;
  std::string bytes, why;
  const ReadResult r = read_entry_file(path, false, &bytes, &why);
  if (r == ReadResult::Absent) return false;
  if (r == ReadResult::Ok && decode_cache_entry(bytes, digest, out, &why)) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // LRU: a hit is a use (fails harmlessly if read-only)
    ++(*delta)[kLocal]["hits"];
    return true;
  }
  ++corrupt_;
  ++(*delta)[kLocal]["corrupt"];
  log_line(CC1D_LOG_WARN, "ignoring bad kernel cache entry {} ({}); it will be rebuilt", path, why);
  return false;
}

bool ImageCache::tier_usable(Tier& t) {
  std::call_once(t.checked, [&] {
    for (const std::string& d : {t.root, t.entries}) {
      std::string why;
      if (t.problem.empty() && check_dir(d, true, &why) != DirCheck::Ok) t.problem = d + " " + why;
    }
    if (!t.problem.empty())
      log_line(CC1D_LOG_WARN,
               "read-only kernel cache tier {} (CAUSAL_CONV1D_CACHE_PATH): {}; it is skipped. A tier must be "
               "owned by root or by you and writable by no one else, and hold {}/ as `causal-conv1d "
               "precompile --out` writes it",
               t.root, t.problem, kEntriesSubdir);
  });
  return t.problem.empty();
}

bool ImageCache::load_tier(Tier& t, const std::string& digest, CompiledImage* out, StatCounts* delta,
                            bool count_miss) {
  if (!tier_usable(t)) return false;
  const std::string path = t.entries + "/" + digest + kEntrySuffix;
  std::string bytes, why;
  const ReadResult r = read_entry_file(path, true, &bytes, &why);
  if (r == ReadResult::Absent) {
    if (count_miss) {
      ++t.misses;
      ++(*delta)[t.root]["misses"];
    }
    return false;
  }
  if (r == ReadResult::Ok && decode_cache_entry(bytes, digest, out, &why)) {
    ++t.hits;
    ++(*delta)[t.root]["hits"];
    write_local(digest, bytes, delta);  // the next process on this machine reads its own disk
    return true;
  }
  ++t.corrupt;
  ++corrupt_;
  ++(*delta)[t.root]["corrupt"];
  log_line(CC1D_LOG_WARN,
           "skipping bad entry {} of the read-only kernel cache tier {} ({}); it is not deleted. "
           "`causal-conv1d cache verify` lists every bad entry",
           path, t.root, why);
  return false;
}

bool ImageCache::lookup(const std::string& digest, CompiledImage* out, std::string* origin, StatCounts* delta,
                         bool count_miss) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(digest);
    if (it != memory_.end()) {
      *out = it->second;
      ++hits_;
      ++memory_hits_;
      if (origin) *origin = "memory cache";
      return true;
    }
  }
  if (load_local(digest, out, delta)) {
    if (origin) *origin = "disk cache";
  } else {
    size_t i = 0;
    while (i < tiers_.size() && !load_tier(*tiers_[i], digest, out, delta, count_miss)) ++i;
    if (i == tiers_.size()) return false;  // the caller counts the miss (after waiting, maybe)
    ++tier_hits_;
    if (local_readable()) ++(*delta)[kLocal]["misses"];
    if (origin) *origin = "tier " + tiers_[i]->root;
  }
  ++hits_;
  remember(digest, *out);
  return true;
}

void ImageCache::flush(const StatCounts& delta) {
  if (!config_.persist_stats || delta.empty()) return;
  const Disk d = disk();
  if (d == Disk::ReadWrite || d == Disk::Full) add_persistent_stats(entries_dir(), delta);
}

void ImageCache::write_failed(int err, const std::string& path) {
  ++errors_;
  const std::string what = std::string(std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS) {
    disk_ = Disk::ReadOnly;
    warn_once("cache-read-only:" + config_.dir,
              "kernel cache directory " + config_.dir + " is not writable (" + path + ": " + what +
                  "); compiled kernels are kept in memory only for this process. Set CAUSAL_CONV1D_CACHE_DIR to "
                  "a writable directory, or to 'off' to silence this");
  } else if (err == ENOSPC || err == EDQUOT) {
    disk_ = Disk::Full;
    warn_once("cache-full:" + config_.dir,
              "kernel cache directory " + config_.dir + " is full (" + what +
                  ", even after evicting old entries); this kernel is kept in memory only, and later compiles "
                  "try again. Free space there, lower CAUSAL_CONV1D_CACHE_MAX_MB, or move CAUSAL_CONV1D_CACHE_DIR");
  } else {
    warn_once("cache-write:" + config_.dir, "writing a kernel cache entry in " + path + " failed (" + what +
                                                "); the kernel is kept in memory only, and later compiles try again");
  }
}

void ImageCache::write_local(const std::string& digest, const std::string& bytes, StatCounts* delta) {
  if (!ensure_local_dir()) return;
  const std::string dir = entries_dir(), name = digest + kEntrySuffix;
  const mode_t mode = config_.shared ? 0644 : 0600;
  auto evict = [&](const std::function<uint64_t(uint64_t)>& target) {
    const Eviction ev = evict_lru(dir, target, name);
    evictions_ += ev.evicted;
    if (ev.evicted) (*delta)[kLocal]["evictions"] += ev.evicted;
    return ev.evicted + ev.temps_removed;
  };
  int err = write_file_atomic(dir, name, bytes, mode);
  if (err == ENOSPC || err == EDQUOT) {
    // Make room for twice this entry by evicting the least recently used, then try once more.
    const uint64_t need = 2 * bytes.size();
    if (evict([&](uint64_t total) { return total > need ? total - need : 0; }) > 0)
      err = write_file_atomic(dir, name, bytes, mode);
  }
  if (err != 0) return write_failed(err, dir + "/" + name);
  ++writes_;
  ++(*delta)[kLocal]["writes"];
  Disk full = Disk::Full;
  disk_.compare_exchange_strong(full, Disk::ReadWrite);  // space again
  const uint64_t cap = config_.max_bytes;
  // Down to 90% of the cap, so the next few writes do not each trigger a scan-and-delete.
  if (cap != 0) evict([&](uint64_t total) { return total > cap ? cap / 10 * 9 : total; });
}

bool ImageCache::load(const CacheKey& key, CompiledImage* out, std::string* origin, bool count_miss) {
  StatCounts delta;
  const bool hit = lookup(key.digest(), out, origin, &delta, count_miss);
  if (!hit && count_miss) {
    ++misses_;
    ++delta[kLocal]["misses"];
  }
  flush(delta);
  return hit;
}

void ImageCache::store(const CacheKey& key, const CompiledImage& kernel) {
  if (kernel.image.empty()) return;  // never cache a failed/empty compile
  const std::string digest = key.digest();
  remember(digest, kernel);
  StatCounts delta;
  write_local(digest, encode_cache_entry(key, kernel), &delta);
  flush(delta);
}

CompiledImage ImageCache::get_or_compile(const CacheKey& key, const std::function<CompiledImage()>& compile,
                                         std::string* origin) {
  std::vector<std::string> origins;
  std::vector<CompiledImage> images = get_or_compile_all(
      {key}, [&](const std::vector<size_t>&) { return std::vector<CompiledImage>{compile()}; }, &origins);
  if (origin) *origin = origins[0];
  return std::move(images[0]);
}

std::vector<CompiledImage> ImageCache::get_or_compile_all(const std::vector<CacheKey>& keys,
                                                          const CompileMissing& compile,
                                                          std::vector<std::string>* origins) {
  const size_t n = keys.size();
  std::vector<std::string> digests, where(n);
  for (const CacheKey& k : keys) digests.push_back(k.digest());
  std::vector<CompiledImage> images(n);
  std::vector<size_t> missing;
  StatCounts delta;
  for (size_t i = 0; i < n; ++i)
    if (!lookup(digests[i], &images[i], &where[i], &delta)) missing.push_back(i);
  std::unique_ptr<KeyLock> lock;
  if (!missing.empty() && ensure_local_dir()) {
    // The first missing kernel's lock stands for the set: processes making the same call wait
    // for one another; one making another call that shares a kernel may compile it again (the
    // same bytes, written atomically).
    const CacheKey& first = keys[missing[0]];
    lock = std::make_unique<KeyLock>(entries_dir(), digests[missing[0]], config_.lock_timeout_s);
    if (lock->waited()) ++lock_waits_;
    if (lock->state() == KeyLock::State::Acquired) {
      // Whoever held the lock, or finished just before we looked, has stored the entries.
      std::vector<size_t> still;
      for (size_t i : missing) {
        if (!load_local(digests[i], &images[i], &delta)) {
          still.push_back(i);
          continue;
        }
        ++hits_;
        remember(digests[i], images[i]);
        where[i] = "disk cache";
      }
      if (still.size() < missing.size())
        log_line(CC1D_LOG_INFO, "kernel {} loaded from the cache after waiting {} ms for another process to compile it",
                 first.name_expression, Fixed{lock->waited_ms(), 0});
      missing = still;
    } else if (lock->state() == KeyLock::State::TimedOut) {
      ++lock_timeouts_;
      log_line(CC1D_LOG_WARN,
               "another process has been compiling {} for {} s (CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT); "
               "compiling it here without waiting longer",
               first.name_expression, Fixed{lock->waited_ms() / 1000, 0});
    } else {
      log_line(CC1D_LOG_DEBUG, "compiling {} without the cross-process lock: {}", first.name_expression, lock->why());
    }
  }
  if (!missing.empty()) {
    misses_ += missing.size();
    delta[kLocal]["misses"] += missing.size();
    std::vector<CompiledImage> made = compile(missing);  // on a throw: nothing stored, the lock released
    if (made.size() != missing.size())
      fail(CC1D_ERR_INTERNAL, "the compiler returned " + std::to_string(made.size()) + " images for " +
                                  std::to_string(missing.size()) + " kernels");
    for (size_t j = 0; j < missing.size(); ++j) {
      const size_t i = missing[j];
      images[i] = std::move(made[j]);
      where[i] = "compiled";
      if (images[i].image.empty()) continue;
      remember(digests[i], images[i]);
      write_local(digests[i], encode_cache_entry(keys[i], images[i]), &delta);
    }
  }
  flush(delta);
  if (origins) *origins = std::move(where);
  return images;
}

CacheStats ImageCache::stats() const {
  CacheStats s;
  s.hits = hits_;
  s.memory_hits = memory_hits_;
  s.tier_hits = tier_hits_;
  s.misses = misses_;
  s.writes = writes_;
  s.errors = errors_;
  s.corrupt = corrupt_;
  s.evictions = evictions_;
  s.lock_waits = lock_waits_;
  s.lock_timeouts = lock_timeouts_;
  return s;
}

std::string ImageCache::report_json() {
  const CacheStats s = stats();
  auto n = [](uint64_t v) { return std::to_string(v); };
  std::string j = "{\"dir\": " + json_quote(config_.dir) + ", \"disk\": " + json_quote(state()) +
                  ", \"max_bytes\": " + n(config_.max_bytes) + ", \"hits\": " + n(s.hits) +
                  ", \"memory_hits\": " + n(s.memory_hits) + ", \"tier_hits\": " + n(s.tier_hits) +
                  ", \"misses\": " + n(s.misses) + ", \"writes\": " + n(s.writes) + ", \"errors\": " + n(s.errors) +
                  ", \"corrupt\": " + n(s.corrupt) + ", \"evictions\": " + n(s.evictions) +
                  ", \"lock_waits\": " + n(s.lock_waits) + ", \"lock_timeouts\": " + n(s.lock_timeouts) +
                  ", \"tiers\": [";
  for (size_t i = 0; i < tiers_.size(); ++i) {
    Tier& t = *tiers_[i];
    tier_usable(t);
    j += std::string(i ? ", " : "") + "{\"path\": " + json_quote(t.root) + ", \"problem\": " + json_quote(t.problem) +
         ", \"hits\": " + n(t.hits) + ", \"misses\": " + n(t.misses) + ", \"corrupt\": " + n(t.corrupt) + "}";
  }
  return j + "]}";
}

}  // namespace cc1d
