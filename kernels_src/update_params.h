// update_params.h — the single by-value parameter block of the decode-step update kernel.
//
// Shared verbatim by the kernel (NVRTC and emulator) and by the host code that fills it
// (runtime/src/ops/update/update_op.cpp). Plain C types only: compiled by NVRTC with no
// headers. Strides are in elements, 64-bit.
#pragma once

namespace cc1d {

constexpr int kUpdateThreads = 128;  // threads per block, one channel each

struct UpdateParams {
  const void* x;           // (batch, dim, seqlen), TX
  void* conv_state;        // (pool, dim, state_len), TX, read and written
  const void* weight;      // (dim, width), TW
  const void* bias;        // (dim,), TW, or null
  const int* cache_seqlens;       // (batch,), or null: shift mode
  const int* conv_state_indices;  // (batch,), or null: row b uses state row b
  void* out;               // (batch, dim, seqlen), TX
  long long batch, dim, seqlen, state_len, pool;
  long long x_stride[3];
  long long state_stride[3];
  long long w_stride[2];
  long long bias_stride;
  long long cache_stride;
  long long index_stride;
  long long out_stride[3];
  int silu;
  int pad_;
};

}  // namespace cc1d
