// nvrtc_memo.h — what discovery learnt about each libnvrtc file, kept on disk, so that a process
// whose kernels all come from a cache or the shipped PTX tier never loads NVRTC at all.
//
// Why: discovery asks each candidate for its version and SMs, and the choice of NVRTC (and so
// every cache key) depends on the answers. Asking means dlopen()ing a library of about 100 MB:
// 4-6 ms with a warm page cache, 26-84 ms from a cold one, in every process, for nothing when no
// kernel is compiled. With the memo a candidate whose file is unchanged is not loaded until a
// kernel has to be compiled with it.
//
// A file's facts are keyed by its real path and identity (device, inode, size, mtime and ctime
// to the nanosecond): an edited or replaced file has a new identity, so the memo never answers for
// a file it has not probed. A soname's resolution by the loader is keyed by what decides it: the
// soname, LD_LIBRARY_PATH, /etc/ld.so.cache's identity, the executable and libcc1d; not when a
// library of that soname was in the process before discovery (torch's), since dlopen() then
// returns it whatever the search would find. Only libraries that loaded with every entry point
// are remembered; a failure is asked again.
//
// The memo is one small text file in the kernel cache's directory (CAUSAL_CONV1D_CACHE_DIR), under
// the same trust rule (cache_fs.h), replaced atomically. With the cache off nothing is kept.
// Entries of files that are gone are dropped when it is next written; at most kMaxEntries stay.
#pragma once
#include <map>
#include <set>
#include <string>

#include "nvrtc/nvrtc_choice.h"

namespace cc1d {

class NvrtcMemo {
 public:
  static constexpr const char* kFileName = "nvrtc-facts-v1";
  static constexpr size_t kMaxEntries = 64;

  // The memo in directory `dir` ("" = none: every lookup misses, nothing is written). Not
  // thread-safe: discovery uses it once, on one thread.
  explicit NvrtcMemo(std::string dir);

  // The remembered facts of the file at `path` (its version and archs) when its identity is
  // unchanged; path and origin are the caller's to fill.
  bool facts(const std::string& path, NvrtcFacts* out);
  void remember(const std::string& path, const NvrtcFacts& facts);
  // The file the loader found for `soname` in this process's context.
  bool resolved(const std::string& soname, std::string* path);
  void remember_resolution(const std::string& soname, const std::string& path);
  // Writes the memo when something was remembered. Never throws; a failure is logged (debug).
  void save();

  const std::string& path() const { return file_; }

 private:
  bool lookup(const std::string& key, std::string* value);
  const std::string& context();  // loader_context(), made once
  void put(const std::string& key, const std::string& value);
  std::string dir_, file_, context_;
  bool read_ = false, dirty_ = false;
  std::map<std::string, std::string> entries_;  // key -> value: one line "key\tvalue" each
  std::set<std::string> used_;                  // keys looked up or remembered by this process
};

}  // namespace cc1d
