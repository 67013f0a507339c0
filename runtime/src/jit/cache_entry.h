// cache_entry.h — one compiled kernel image as the caches hold it: the key, the entry's bytes
// (header + payload), and the one safe way to read an entry file.
//
// An entry is a header (magic, format, header size, payload length, SHA-256 of the payload,
// 8 reserved zero bytes: every byte is checked) and a payload naming its own key (digest,
// compiler, name expression, target), the lowered name and the image. Integrity is modelled on
// ccache (prior-art §3); the checksum guards against damage, not against a writer: who may write
// a directory is the trust rule's business (cache_fs.h).
#pragma once
#include <cstdint>
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

// What an entry says about itself (for `cache list`).
struct EntryMeta {
  std::string digest, compiler, name_expression, target, lowered_name;
  uint64_t image_bytes = 0;
};

constexpr const char* kEntriesSubdir = "kernels-v3";  // <cache dir>/kernels-v3/<digest>.cc1dbin
constexpr const char* kEntrySuffix = ".cc1dbin";
constexpr size_t kEntryHeaderBytes = 64;
constexpr uint64_t kMaxEntryBytes = 1ull << 30;  // larger is never a kernel: refused unread

// Serialises an entry for `key`; decode verifies every header byte, the checksum, and that the
// entry belongs to `digest`. `meta` (optional) receives what the entry says about itself.
std::string encode_cache_entry(const CacheKey& key, const CompiledImage& kernel);
bool decode_cache_entry(const std::string& bytes, const std::string& digest, CompiledImage* out,
                        std::string* why, EntryMeta* meta = nullptr);

enum class ReadResult { Ok, Absent, Bad };

// Reads the entry file at `path` without ever blocking or reading without bound: opened
// O_NONBLOCK (a FIFO cannot hang us), it must be a regular file (not /dev/zero through a
// symlink) owned by the effective user (or root, when root_ok: a read-only tier) and writable
// by no one else, whose size is exactly what its header says (at most kMaxEntryBytes).
// Absent: no such file. Bad: *why says what is wrong.
ReadResult read_entry_file(const std::string& path, bool root_ok, std::string* bytes, std::string* why);

}  // namespace cc1d
