// block_runner.h — runs one thread block of an emulated kernel launch on one OS thread.
//
// Every GPU thread of the block is a cooperative fiber. A barrier (__syncthreads) or a warp
// operation parks the calling fiber; the runner resumes the parked threads only when every
// thread the operation waits for has arrived (threads that have exited count as arrived, as on
// sm_70+). So a barrier really waits, and code after it sees every write made before it.
//
// An atomic operation is a scheduling point too, in shuffled runs only: the thread yields and is
// resumed, in shuffled order with the other yielded threads, once every other thread has
// started and parked, so the order of the block's atomics changes between runs.
//
// Fibers are started lazily and reused: a fiber runs threads one after another until one of
// them parks, and only then is another fiber started for the next thread. A block whose
// threads never synchronise therefore costs one fiber switch, not one per thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu_types.h"

namespace cc1d {
namespace emu {

class Fiber;

// The float atomicAdds of one run of a launch, by address (checking mode): how many, and the sum
// of the addends' magnitudes, which bounds how far two summation orders can round apart.
class FloatAtomicLog {
 public:
  struct Entry {
    uint64_t count = 0;
    double magnitude = 0;
  };
  void add(const void* address, double addend);
  std::unordered_map<uintptr_t, Entry> entries() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uintptr_t, Entry> map_;
};

// One launch as the runners see it (launch.cpp fills it).
struct LaunchSpec {
  const char* kernel_name = "";
  void (*fn)(void** args) = nullptr;  // runs the kernel body for the current emulated thread
  void** args = nullptr;              // cuLaunchKernel's kernelParams
  dim3 grid, block;
  size_t dynamic_shared = 0;
  bool random_order = false;  // shuffle thread start/resume order (checking mode)
  uint64_t seed = 0;
  unsigned char poison = 0xff;  // fill byte of fresh shared memory
  FloatAtomicLog* float_atomics = nullptr;  // checking mode: where float atomicAdds are recorded
};

class BlockRunner {
 public:
  BlockRunner();
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs block `block_linear` (x fastest) to completion. Returns "" or the first error
  // (deadlock, misaligned vector access, exception thrown by the kernel), naming the kernel,
  // the block and the thread.
  std::string run(const LaunchSpec& spec, uint64_t block_linear);

  // Hooks for cuda_prelude.h, called on a fiber of this runner.
  int barrier(BarrierKind kind, int predicate);
  unsigned long long warp_exchange(WarpOp op, unsigned mask, unsigned long long value, int src);
  int lane() const { return current_ & 31; }
  unsigned active_mask() const;
  void* static_shared(const void* key, size_t bytes, size_t align);
  void* dynamic_shared() const { return dynamic_shared_; }
  void check_vector_access(const void* p, size_t bytes, bool store);
  void atomic_point(const void* address, bool float_add, double addend);

  // Number of fibers this runner has created (for statistics).
  size_t fibers() const { return fibers_.size(); }

 private:
  enum class Wait : uint8_t { NotStarted, Running, Block, Warp, Yield, Done };
  struct Slot {
    Wait wait = Wait::NotStarted;
    Fiber* fiber = nullptr;
    BarrierKind bar_kind = BarrierKind::Sync;
    WarpOp op = WarpOp::Sync;
    unsigned mask = 0;
    int src = 0;
    unsigned long long value = 0;
    unsigned long long result = 0;
  };

  static void fiber_main(void* self);
  void fiber_loop(Fiber* me);
  Fiber* idle_fiber();
  void resume_thread(int t);
  void park(int t);
  bool release();
  bool release_yielded();
  bool release_warp(int warp);
  void release_block();
  void make_ready(std::vector<int>& threads);
  void set_thread_builtins(int t);
  std::string where(int t) const;
  void record_error(const std::string& message);
  void free_shared();

  const LaunchSpec* spec_ = nullptr;
  uint3 block_idx_{0, 0, 0};
  int nthreads_ = 0;
  int current_ = -1;
  size_t next_start_ = 0;
  int done_ = 0;
  std::vector<int> order_;  // thread start order
  std::vector<Slot> slots_;
  std::vector<int> ready_;  // released threads, resumed front to back
  size_t ready_pos_ = 0;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Fiber*> idle_;
  Fiber* running_fiber_ = nullptr;  // the fiber the scheduler resumes next / resumed last
  std::mt19937_64 rng_;
  std::string error_;
  bool abort_ = false;
  void* dynamic_shared_ = nullptr;
  std::vector<std::pair<const void*, void*>> static_shared_;
};

}  // namespace emu
}  // namespace cc1d
