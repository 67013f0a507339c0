// fwd_aten.cpp — the forward with ATen ops: a sum over the W taps of shifted copies of x (exact
// seq_idx masking, no TF32 convolution), as _op_fwd.ref_forward.
#include <algorithm>

#include "fallback/aten/aten_ref.h"

namespace cc1d::aten {

void fwd_reference(const Tensor& x, const Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
                   const OptTensor& initial_states, bool use_silu, const Tensor& out, const OptTensor& final_states) {
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const ScalarType cdt = compute_type(x, weight);
  const Tensor pre = initial_states ? aten::to(*initial_states, x.scalar_type()) : aten::new_zeros(x, {B, D, W - 1}, x.scalar_type());
  const Tensor xs = aten::cat({aten::to(pre, cdt), aten::to(x, cdt)}, 2);  // position s of the sequence is xs[..., s + W - 1]
  const Tensor w = aten::to(weight, cdt);
  const Tensor zero = aten::new_zeros(xs, {}, cdt);
  Tensor seq_pad;
  if (seq_idx) seq_pad = aten::cat({aten::expand(aten::narrow(*seq_idx, 1, 0, 1), {B, W - 1}), *seq_idx}, 1);
  std::vector<Tensor> terms;
  for (int64_t k = 0; k < W; ++k) {  // the tap at t - W + 1 + k
    Tensor term = aten::mul(aten::narrow(xs, 2, k, L), aten::narrow(w, 1, k, 1));
    if (seq_idx) term = aten::where(aten::unsqueeze(aten::eq(aten::narrow(seq_pad, 1, k, L), *seq_idx), 1), term, zero);
    terms.push_back(term);
  }
  if (bias) terms.push_back(aten::expand(aten::unsqueeze(aten::to(*bias, cdt), 1), {B, D, L}));
  Tensor acc = aten::sum(aten::stack(terms, 0), 0);
  if (use_silu) acc = aten::silu(acc);
  if (seq_idx) acc = aten::where(aten::unsqueeze(aten::ge(*seq_idx, aten::new_zeros(*seq_idx, {}, seq_idx->scalar_type())), 1), acc, zero);
  aten::copy_(out, acc);
  if (final_states) {  // the last W-1 entries of concat(pre, x), in x's dtype
    const int64_t from_x = std::min(L, W - 1);
    aten::copy_(*final_states, aten::cat({aten::narrow(pre, 2, from_x, W - 1 - from_x), aten::narrow(x, 2, L - from_x, from_x)}, 2));
  }
}

}  // namespace cc1d::aten
