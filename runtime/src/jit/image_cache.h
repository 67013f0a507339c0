// image_cache.h — compiled kernel images (cubins, PTX, ...) cached in memory and on disk
// across processes. Vendor-neutral: an image is bytes plus the entry point's name.
//
// Integrity is modelled on ccache (prior-art §3): the key is a SHA-256 over every input that
// can change the binary; entries are written to a unique temp file in the same directory,
// checked through write/fsync/close, then renamed into place (readers never see a partial
// file, concurrent writers of one key all leave a valid entry); each entry carries a header
// with magic, format version, payload length and SHA-256, verified on load, so a corrupt or
// truncated entry is ignored (and overwritten by the next store). Failed compiles are never
// stored. An unwritable directory degrades to memory-only with one warning. Hits touch the
// mtime, and a size cap evicts the least recently used entries.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>


namespace cc1d {

// A compiled kernel as the cache and the toolchains exchange it.
struct CompiledImage {
  std::string image;         // e.g. cubin bytes, or NUL-terminated PTX text
  std::string lowered_name;  // the entry point's symbol in the image
  std::string target;        // e.g. "sm_90", "compute_90"
  double ms = 0;             // compile wall time (0 when loaded from a cache)
};

struct CacheKey {
  std::string sources_hash;     // KernelSources::hash
  std::string name_expression;  // e.g. "cc1d::causal_conv1d_fwd_kernel<float, float, 4, 0>"
  std::string target;           // "sm_90"
  std::string compiler;         // "NVRTC 13.0"
  std::vector<std::string> options;
  unsigned abi = 0;             // CC1D_ABI_VERSION
  std::string digest() const;   // 64 hex chars
};

struct CacheStats {
  uint64_t hits = 0, memory_hits = 0, misses = 0, writes = 0, errors = 0, corrupt = 0,
           evictions = 0;
};

constexpr uint64_t kDefaultCacheMaxBytes = 256ull << 20;  // CAUSAL_CONV1D_CACHE_MAX_MB's default

class ImageCache {
 public:
  // dir "" keeps entries in memory only. max_bytes 0 means no size cap.
  explicit ImageCache(std::string dir, uint64_t max_bytes = kDefaultCacheMaxBytes);

  // CAUSAL_CONV1D_CACHE_DIR, else $XDG_CACHE_HOME/causal_conv1d, else ~/.cache/causal_conv1d;
  // "" when the variable is "off" (or no home is known).
  static std::string default_dir();
  // CAUSAL_CONV1D_CACHE_MAX_MB (default 256; 0 = unlimited) in bytes.
  static uint64_t default_max_bytes();

  // True and fills *out on a hit (memory first, then disk).
  bool load(const CacheKey& key, CompiledImage* out);
  // Stores a successful compile. Never throws: disk problems are logged and counted.
  void store(const CacheKey& key, const CompiledImage& kernel);

  CacheStats stats() const;
  const std::string& dir() const { return dir_; }
  bool disk_writable() const { return writable_.load(); }
  // The file an entry of `key` lives in ("" when memory-only).
  std::string entry_path(const CacheKey& key) const;
  std::string report_json() const;

 private:
  bool load_disk(const std::string& digest, CompiledImage* out);
  bool write_disk(const std::string& digest, const CompiledImage& kernel);
  void evict_if_needed(const std::string& keep);
  void disable_writes(const std::string& why);

  std::string dir_;  // the versioned directory entries live in
  uint64_t max_bytes_;
  std::atomic<bool> writable_{true};
  mutable std::mutex mu_;
  std::map<std::string, CompiledImage> memory_;
  std::atomic<uint64_t> hits_{0}, memory_hits_{0}, misses_{0}, writes_{0}, errors_{0},
      corrupt_{0}, evictions_{0};
};

// Entry (de)serialisation, exposed for tests: encode -> bytes with header; decode verifies
// magic, version, length, checksum and that the entry belongs to `digest`.
std::string encode_cache_entry(const std::string& digest, const CompiledImage& kernel);
bool decode_cache_entry(const std::string& bytes, const std::string& digest, CompiledImage* out,
                        std::string* why);

}  // namespace cc1d
