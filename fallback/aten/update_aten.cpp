// update_aten.cpp — the decode step with ATen ops, one batch row at a time: the row's window is
// read from its state (a shift or a circular buffer, which spans at most two runs), the output is
// the forward over x with that window as initial states, then x is written into the state.
#include <algorithm>

#include "fallback/aten/aten_ref.h"

namespace cc1d::aten {

namespace {

// `n` entries of `state` (dim, state_len) along time from `start` (mod state_len), wrapping.
Tensor circular_read(const Tensor& state, int64_t start, int64_t n) {
  const int64_t S = state.size(1);
  start = ((start % S) + S) % S;
  const int64_t first = std::min(S - start, n);
  if (first == n) return aten::narrow(state, 1, start, n);
  return aten::cat({aten::narrow(state, 1, start, first), aten::narrow(state, 1, 0, n - first)}, 1);
}

// Writes src (dim, n) into `state` at time positions start, start+1, ... (mod state_len).
void circular_write(const Tensor& state, int64_t start, const Tensor& src) {
  const int64_t S = state.size(1), n = src.size(1);
  start %= S;
  const int64_t first = std::min(S - start, n);
  aten::copy_(aten::narrow(state, 1, start, first), aten::narrow(src, 1, 0, first));
  if (first < n) aten::copy_(aten::narrow(state, 1, 0, n - first), aten::narrow(src, 1, first, n - first));
}

}  // namespace

void update_reference(const Tensor& x, const Tensor& conv_state, const Tensor& weight, const OptTensor& bias,
                      const OptTensor& cache_seqlens, const OptTensor& conv_state_indices, bool silu,
                      const Tensor& out) {
  const bool two_d = x.dim() == 2;
  const Tensor x3 = two_d ? aten::unsqueeze(x, 2) : x, out3 = two_d ? aten::unsqueeze(out, 2) : out;
  const int64_t B = x3.size(0), L = x3.size(2), W = weight.size(1);
  const int64_t pool = conv_state.size(0), S = conv_state.size(2);
  std::vector<int64_t> rows(B), cache;
  for (int64_t b = 0; b < B; ++b) rows[b] = b;
  if (conv_state_indices) rows = aten::host_ints(*conv_state_indices);
  if (cache_seqlens) cache = aten::host_ints(*cache_seqlens);
  for (int64_t b = 0; b < B; ++b) {
    const Tensor ob = aten::select(out3, 0, b);
    const int64_t row = rows[b];
    if (row < 0 || row >= pool || (cache_seqlens && cache[b] < 0)) {  // padding: output 0, state kept
      aten::zero_(ob);
      continue;
    }
    const Tensor state = aten::select(conv_state, 0, row), xb = aten::select(x3, 0, b);
    const Tensor window = cache_seqlens ? circular_read(state, cache[b] - (W - 1), W - 1)
                                        : aten::narrow(state, 1, S - (W - 1), W - 1);
    fwd_reference(aten::unsqueeze(xb, 0), weight, bias, OptTensor(), aten::unsqueeze(window, 0), silu, aten::unsqueeze(ob, 0),
                  OptTensor());
    if (cache_seqlens) {  // later tokens overwrite earlier ones at the same slot
      const int64_t first = std::max<int64_t>(0, L - S);
      circular_write(state, cache[b] + first, aten::narrow(xb, 1, first, L - first));
    } else {
      aten::copy_(state, aten::narrow(aten::cat({state, xb}, 1), 1, L, S));
    }
  }
}

std::vector<int64_t> host_ints(const Tensor& t) {
  const Tensor h = aten::call("aten::to", "dtype", aten::to_cpu(t), ScalarType::Long, false, true, none);  // a copy
  std::vector<int64_t> v(h.numel());
  const auto* p = static_cast<const int64_t*>(h.data_ptr());
  for (int64_t i = 0; i < h.numel(); ++i) v[i] = p[i * h.stride(0)];
  return v;
}

}  // namespace cc1d::aten
