// fwd_params.h — the single by-value parameter block of the forward kernel.
//
// Shared verbatim by the kernels (NVRTC and emulator) and by the host code that fills it
// (runtime/src/ops/fwd/fwd_plan.cpp), so the layout can never drift. Plain C types only: this file is
// compiled by NVRTC with no headers. Strides are in elements, 64-bit.
#pragma once

namespace cc1d {

// Launch geometry, used by both the kernels and the planner.
constexpr int kFwdThreads = 128;     // threads per block, both layouts
constexpr int kFwdItemsTime = 8;     // TIME layout: consecutive outputs per thread
constexpr int kFwdChunkChannel = 32; // CHANNEL layout: time steps per thread

// Thread mapping, chosen by the planner from the strides.
constexpr int kLayoutTime = 0;     // threads walk time: best when stride(t) is the smallest
constexpr int kLayoutChannel = 1;  // threads walk channels: best when stride(c) is the smallest

struct FwdParams {
  const void* x;               // (batch, dim, seqlen), TX
  const void* weight;          // (dim, width), TW
  const void* bias;            // (dim,), TW, or null
  const int* seq_idx;          // (batch, seqlen), or null
  const void* initial_states;  // (batch, dim, width-1), TX, or null
  void* out;                   // (batch, dim, seqlen), TX
  void* final_states;          // (batch, dim, width-1), TX, or null
  long long batch, dim, seqlen;
  long long x_stride[3];
  long long w_stride[2];
  long long bias_stride;
  long long seq_stride[2];
  long long init_stride[3];
  long long out_stride[3];
  long long final_stride[3];
  long long num_time_chunks;     // ceil(seqlen / per-block time span)
  long long num_channel_blocks;  // CHANNEL layout: ceil(dim / kFwdThreads); TIME layout: dim
  int silu;
  int pad_;
};

}  // namespace cc1d
