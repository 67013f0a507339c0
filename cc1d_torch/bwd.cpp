// bwd.cpp — the backward's kernel: the gradients allocated as the Python op allocates them
// (_op_bwd.alloc_grads: an empty (0,) tensor for one not wanted, dx written into dx_out when
// given, dinitial_states channel-last when x is), then libcc1d or the ATen reference writes them.
// On CUDA tensors libcc1d needs an fp32 workspace for dweight/dbias: its size is asked of libcc1d,
// the memory comes from torch's allocator on the tensors' device and stream.
#include "cc1d_torch/kernels.h"
#include "fallback/aten/aten_ref.h"

namespace cc1d_torch {

namespace aten = cc1d::aten;

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                               const Tensor& dout, const OptTensor& seq_idx,
                                               const OptTensor& initial_states, const OptTensor& dfinal_states,
                                               const OptTensor& dx_out, bool silu, bool want_dx, bool want_dweight,
                                               bool want_dbias, bool want_dinitial_states, bool deterministic,
                                               Str backend) {
  check_rank("bwd", "x", x, 3, 3);
  check_rank("bwd", "weight", weight, 2, 2);
  const int64_t B = x.size(0), D = x.size(1), W = weight.size(1);
  const bool channel_last = x.stride(1) == 1 && x.stride(2) != 1;
  const Tensor dx = want_dx && !dx_out ? aten::empty_like(x) : aten::new_empty(x, {0});
  const Tensor dw = want_dweight ? aten::new_empty(weight, {D, W}) : aten::new_empty(weight, {0});
  const Tensor db = aten::new_empty(weight, {want_dbias ? D : 0});
  const Tensor di = !want_dinitial_states ? aten::new_empty(x, {0})
                    : channel_last        ? aten::transpose(aten::new_empty(x, {B, W - 1, D}), 1, 2)
                                          : aten::new_empty(x, {B, D, W - 1});
  auto wanted = [](bool want, const Tensor& t) { return want ? OptTensor(t) : OptTensor(); };
  const OptTensor dx_target = want_dx ? (dx_out ? dx_out : OptTensor(dx)) : OptTensor();
  const OptTensor dw_target = wanted(want_dweight, dw), db_target = wanted(want_dbias, db);
  const OptTensor di_target = wanted(want_dinitial_states, di);
  OpCall call{CC1D_OP_BWD,
              {{"x", x, false},
               {"weight", weight, false},
               {"bias", bias, false},
               {"seq_idx", seq_idx, false},
               {"initial_states", initial_states, false},
               {"dout", dout, false},
               {"dfinal_states", dfinal_states, false},
               {"dx", dx_target, true},
               {"dweight", dw_target, true},
               {"dbias", db_target, true},
               {"dinitial_states", di_target, true}},
              nullptr, nullptr};
  call.run_lib = [&](const std::vector<const cc1d_tensor*>& t, int32_t backend_id, void* stream) {
    cc1d_bwd_args a{};
    a.struct_size = sizeof a;
    a.x = t[0], a.weight = t[1], a.bias = t[2], a.seq_idx = t[3], a.initial_states = t[4], a.dout = t[5];
    a.dfinal_states = t[6], a.dx = t[7], a.dweight = t[8], a.dbias = t[9], a.dinitial_states = t[10];
    a.activation = silu ? CC1D_ACT_SILU : CC1D_ACT_NONE;
    a.deterministic = deterministic ? 1 : 0;
    a.backend = backend_id;
    a.stream = stream;
    // The workspace lives until the call returns: torch's allocator reuses it only after the
    // kernels queued on this stream, so it need not outlive them.
    OptTensor workspace;
    cc1d_tensor ws{};
    if (t[0]->device_type == CC1D_DEVICE_CUDA && backend_id != CC1D_BACKEND_ATEN && (a.dweight || a.dbias)) {
      int64_t n = 0;
      if (const cc1d_status s = cc1d_causal_conv1d_bwd_workspace(&a, &n); s != CC1D_OK) return s;
      workspace = aten::new_empty(x, {n}, aten::ScalarType::Float);
      ws.data = workspace->data_ptr();
      ws.dtype = CC1D_FLOAT32;
      ws.device_type = CC1D_DEVICE_CUDA;
      ws.device_index = t[0]->device_index;
      ws.ndim = 1;
      ws.shape[0] = n;
      ws.strides[0] = 1;
      a.workspace = &ws;
    }
    return cc1d_causal_conv1d_bwd(&a);
  };
  call.run_aten = [&] {
    aten::bwd_reference(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, silu, dx_target, dw_target,
                        db_target, di_target);
  };
  run(call, std::string(backend.data(), backend.size()));
  return std::make_tuple(dx, dw, db, di);
}

}  // namespace cc1d_torch
