// tiling.h — which of its two tilings the cpu backend gives a forward or backward problem:
// time-major (a channel's row, vectorised over time; any time stride is gathered into a tile)
// or channel-major (a tile of steps, vectorised over the channels of a step).
#pragma once
#include <cstdint>

namespace cc1d {

// Channel-last problems narrower than this take the time-major tiling: the channel-major one
// pays per-step costs that only wide steps amortise. Measured on bf16 rows of 2^24 elements
// (Zen 4 VM, 2026-12-05), channel-major against time-major, ns an element: dim 3 forward 23.7
// against 1.5, backward 88 against 3.0; dim 8 8.2 against 2.0 and 30.8 against 2.7; dim 16 1.1
// against 2.3 and 3.2 against 3.4 (the crossing); dim 64 0.7 against 6.7 and 2.1 against 14.3.
constexpr int64_t kMinChannelMajorDim = 16;

// P: a FwdProblem or BwdProblem (conv_inputs.h): time_major is which axis x's rows run along.
template <typename P>
bool cpu_time_major(const P& p) {
  return p.time_major || p.dim < kMinChannelMajorDim;
}

}  // namespace cc1d
