// broken_kernel.h — kernels with a deliberately missing __syncthreads, and the same kernels
// with the barrier, compiled for the host through the emulator's CUDA prelude
// (broken_kernel.cpp). The checking mode must catch the broken ones and pass the fixed ones.
#pragma once

namespace broken_kernel {

constexpr int kThreads = 128;

// out[block] = sum of x[block*128 .. block*128+127] by a shared-memory tree reduction.
// Parameters: (const float* x, float* out). The broken one lacks the barrier between filling
// shared memory and the first reduction step.
extern void (*const block_sum_missing_barrier)(void**);
extern void (*const block_sum_with_barrier)(void**);

// Each of `rounds` rounds replaces s[t] by s[(t+1) % 128] + 1 in shared memory; out[t] = s[t].
// Parameters: (const int* in, int* out, int rounds). The broken one lacks the barrier between
// reading the neighbour and overwriting its own slot (a write-after-read race), so its result
// depends only on thread order — no uninitialised memory is involved.
extern void (*const rotate_missing_barrier)(void**);
extern void (*const rotate_with_barrier)(void**);

}  // namespace broken_kernel
