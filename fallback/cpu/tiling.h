// tiling.h — which of its two tilings the cpu backend gives a forward or backward problem:
// time-major (a channel's row, vectorised over time; any time stride is gathered into a tile)
// or channel-major (a tile of steps, vectorised over the channels of a step; any channel stride
// is gathered). Each pays a fixed cost per row or per step, which only a long row or a wide step
// amortises, so a problem whose own layout makes that axis short takes the other tiling.
#pragma once
#include <cstdint>

namespace cc1d {

// Channel-last problems narrower than this take the time-major tiling. Measured on bf16, 2^24
// elements, two threads (Zen 4 VM, 2026-12-05), channel-major against time-major, ns an element:
// dim 3 forward 23.7 against 1.5, backward 88 against 3.0; dim 8 8.2 against 2.0 and 30.8
// against 2.7; dim 16 1.1 against 2.3 and 3.2 against 3.4 (the crossing); dim 64 0.7 against 6.7.
constexpr int64_t kMinChannelMajorDim = 16;
// Channel-first problems of shorter rows (and at least kMinChannelMajorDim channels) take the
// channel-major tiling. The same machine, time-major against channel-major: 4 steps forward 9.7
// against 1.9-2.7, backward 26-28 against 10-12.5; 16 steps 4.5 against 1.6 and 5.6 against 3.4;
// 32 steps 2.0 against 1.9 and 3.6 against 2.7; 48 steps 1.2 against 1.4 and 2.0 against 2.2.
constexpr int64_t kMinTimeMajorLen = 40;

// P: a FwdProblem or BwdProblem (conv_inputs.h), whose time_major says which axis x's rows run
// along.
template <typename P>
bool cpu_time_major(const P& p) {
  if (p.time_major) return p.seqlen >= kMinTimeMajorLen || p.dim < kMinChannelMajorDim;
  return p.dim < kMinChannelMajorDim;
}

}  // namespace cc1d
