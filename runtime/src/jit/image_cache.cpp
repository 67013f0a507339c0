#include "jit/image_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "cc1d/cc1d.h"
#include "core/json.h"
#include "jit/hash.h"
#include "core/log.h"

namespace cc1d {

namespace {

constexpr char kMagic[8] = {'C', 'C', '1', 'D', 'K', 'R', 'N', '\0'};
constexpr uint32_t kFormat = 2;
constexpr size_t kHeaderSize = 64;  // magic 8 | format 4 | header size 4 | length 8 | sha256 32 | 0 8
constexpr const char* kSuffix = ".cc1dbin";
constexpr const char* kSubdir = "/kernels-v2";
constexpr time_t kStaleTempSeconds = 3600;  // temp files of killed writers

void put_u32(std::string& s, uint32_t v) { for (int i = 0; i < 4; ++i) s += (char)(v >> (8 * i)); }
void put_u64(std::string& s, uint64_t v) { for (int i = 0; i < 8; ++i) s += (char)(v >> (8 * i)); }
uint64_t get_uint(const std::string& s, size_t off, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= (uint64_t)(unsigned char)s[off + i] << (8 * i);
  return v;
}

bool make_dirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool read_file(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ::close(fd);
      return false;
    }
    if (r == 0) break;
    out->append(buf, (size_t)r);
  }
  ::close(fd);
  return true;
}

}  // namespace

std::string CacheKey::digest() const {
  Sha256 h;
  h.update_field("cc1d-kernel-cache");
  h.update_field(std::to_string(kFormat));
  h.update_field(sources_hash);
  h.update_field(name_expression);
  h.update_field(target);
  h.update_field(compiler);
  h.update_field(std::to_string(options.size()));
  for (const auto& o : options) h.update_field(o);
  h.update_field(std::to_string(abi));
  return h.hex_digest();
}

std::string encode_cache_entry(const std::string& digest, const CompiledImage& k) {
  std::string payload;
  put_u32(payload, (uint32_t)digest.size());
  payload += digest;
  put_u32(payload, (uint32_t)k.target.size());
  payload += k.target;
  put_u32(payload, (uint32_t)k.lowered_name.size());
  payload += k.lowered_name;
  put_u64(payload, k.image.size());
  payload += k.image;
  Sha256 h;
  h.update(payload);
  const auto sum = h.digest();
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kFormat);
  put_u32(out, (uint32_t)kHeaderSize);
  put_u64(out, payload.size());
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  put_u64(out, 0);
  return out + payload;
}

bool decode_cache_entry(const std::string& b, const std::string& digest, CompiledImage* out,
                        std::string* why) {
  auto bad = [&](const std::string& w) {
    if (why != nullptr) *why = w;
    return false;
  };
  if (b.size() < kHeaderSize) return bad("truncated header (" + std::to_string(b.size()) + " bytes)");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return bad("bad magic");
  if (get_uint(b, 8, 4) != kFormat) return bad("format version " + std::to_string(get_uint(b, 8, 4)));
  if (get_uint(b, 12, 4) != kHeaderSize) return bad("bad header size");
  const uint64_t len = get_uint(b, 16, 8);
  if (len != b.size() - kHeaderSize)
    return bad("payload length " + std::to_string(b.size() - kHeaderSize) + ", header says " + std::to_string(len));
  Sha256 h;
  h.update(b.data() + kHeaderSize, len);
  const auto sum = h.digest();
  if (std::memcmp(sum.data(), b.data() + 24, 32) != 0) return bad("checksum mismatch");
  // The payload is checksummed, so from here on only a foreign (well-formed) entry can fail.
  size_t off = kHeaderSize;
  auto need = [&](uint64_t n) { return off + n <= b.size(); };
  if (!need(4)) return bad("short payload");
  const uint64_t dlen = get_uint(b, off, 4);
  off += 4;
  if (!need(dlen) || b.compare(off, dlen, digest) != 0 || dlen != digest.size())
    return bad("entry belongs to another key");
  off += dlen;
  if (!need(4)) return bad("short payload");
  const uint64_t tlen = get_uint(b, off, 4);
  off += 4;
  if (!need(tlen + 4)) return bad("short payload");
  out->target = b.substr(off, tlen);
  off += tlen;
  const uint64_t nlen = get_uint(b, off, 4);
  off += 4;
  if (!need(nlen + 8)) return bad("short payload");
  out->lowered_name = b.substr(off, nlen);
  off += nlen;
  const uint64_t ilen = get_uint(b, off, 8);
  off += 8;
  if (ilen == 0 || off + ilen != b.size()) return bad("bad image length");
  out->image = b.substr(off, ilen);
  out->ms = 0;
  return true;
}

ImageCache::ImageCache(std::string dir, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  if (dir_.empty()) writable_ = false;
}

std::string ImageCache::default_dir() {
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_DIR");
  if (env != nullptr && *env != '\0') return std::string(env) == "off" ? "" : std::string(env);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/causal_conv1d";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* pw = getpwuid(getuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  return home != nullptr && *home != '\0' ? std::string(home) + "/.cache/causal_conv1d" : "";
}

uint64_t ImageCache::default_max_bytes() {
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_MAX_MB");
  if (env == nullptr || *env == '\0') return kDefaultCacheMaxBytes;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(env, &end, 10);
  if (end == env || *end != '\0') {
    warn_once("cache-max-mb", "CAUSAL_CONV1D_CACHE_MAX_MB='" + std::string(env) +
                                  "' is not a number of MB; using " + std::to_string(kDefaultCacheMaxBytes >> 20));
    return kDefaultCacheMaxBytes;
  }
  return mb << 20;
}

