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

// out[r] = sum of x[r*128 .. r*128+127] for r < rows, blocks striding the rows in y (a block
// serves rows y, y + gridDim.y, ...). Parameters: (const float* x, float* out, int rows). The
// broken one lacks the barrier between one row's sum (thread 0 reading s) and the next row's
// refill of s: a race only when a block serves several rows, which the checking mode provokes by
// halving the grid's rows.
extern void (*const row_totals_missing_barrier)(void**);
extern void (*const row_totals_with_barrier)(void**);

}  // namespace broken_kernel
