#include "jit/cache_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "jit/cache_entry.h"

namespace cc1d {

namespace {

constexpr time_t kTempMinAgeSeconds = 60;
constexpr const char* kTempTag = ".tmp.";

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", (unsigned)(m & 07777));
  return buf;
}

}  // namespace

std::string trust_problem(const struct stat& st, bool root_ok) {
  const uid_t me = geteuid();
  if (st.st_uid != me && !(root_ok && st.st_uid == 0))
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) + ")" +
           (root_ok ? " or root" : "");
  const bool g = st.st_mode & S_IWGRP, o = st.st_mode & S_IWOTH;
  if (g || o)
    return std::string("is writable by ") + (g && o ? "its group and others" : g ? "its group" : "others") +
           " (mode " + octal_mode(st.st_mode) + ")";
  return "";
}

DirCheck check_dir(const std::string& path, bool root_ok, std::string* why) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    *why = err == ENOENT || err == ENOTDIR ? "does not exist" : std::string("cannot be examined: ") + std::strerror(err);
    return err == ENOENT || err == ENOTDIR ? DirCheck::Absent : DirCheck::Unreadable;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = "is not a directory";
    return DirCheck::Unreadable;
  }
  *why = trust_problem(st, root_ok);
  return why->empty() ? DirCheck::Ok : DirCheck::Untrusted;
}

bool make_dirs(const std::string& path, mode_t mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string cur = path.substr(0, i);
    if (mkdir(cur.c_str(), mode) == 0) chmod(cur.c_str(), mode);  // exactly `mode`, whatever the umask
    else if (errno != EEXIST) return false;
  }
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return false;
  }
  return true;
}

int write_file_atomic(const std::string& dir, const std::string& name, const std::string& bytes, mode_t mode) {
  // A unique temp file in the same directory, so the rename is atomic and never crosses file
  // systems; a concurrent writer of the same name has its own temp file.
  std::string tmp = dir + "/." + name + kTempTag + "XXXXXX";
  const int fd = mkstemp(&tmp[0]);
  if (fd < 0) return errno;
  struct flock lk{};
  lk.l_type = F_WRLCK;
  lk.l_whence = SEEK_SET;
  fcntl(fd, F_OFD_SETLK, &lk);  // best effort: without it, the one-minute age still protects us
  int err = 0;
  if (fchmod(fd, mode) != 0 || !write_all(fd, bytes.data(), bytes.size()) || fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) err = errno;
  if (err != 0) ::unlink(tmp.c_str());
  return err;
}

std::string DirFile::digest() const {
  return temp ? std::string() : name.substr(0, name.size() - std::strlen(kEntrySuffix));
}

std::vector<DirFile> list_dir(const std::string& dir) {
  std::vector<DirFile> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    DirFile f;
    f.name = e->d_name;
    f.temp = f.name[0] == '.' && f.name.find(kTempTag) != std::string::npos;
    if (!f.temp && (f.name[0] == '.' || !ends_with(f.name, kEntrySuffix))) continue;
    f.path = dir + "/" + f.name;
    struct stat st{};
    if (lstat(f.path.c_str(), &st) != 0) continue;  // removed meanwhile
    f.size = (uint64_t)st.st_size;
    f.mtime = st.st_mtim;
    out.push_back(std::move(f));
  }
  closedir(d);
  return out;
}

std::string read_trusted_file(const std::string& dir, const std::string& name, bool root_ok, size_t max_bytes) {
  std::string why, text;
  if (check_dir(dir, root_ok, &why) != DirCheck::Ok) return text;
  const int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return text;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && trust_problem(st, root_ok).empty() &&
      (size_t)st.st_size <= max_bytes) {
    text.resize((size_t)st.st_size);
    if (read(fd, text.data(), text.size()) != (ssize_t)text.size()) text.clear();
  }
  close(fd);
  return text;
}

std::vector<std::string> split_fields(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) out.push_back(s.substr(start, i - start)), start = i + 1;
  return out;
}

bool is_facts_file(const std::string& name) {
  const size_t at = name.rfind("-facts-v");
  if (at == 0 || at == std::string::npos || at + 8 == name.size() || name[0] == '.') return false;
  return name.find_first_not_of("0123456789", at + 8) == std::string::npos;
}

std::vector<std::string> facts_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (is_facts_file(e->d_name)) out.push_back(dir + "/" + e->d_name);
  closedir(d);
  return out;
}

bool temp_abandoned(const DirFile& f, time_t now) {
  if (!f.temp || now - f.mtime.tv_sec < kTempMinAgeSeconds) return false;
  const int fd = ::open(f.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno != ENOENT;  // unreadable: not ours to judge, but not a live writer's
  struct flock lk{};
  lk.l_type = F_RDLCK;
  lk.l_whence = SEEK_SET;
  const bool free_of_writers = fcntl(fd, F_OFD_SETLK, &lk) == 0;
  ::close(fd);
  return free_of_writers;
}

Eviction evict_lru(const std::string& dir, const std::function<uint64_t(uint64_t)>& target,
                   const std::string& keep) {
  Eviction ev;
  std::vector<DirFile> files = list_dir(dir);
  const time_t now = time(nullptr);
  std::vector<DirFile> entries;
  for (DirFile& f : files) {
    ev.bytes_before += f.size;
    if (f.temp) {
      if (temp_abandoned(f, now) && ::unlink(f.path.c_str()) == 0) ++ev.temps_removed;
      else ev.bytes_after += f.size;  // a live writer's: it counts toward the cap
      continue;
    }
    ev.bytes_after += f.size;
    if (f.name != keep) entries.push_back(std::move(f));
  }
  std::sort(entries.begin(), entries.end(), [](const DirFile& a, const DirFile& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  const uint64_t target_bytes = target(ev.bytes_after);
  for (const DirFile& e : entries) {
    if (ev.bytes_after <= target_bytes) break;
    if (::unlink(e.path.c_str()) == 0) {
      ev.bytes_after -= e.size;
      ++ev.evicted;
    }
  }
  return ev;
}

}  // namespace cc1d
