// fwd_params.h — the single by-value parameter block of the forward kernel.
//
// Shared verbatim by the kernels (NVRTC and emulator) and by the host code that fills it
// (runtime/src/ops/fwd/fwd_plan.cpp), so the layout can never drift. Plain C types only: this file is
// compiled by NVRTC with no headers. Strides are in elements, 64-bit.
#pragma once

namespace cc1d {

// Launch geometry, used by both the kernels and the planner.
constexpr int kFwdThreads = 128;                   // threads per block, every path
constexpr int kFwdWarps = kFwdThreads / 32;
constexpr int kFwdItemsTime = 8;                   // TIME paths: consecutive outputs per thread and step
constexpr int kFwdWarpSpan = 32 * kFwdItemsTime;   // TIME_VEC: time steps a warp covers per step
constexpr int kFwdVecSegment = 4 * kFwdWarpSpan;   // TIME_VEC: time steps one warp computes per task
constexpr int kFwdChunkChannel = 32;               // CHANNEL, CHANNEL_SEQ: time steps per thread
constexpr int kFwdChannelBurst = 8;                // CHANNEL, CHANNEL_SEQ: steps loaded together
constexpr int kFwdChannelTile = 32;                // CHANNEL_VEC: time steps per tile
constexpr int kFwdChannelTiles = 4;                // CHANNEL_VEC: tiles per work item
constexpr int kFwdTileChannels = 64;               // CHANNEL_VEC: channels per item, two a lane

// Kernel paths: the 4th template argument, chosen by the planner (fwd_plan.cpp) per call.
constexpr int kFwdPathTime = 0;        // threads walk time; any strides
constexpr int kFwdPathChannel = 1;     // threads walk channels; any strides
constexpr int kFwdPathTimeSeq = 2;     // kFwdPathTime with seq_idx
constexpr int kFwdPathChannelSeq = 3;  // kFwdPathChannel with seq_idx
constexpr int kFwdPathTimeVec = 4;     // channel-first, unit time stride, x and out rows equally aligned, no seq_idx
constexpr int kFwdPathChannelVec = 5;  // channel-last, unit channel stride, 16-byte aligned, no seq_idx
constexpr int kFwdPathTimeVecSilu = 6;     // kFwdPathTimeVec with silu
constexpr int kFwdPathChannelVecSilu = 7;  // kFwdPathChannelVec with silu
constexpr int kFwdPathChannelVecSeq = 8;   // kFwdPathChannelVec with seq_idx (silu a runtime flag)
constexpr int kFwdNumPaths = 9;

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
  // Work items of one batch row: num_channel_blocks x num_time_chunks, where a TIME path's item
  // is one channel and a time chunk (kFwdThreads * kFwdItemsTime steps; TIME_VEC: one warp and
  // kFwdVecSegment steps), a CHANNEL path's item 32 channels x kFwdWarps runs of
  // kFwdChunkChannel steps, and a CHANNEL_VEC item kFwdTileChannels channels x kFwdChannelTiles
  // tiles of kFwdChannelTile steps.
  long long num_time_chunks;
  long long num_channel_blocks;
  long long blocks_per_batch;  // TIME_VEC: items / kFwdWarps rounded up; else the item count
  int silu;  // the generic paths' and CHANNEL_VEC_SEQ's activation (the other vector paths have it in their variant)
  int pad_;
};

}  // namespace cc1d
