#include "jit/cache_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/log.h"

namespace cc1d {

namespace {

constexpr size_t kMaxStatsBytes = 1 << 20;  // a runaway file is ignored, not read whole

std::string path_of(const std::string& dir) { return dir + "/stats"; }

// Plain string scanning, no iostreams: their first use costs a process ~0.1 ms of locale setup,
// on the path of its first kernel.
StatCounts parse(const std::string& text) {
  StatCounts c;
  for (size_t start = 0, stop; start < text.size(); start = stop + 1) {
    stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    const std::string line = text.substr(start, stop - start);
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos || a == 0 || b == a + 1) continue;
    const std::string v = line.substr(b + 1);
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) continue;
    c[line.substr(0, a)][line.substr(a + 1, b - a - 1)] += std::strtoull(v.c_str(), nullptr, 10);
  }
  return c;
}

std::string read_fd(int fd) {
  std::string s;
  char buf[4096];
  for (off_t off = 0; s.size() < kMaxStatsBytes;) {
    const ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    s.append(buf, (size_t)r);
    off += r;
  }
  return s;
}

// The whole file, locked; gives up after a second rather than stall a kernel launch on it.
bool lock_file(int fd, short type) {
  struct flock lk{};
  lk.l_type = type;
  lk.l_whence = SEEK_SET;
  for (int i = 0; i < 200; ++i) {
    if (fcntl(fd, F_OFD_SETLK, &lk) == 0) return true;
    if (errno != EAGAIN && errno != EACCES) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

void add_persistent_stats(const std::string& dir, const StatCounts& delta) {
  const std::string path = path_of(dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) {
    log_line(CC1D_LOG_DEBUG, "kernel cache stats not updated: cannot open {}", path);
    return;
  }
  if (lock_file(fd, F_WRLCK)) {
    const std::string old = read_fd(fd);
    StatCounts c = parse(old);
    for (const auto& scope : delta)
      for (const auto& kv : scope.second) c[scope.first][kv.first] += kv.second;
    std::string text;
    for (const auto& scope : c)
      for (const auto& kv : scope.second) text += scope.first + "\t" + kv.first + "\t" + std::to_string(kv.second) + "\n";
    // One write: a killed process leaves the old or the new text. Counts only grow, so the new
    // text is shorter than the old only when a damaged line was dropped: only then truncate.
    if (pwrite(fd, text.data(), text.size(), 0) != (ssize_t)text.size() ||
        (text.size() < old.size() && ftruncate(fd, (off_t)text.size()) != 0))
      log_line(CC1D_LOG_DEBUG, "kernel cache stats not updated: writing {} failed", path);
  } else {
    log_line(CC1D_LOG_DEBUG, "kernel cache stats not updated: {} stayed locked", path);
  }
  ::close(fd);
}

StatCounts read_persistent_stats(const std::string& dir) {
  const int fd = ::open(path_of(dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return {};
  StatCounts c = lock_file(fd, F_RDLCK) ? parse(read_fd(fd)) : StatCounts{};
  ::close(fd);
  return c;
}

}  // namespace cc1d
