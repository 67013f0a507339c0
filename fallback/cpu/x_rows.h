// x_rows.h — the convolution's input as the cpu backend's forward and backward read it: x at
// time s >= 0, the initial states (or zeros) at s < 0, an element or a step's channels at once.
#pragma once
#include <algorithm>
#include <cstdint>

#include "fallback/cpu/convert.h"
#include "ops/conv_inputs.h"

namespace cc1d {

// One element of dtype dt at off (elements) from base, as float.
inline float load(const void* base, cc1d_dtype dt, int64_t off) {
  float v;
  gather_fn(dt)(base, off, 1, 1, &v);
  return v;
}

// x at time s of row (b, c): the initial states (or 0) for s < 0.
inline float x_at(const ConvProblem& p, int64_t b, int64_t c, int64_t s) {
  if (s >= 0) return load(p.x.data, p.x_dtype, b * p.x.strides[0] + c * p.x.strides[1] + s * p.x.strides[2]);
  if (!p.initial_states.present()) return 0.f;
  const TensorRef& st = p.initial_states;
  return load(st.data, p.x_dtype, b * st.strides[0] + c * st.strides[1] + (p.width - 1 + s) * st.strides[2]);
}

// Channels [c0, c0+nc) of batch row b at time s into row, as x_at gives them, in one gather
// (element by element, a short row's steps before time 0 took most of its backward).
inline void x_step(const ConvProblem& p, int64_t b, int64_t s, int64_t c0, int64_t nc, float* row) {
  const TensorRef& t = s >= 0 ? p.x : p.initial_states;
  if (s < 0 && !t.present()) return (void)std::fill(row, row + nc, 0.f);
  const int64_t at = s >= 0 ? s : p.width - 1 + s;
  gather_fn(p.x_dtype)(t.data, b * t.strides[0] + c0 * t.strides[1] + at * t.strides[2], t.strides[1], nc, row);
}

}  // namespace cc1d
