// tiling.h — which of its two tilings the cpu backend gives a forward or backward problem:
// time-major (a channel's row, vectorised over time; any time stride is gathered into a tile)
// or channel-major (a tile of steps, vectorised over the channels of a step; any channel stride
// is gathered). Each pays a fixed cost per row or per step, which only a long row or a wide step
// amortises, so a problem whose own layout makes that axis short takes the other tiling.
#pragma once
#include <algorithm>
#include <cstdint>

namespace cc1d {

// Channel-last problems narrower than this take the time-major tiling. Measured on bf16, 2^24
// elements, two threads (Zen 4 VM, 2026-12-05), channel-major against time-major, ns an element:
// dim 3 forward 23.7 against 1.5, backward 88 against 3.0; dim 8 8.2 against 2.0 and 30.8
// against 2.7; dim 16 1.1 against 2.3 and 3.2 against 3.4 (the crossing); dim 64 0.7 against 6.7.
constexpr int64_t kMinChannelMajorDim = 16;
// Channel-first problems of shorter rows (and at least kMinChannelMajorDim channels) take the
// channel-major tiling. The same machine, after the chunks below, time-major against
// channel-major: 4 steps forward 6.9 against 1.1-1.2, backward 21 against 2.0-2.4; 24 steps 1.9-3.7
// against 1.2-1.4 and 5.5-6.3 against 1.6-2.0; 40 steps 1.2 against 1.2-1.5 and 3.6-4.1 against
// 1.5-2.4; 64 steps 0.5-0.8 against 1.3-1.4 and 1.8-2.0 against 1.7-2.5.
constexpr int64_t kMinTimeMajorLen = 40;

// P: a FwdProblem or BwdProblem (conv_inputs.h), whose time_major says which axis x's rows run
// along.
template <typename P>
bool cpu_time_major(const P& p) {
  if (p.time_major) return p.seqlen >= kMinTimeMajorLen || p.dim < kMinChannelMajorDim;
  return p.dim < kMinChannelMajorDim;
}

// The pool gets whole items in chunks of about this many elements, so what a chunk sets up (its
// tile buffers, the pool's dispatch) is paid per 32 K elements, not per short row or narrow tile:
// rows of 1 step took 24 ns an element in the backward, and 5 in the forward, allocating a
// 64-step tile's buffers for each. Long rows' items are larger than a chunk, one item each.
constexpr int64_t kChunkElements = 32768;

// Items per chunk for items of item_elements each, a multiple of `multiple` items.
inline int64_t chunk_items(int64_t item_elements, int64_t multiple = 1) {
  return multiple * std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, item_elements * multiple));
}

}  // namespace cc1d
