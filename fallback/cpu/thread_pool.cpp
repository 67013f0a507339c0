// thread_pool.cpp — the persistent pool behind parallel_for.
//
// Concurrent callers do not wait for each other: each run() publishes its own RunState, the
// caller works on its own items, and idle workers take items from any run that has some left.
// Fork-safe: a child process forked while other threads are inside a call (DataLoader workers
// do it all the time) abandons the parent's pool, whose threads do not exist in the child, and
// builds a new one on first use (pthread_atfork).
#include "fallback/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cc1d {

namespace {

thread_local bool t_in_pool_task = false;

struct RunState {
  const std::function<void(int64_t)>* job = nullptr;
  int64_t count = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> pending{0};
  std::mutex mu;
  std::condition_variable done_cv;
  std::exception_ptr error;

  bool has_items() const { return next.load(std::memory_order_relaxed) < count; }

  void work() {
    const bool outer = t_in_pool_task;
    t_in_pool_task = true;
    for (int64_t i; (i = next.fetch_add(1)) < count;) {
      try {
        (*job)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (pending.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        done_cv.notify_all();
      }
    }
    t_in_pool_task = outer;
  }
};

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }

  // Runs job(i) for i in [0, count) on the workers and the caller.
  void run(int64_t count, const std::function<void(int64_t)>& job) {
    auto state = std::make_shared<RunState>();
    state->job = &job;
    state->count = count;
    state->pending = count;
    {
      std::lock_guard<std::mutex> lock(mu_);
      runs_.push_back(state);
    }
    cv_.notify_all();
    state->work();
    {
      std::lock_guard<std::mutex> lock(mu_);
      runs_.erase(std::remove(runs_.begin(), runs_.end(), state), runs_.end());
    }
    std::unique_lock<std::mutex> lock(state->mu);
    state->done_cv.wait(lock, [&] { return state->pending.load() == 0; });
    if (state->error) std::rethrow_exception(state->error);
  }

 private:
  // Under mu_: a run with items left (runs without any are dropped), or null.
  std::shared_ptr<RunState> pick() {
    runs_.erase(std::remove_if(runs_.begin(), runs_.end(), [](const auto& r) { return !r->has_items(); }),
                runs_.end());
    return runs_.empty() ? nullptr : runs_.front();
  }

  void loop() {
    for (;;) {
      std::shared_ptr<RunState> state;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return (state = pick()) != nullptr; });
      }
      state->work();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<RunState>> runs_;  // runs that may have items left
};

// The process's pool, created on first use. Leaked on purpose: joining threads from a static
// destructor at exit can deadlock, and a forked child abandons its copy (see below).
std::mutex g_pool_mu;
Pool* g_pool = nullptr;

void before_fork() { g_pool_mu.lock(); }
void after_fork_parent() { g_pool_mu.unlock(); }
void after_fork_child() {
  g_pool = nullptr;  // its threads exist only in the parent; its locks may be held by them
  g_pool_mu.unlock();
}

Pool& pool() {
  static const bool registered = (pthread_atfork(before_fork, after_fork_parent, after_fork_child), true);
  (void)registered;
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_pool == nullptr) g_pool = new Pool(num_threads() - 1);
  return *g_pool;
}

}  // namespace

int num_threads() {
  static const int n = [] {
    const char* v = std::getenv("CAUSAL_CONV1D_NUM_THREADS");
    int parsed = v ? std::atoi(v) : 0;
    if (parsed > 0) return std::min(parsed, 1024);
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = n / grain + (n % grain != 0);  // no n + grain overflow
  if (chunks == 1 || t_in_pool_task || num_threads() == 1) {
    fn(0, n);
    return;
  }
  pool().run(chunks, [&](int64_t c) { fn(c * grain, c + 1 == chunks ? n : (c + 1) * grain); });
}

}  // namespace cc1d
