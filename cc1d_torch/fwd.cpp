// fwd.cpp — the forward's kernel: outputs allocated as the Python op allocates them (out like x,
// final states channel-last when x is), then libcc1d or the ATen reference writes them.
#include "cc1d_torch/kernels.h"
#include "fallback/aten/aten_ref.h"

namespace cc1d_torch {

namespace aten = cc1d::aten;

std::tuple<Tensor, Tensor> fwd(const Tensor& x, const Tensor& weight, const OptTensor& bias, const OptTensor& seq_idx,
                               const OptTensor& initial_states, bool return_final_states, bool silu,
                               Str backend) {
  check_rank("fwd", "x", x, 3, 3);
  check_rank("fwd", "weight", weight, 2, 2);
  const int64_t B = x.size(0), D = x.size(1), W = weight.size(1);
  const Tensor out = aten::empty_like(x);
  const bool channel_last = x.stride(1) == 1 && x.stride(2) != 1;
  const Tensor fs = !return_final_states ? aten::new_empty(x, {0})
                    : channel_last       ? aten::transpose(aten::new_empty(x, {B, W - 1, D}), 1, 2)
                                         : aten::new_empty(x, {B, D, W - 1});
  const OptTensor final_states = return_final_states ? OptTensor(fs) : OptTensor();
  OpCall call{CC1D_OP_FWD,
              {{"x", x, false},
               {"weight", weight, false},
               {"bias", bias, false},
               {"seq_idx", seq_idx, false},
               {"initial_states", initial_states, false},
               {"out", out, true},
               {"final_states", final_states, true}},
              nullptr, nullptr};
  call.run_lib = [&](const std::vector<const cc1d_tensor*>& t, int32_t backend_id, void* stream) {
    cc1d_fwd_args a{};
    a.struct_size = sizeof a;
    a.x = t[0], a.weight = t[1], a.bias = t[2], a.seq_idx = t[3], a.initial_states = t[4], a.out = t[5];
    a.final_states = t[6];
    a.activation = silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
    a.backend = backend_id;
    a.stream = stream;
    return cc1d_causal_conv1d_fwd(&a);
  };
  call.run_aten = [&] { aten::fwd_reference(x, weight, bias, seq_idx, initial_states, silu, out, final_states); };
  run(call, std::string(backend.data(), backend.size()));
  return std::make_tuple(out, fs);
}

}  // namespace cc1d_torch
