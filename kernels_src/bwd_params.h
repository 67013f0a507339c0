// bwd_params.h — the single by-value parameter block of the backward's kernels.
//
// Shared verbatim by the kernels (NVRTC and emulator) and by the host code that fills it
// (runtime/src/ops/bwd/bwd_plan.cpp). Plain C types only: compiled by NVRTC with no headers.
// Strides are in elements, 64-bit.
#pragma once

namespace cc1d {

constexpr int kBwdThreads = 128;  // threads per block, every layout

// Thread mapping of the main kernel, chosen by the planner from the strides.
constexpr int kBwdLayoutTime = 0;     // threads walk time (each 16 bytes of x), scalar loads, any strides, no seq_idx
constexpr int kBwdLayoutTimeVec = 1;  // a warp per (channel, segment), x, dout, dx in registers by 16-byte
                                      // accesses (unit stride, equally aligned rows), no seq_idx
constexpr int kBwdLayoutChannel = 2;  // threads walk channels (one each), each over a run of time, no seq_idx
constexpr int kBwdLayoutTimeSeq = 3;  // the time walk with seq_idx (scalar loads, any strides)
constexpr int kBwdLayoutChannelSeq = 4;  // the channel walk with seq_idx
constexpr int kBwdLayoutChannelVec = 5;  // channel-last tiles in shared memory, 16-byte accesses, no seq_idx
constexpr int kBwdLayoutChannelVecSeq = 6;  // kBwdLayoutChannelVec with seq_idx
constexpr int kBwdNumLayouts = 7;

// Time layouts: a block walks one row's segment of time backwards, chunk by chunk; a chunk is
// kBwdThreads * (16 / sizeof(x's element)) steps (TIME_VEC: a warp walks its segment
// kBwdWarpSpan steps at a time, segments of at least kBwdVecMinSpans of them). Channel layout: a
// thread walks its channel over a segment (CHANNEL_VEC: a block walks 128 bytes of channels,
// tile by tile). At most kBwdMaxSegments segments per row, which bounds the workspace of the
// deterministic mode.
constexpr int kBwdMaxSegments = 64;
constexpr int kBwdWarps = kBwdThreads / 32;
constexpr int kBwdWarpItems = 8;                     // TIME_VEC: consecutive steps per lane
constexpr int kBwdWarpSpan = 32 * kBwdWarpItems;     // TIME_VEC: steps per warp step
constexpr int kBwdVecMinSpans = 4;                   // TIME_VEC: warp steps per segment, at least
constexpr int kBwdMinChannelSegment = 64;  // channel layout: time steps per thread, at least
// CHANNEL_VEC: a block owns kBwdTileChannels channels (two a lane: 128 bytes of 16-bit ones, 256
// of fp32) and walks its segment backwards a tile of kBwdChannelTile steps at a time (segments
// are whole tiles), each warp on a quarter of the tile's steps.
constexpr int kBwdChannelTile = 32;
constexpr int kBwdTileChannels = 64;

// Time layouts: steps per chunk (each thread 16 bytes of x), and the dynamic shared memory of a
// block in floats: x with its left halo, g with its right halo, the two stages of the block
// reduction, then (with seq_idx) the segment ids of x's positions with both halos.
// (Host and device functions: the planner sizes the launch with the same numbers.)
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define CC1D_BWD_FN __host__ __device__ constexpr
#else
#define CC1D_BWD_FN constexpr
#endif
CC1D_BWD_FN bool bwd_channel_layout(int layout) {
  return layout == kBwdLayoutChannel || layout == kBwdLayoutChannelSeq || layout == kBwdLayoutChannelVec ||
         layout == kBwdLayoutChannelVecSeq;
}
// TIME_VEC and the channel walks take no dynamic shared memory (CHANNEL_VEC's tiles are static).
CC1D_BWD_FN bool bwd_block_smem(int layout) { return layout == kBwdLayoutTime || layout == kBwdLayoutTimeSeq; }
CC1D_BWD_FN int bwd_chunk(int x_bytes) { return kBwdThreads * (16 / x_bytes); }
// The main kernel's __launch_bounds__ minimum of resident blocks. TIME_VEC in 16-bit types: 6
// (at most 80 registers, 38% occupancy): the most that holds its walk without spilling (7, 72
// registers, spills 22 instructions outside the loop); left alone, ptxas takes 96 (31%), and
// the walk, bound by instruction issue, ran slower (bwd_time_vec.cuh, kAhead). 0: none (an
// explicit 1 is not the same to ptxas: it gave the time layouts 40-60 more registers).
CC1D_BWD_FN int bwd_min_blocks(int layout, int x_bytes) { return layout == kBwdLayoutTimeVec && x_bytes == 2 ? 6 : 0; }
CC1D_BWD_FN int bwd_smem_gt(int C, int W) { return W - 1 + C; }
CC1D_BWD_FN int bwd_smem_red(int C, int W) { return bwd_smem_gt(C, W) + C + W - 1; }
CC1D_BWD_FN int bwd_smem_red2(int C, int W) { return bwd_smem_red(C, W) + (W + 1) * kBwdThreads; }
CC1D_BWD_FN int bwd_smem_st(int C, int W) { return bwd_smem_red2(C, W) + (W + 1) * 32; }
CC1D_BWD_FN int bwd_smem_floats(int C, int W, bool seq) { return bwd_smem_st(C, W) + (seq ? C + 2 * (W - 1) : 0); }
// The main kernel's dynamic shared memory in bytes for a layout.
CC1D_BWD_FN int bwd_smem_bytes(int layout, int x_bytes, int W) {
  if (!bwd_block_smem(layout)) return 0;
  return (int)sizeof(float) * bwd_smem_floats(bwd_chunk(x_bytes), W, layout == kBwdLayoutTimeSeq);
}
#undef CC1D_BWD_FN

struct BwdParams {
  const void* x;               // (batch, dim, seqlen), TX
  const void* weight;          // (dim, width), TW
  const void* bias;            // (dim,), TW, or null
  const int* seq_idx;          // (batch, seqlen), or null
  const void* initial_states;  // (batch, dim, width-1), TX, or null
  const void* dout;            // (batch, dim, seqlen), TX
  const void* dfinal_states;   // (batch, dim, width-1), TX, or null
  void* dx;                    // (batch, dim, seqlen), TX, or null
  void* dinitial_states;       // (batch, dim, width-1), TX, or null
  void* dweight;               // (dim, width), TW, or null (finalize kernel)
  void* dbias;                 // (dim,), TW, or null (finalize kernel)
  // fp32 partial sums (parts, dim, width+1): per channel the width taps of dweight, then dbias.
  // Null when neither dweight nor dbias is wanted.
  float* acc;
  long long batch, dim, seqlen;
  long long x_stride[3];
  long long w_stride[2];
  long long bias_stride;
  long long seq_stride[2];
  long long init_stride[3];
  long long dout_stride[3];
  long long dfinal_stride[3];
  long long dx_stride[3];
  long long dinit_stride[3];
  long long dw_stride[2];
  long long db_stride;
  long long num_segments;        // segments per row
  long long segment_len;         // time steps per segment (time layouts: a multiple of the chunk;
                                 // TIME_VEC: of kBwdWarpSpan)
  long long num_channel_blocks;  // channel layout: ceil(dim / kBwdThreads); time layouts: dim (TIME_VEC: a
                                 // warp per (channel, segment), kBwdWarps of them per block)
  long long parts;               // rows of acc: 1 (atomics) or batch * num_segments (deterministic)
  int width;                     // for the zero and finalize kernels
  int silu;
  int deterministic;             // 1: each (batch, segment) writes its own row of acc, no atomics
  int pad_;
};

}  // namespace cc1d