std::string ImageCache::entry_path(const CacheKey& key) const {
  return dir_.empty() ? "" : dir_ + kSubdir + "/" + key.digest() + kSuffix;
}

bool ImageCache::load(const CacheKey& key, CompiledImage* out) {
  const std::string digest = key.digest();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(digest);
    if (it != memory_.end()) {
      *out = it->second;
      ++hits_;
      ++memory_hits_;
      return true;
    }
  }
  if (!dir_.empty() && load_disk(digest, out)) {
    ++hits_;
    std::lock_guard<std::mutex> lock(mu_);
    memory_.emplace(digest, *out);
    return true;
  }
  ++misses_;
  return false;
}

bool ImageCache::load_disk(const std::string& digest, CompiledImage* out) {
  const std::string path = dir_ + kSubdir + "/" + digest + kSuffix;
  std::string bytes;
  if (!read_file(path, &bytes)) return false;  // absent: a plain miss
  std::string why;
  if (!decode_cache_entry(bytes, digest, out, &why)) {
    ++corrupt_;
    logger().warn("ignoring corrupt kernel cache entry {} ({}); it will be rebuilt", path, why);
    return false;
  }
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // LRU: a hit is a use (fails harmlessly if read-only)
  return true;
}

void ImageCache::store(const CacheKey& key, const CompiledImage& kernel) {
  if (kernel.image.empty()) return;  // never cache a failed/empty compile
  const std::string digest = key.digest();
  {
    std::lock_guard<std::mutex> lock(mu_);
    memory_[digest] = kernel;
  }
  if (!writable_.load()) return;
  if (write_disk(digest, kernel)) {
    ++writes_;
    evict_if_needed(digest);
  }
}

void ImageCache::disable_writes(const std::string& why) {
  ++errors_;
  if (writable_.exchange(false))
    logger().warn("kernel cache directory {} is not writable ({}); compiled kernels are kept in "
                  "memory only for this process. Set CAUSAL_CONV1D_CACHE_DIR to a writable "
                  "directory, or to 'off' to silence this",
                  dir_, why);
}

bool ImageCache::write_disk(const std::string& digest, const CompiledImage& kernel) {
  const std::string sub = dir_ + kSubdir;
  if (!make_dirs(sub)) {
    disable_writes("cannot create " + sub + ": " + std::strerror(errno));
    return false;
  }
  // A unique temp file in the same directory, so the rename is atomic and never crosses
  // file systems; a concurrent writer of the same key has its own temp file.
  std::string tmp = sub + "/." + digest + ".tmp.XXXXXX";
  const int fd = mkstemp(&tmp[0]);
  if (fd < 0) {
    disable_writes(std::string("cannot create a file there: ") + std::strerror(errno));
    return false;
  }
  const std::string bytes = encode_cache_entry(digest, kernel);
  bool ok = fchmod(fd, 0644) == 0 && write_all(fd, bytes.data(), bytes.size()) && fsync(fd) == 0;
  int saved = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  const std::string final_path = sub + "/" + digest + kSuffix;
  if (ok && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    disable_writes("writing " + final_path + ": " + std::strerror(saved));
  }
  return ok;
}

void ImageCache::evict_if_needed(const std::string& keep) {
  const std::string sub = dir_ + kSubdir;
  DIR* d = opendir(sub.c_str());
  if (d == nullptr) return;
  struct Entry {
    timespec mtime;
    uint64_t size;
    std::string path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = sub + "/" + name;
    struct stat st{};
    if (name == "." || name == ".." || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (name[0] == '.' && name.find(".tmp.") != std::string::npos) {
      if (now - st.st_mtime > kStaleTempSeconds) ::unlink(path.c_str());  // a killed writer's
      continue;
    }
    total += (uint64_t)st.st_size;
    if (name.compare(0, keep.size(), keep) != 0) entries.push_back({st.st_mtim, (uint64_t)st.st_size, path});
  }
  closedir(d);
  if (max_bytes_ == 0 || total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  // Down to 90% of the cap, so the next few writes do not each trigger a scan-and-delete.
  const uint64_t target = max_bytes_ / 10 * 9;
  for (const Entry& e : entries) {
    if (total <= target) break;
    if (::unlink(e.path.c_str()) == 0) {
      total -= e.size;
      ++evictions_;
    }
  }
}

CacheStats ImageCache::stats() const {
  CacheStats s;
  s.hits = hits_;
  s.memory_hits = memory_hits_;
  s.misses = misses_;
  s.writes = writes_;
  s.errors = errors_;
  s.corrupt = corrupt_;
  s.evictions = evictions_;
  return s;
}

std::string ImageCache::report_json() const {
  const CacheStats s = stats();
  return "{\"dir\": " + json_quote(dir_) + ", \"disk\": " +
         (dir_.empty() ? "\"off\"" : writable_.load() ? "\"read-write\"" : "\"read-only\"") +
         ", \"max_bytes\": " + std::to_string(max_bytes_) + ", \"hits\": " + std::to_string(s.hits) +
         ", \"memory_hits\": " + std::to_string(s.memory_hits) + ", \"misses\": " + std::to_string(s.misses) +
         ", \"writes\": " + std::to_string(s.writes) + ", \"errors\": " + std::to_string(s.errors) +
         ", \"corrupt\": " + std::to_string(s.corrupt) + ", \"evictions\": " + std::to_string(s.evictions) + "}";
}

}  // namespace cc1d
