// cache_lock.h — compile once across processes: a per-key lock that the first process to miss
// takes while it compiles and stores; the others wait for it, then load its entry.
//
// The lock is an open-file-description (OFD) lock on one byte of <entries dir>/compile.lock,
// the byte chosen by the key's digest, so every key has its own lock in one file that is
// never unlinked (no race between unlinking and waiting, no file per key to clean up). The
// kernel drops the lock of a process that dies, so a killed compiler never blocks anyone; a
// holder that hangs (a stopped process, a stale NFS lock) is bypassed after a timeout: the
// waiter then compiles without the lock (the atomic rename keeps the entry whole either way).
// OFD locks also exclude threads of one process that open the file separately.
#pragma once
#include <string>

namespace cc1d {

class KeyLock {
 public:
  enum class State {
    Acquired,     // we hold it until destruction
    TimedOut,     // another holder kept it past the timeout: go on without it
    Unavailable,  // the lock file cannot be opened or locked here (why()): go on without it
  };
  // Waits up to timeout_s (polling, every 2..50 ms) for the lock of `digest` in `dir`.
  KeyLock(const std::string& dir, const std::string& digest, double timeout_s);
  ~KeyLock();
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

  State state() const { return state_; }
  bool waited() const { return waited_; }  // it was held by someone else at first
  double waited_ms() const { return waited_ms_; }
  const std::string& why() const { return why_; }

 private:
  int fd_ = -1;
  State state_ = State::Unavailable;
  bool waited_ = false;
  double waited_ms_ = 0;
  std::string why_;
};

constexpr double kDefaultLockTimeoutS = 60;

// CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT in seconds (default kDefaultLockTimeoutS; a bad value: the
// default and one warning).
double default_lock_timeout_s();

}  // namespace cc1d
