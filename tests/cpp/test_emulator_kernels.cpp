// test_emulator_kernels.cpp — CUDA kernels compiled for the host; see test_emulator_kernels.h.
#include "fallback/emulator/cuda_prelude.h"

#include <pthread.h>
#include <unistd.h>

#include <stdexcept>

#include "test_emulator_kernels.h"

namespace emu_kernels {
namespace {

__global__ void k_record_order(int* counter, int* order) {
  const int tid = threadIdx.x;
  order[blockIdx.x * blockDim.x + tid] = atomicAdd(&counter[blockIdx.x], 1);
}

__global__ void k_warp_ops(unsigned* out) {
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const unsigned full = 0xffffffffu;
  unsigned* o = out + tid * 12;
  unsigned v = lane + 1;
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(full, v, m);
  o[0] = v;
  o[1] = __shfl_sync(full, unsigned(lane * 10), 31 - lane);
  o[2] = __shfl_up_sync(full, unsigned(lane), 3);
  o[3] = __shfl_down_sync(full, unsigned(lane), 5);
  o[4] = __shfl_sync(full, unsigned(lane), 0, 16);
  o[5] = __shfl_xor_sync(full, unsigned(lane), 4, 8);
  o[6] = __ballot_sync(full, lane % 3 == 0);
  o[7] = __any_sync(full, lane == 7 + tid / 32);
  o[8] = __all_sync(full, lane < 31);
  if (lane < 16) {
    o[9] = __ballot_sync(0x0000ffffu, lane & 1);  // only the low half of the warp takes part
  } else {
    o[9] = 0;
  }
  const long long wide = static_cast<long long>(lane) << 33;
  o[10] = static_cast<unsigned>(__shfl_xor_sync(full, wide, 1) >> 33);
  o[11] = __activemask();
}

__global__ void k_barrier_votes(int* out) {
  const int tid = threadIdx.x;
  const int count = __syncthreads_count(tid % 3 == 0);
  const int all = __syncthreads_and(tid % 3 == 0);
  const int any = __syncthreads_or(tid % 3 == 0);
  const int all_true = __syncthreads_and(1);
  if (tid == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
    out[3] = all_true;
  }
}

__global__ void k_reverse_dynamic_shared(const float* in, float* out) {
  CC1D_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = in[blockIdx.x * n + t];
  __syncthreads();
  out[blockIdx.x * n + t] = s[n - 1 - t];
}

__global__ void k_indices_3d(unsigned* out) {
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned* o = out + 4 * (b * threads + t);
  o[0] = threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16;
  o[1] = blockIdx.x | blockIdx.y << 8 | blockIdx.z << 16;
  o[2] = blockDim.x | blockDim.y << 8 | blockDim.z << 16;
  o[3] = gridDim.x | gridDim.y << 8 | gridDim.z << 16;
}

__global__ void k_atomics(float* fsum, int* isum) {
  atomicAdd(fsum, 1.0f);
  atomicAdd(isum, 1);
}

__global__ void k_atomic_tickets(int* counter, int* out) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  out[2 * gid] = atomicAdd(counter, 1);
  out[2 * gid + 1] = atomicAdd(counter, 1);
}

__global__ void k_float_atomic_sums(const float* x, float* sums) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&sums[gid % 4], x[gid]);
}

__global__ void k_own_ticket_adds(int* counter, float* sum) {
  if (atomicAdd(counter, 1) == static_cast<int>(threadIdx.x)) atomicAdd(sum, 1.0f);
}

__global__ void k_float_plain_sums(const float* x, float* sums) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  sums[gid % 4] += x[gid];
}

__global__ void k_early_exit(int* out) {
  const int t = threadIdx.x;
  if (t & 1) return;
  out[t] = 1;
  __syncthreads();
  out[t] += 1;
  __syncthreads();
  out[t] += 1;
}

__global__ void k_deadlock(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  }
}

__global__ void k_vec_load(const float* base, int offset, float* out) {
  if (threadIdx.x != 0) return;
  float v[4];
  cc1d_vec_load(base + offset, v);
  for (int i = 0; i < 4; ++i) out[i] = v[i];
}

__global__ void k_record_os_thread(unsigned long long* out) {
  if (threadIdx.x != 0) return;
  out[blockIdx.x] = static_cast<unsigned long long>(pthread_self());
  usleep(2000);
}

__global__ void k_throws(int* out) {
  if (threadIdx.x == 5) throw std::runtime_error("kernel says no");
  out[threadIdx.x] = 1;
}

__global__ void k_shared_overrun(float* out, int n) {
  CC1D_SHARED_ARRAY(float, s, 32);
  if (threadIdx.x != 0) return;
  for (int i = 0; i < n; ++i) s[i] = static_cast<float>(i);
  for (int i = 0; i < n; ++i) out[i] = s[i];
}

}  // namespace

const Fn record_order = &cc1d::emu::trampoline<&k_record_order>;
const Fn warp_ops = &cc1d::emu::trampoline<&k_warp_ops>;
const Fn barrier_votes = &cc1d::emu::trampoline<&k_barrier_votes>;
const Fn reverse_dynamic_shared = &cc1d::emu::trampoline<&k_reverse_dynamic_shared>;
const Fn indices_3d = &cc1d::emu::trampoline<&k_indices_3d>;
const Fn atomics = &cc1d::emu::trampoline<&k_atomics>;
const Fn atomic_tickets = &cc1d::emu::trampoline<&k_atomic_tickets>;
const Fn float_atomic_sums = &cc1d::emu::trampoline<&k_float_atomic_sums>;
const Fn own_ticket_adds = &cc1d::emu::trampoline<&k_own_ticket_adds>;
const Fn float_plain_sums = &cc1d::emu::trampoline<&k_float_plain_sums>;
const Fn early_exit = &cc1d::emu::trampoline<&k_early_exit>;
const Fn deadlock = &cc1d::emu::trampoline<&k_deadlock>;
const Fn vec_load = &cc1d::emu::trampoline<&k_vec_load>;
const Fn record_os_thread = &cc1d::emu::trampoline<&k_record_os_thread>;
const Fn throws = &cc1d::emu::trampoline<&k_throws>;
const Fn shared_overrun = &cc1d::emu::trampoline<&k_shared_overrun>;

}  // namespace emu_kernels
