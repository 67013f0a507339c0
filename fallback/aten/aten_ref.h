// aten_ref.h — the ATen reference: each op written with ATen ops (aten.h), for any device. It is
// the "aten" backend of the libtorch op library (cc1d_torch/) and its fallback where libcc1d
// cannot serve. The same math as the Python references (_op_<op>.py): computed in float32
// (float64 when an input is float64), outputs rounded to their own dtype. Arguments are trusted:
// callers validate them first (libcc1d's tables).
#pragma once
#include "fallback/aten/aten.h"

namespace cc1d::aten {

// The dtype the references compute in: float64 when an input is, else float32.
inline ScalarType compute_type(const Tensor& x, const Tensor& weight) {
  const bool f64 = x.scalar_type() == ScalarType::Double || weight.scalar_type() == ScalarType::Double;
  return f64 ? ScalarType::Double : ScalarType::Float;
}

// The forward: writes `out` and, when given, `final_states` (see cc1d_fwd_args).
void fwd_reference(const Tensor& x, const Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
                   const OptTensor& initial_states, bool silu, const Tensor& out, const OptTensor& final_states);

// The decode step: writes `out` and updates `conv_state` in place (see cc1d_update_args). An
// index out of range or a negative cache_seqlens makes its row padding (output 0, state kept).
void update_reference(const Tensor& x, const Tensor& conv_state, const Tensor& weight, const OptTensor& bias,
                      const OptTensor& cache_seqlens, const OptTensor& conv_state_indices, bool silu,
                      const Tensor& out);

// The backward: writes each gradient whose output is given (see cc1d_bwd_args); bias and
// initial_states may be absent (zero) while dbias and dinitial_states are asked for.
void bwd_reference(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& dout,
                   const OptTensor& seq_idx, const OptTensor& initial_states, const OptTensor& dfinal_states, bool silu,
                   const OptTensor& dx, const OptTensor& dweight, const OptTensor& dbias,
                   const OptTensor& dinitial_states);
// The varlen states: writes `out` (batch, dim, state_len) from x (total, dim) and cu_seqlens
// (batch+1,) (see cc1d_varlen_states_args); values clamped as the CUDA kernel clamps them.
void varlen_states_reference(const Tensor& x, const Tensor& cu_seqlens, const Tensor& out);

}  // namespace cc1d::aten
