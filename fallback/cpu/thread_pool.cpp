#include "fallback/cpu/thread_pool.h"

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

// Each run() publishes its own state; a worker that wakes late holds the state of a finished
// run, finds no items left in it, and goes back to sleep.
struct RunState {
  const std::function<void(int64_t)>* job = nullptr;
  int64_t count = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> pending{0};
  std::mutex mu;
  std::condition_variable done_cv;
  std::exception_ptr error;

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
  int workers() const { return static_cast<int>(threads_.size()); }

  // Runs job(i) for i in [0, count) on the workers and the caller.
  void run(int64_t count, const std::function<void(int64_t)>& job) {
    std::lock_guard<std::mutex> one_at_a_time(run_mu_);
    auto state = std::make_shared<RunState>();
    state->job = &job;
    state->count = count;
    state->pending = count;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = state;
      ++generation_;
    }
    cv_.notify_all();
    state->work();
    std::unique_lock<std::mutex> lock(state->mu);
    state->done_cv.wait(lock, [&] { return state->pending.load() == 0; });
    if (state->error) std::rethrow_exception(state->error);
  }

 private:
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<RunState> state;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        state = current_;
      }
      state->work();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_;
  std::shared_ptr<RunState> current_;
  uint64_t generation_ = 0;
};

Pool& pool() {
  // Leaked on purpose: joining threads from a static destructor at exit can deadlock.
  static Pool* p = new Pool(num_threads() - 1);
  return *p;
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
