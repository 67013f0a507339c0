// stream_out.h — when the cpu backend's channel-last forward writes its output with
// non-temporal stores (around the caches; the SIMD builds that have them: AVX2 and AVX-512).
//
// A store to a line not in cache first reads it from memory (a read for ownership). A
// channel-last tile writes each step's row of channels a page from the last, which no hardware
// prefetcher follows, so those reads wait; streamed, whole lines go straight to memory. Measured
// on the AMD EPYC (AVX2) VM, 4x2048x2048 with silu, two threads: fp32 0.52 -> 0.42 ns an output,
// bf16 0.44 -> 0.41 (bench/RESULTS.md). Channel-first rows are written in sequence, whose reads
// the prefetcher hides: streamed, they were 0-6% slower, so they are not. An output that fits in
// the last-level cache beside x is written as usual, so that the next op reads it from there.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "platform/cpu_cache.h"

namespace cc1d {

// CAUSAL_CONV1D_CPU_STREAM: unset, "" or "auto": outputs of more than half the last-level cache
// (x and out together no longer fit); else an env_flag (1/on: every output, 0/off: none). Read
// on every call.
inline bool stream_output(size_t bytes) {
  const char* v = std::getenv("CAUSAL_CONV1D_CPU_STREAM");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return bytes > last_level_cache_bytes() / 2;
  return env_flag("CAUSAL_CONV1D_CPU_STREAM");
}

}  // namespace cc1d
