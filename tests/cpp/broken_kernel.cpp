// broken_kernel.cpp — see broken_kernel.h. CUDA source compiled by the host compiler.
#include "fallback/emulator/cuda_prelude.h"

#include "broken_kernel.h"

namespace broken_kernel {
namespace {

template <bool kBarrier>
__global__ void block_sum(const float* x, float* out) {
  CC1D_SHARED_ARRAY(float, s, kThreads);
  const int t = threadIdx.x;
  s[t] = x[blockIdx.x * kThreads + t];
  if (kBarrier) __syncthreads();  // the broken variant reads s[t + 64] before it is written
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

template <bool kBarrier>
__global__ void rotate(const int* in, int* out, int rounds) {
  __shared__ int s[kThreads];  // the plain CUDA spelling works too
  const int t = threadIdx.x;
  s[t] = in[t];
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    const int v = s[(t + 1) % kThreads];
    if (kBarrier) __syncthreads();  // without it a neighbour may already have overwritten s[t+1]
    s[t] = v + 1;
    __syncthreads();
  }
  out[t] = s[t];
}

// Blocks stride rows in y, as the ops' kernels stride batch rows: a block serving several rows
// must not refill s while thread 0 still sums the previous row.
template <bool kBarrier>
__global__ void row_totals(const float* x, float* out, int rows) {
  CC1D_SHARED_ARRAY(float, s, kThreads);
  const int t = threadIdx.x;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    if (kBarrier) __syncthreads();  // the previous row is summed
    s[t] = x[r * kThreads + t];
    __syncthreads();
    if (t == 0) {
      float sum = 0.f;
      for (int i = 0; i < kThreads; ++i) sum += s[i];
      out[r] = sum;
    }
  }
}

}  // namespace

void (*const block_sum_missing_barrier)(void**) = &cc1d::emu::trampoline<&block_sum<false>>;
void (*const block_sum_with_barrier)(void**) = &cc1d::emu::trampoline<&block_sum<true>>;
void (*const rotate_missing_barrier)(void**) = &cc1d::emu::trampoline<&rotate<false>>;
void (*const rotate_with_barrier)(void**) = &cc1d::emu::trampoline<&rotate<true>>;
void (*const row_totals_missing_barrier)(void**) = &cc1d::emu::trampoline<&row_totals<false>>;
void (*const row_totals_with_barrier)(void**) = &cc1d::emu::trampoline<&row_totals<true>>;

}  // namespace broken_kernel
