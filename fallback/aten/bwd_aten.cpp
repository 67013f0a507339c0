// bwd_aten.cpp — the backward with ATen ops, as _op_bwd.ref_backward: with xs = concat(initial
// states or 0, x), g = dout * silu'(z) (dout without silu; 0 at padding tokens) and m_k the
// seq_idx mask of tap k, dxs[t+k] += m_k w_k g[t], dw_k = sum m_k g xs[t+k], db = sum g, and
// dfinal_states adds to the last W-1 entries of xs. Sums are stacks summed (ATen's add and sub
// take a Scalar, which the stable ABI cannot box); shifts are concatenations with zeros.
#include "fallback/aten/aten_ref.h"

namespace cc1d::aten {

void bwd_reference(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& dout,
                   const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states,
                   bool use_silu, const OptTensor& dx, const OptTensor& dweight, const OptTensor& dbias,
                   const OptTensor& dinitial_states) {
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const ScalarType cdt = compute_type(x, weight);
  const Tensor pre = initial_states ? aten::to(*initial_states, cdt) : aten::new_zeros(x, {B, D, W - 1}, cdt);
  const Tensor xs = aten::cat({pre, aten::to(x, cdt)}, 2);  // position s of the sequence is xs[..., s + W - 1]
  const Tensor w = aten::to(weight, cdt);
  const Tensor zero = aten::new_zeros(xs, {}, cdt);
  std::vector<Tensor> same(W);  // same[k]: (B, 1, L), tap k reads the current token's segment
  if (seq_idx) {
    const Tensor seq_pad = aten::cat({aten::expand(aten::narrow(*seq_idx, 1, 0, 1), {B, W - 1}), *seq_idx}, 1);
    for (int64_t k = 0; k < W; ++k) same[k] = aten::unsqueeze(aten::eq(aten::narrow(seq_pad, 1, k, L), *seq_idx), 1);
  }
  auto tap = [&](const Tensor& t, int64_t k) { return seq_idx ? aten::where(same[k], t, zero) : t; };
  Tensor g = aten::to(dout, cdt);
  if (use_silu) {  // z recomputed as the forward's reference computes it
    std::vector<Tensor> terms;
    for (int64_t k = 0; k < W; ++k) terms.push_back(tap(aten::mul(aten::narrow(xs, 2, k, L), aten::narrow(w, 1, k, 1)), k));
    if (bias) terms.push_back(aten::expand(aten::unsqueeze(aten::to(*bias, cdt), 1), {B, D, L}));
    g = aten::silu_backward(g, aten::sum(aten::stack(terms, 0), 0));
  }
  if (seq_idx)  // padding tokens output a constant 0
    g = aten::where(aten::unsqueeze(aten::ge(*seq_idx, aten::new_zeros(*seq_idx, {}, seq_idx->scalar_type())), 1), g, zero);
  if (dx || dinitial_states) {
    std::vector<Tensor> parts;  // each (B, D, L + W - 1)
    for (int64_t k = 0; k < W; ++k)
      parts.push_back(aten::cat({aten::new_zeros(xs, {B, D, k}, cdt), aten::mul(tap(g, k), aten::narrow(w, 1, k, 1)),
                                 aten::new_zeros(xs, {B, D, W - 1 - k}, cdt)},
                                2));
    if (dfinal_states)  // the final states are the last W-1 entries of xs
      parts.push_back(aten::cat({aten::new_zeros(xs, {B, D, L}, cdt), aten::to(*dfinal_states, cdt)}, 2));
    const Tensor dxs = aten::sum(aten::stack(parts, 0), 0);
    if (dx) aten::copy_(*dx, aten::narrow(dxs, 2, W - 1, L));
    if (dinitial_states) aten::copy_(*dinitial_states, aten::narrow(dxs, 2, 0, W - 1));
  }
  if (dweight) {
    std::vector<Tensor> dw;
    for (int64_t k = 0; k < W; ++k) dw.push_back(aten::sum(aten::mul(tap(g, k), aten::narrow(xs, 2, k, L)), {0, 2}));
    aten::copy_(*dweight, aten::stack(dw, 1));
  }
  if (dbias) aten::copy_(*dbias, aten::sum(g, {0, 2}));
}

}  // namespace cc1d::aten
