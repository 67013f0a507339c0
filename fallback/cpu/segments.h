// segments.h — seq_idx for the CPU backend's fused passes (forward and backward): the runs of
// one segment id along a batch row. Within a run every tap is a plain convolution except those
// reaching outside it, which count only where their id is the run's (whatever the pattern of
// ids), so a fused pass runs once per run with those few steps masked.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace cc1d {

// With seq_idx, a tile cut into runs shorter than this many steps on average takes the
// unfused path (a pass per run costs a call and its masked history).
constexpr int64_t kMinRun = 8;

// seq_idx[b, s] (a [batch, seqlen] int32 tensor); s < 0, the initial states, is token 0's segment.
inline int seq_value(const TensorRef& seq, int64_t b, int64_t s) {
  return static_cast<const int32_t*>(seq.data)[b * seq.strides[0] + std::max<int64_t>(s, 0) * seq.strides[1]];
}

// Per batch row, the starts of its runs of one seq_idx value, then seqlen (no rows without seq_idx).
inline std::vector<std::vector<int64_t>> seq_runs(const TensorRef& seq, int64_t batch, int64_t seqlen) {
  std::vector<std::vector<int64_t>> runs(seq.present() ? batch : 0);
  for (size_t b = 0; b < runs.size(); ++b) {
    runs[b].push_back(0);
    for (int64_t s = 1; s < seqlen; ++s)
      if (seq_value(seq, b, s) != seq_value(seq, b, s - 1)) runs[b].push_back(s);
    runs[b].push_back(seqlen);
  }
  return runs;
}

// The runs within [t0, t0+n) as [r0, r1) (one run without seq_idx: starts is null).
struct TileRuns {
  // first: the start of the run holding t0; last: the first start at or after t0+n.
  const int64_t *first = nullptr, *last = nullptr;
  int64_t t0 = 0, end = 0;
  TileRuns(const std::vector<int64_t>* starts, int64_t t0_, int64_t n) : t0(t0_), end(t0_ + n) {
    if (starts == nullptr) return;
    first = &*(std::upper_bound(starts->begin(), starts->end(), t0) - 1);
    last = &*std::lower_bound(starts->begin(), starts->end(), end);
  }
  int64_t count() const { return first ? last - first : 1; }
  // Whether a fused pass per run pays (always without seq_idx).
  bool fused() const { return first == nullptr || count() * kMinRun <= end - t0; }
  template <typename F>
  void each(F f) const {
    if (first == nullptr) return f(t0, end);
    for (const int64_t* r = first; r < last; ++r) f(std::max(*r, t0), std::min(r[1], end));
  }
};

}  // namespace cc1d
