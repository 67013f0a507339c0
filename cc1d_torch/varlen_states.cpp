// varlen_states.cpp — the varlen-states kernel: the states allocated as the Python op (and upstream)
// allocates them, empty(batch, state_len, dim).transpose(1, 2), then libcc1d or the ATen reference
// writes them.
#include "cc1d_torch/kernels.h"
#include "fallback/aten/aten_ref.h"

namespace cc1d_torch {

namespace aten = cc1d::aten;

Tensor varlen_states(const Tensor& x, const Tensor& cu_seqlens, int64_t state_len, Str backend) {
  check_rank("varlen_states", "x", x, 2, 2);
  check_rank("varlen_states", "cu_seqlens", cu_seqlens, 1, 1);
  if (state_len < 1 || state_len > CC1D_MAX_VARLEN_STATE_LEN || cu_seqlens.size(0) < 1)
    fail(CC1D_ERR_INVALID_ARGUMENT, "varlen_states: " +
                                        (cu_seqlens.size(0) < 1 ? std::string("argument 'cu_seqlens' must hold batch+1 >= 1 entries")
                                                                : "argument 'state_len' must be between 1 and " +
                                                                      std::to_string(CC1D_MAX_VARLEN_STATE_LEN) +
                                                                      ", got " + std::to_string(state_len)));
  const Tensor out = aten::transpose(aten::new_empty(x, {cu_seqlens.size(0) - 1, state_len, x.size(1)}), 1, 2);
  OpCall call{CC1D_OP_VARLEN_STATES, {{"x", x, false}, {"cu_seqlens", cu_seqlens, false}, {"out", out, true}}, nullptr,
              nullptr};
  call.run_lib = [&](const std::vector<const cc1d_tensor*>& t, int32_t backend_id, void* stream) {
    cc1d_varlen_states_args a{};
    a.struct_size = sizeof a;
    a.x = t[0], a.cu_seqlens = t[1], a.out = t[2];
    a.backend = backend_id;
    a.stream = stream;
    return cc1d_causal_conv1d_varlen_states(&a);
  };
  call.run_aten = [&] { aten::varlen_states_reference(x, cu_seqlens, out); };
  run(call, std::string(backend.data(), backend.size()));
  return out;
}

}  // namespace cc1d_torch
