// varlen_params.h — the single by-value parameter block of the varlen-states kernel.
//
// Shared verbatim by the kernel (NVRTC and emulator) and by the host code that fills it
// (runtime/src/ops/varlen/varlen_op.cpp). Plain C types only: compiled by NVRTC with no
// headers. Strides are in elements, 64-bit.
#pragma once

namespace cc1d {

constexpr int kVarlenThreads = 128;  // threads per block, one element or one 16-byte vector each

struct VarlenParams {
  const void* x;          // (total, dim), T
  const int* cu_seqlens;  // (batch+1,)
  void* out;              // (batch, dim, state_len), T
  long long total, dim, batch, state_len;
  long long x_stride[2];
  long long cu_stride;
  long long out_stride[3];
};

}  // namespace cc1d
