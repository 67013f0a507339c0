#include "block_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>

#include "fiber.h"

namespace cc1d {
namespace emu {

thread_local Builtins tls_builtins;

namespace {

thread_local BlockRunner* tls_runner = nullptr;

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::Shfl: return "__shfl*_sync";
    case WarpOp::Ballot: return "__ballot_sync";
    case WarpOp::Any: return "__any_sync";
    case WarpOp::All: return "__all_sync";
  }
  return "warp operation";
}

std::string hex(unsigned long long v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

std::string triple(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

}  // namespace

// ---- hooks called by cuda_prelude.h --------------------------------------------------------
// Outside a launch (a kernel function called directly) they behave as a block of one thread.

int block_barrier(BarrierKind kind, int predicate) {
  if (tls_runner == nullptr) return kind == BarrierKind::Sync ? 0 : predicate != 0;
  return tls_runner->barrier(kind, predicate);
}

unsigned long long warp_exchange(WarpOp op, unsigned mask, unsigned long long value, int src) {
  if (tls_runner == nullptr) return op == WarpOp::Ballot ? (value != 0) : value;
  return tls_runner->warp_exchange(op, mask, value, src);
}

int lane_id() { return tls_runner == nullptr ? 0 : tls_runner->lane(); }
unsigned active_mask() { return tls_runner == nullptr ? 1u : tls_runner->active_mask(); }

void* static_shared(const void* key, size_t bytes, size_t align) {
  if (tls_runner == nullptr) {
    std::fprintf(stderr, "cc1d emulator: shared memory used outside an emulated launch\n");
    std::abort();
  }
  return tls_runner->static_shared(key, bytes, align);
}

void* dynamic_shared() { return tls_runner == nullptr ? nullptr : tls_runner->dynamic_shared(); }

void check_vector_access(const void* p, size_t bytes, bool store) {
  if (tls_runner != nullptr) tls_runner->check_vector_access(p, bytes, store);
}

void atomic_point(const void* address, bool float_add, double addend) {
  if (tls_runner != nullptr) tls_runner->atomic_point(address, float_add, addend);
}

void FloatAtomicLog::add(const void* address, double addend) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = map_[reinterpret_cast<uintptr_t>(address)];
  ++e.count;
  e.magnitude += std::fabs(addend);
}

std::unordered_map<uintptr_t, FloatAtomicLog::Entry> FloatAtomicLog::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

// ---- the runner ------------------------------------------------------------------------------

BlockRunner::BlockRunner() = default;

BlockRunner::~BlockRunner() { free_shared(); }

void BlockRunner::fiber_main(void* self) {
  auto* runner = static_cast<BlockRunner*>(self);
  runner->fiber_loop(runner->running_fiber_);
}

// Runs not-yet-started threads one after another; goes idle when none is left. A thread that
// parks keeps this fiber until it is resumed and finishes.
void BlockRunner::fiber_loop(Fiber* me) {
  for (;;) {
    if (!abort_ && next_start_ < order_.size()) {
      const int t = order_[next_start_++];
      Slot& s = slots_[t];
      s.wait = Wait::Running;
      s.fiber = me;
      current_ = t;
      set_thread_builtins(t);
      try {
        spec_->fn(spec_->args);
      } catch (const std::exception& e) {
        record_error(where(t) + " threw an exception: " + e.what());
      } catch (...) {
        record_error(where(t) + " threw an exception");
      }
      s.wait = Wait::Done;
      s.fiber = nullptr;
      ++done_;
      continue;
    }
    idle_.push_back(me);
    me->yield();
  }
}

Fiber* BlockRunner::idle_fiber() {
  if (!idle_.empty()) {
    Fiber* f = idle_.back();
    idle_.pop_back();
    return f;
  }
  fibers_.push_back(std::make_unique<Fiber>(Fiber::kDefaultStackBytes, &BlockRunner::fiber_main, this));
  return fibers_.back().get();
}

void BlockRunner::set_thread_builtins(int t) {
  const unsigned bx = spec_->block.x, by = spec_->block.y;
  const unsigned u = static_cast<unsigned>(t);
  tls_builtins.thread_idx = uint3{u % bx, (u / bx) % by, u / (bx * by)};
}

std::string BlockRunner::where(int t) const {
  const unsigned bx = spec_->block.x, by = spec_->block.y, u = static_cast<unsigned>(t);
  return "thread " + triple(uint3{u % bx, (u / bx) % by, u / (bx * by)}) + " of block " +
         triple(block_idx_) + " of kernel " + spec_->kernel_name;
}

void BlockRunner::record_error(const std::string& message) {
  if (error_.empty()) error_ = message;
}

void BlockRunner::free_shared() {
  for (auto& kv : static_shared_) std::free(kv.second);
  static_shared_.clear();
  std::free(dynamic_shared_);
  dynamic_shared_ = nullptr;
}

std::string BlockRunner::run(const LaunchSpec& spec, uint64_t block_linear) {
  spec_ = &spec;
  const uint64_t gx = spec.grid.x, gy = spec.grid.y;
  block_idx_ = uint3{static_cast<unsigned>(block_linear % gx), static_cast<unsigned>((block_linear / gx) % gy),
                     static_cast<unsigned>(block_linear / (gx * gy))};
  nthreads_ = static_cast<int>(spec.block.x * spec.block.y * spec.block.z);
  slots_.assign(nthreads_, Slot{});
  order_.resize(nthreads_);
  std::iota(order_.begin(), order_.end(), 0);
  rng_.seed(spec.seed ^ (block_linear * 0x9e3779b97f4a7c15ull));
  if (spec.random_order) std::shuffle(order_.begin(), order_.end(), rng_);
  next_start_ = 0;
  done_ = 0;
  current_ = -1;
  ready_.clear();
  ready_pos_ = 0;
  error_.clear();
  abort_ = false;

  // Dynamic shared memory: exactly the launch's size, so an overrun is an ASan error.
  if (posix_memalign(&dynamic_shared_, 16, spec.dynamic_shared) != 0) dynamic_shared_ = nullptr;
  if (dynamic_shared_ != nullptr && spec.dynamic_shared > 0)
    std::memset(dynamic_shared_, spec.poison, spec.dynamic_shared);

  BlockRunner* outer = tls_runner;
  const Builtins saved = tls_builtins;
  tls_runner = this;
  tls_builtins.block_idx = block_idx_;
  tls_builtins.block_dim = spec.block;
  tls_builtins.grid_dim = spec.grid;

  for (;;) {
    if (ready_pos_ < ready_.size()) {
      resume_thread(ready_[ready_pos_++]);
      continue;
    }
    ready_.clear();
    ready_pos_ = 0;
    if (abort_) break;
    if (next_start_ < order_.size()) {
      running_fiber_ = idle_fiber();
      running_fiber_->resume();
      continue;
    }
    if (done_ == nthreads_) break;
    if (!release()) {
      int at_block = 0, at_warp = 0;
      std::string warp_lanes;
      for (int t = 0; t < nthreads_; ++t) {
        if (slots_[t].wait == Wait::Block) ++at_block;
        if (slots_[t].wait == Wait::Warp) {
          if (at_warp++ < 4) warp_lanes += (warp_lanes.empty() ? "" : ", ") + std::to_string(t);
        }
      }
      record_error("deadlock in block " + triple(block_idx_) + " of kernel " + spec.kernel_name + ": " +
                   std::to_string(at_block) + " thread(s) wait in __syncthreads and " + std::to_string(at_warp) +
                   " in warp operations (threads " + warp_lanes + (at_warp > 4 ? ", ..." : "") +
                   ") that wait for each other: a barrier or warp operation not reached by every thread "
                   "it names");
      abort_ = true;
      break;
    }
  }

  // Threads left parked by an abort: throw their execution away, keep the fibers.
  for (Slot& s : slots_) {
    if (s.wait != Wait::Done && s.fiber != nullptr) {
      s.fiber->reset();
      idle_.push_back(s.fiber);
      s.fiber = nullptr;
    }
  }
  free_shared();
  tls_runner = outer;
  tls_builtins = saved;
  spec_ = nullptr;
  return error_;
}

void BlockRunner::resume_thread(int t) {
  Slot& s = slots_[t];
  s.wait = Wait::Running;
  current_ = t;
  set_thread_builtins(t);
  running_fiber_ = s.fiber;
  s.fiber->resume();
}

void BlockRunner::park(int t) {
  slots_[t].fiber->yield();
  // Resumed by resume_thread(t), which restored current_ and the builtins.
}

void BlockRunner::make_ready(std::vector<int>& threads) {
  if (spec_->random_order) std::shuffle(threads.begin(), threads.end(), rng_);
  ready_.insert(ready_.end(), threads.begin(), threads.end());
}

bool BlockRunner::release() {
  if (release_yielded()) return true;
  bool any = false;
  const int warps = (nthreads_ + 31) / 32;
  for (int w = 0; w < warps; ++w) any = release_warp(w) || any;
  if (any) return true;
  int waiting = 0;
  for (const Slot& s : slots_) waiting += s.wait == Wait::Block;
  if (waiting > 0 && waiting == nthreads_ - done_) {
    release_block();
    return true;
  }
  return false;
}

// Resumes the threads that yielded at an atomic (shuffled runs only).
bool BlockRunner::release_yielded() {
  std::vector<int> yielded;
  for (int t = 0; t < nthreads_; ++t)
    if (slots_[t].wait == Wait::Yield) {
      slots_[t].wait = Wait::Running;
      yielded.push_back(t);
    }
  make_ready(yielded);
  return !yielded.empty();
}

// Releases every group of lanes of warp `w` whose warp operation is complete: each lane named
// by the mask has arrived or exited.
bool BlockRunner::release_warp(int w) {
  const int base = w * 32;
  const int count = std::min(32, nthreads_ - base);
  unsigned alive = 0, at_warp = 0;
  for (int l = 0; l < count; ++l) {
    const Wait st = slots_[base + l].wait;
    if (st != Wait::Done) alive |= 1u << l;
    if (st == Wait::Warp) at_warp |= 1u << l;
  }
  bool any = false;
  unsigned handled = 0;
  while (at_warp & ~handled) {
    const int lead = __builtin_ctz(at_warp & ~handled);
    const Slot& ls = slots_[base + lead];
    const unsigned group = ls.mask & alive;
    handled |= group | (1u << lead);
    if ((group & at_warp) != group) continue;  // someone it waits for is elsewhere
    unsigned ballot = 0;
    for (int l = 0; l < count; ++l) {
      if (!(group >> l & 1u)) continue;
      const Slot& s = slots_[base + l];
      if (s.mask != ls.mask || s.op != ls.op)
        record_error(where(base + l) + ": " + op_name(s.op) + " with mask " + hex(s.mask) +
                     " meets lane " + std::to_string(lead) + "'s " + op_name(ls.op) + " with mask " +
                     hex(ls.mask) + ": every lane of a mask must call the same operation with the same mask");
      if (s.value != 0) ballot |= 1u << l;
    }
    std::vector<int> released;
    for (int l = 0; l < count; ++l) {
      if (!(group >> l & 1u)) continue;
      Slot& s = slots_[base + l];
      switch (s.op) {
        case WarpOp::Sync: s.result = 0; break;
        case WarpOp::Shfl:
          if (s.src >= 0 && s.src < 32 && (group >> s.src & 1u))
            s.result = slots_[base + s.src].value;
          else  // reading a lane outside the operation is undefined: make it visible
            s.result = spec_->random_order ? rng_() : s.value;
          break;
        case WarpOp::Ballot: s.result = ballot; break;
        case WarpOp::Any: s.result = ballot != 0; break;
        case WarpOp::All: s.result = ballot == group; break;
      }
      s.wait = Wait::Running;  // released: no longer counts as waiting
      released.push_back(base + l);
    }
    at_warp &= ~group;
    make_ready(released);
    any = true;
  }
  return any;
}

void BlockRunner::release_block() {
  int count = 0, total = 0;
  for (const Slot& s : slots_)
    if (s.wait == Wait::Block) {
      ++total;
      count += s.value != 0;
    }
  std::vector<int> released;
  for (int t = 0; t < nthreads_; ++t) {
    Slot& s = slots_[t];
    if (s.wait != Wait::Block) continue;
    switch (s.bar_kind) {
      case BarrierKind::Sync: s.result = 0; break;
      case BarrierKind::Count: s.result = static_cast<unsigned long long>(count); break;
      case BarrierKind::And: s.result = count == total; break;
      case BarrierKind::Or: s.result = count != 0; break;
    }
    s.wait = Wait::Running;
    released.push_back(t);
  }
  make_ready(released);
}

int BlockRunner::barrier(BarrierKind kind, int predicate) {
  const int t = current_;
  Slot& s = slots_[t];
  s.bar_kind = kind;
  s.value = predicate != 0;
  s.wait = Wait::Block;
  park(t);
  return static_cast<int>(slots_[t].result);
}

unsigned long long BlockRunner::warp_exchange(WarpOp op, unsigned mask, unsigned long long value, int src) {
  const int t = current_;
  const unsigned own = 1u << (t & 31);
  if (!(mask & own)) {
    record_error(where(t) + ": " + op_name(op) + " with mask " + hex(mask) +
                 " that does not name the calling lane " + std::to_string(t & 31));
    mask |= own;
  }
  Slot& s = slots_[t];
  s.op = op;
  s.mask = mask;
  s.value = value;
  s.src = src;
  s.wait = Wait::Warp;
  park(t);
  return slots_[t].result;
}

// The emulator does not model divergence: every lane of the warp that exists in the block is
// reported active (order-independent, and right at convergent points, where it is used).
unsigned BlockRunner::active_mask() const {
  const int base = current_ & ~31;
  const int count = std::min(32, nthreads_ - base);
  return count == 32 ? 0xffffffffu : (1u << count) - 1u;
}

void* BlockRunner::static_shared(const void* key, size_t bytes, size_t align) {
  for (auto& kv : static_shared_)
    if (kv.first == key) return kv.second;
  void* p = nullptr;
  if (posix_memalign(&p, std::max(align, sizeof(void*)), bytes) != 0 || p == nullptr) {
    std::fprintf(stderr, "cc1d emulator: cannot allocate %zu bytes of shared memory\n", bytes);
    std::abort();
  }
  std::memset(p, spec_->poison, bytes);
  static_shared_.emplace_back(key, p);
  return p;
}

void BlockRunner::atomic_point(const void* address, bool float_add, double addend) {
  if (float_add && spec_->float_atomics != nullptr) spec_->float_atomics->add(address, addend);
  if (!spec_->random_order) return;
  slots_[current_].wait = Wait::Yield;
  park(current_);
}

void BlockRunner::check_vector_access(const void* p, size_t bytes, bool store) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a % bytes == 0) return;
  record_error("misaligned " + std::to_string(bytes) + "-byte vector " + (store ? "store" : "load") + " at " +
               hex(a) + " (address % " + std::to_string(bytes) + " = " + std::to_string(a % bytes) + ") in " +
               where(current_) + ": a vector access needs an address aligned to its size");
}

}  // namespace emu
}  // namespace cc1d
