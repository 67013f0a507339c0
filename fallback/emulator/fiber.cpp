#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define CC1D_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CC1D_EMU_ASAN 1
#endif
#endif

#ifdef CC1D_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CC1D_START_SWITCH(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define CC1D_FINISH_SWITCH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
#define CC1D_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CC1D_START_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define CC1D_FINISH_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define CC1D_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace cc1d {
namespace emu {

Fiber::Fiber(size_t stack_bytes, Entry entry, void* arg) : entry_(entry), arg_(arg) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  mapping_bytes_ = stack_bytes_ + page;
  void* m = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED)
    fail(CC1D_ERR_INTERNAL, "emulator: cannot map a " + std::to_string(mapping_bytes_ / 1024) +
                                " KiB fiber stack (out of address space?)");
  mapping_ = static_cast<char*>(m);
  // The lowest page stays inaccessible, so a stack overflow in a kernel faults at once.
  mprotect(mapping_, page, PROT_NONE);
  stack_ = mapping_ + page;
  prepare();
}

Fiber::~Fiber() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

void Fiber::prepare() {
  CC1D_UNPOISON(stack_, stack_bytes_);  // frames of an abandoned run may have left poison
  getcontext(&fiber_ctx_);
  fiber_ctx_.uc_stack.ss_sp = stack_;
  fiber_ctx_.uc_stack.ss_size = stack_bytes_;
  fiber_ctx_.uc_link = nullptr;  // the entry never returns
  fiber_fake_stack_ = nullptr;
  const uintptr_t self = reinterpret_cast<uintptr_t>(this);
  makecontext(&fiber_ctx_, reinterpret_cast<void (*)()>(&Fiber::trampoline), 2,
              static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu));
}

void Fiber::reset() { prepare(); }

void Fiber::trampoline(unsigned hi, unsigned lo) {
  Fiber* self = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
  // First arrival on this stack: no fake stack to restore; learn the owner's stack bounds.
  CC1D_FINISH_SWITCH(nullptr, &self->owner_stack_bottom_, &self->owner_stack_size_);
  self->entry_(self->arg_);
  // Unreachable: entries loop forever and only ever yield.
}

void Fiber::resume() {
  CC1D_START_SWITCH(&owner_fake_stack_, stack_, stack_bytes_);
  swapcontext(&owner_ctx_, &fiber_ctx_);
  CC1D_FINISH_SWITCH(owner_fake_stack_, nullptr, nullptr);
}

void Fiber::yield() {
  CC1D_START_SWITCH(&fiber_fake_stack_, owner_stack_bottom_, owner_stack_size_);
  swapcontext(&fiber_ctx_, &owner_ctx_);
  CC1D_FINISH_SWITCH(fiber_fake_stack_, &owner_stack_bottom_, &owner_stack_size_);
}

}  // namespace emu
}  // namespace cc1d
