// fiber.h — a cooperative execution context with its own stack, for the kernel emulator.
//
// ucontext-based (glibc, no extra library), with a guard page under each stack and the
// AddressSanitizer fiber annotations (__sanitizer_start_switch_fiber /
// __sanitizer_finish_switch_fiber) so ASan tracks which stack is live and reports stack and
// heap errors inside emulated GPU threads correctly.
//
// A fiber is owned by one scheduler running on one OS thread: resume() is called by the
// scheduler, yield() by code running on the fiber. The entry function never returns; a fiber
// is reused for many GPU threads (see block_runner.cpp).
#pragma once
#include <cstddef>

#include <ucontext.h>

namespace cc1d {
namespace emu {

class Fiber {
 public:
  using Entry = void (*)(void* arg);

  Fiber(size_t stack_bytes, Entry entry, void* arg);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Scheduler side: runs the fiber until it yields.
  void resume();
  // Fiber side: returns control to the scheduler that resumed it.
  void yield();
  // Scheduler side: abandons whatever the fiber was doing; the next resume() starts the entry
  // function from the beginning on a clean stack.
  void reset();

  // The default stack size: generous for kernels (locals + spdlog/printf from a kernel) and
  // for ASan's redzones; only touched pages are committed.
  static constexpr size_t kDefaultStackBytes = 256 * 1024;

 private:
  static void trampoline(unsigned hi, unsigned lo);
  void prepare();

  Entry entry_;
  void* arg_;
  char* mapping_ = nullptr;  // guard page + stack
  size_t mapping_bytes_ = 0;
  char* stack_ = nullptr;
  size_t stack_bytes_ = 0;
  ucontext_t fiber_ctx_{};
  ucontext_t owner_ctx_{};
  // ASan bookkeeping: the owner's stack bounds and the fake stacks saved across switches.
  const void* owner_stack_bottom_ = nullptr;
  size_t owner_stack_size_ = 0;
  void* owner_fake_stack_ = nullptr;
  void* fiber_fake_stack_ = nullptr;
};

}  // namespace emu
}  // namespace cc1d
