// test_emulator_kernels.h — small CUDA kernels compiled for the host (test_emulator_kernels.cpp)
// that exercise one emulator feature each. Every entry is an emulator trampoline: it takes
// cuLaunchKernel-style kernelParams (one pointer per parameter).
#pragma once

namespace emu_kernels {

using Fn = void (*)(void**);

// (int* counter, int* order): order[linear tid + block offset] = arrival rank in the block.
extern const Fn record_order;
// (unsigned* out): per thread 10 words, see the kernel for the layout. Block of 64 threads.
extern const Fn warp_ops;
// (int* out): out[0..2] = __syncthreads_count/_and/_or of (tid % 3 == 0), written by thread 0.
extern const Fn barrier_votes;
// (const float* in, float* out): reverses each block's slice through dynamic shared memory.
extern const Fn reverse_dynamic_shared;
// (unsigned* out): out[global linear id] packs threadIdx/blockIdx/blockDim/gridDim checks.
extern const Fn indices_3d;
// (float* fsum, int* isum): every thread adds 1 to both.
extern const Fn atomics;
// (int* counter, int* out): each thread takes two tickets, out[2*gid] and out[2*gid+1], with
// atomicAdd(counter, 1) on one counter shared by every block.
extern const Fn atomic_tickets;
// (const float* x, float* sums): thread gid adds x[gid] to sums[gid % 4] with atomicAdd.
extern const Fn float_atomic_sums;
// (int* counter, float* sum): every thread takes a ticket and adds 1 to sum only when the ticket
// equals its thread index: how many atomics reach sum depends on the order.
extern const Fn own_ticket_adds;
// (const float* x, float* sums): like float_atomic_sums but with a plain `+=` (one block).
extern const Fn float_plain_sums;
// (int* out): threads with odd tid return at once; the others pass two barriers.
extern const Fn early_exit;
// (int* out): lane 0 of warp 0 waits in __syncthreads while lanes 1..31 wait in a shuffle.
extern const Fn deadlock;
// (const float* base, int offset, float* out): cc1d_vec_load of 4 floats at base + offset.
extern const Fn vec_load;
// (unsigned long long* out): blocks record the OS thread that ran them and sleep 2 ms.
extern const Fn record_os_thread;
// (int* out): thread 5 throws std::runtime_error.
extern const Fn throws;
// (float* out, int n): out[i] = i for i < n; writes past n when n > 32 — an overrun of a
// 32-float CC1D_SHARED_ARRAY used as staging (for the AddressSanitizer test).
extern const Fn shared_overrun;

}  // namespace emu_kernels
