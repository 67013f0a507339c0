#include "nvrtc/nvrtc_memo.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "jit/cache_fs.h"
#include "jit/hash.h"
#include "platform/dynlib.h"

namespace cc1d {

namespace {

constexpr const char* kHeader = "cc1d nvrtc facts 1";
constexpr size_t kMaxFileBytes = 256 << 10;

// What changes when the file is edited or replaced: "" when it cannot be examined.
std::string identity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

// What decides where dlopen(soname) lands, hashed.
std::string loader_context() {
  Sha256 h;
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  h.update_field(ld != nullptr ? ld : "");
  h.update_field(identity("/etc/ld.so.cache"));
  const std::string exe = real_path("/proc/self/exe");
  h.update_field(exe);
  h.update_field(identity(exe));
  h.update_field(self_library_dir());
  return h.hex_digest();
}

bool plain(const std::string& s) { return s.find_first_of("\t\n") == std::string::npos; }

bool parse_int(const std::string& s, int* v) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *v = std::atoi(s.c_str());
  return true;
}

// "13.0\t75,80,90" <-> the facts' version and archs.
std::string facts_value(const NvrtcFacts& f) {
  std::string archs;
  for (size_t i = 0; i < f.archs.size(); ++i) archs += (i ? "," : "") + std::to_string(f.archs[i]);
  return std::to_string(f.major) + "." + std::to_string(f.minor) + "\t" + archs;
}

bool parse_facts(const std::string& value, NvrtcFacts* f) {
  const std::vector<std::string> v = split_fields(value, '\t');
  if (v.size() != 2) return false;
  const std::vector<std::string> ver = split_fields(v[0], '.');
  if (ver.size() != 2 || !parse_int(ver[0], &f->major) || !parse_int(ver[1], &f->minor)) return false;
  f->archs.clear();
  for (const std::string& a : split_fields(v[1], ',')) {
    int sm = 0;
    if (!parse_int(a, &sm)) return false;
    f->archs.push_back(sm);
  }
  return true;
}

}  // namespace

NvrtcMemo::NvrtcMemo(std::string dir) : dir_(std::move(dir)), file_(dir_.empty() ? "" : dir_ + "/" + kFileName) {}

bool NvrtcMemo::lookup(const std::string& key, std::string* value) {
  if (!read_) {
    read_ = true;
    if (file_.empty()) return false;
    std::vector<std::string> lines = split_fields(read_trusted_file(dir_, kFileName, false, kMaxFileBytes), '\n');
    if (lines.empty() || lines[0] != kHeader) lines.clear();  // another format, or damaged: ignored
    for (size_t i = 1; i < lines.size(); ++i) {
      const std::vector<std::string> f = split_fields(lines[i], '\t');
      const size_t fields = f.empty() ? 0 : f[0] == "F" ? 5 : f[0] == "S" ? 4 : 0;
      if (fields == 0 || f.size() != fields) continue;
      std::string k = f[0] + "\t" + f[1] + "\t" + f[2], v = f[3];
      for (size_t j = 4; j < fields; ++j) v += "\t" + f[j];
      entries_[k] = v;
    }
  }
  const auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  used_.insert(key);
  *value = it->second;
  return true;
}

void NvrtcMemo::put(const std::string& key, const std::string& value) {
  if (file_.empty()) return;
  std::string old;
  if (lookup(key, &old) && old == value) return;
  entries_[key] = value;
  used_.insert(key);
  dirty_ = true;
}

bool NvrtcMemo::facts(const std::string& path, NvrtcFacts* out) {
  const std::string id = identity(path);
  std::string value;
  return !id.empty() && lookup("F\t" + path + "\t" + id, &value) && parse_facts(value, out);
}

void NvrtcMemo::remember(const std::string& path, const NvrtcFacts& facts) {
  const std::string id = identity(path);
  if (!id.empty() && plain(path) && facts.load_error.empty()) put("F\t" + path + "\t" + id, facts_value(facts));
}

const std::string& NvrtcMemo::context() {
  if (context_.empty()) context_ = loader_context();
  return context_;
}

bool NvrtcMemo::resolved(const std::string& soname, std::string* path) {
  std::string file;
  if (!lookup("S\t" + soname + "\t" + context(), &file) || access(file.c_str(), F_OK) != 0) return false;
  *path = file;
  return true;
}

void NvrtcMemo::remember_resolution(const std::string& soname, const std::string& path) {
  if (plain(soname) && plain(path) && path.find('/') != std::string::npos)
    put("S\t" + soname + "\t" + context(), path);
}

void NvrtcMemo::save() {
  if (!dirty_) return;
  dirty_ = false;
  // Keep what another environment of this user remembered, while its files are there.
  for (auto it = entries_.begin(); it != entries_.end();) {
    const std::vector<std::string> k = split_fields(it->first, '\t');
    const bool live = used_.count(it->first) != 0 ||
                      (k[0] == "F" ? identity(k[1]) == k[2] : access(it->second.c_str(), F_OK) == 0);
    it = live ? std::next(it) : entries_.erase(it);
  }
  for (auto it = entries_.begin(); it != entries_.end() && entries_.size() > kMaxEntries;)
    it = used_.count(it->first) != 0 ? std::next(it) : entries_.erase(it);
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [k, v] : entries_) text += k + "\t" + v + "\n";
  std::string why;
  if (!make_dirs(dir_, 0700) || check_dir(dir_, false, &why) != DirCheck::Ok) {
    log_line(CC1D_LOG_DEBUG, "NVRTC facts not kept: {} {}", dir_, why.empty() ? std::strerror(errno) : why);
    return;
  }
  if (const int err = write_file_atomic(dir_, kFileName, text, 0600); err != 0)
    log_line(CC1D_LOG_DEBUG, "NVRTC facts not kept in {}: {}", file_, std::strerror(err));
}

}  // namespace cc1d
