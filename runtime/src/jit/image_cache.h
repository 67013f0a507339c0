// image_cache.h — compiled kernel images cached in memory, in a local directory shared by the
// processes of a machine, and in read-only tiers (an image layer, an NFS mount, a bucket).
// Vendor-neutral: an image is bytes plus the entry point's name.
//
// Lookup order: memory, the local cache, then each tier of CAUSAL_CONV1D_CACHE_PATH. A tier hit
// is verified like any entry and copied into the local cache; a bad tier entry is skipped and
// reported, never deleted. get_or_compile() is the compile-once path: on a miss it takes the
// key's cross-process lock (cache_lock.h), looks again, and only then compiles and stores, so
// N processes starting together on a cold cache compile each kernel once. get_or_compile_all()
// does the same for the kernels one call needs, compiled in one program.
//
// Local writes go through a locked temp file, fsync and rename (cache_fs.h): readers never see
// a partial entry. Failed compiles are never stored. A size cap evicts the least recently used
// entries (hits touch the mtime). Nothing here throws for a disk problem: the cache degrades
// (memory only) and says why once. The directory state is reported truly: "off", "untrusted"
// (fails the trust rule of cache_fs.h), "unavailable" (cannot be created), "read-only", "full"
// (the last write found no space, even after evicting; the next store retries) or "read-write".
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/cache_entry.h"
#include "jit/cache_lock.h"
#include "jit/cache_stats.h"

namespace cc1d {

constexpr uint64_t kDefaultCacheMaxBytes = 256ull << 20;  // CAUSAL_CONV1D_CACHE_MAX_MB's default

struct CacheConfig {
  std::string dir;                     // the local cache ("" = memory only); entries in dir/kernels-v3
  uint64_t max_bytes = kDefaultCacheMaxBytes;  // 0 = no cap
  std::vector<std::string> tiers;      // read-only, searched in order after the local cache
  bool shared = false;                 // dirs 0755 and entries 0644 (precompile's output), else 0700/0600
  bool persist_stats = true;           // keep counters in dir/kernels-v3/stats
  double lock_timeout_s = kDefaultLockTimeoutS;

  // CAUSAL_CONV1D_CACHE_DIR (or $XDG_CACHE_HOME/causal-conv1d/kernels, ~/.cache/...; "" when
  // "off" or no home is known), CAUSAL_CONV1D_CACHE_MAX_MB, CAUSAL_CONV1D_CACHE_PATH and
  // CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT.
  static CacheConfig from_env();
  static std::string default_dir();
  // CAUSAL_CONV1D_CACHE_MAX_MB in bytes: digits only, at most 2^44-1 MiB (so the bytes fit in
  // 64 bits); anything else is rejected with one warning and the default is used.
  static uint64_t default_max_bytes();
  static std::vector<std::string> default_tiers();  // CAUSAL_CONV1D_CACHE_PATH, ':'-separated
};

struct CacheStats {
  uint64_t hits = 0, memory_hits = 0, tier_hits = 0, misses = 0, writes = 0, errors = 0, corrupt = 0,
           evictions = 0, lock_waits = 0, lock_timeouts = 0;
};

class ImageCache {
 public:
  explicit ImageCache(CacheConfig config);
  // A local cache at `dir` with the defaults otherwise (no tiers): tests and tools.
  explicit ImageCache(std::string dir, uint64_t max_bytes = kDefaultCacheMaxBytes);
  ~ImageCache();

  // True and fills *out on a hit (memory, local, then tiers). *origin (optional): "memory
  // cache", "disk cache" or "tier <path>". count_miss false: a look before another key's
  // lookup, whose miss that lookup counts (in the local cache and the tiers alike).
  bool load(const CacheKey& key, CompiledImage* out, std::string* origin = nullptr, bool count_miss = true);
  // Stores a successful compile (memory, and the local directory when writable). Never throws.
  void store(const CacheKey& key, const CompiledImage& kernel);
  // A hit, or else the result of `compile`, called at most once across the processes sharing
  // the local cache (unless the lock is unavailable or times out). compile's exceptions
  // propagate and nothing is stored. *origin as for load, or "compiled".
  CompiledImage get_or_compile(const CacheKey& key, const std::function<CompiledImage()>& compile,
                               std::string* origin = nullptr);
  // The same for the kernels of one call, compiled together: `compile` receives the indices
  // (into keys) of those no cache holds and returns their images in that order (one compiler
  // program: each image holds them all). The set takes the lock of its first missing kernel.
  // Returns every image in the order of keys; *origins (optional) as for get_or_compile.
  using CompileMissing = std::function<std::vector<CompiledImage>(const std::vector<size_t>& missing)>;
  std::vector<CompiledImage> get_or_compile_all(const std::vector<CacheKey>& keys, const CompileMissing& compile,
                                                std::vector<std::string>* origins = nullptr);

  CacheStats stats() const;
  const std::string& dir() const { return config_.dir; }
  std::string entries_dir() const;  // dir/kernels-v3 ("" when memory-only)
  std::string state();              // "off", "untrusted", "unavailable", "read-only", "full", "read-write"
  std::string problem() const;      // why the state is untrusted or unavailable ("" otherwise)
  // "" when tier i (of CacheConfig::tiers) is usable, else why not ("<dir> does not exist", ...).
  std::string tier_problem(size_t i);
  // The file an entry of `key` lives in ("" when memory-only).
  std::string entry_path(const CacheKey& key) const;
  std::string report_json();

 private:
  struct Tier;
  enum class Disk { Off, Untrusted, Unavailable, ReadOnly, Full, ReadWrite };

  void open_local();
  void untrusted(const std::string& dir, const std::string& why);
  void unavailable(const std::string& why);
  bool ensure_local_dir();
  bool tier_usable(Tier& tier);
  bool local_readable();
  // count_miss false: a tier that does not hold it counts no miss (load's look before another key).
  bool lookup(const std::string& digest, CompiledImage* out, std::string* origin, StatCounts* delta,
              bool count_miss = true);
  bool load_local(const std::string& digest, CompiledImage* out, StatCounts* delta);
  bool load_tier(Tier& tier, const std::string& digest, CompiledImage* out, StatCounts* delta, bool count_miss);
  void remember(const std::string& digest, const CompiledImage& image);
  // Writes an entry's bytes into the local cache: retried after eviction on a full disk, then
  // the size cap enforced.
  void write_local(const std::string& digest, const std::string& bytes, StatCounts* delta);
  void write_failed(int err, const std::string& path);
  void flush(const StatCounts& delta);
  Disk disk();

  CacheConfig config_;
  std::once_flag open_once_;
  std::atomic<Disk> disk_{Disk::Off};
  std::vector<std::unique_ptr<Tier>> tiers_;
  mutable std::mutex mu_;
  std::map<std::string, CompiledImage> memory_;
  std::string problem_;
  std::atomic<uint64_t> hits_{0}, memory_hits_{0}, tier_hits_{0}, misses_{0}, writes_{0}, errors_{0}, corrupt_{0},
      evictions_{0}, lock_waits_{0}, lock_timeouts_{0};
};

}  // namespace cc1d
