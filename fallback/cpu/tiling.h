// tiling.h — which of its two tilings the cpu backend gives a forward or backward problem:
// time-major (a channel's row, vectorised over time; any time stride is gathered into a tile)
// or channel-major (a tile of steps, vectorised over the channels of a step; any channel stride
// is gathered). Each pays a fixed cost per row or per step, which only a long row or a wide step
// amortises, so a problem whose own layout makes that axis short takes the other tiling.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ops/conv_inputs.h"

namespace cc1d {

// Channel-last problems narrower than conv_inputs.h's kMinChannelMajorDim take the time-major
// tiling too. Measured on bf16, 2^24 elements, two threads (Zen 4 VM, 2026-12-05),
// channel-major against time-major, ns an element: dim 3 forward 23.7 against 1.5, backward 88
// against 3.0; dim 8 8.2 against 2.0 and 30.8 against 2.7; dim 16 1.1 against 2.3 and 3.2
// against 3.4 (the crossing); dim 64 0.7 against 6.7. (Short channel-first rows are channel-major
// for every backend: ConvProblem::time_major.)
// P: a FwdProblem or BwdProblem (conv_inputs.h).
template <typename P>
bool cpu_time_major(const P& p) {
  return p.time_major || p.dim < kMinChannelMajorDim;
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
