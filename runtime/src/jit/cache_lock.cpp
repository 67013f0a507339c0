#include "jit/cache_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/log.h"

namespace cc1d {

namespace {

// The key's byte in compile.lock: 60 bits of its digest (offset 0 is never used).
off_t lock_offset(const std::string& digest) {
  uint64_t v = 0;
  for (size_t i = 0; i < 15 && i < digest.size(); ++i) {
    const char c = digest[i];  // lower-case hex
    v = v * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return (off_t)(v + 1);
}

int try_lock(int fd, off_t at, short type) {
  struct flock lk{};
  lk.l_type = type;
  lk.l_whence = SEEK_SET;
  lk.l_start = at;
  lk.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lk) == 0 ? 0 : errno;
}

}  // namespace

KeyLock::KeyLock(const std::string& dir, const std::string& digest, double timeout_s) {
  const std::string path = dir + "/compile.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) {
    why_ = "cannot open " + path + ": " + std::strerror(errno);
    return;
  }
  const off_t at = lock_offset(digest);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  double pause_ms = 2;
  for (;;) {
    const int err = try_lock(fd_, at, F_WRLCK);
    if (err == 0) {
      state_ = State::Acquired;
      break;
    }
    if (err != EAGAIN && err != EACCES) {
      why_ = "cannot lock " + path + ": " + std::strerror(err);
      break;
    }
    waited_ = true;
    if (elapsed_s() >= timeout_s) {
      state_ = State::TimedOut;
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms));
    pause_ms = std::min(pause_ms * 1.5, 50.0);
  }
  waited_ms_ = elapsed_s() * 1000;
  if (state_ != State::Acquired) {
    ::close(fd_);
    fd_ = -1;
  }
}

KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the OFD releases its locks
}

double default_lock_timeout_s() {
  const char* env = std::getenv("CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT");
  if (env == nullptr || *env == '\0') return kDefaultLockTimeoutS;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(env, &end);
  if (end == env || *end != '\0' || errno != 0 || !std::isfinite(s) || s < 0) {
    warn_once("cache-lock-timeout:" + std::string(env), "CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT='" + std::string(env) +
                                        "' is not a number of seconds >= 0; using " +
                                        std::to_string((int)kDefaultLockTimeoutS));
    return kDefaultLockTimeoutS;
  }
  return s;
}

}  // namespace cc1d
