// kernels.h — one kernel per op of ops.def, with the C++ signature of its schema (str arguments
// are Str, optional tensors OptTensor: aten.h). Each allocates its outputs, describes the call
// to run() (run.h) and returns.
#pragma once
#include <string>
#include <tuple>

#include "cc1d_torch/run.h"

namespace cc1d_torch {

using cc1d::aten::Str;

std::tuple<Tensor, Tensor> fwd(const Tensor& x, const Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
                               const OptTensor& initial_states, bool return_final_states, bool silu,
                               Str backend);

Tensor update(const Tensor& x, const Tensor& conv_state, const Tensor& weight, const OptTensor& bias,
              const OptTensor& cache_seqlens, const OptTensor& conv_state_indices, bool silu, Str backend);

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                               const Tensor& dout, const OptTensor& seq_idx,
                                               const OptTensor& initial_states, const OptTensor& dfinal_states,
                                               const OptTensor& dx_out, bool silu, bool want_dx, bool want_dweight,
                                               bool want_dbias, bool want_dinitial_states, bool deterministic,
                                               Str backend);
Tensor varlen_states(const Tensor& x, const Tensor& cu_seqlens, int64_t state_len, Str backend);

// Raises unless `t` has `rank` dimensions (outputs are allocated from shapes before libcc1d
// validates the rest).
void check_rank(const char* op, const char* arg, const Tensor& t, int64_t lo, int64_t hi);

}  // namespace cc1d_torch
