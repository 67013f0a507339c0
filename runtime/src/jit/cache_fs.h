// cache_fs.h — the file-system side of the kernel caches: the trust rule, directory creation,
// atomic writes, listing a directory of entries, temp files of killed writers, LRU eviction.
//
// Trust (whatever is in a cache becomes code on the GPU): a directory or entry is used only
// when owned by the effective user (or by root, for read-only tiers) and writable by no one
// else (no group or world write bit). The checksum only guards against damage.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace cc1d {

// "" when `st` passes the trust rule, else what is wrong, e.g. "is owned by uid 1234, not by
// you (uid 1000)" or "is writable by its group and others (mode 0777)".
std::string trust_problem(const struct stat& st, bool root_ok);

// The trust rule for a directory. Absent: no such directory (nor its parent); Unreadable: it
// cannot be examined, or is not a directory. *why says what is wrong (unless Ok).
enum class DirCheck { Ok, Absent, Unreadable, Untrusted };
DirCheck check_dir(const std::string& path, bool root_ok, std::string* why);

// mkdir -p; every directory it creates gets exactly `mode`, whatever the umask. false with
// errno set on failure.
bool make_dirs(const std::string& path, mode_t mode);

// The text of a small file beside the entries (dir/name) under the trust rule (the directory
// and the regular file, not followed if a symlink), or "" when it is absent, untrusted or over
// max_bytes.
std::string read_trusted_file(const std::string& dir, const std::string& name, bool root_ok, size_t max_bytes);

// s cut at each `sep` (n separators give n + 1 fields).
std::vector<std::string> split_fields(const std::string& s, char sep);

// Writes dir/name through a unique temp file in dir (".<name>.tmp.XXXXXX"), locked while it
// is written so a scan can tell a live writer from a killed one: mode, write, fsync and close
// are checked before the rename. Returns 0, or the errno of the step that failed (the temp
// file is removed).
int write_file_atomic(const std::string& dir, const std::string& name, const std::string& bytes, mode_t mode);

// A file of an entries directory: an entry (<digest>.cc1dbin) or a writer's temp file.
struct DirFile {
  std::string name, path;
  uint64_t size = 0;
  timespec mtime{};
  bool temp = false;
  std::string digest() const;  // the entry's key ("" for a temp file)
};

// Entries and temp files of `dir` (other files, such as the lock and stats files, are not
// listed). Empty when dir does not exist.
std::vector<DirFile> list_dir(const std::string& dir);

// A file in the cache's own directory (beside the entries directory) where a toolchain keeps
// what it learnt about its compilers: "<tool>-facts-v<N>" (nvrtc_memo.h). Not kernels, but
// `cache clear` removes them too, so that the next process asks the compilers again.
bool is_facts_file(const std::string& name);
// The paths of those in `dir`.
std::vector<std::string> facts_files(const std::string& dir);

// A temp file whose writer is gone (killed): nobody holds its lock, and it is older than a
// minute (a live writer locks it at creation and renames it right after closing it).
bool temp_abandoned(const DirFile& f, time_t now);

struct Eviction {
  uint64_t evicted = 0;        // entries removed
  uint64_t temps_removed = 0;  // abandoned temp files removed
  uint64_t bytes_before = 0, bytes_after = 0;  // entries and temp files together
};

// Removes abandoned temp files, then the least recently used entries (oldest mtime) until
// entries and live temp files together hold at most target(total), total being what they
// hold after the temp files went. Never removes the entry named `keep` (the one just written).
Eviction evict_lru(const std::string& dir, const std::function<uint64_t(uint64_t total)>& target,
                   const std::string& keep);

}  // namespace cc1d
