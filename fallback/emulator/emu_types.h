// emu_types.h — uint3/dim3, the per-thread built-in variables and the hooks through which
// cuda_prelude.h reaches the block runner. Kept apart from the prelude so the emulator's own
// sources see these without the prelude's CUDA keyword macros.
#pragma once
#include <cstddef>

struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

namespace cc1d {
namespace emu {

// The built-in variables of the GPU thread that runs on this OS thread right now. The block
// runner rewrites them whenever it switches fibers (a fiber never changes OS thread).
struct Builtins {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1};
  dim3 grid_dim{1, 1, 1};
};
extern thread_local Builtins tls_builtins;

// Hooks implemented by the block runner (block_runner.cpp).
enum class BarrierKind : int { Sync = 0, Count = 1, And = 2, Or = 3 };
enum class WarpOp : int { Sync = 0, Shfl = 1, Ballot = 2, Any = 3, All = 4 };
int block_barrier(BarrierKind kind, int predicate);
// Deposits `value` for this lane, waits for the lanes of `mask`, returns the value of lane
// `src` (Shfl; own value if src did not take part) or the vote's result.
unsigned long long warp_exchange(WarpOp op, unsigned mask, unsigned long long value, int src);
int lane_id();
unsigned active_mask();
void* static_shared(const void* key, size_t bytes, size_t align);
void* dynamic_shared();
void check_vector_access(const void* p, size_t bytes, bool store);
// Called by every atomic of cuda_prelude.h just before its read-modify-write (which is a real
// host atomic, so blocks on other OS threads see it whole). In a shuffled run the thread yields
// here, so the threads' atomics interleave in another order. A float addition (float_add, with
// its addend) is recorded in checking mode, so that a sum whose order changed is compared
// within its rounding bound (launch.h).
void atomic_point(const void* address, bool float_add, double addend);

}  // namespace emu
}  // namespace cc1d

