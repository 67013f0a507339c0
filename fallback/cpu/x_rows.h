// x_rows.h — the convolution's input as the cpu backend's forward and backward read it: x at
// time s >= 0, the initial states (or zeros) at s < 0, an element or a tile of steps at once;
// and a tile of steps written out.
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

// Channel-first runs of at least this many steps take the SIMD transposes (simd_transpose.inc);
// shorter ones the gather a step. Rows of 1024 channels, 2^23 elements, silu, kernel GB/s, gathers
// against transposes (bench/cpu_fwd.py --shape, Zen 4 VM, 2026-12-05): bf16 2 steps 5.1 against
// 2.4, 4 steps 5.3 / 4.4, 5 steps 5.4 / 4.9, 6 steps 4.9 / 5.9, 7 steps 5.0 / 6.3, 16 steps 4.6
// / 7.5; fp32 2 steps 7.6 / 5.5, 5 steps 8.2 / 8.9, 6 steps 7.3 / 8.4, 8 steps 9.1 / 12.7.
constexpr int64_t kMinTransposeSteps = 6;
inline bool transposed_run(const TensorRef& t, int64_t steps) {
  return steps >= kMinTransposeSteps && t.strides[2] == 1 && t.strides[1] != 1;
}

// Steps [t0, t0+n) of channels [c0, c0+nc) of the x-shaped tensor t (x, dout) into rows of nc
// floats (dst[i*nc + j]: step t0+i, channel c0+j): in blocks where transposed_run, else a gather
// a step.
inline void get_steps(const TensorRef& t, cc1d_dtype dt, int64_t b, int64_t t0, int64_t n, int64_t c0, int64_t nc,
                      float* dst) {
  const int64_t off = b * t.strides[0] + c0 * t.strides[1] + t0 * t.strides[2];
  if (transposed_run(t, n))
    return simd().rows_to_f32_t(dt, static_cast<const char*>(t.data) + off * dtype_size(dt), t.strides[1], nc, n, dst,
                                nc);
  for (int64_t i = 0; i < n; ++i) gather_fn(dt)(t.data, off + i * t.strides[2], t.strides[1], nc, dst + i * nc);
}

// The reverse of get_steps: rows of nc floats into the x-shaped tensor out (out, dx).
inline void put_steps(const TensorRef& out, cc1d_dtype dt, int64_t b, int64_t t0, int64_t n, int64_t c0, int64_t nc,
                      const float* src) {
  const int64_t off = b * out.strides[0] + c0 * out.strides[1] + t0 * out.strides[2];
  if (transposed_run(out, n))
    return simd().rows_from_f32_t(dt, src, nc, nc, n, static_cast<char*>(out.data) + off * dtype_size(dt),
                                  out.strides[1]);
  for (int64_t i = 0; i < n; ++i) scatter_fn(dt)(out.data, off + i * out.strides[2], out.strides[1], nc, src + i * nc);
}

// Steps [s0, s0+n) of x as x_at gives them (the initial states or zeros before time 0), in
// get_steps' rows.
inline void x_steps(const ConvProblem& p, int64_t b, int64_t s0, int64_t n, int64_t c0, int64_t nc, float* dst) {
  if (s0 < 0) {
    const int64_t m = std::min(n, -s0);
    if (p.initial_states.present())
      get_steps(p.initial_states, p.x_dtype, b, p.width - 1 + s0, m, c0, nc, dst);
    else
      std::fill(dst, dst + m * nc, 0.f);
    s0 += m, n -= m, dst += m * nc;
  }
  if (n > 0) get_steps(p.x, p.x_dtype, b, s0, n, c0, nc, dst);
}

}  // namespace cc1d
