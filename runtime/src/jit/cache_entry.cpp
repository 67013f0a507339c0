#include "jit/cache_entry.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "jit/cache_fs.h"
#include "jit/hash.h"

namespace cc1d {

namespace {

constexpr char kMagic[8] = {'C', 'C', '1', 'D', 'K', 'R', 'N', '\0'};
constexpr uint32_t kFormat = 3;
// Header: magic 8 | format 4 | header size 4 | payload length 8 | sha256 32 | reserved 8 (zero).
constexpr size_t kLengthAt = 16, kSumAt = 24, kReservedAt = 56;

void put_u32(std::string& s, uint32_t v) { for (int i = 0; i < 4; ++i) s += (char)(v >> (8 * i)); }
void put_u64(std::string& s, uint64_t v) { for (int i = 0; i < 8; ++i) s += (char)(v >> (8 * i)); }
void put_str(std::string& s, const std::string& v) {
  put_u32(s, (uint32_t)v.size());
  s += v;
}
uint64_t get_uint(const std::string& s, size_t off, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= (uint64_t)(unsigned char)s[off + i] << (8 * i);
  return v;
}

// Reads the payload's length-prefixed fields in order; any overrun fails.
struct Reader {
  const std::string& b;
  size_t off;
  bool ok = true;
  uint64_t take_uint(int n) {
    if (!ok || off + n > b.size()) return ok = false, 0;
    const uint64_t v = get_uint(b, off, n);
    off += n;
    return v;
  }
  std::string take(uint64_t n) {
    if (!ok || n > b.size() - off) return ok = false, std::string();
    std::string s = b.substr(off, n);
    off += n;
    return s;
  }
  std::string take_str() { return take(take_uint(4)); }
};

bool read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
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

std::string encode_cache_entry(const CacheKey& key, const CompiledImage& k) {
  std::string payload;
  put_str(payload, key.digest());
  put_str(payload, key.compiler);
  put_str(payload, key.name_expression);
  put_str(payload, k.target);
  put_str(payload, k.lowered_name);
  put_u64(payload, k.image.size());
  payload += k.image;
  Sha256 h;
  h.update(payload);
  const auto sum = h.digest();
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kFormat);
  put_u32(out, (uint32_t)kEntryHeaderBytes);
  put_u64(out, payload.size());
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  put_u64(out, 0);
  return out + payload;
}

bool decode_cache_entry(const std::string& b, const std::string& digest, CompiledImage* out, std::string* why,
                        EntryMeta* meta) {
  auto bad = [&](const std::string& w) {
    if (why != nullptr) *why = w;
    return false;
  };
  if (b.size() < kEntryHeaderBytes) return bad("truncated header (" + std::to_string(b.size()) + " bytes)");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return bad("bad magic");
  if (get_uint(b, 8, 4) != kFormat) return bad("format version " + std::to_string(get_uint(b, 8, 4)));
  if (get_uint(b, 12, 4) != kEntryHeaderBytes) return bad("bad header size");
  if (get_uint(b, kReservedAt, 8) != 0) return bad("reserved header bytes 56..63 are not zero");
  const uint64_t len = get_uint(b, kLengthAt, 8);
  if (len != b.size() - kEntryHeaderBytes)
    return bad("payload length " + std::to_string(b.size() - kEntryHeaderBytes) + ", header says " +
               std::to_string(len));
  Sha256 h;
  h.update(b.data() + kEntryHeaderBytes, len);
  const auto sum = h.digest();
  if (std::memcmp(sum.data(), b.data() + kSumAt, 32) != 0) return bad("checksum mismatch");
  // The payload is checksummed, so from here on only a foreign (well-formed) entry can fail.
  Reader r{b, kEntryHeaderBytes};
  EntryMeta m;
  m.digest = r.take_str();
  m.compiler = r.take_str();
  m.name_expression = r.take_str();
  m.target = r.take_str();
  m.lowered_name = r.take_str();
  m.image_bytes = r.take_uint(8);
  if (!r.ok) return bad("short payload");
  if (m.digest != digest) return bad("entry belongs to another key");
  if (m.image_bytes == 0 || m.image_bytes != b.size() - r.off) return bad("bad image length");
  out->image = b.substr(r.off);
  out->lowered_name = m.lowered_name;
  out->target = m.target;
  out->ms = 0;
  if (meta != nullptr) *meta = std::move(m);
  return true;
}

ReadResult read_entry_file(const std::string& path, bool root_ok, std::string* bytes, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return ReadResult::Absent;
    *why = std::string("cannot open: ") + std::strerror(errno);
    return ReadResult::Bad;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    *why = std::string("cannot stat: ") + std::strerror(errno);
    return ReadResult::Bad;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file (a FIFO, device or directory)";
    return ReadResult::Bad;
  }
  const std::string untrusted = trust_problem(st, root_ok);
  if (!untrusted.empty()) {
    *why = "untrusted: it " + untrusted;
    return ReadResult::Bad;
  }
  std::string header(kEntryHeaderBytes, '\0');
  if ((uint64_t)st.st_size < kEntryHeaderBytes || !read_exact(fd, &header[0], header.size())) {
    *why = "truncated header (" + std::to_string((long long)st.st_size) + " bytes)";
    return ReadResult::Bad;
  }
  const uint64_t len = get_uint(header, kLengthAt, 8);
  if (len > kMaxEntryBytes) {
    *why = "the header's payload length " + std::to_string(len) + " exceeds the limit of " +
           std::to_string(kMaxEntryBytes) + " bytes";
    return ReadResult::Bad;
  }
  if (len != (uint64_t)st.st_size - kEntryHeaderBytes) {
    *why = "file size " + std::to_string((long long)st.st_size) + " does not match the header's payload length " +
           std::to_string(len);
    return ReadResult::Bad;
  }
  *bytes = std::move(header);
  bytes->resize(kEntryHeaderBytes + len);
  char extra;
  if (!read_exact(fd, &(*bytes)[kEntryHeaderBytes], len) || ::read(fd, &extra, 1) != 0) {
    *why = "the file changed size while being read";
    return ReadResult::Bad;
  }
  return ReadResult::Ok;
}

}  // namespace cc1d
