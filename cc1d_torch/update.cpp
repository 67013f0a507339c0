// update.cpp — the decode step's kernel: out allocated like x, conv_state updated in place by
// libcc1d or the ATen reference.
#include "cc1d_torch/kernels.h"
#include "fallback/aten/aten_ref.h"

namespace cc1d_torch {

namespace aten = cc1d::aten;

Tensor update(const Tensor& x, const Tensor& conv_state, const Tensor& weight, const OptTensor& bias,
              const OptTensor& cache_seqlens, const OptTensor& conv_state_indices, bool silu, Str backend) {
  check_rank("update", "x", x, 2, 3);
  const Tensor out = aten::empty_like(x);
  OpCall call{CC1D_OP_UPDATE,
              {{"x", x, false},
               {"conv_state", conv_state, true},
               {"weight", weight, false},
               {"bias", bias, false},
               {"cache_seqlens", cache_seqlens, false},
               {"conv_state_indices", conv_state_indices, false},
               {"out", out, true}},
              nullptr, nullptr};
  call.run_lib = [&](const std::vector<const cc1d_tensor*>& t, int32_t backend_id, void* stream) {
    cc1d_update_args a{};
    a.struct_size = sizeof a;
    a.x = t[0], a.conv_state = t[1], a.weight = t[2], a.bias = t[3], a.cache_seqlens = t[4];
    a.conv_state_indices = t[5], a.out = t[6];
    a.activation = silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
    a.backend = backend_id;
    a.stream = stream;
    return cc1d_causal_conv1d_update(&a);
  };
  call.run_aten = [&] {
    aten::update_reference(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, out);
  };
  run(call, std::string(backend.data(), backend.size()));
  return out;
}

}  // namespace cc1d_torch
