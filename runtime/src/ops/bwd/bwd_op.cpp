// bwd_op.cpp — the backward op: its argument table, validation (including the workspace and the
// deterministic switch), registry entry and C entry points.
#include "ops/bwd/bwd_op.h"

#include <cstddef>

#include "api/guard.h"
#include "core/arg_table.h"
#include "core/env.h"

namespace cc1d {

namespace {

enum Sym { B = kConvBatch, D = kConvDim, L = kConvSeqlen, W = kConvWidth };

enum Row {
  X = kConvX, WEIGHT = kConvWeight, BIAS = kConvBias, SEQ_IDX = kConvSeqIdx, INIT = kConvInit,  // shared
  DOUT, DFINAL, DX, DWEIGHT, DBIAS, DINIT, WORKSPACE
};
constexpr DtypeRule kLikeX{DtypeRule::SameAs, X, "dout, states and their gradients have x's dtype"};
constexpr DtypeRule kLikeW{DtypeRule::SameAs, WEIGHT, "bias, dweight and dbias have weight's dtype"};
constexpr DimRule kAny{};

#define CC1D_MEMBER(m) offsetof(cc1d_bwd_args, m)
const ArgRow kRows[] = {
    {"x", CC1D_MEMBER(x), true, Role::In, kFloat, 3, 3, {dim(B), dim(D), dim(L)}},
    {"weight", CC1D_MEMBER(weight), true, Role::In, kFloat, 2, 2, {dim(D), dim(W)}},
    {"bias", CC1D_MEMBER(bias), false, Role::In, kLikeW, 1, 1, {dim(D)}},
    {"seq_idx", CC1D_MEMBER(seq_idx), false, Role::In, kInt32, 2, 2, {dim(B), dim(L)}},
    {"initial_states", CC1D_MEMBER(initial_states), false, Role::In, kLikeX, 3, 3, {dim(B), dim(D), dim(W, -1)}},
    {"dout", CC1D_MEMBER(dout), true, Role::In, kLikeX, 3, 3, {dim(B), dim(D), dim(L)}},
    {"dfinal_states", CC1D_MEMBER(dfinal_states), false, Role::In, kLikeX, 3, 3, {dim(B), dim(D), dim(W, -1)}},
    {"dx", CC1D_MEMBER(dx), false, Role::Out, kLikeX, 3, 3, {dim(B), dim(D), dim(L)}},
    {"dweight", CC1D_MEMBER(dweight), false, Role::Out, kLikeW, 2, 2, {dim(D), dim(W)}},
    {"dbias", CC1D_MEMBER(dbias), false, Role::Out, kLikeW, 1, 1, {dim(D)}},
    {"dinitial_states", CC1D_MEMBER(dinitial_states), false, Role::Out, kLikeX, 3, 3, {dim(B), dim(D), dim(W, -1)}},
    {"workspace", CC1D_MEMBER(workspace), false, Role::Out, kFloat32, 1, 1, {kAny}},
};
#undef CC1D_MEMBER

const OpTable kTable{"cc1d_causal_conv1d_bwd", "cc1d_bwd_args", sizeof(cc1d_bwd_args), kConvSyms, kConvSymCount, kRows, 12};

// Everything but the workspace's size and presence, which depend on the geometry.
BwdProblem bind_bwd(const cc1d_bwd_args* a) {
  const BoundArgs b = bind_args(kTable, a);
  if (a->deterministic != 0 && a->deterministic != 1)
    bad_arg(kTable, "deterministic", "expected 0 or 1, got " + std::to_string(a->deterministic));
  BwdProblem p;
  p.bind_conv(b, kTable, a->activation);
  p.deterministic = a->deterministic == 1 || env_flag("CAUSAL_CONV1D_DETERMINISTIC");
  p.dout = b.t[DOUT];
  p.dfinal_states = b.t[DFINAL];
  p.dx = b.t[DX];
  p.dweight = b.t[DWEIGHT];
  p.dbias = b.t[DBIAS];
  p.dinitial_states = b.t[DINIT];
  p.workspace_arg = b.t[WORKSPACE];
  // An empty batch still has gradients of weight and bias: zeros.
  p.nothing_to_do = p.dim == 0 || (p.batch == 0 && !p.wants_sums());
  return p;
}

}  // namespace

BwdProblem validate_bwd(const cc1d_bwd_args* a) {
  BwdProblem p = bind_bwd(a);
  p.workspace_bytes = bwd_geometry(p).workspace_bytes;
  const int64_t need = static_cast<int64_t>(p.workspace_bytes / sizeof(float));
  const std::string how = "; ask cc1d_causal_conv1d_bwd_workspace() for the size";
  if (p.workspace_arg.given) {
    const TensorRef& ws = p.workspace_arg;
    if (ws.shape[0] < need)
      bad_arg(kTable, "workspace", "holds " + std::to_string(ws.shape[0]) + " float32 elements, these arguments need " +
                                       std::to_string(need) + how);
    if (ws.shape[0] > 1 && ws.strides[0] != 1)
      bad_arg(kTable, "workspace", "expected unit stride, got stride " + std::to_string(ws.strides[0]));
    if (need > 0) p.workspace = ws.data;
  } else if (need > 0 && p.device_type == CC1D_DEVICE_CUDA) {
    bad_arg(kTable, "workspace", "is required on CUDA tensors when dweight or dbias is wanted (libcc1d never "
                                 "allocates device memory): pass a float32 tensor of at least " +
                                     std::to_string(need) + " elements" + how);
  }
  return p;
}

#ifdef CC1D_WITH_EMULATOR
namespace emu {
void add_bwd_kernels_f32(std::vector<HostKernel>&);
void add_bwd_kernels_f16(std::vector<HostKernel>&);
void add_bwd_kernels_bf16(std::vector<HostKernel>&);
void add_bwd_sum_kernels(std::vector<HostKernel>&);
}  // namespace emu
static void bwd_host_kernels(std::vector<emu::HostKernel>& out) {
  emu::add_bwd_kernels_f32(out);
  emu::add_bwd_kernels_f16(out);
  emu::add_bwd_kernels_bf16(out);
  emu::add_bwd_sum_kernels(out);
}
#else
static constexpr void (*bwd_host_kernels)(std::vector<emu::HostKernel>&) = nullptr;
#endif

const OpEntry kBwdOp{CC1D_OP_BWD, "bwd", bwd_cpu, plan_bwd, all_bwd_kernels, "bwd.cuh", bwd_host_kernels};

}  // namespace cc1d

extern "C" CC1D_API cc1d_status cc1d_causal_conv1d_bwd(const cc1d_bwd_args* args) {
  return cc1d::run_entry_point("cc1d_causal_conv1d_bwd", cc1d::kBwdOp, args, cc1d::validate_bwd);
}

extern "C" CC1D_API cc1d_status cc1d_causal_conv1d_bwd_workspace(const cc1d_bwd_args* args, int64_t* elements) {
  return cc1d::guarded("cc1d_causal_conv1d_bwd_workspace", [&] {
    if (elements == nullptr) cc1d::fail(CC1D_ERR_NULL_POINTER, "cc1d_causal_conv1d_bwd_workspace: elements is NULL");
    *elements = 0;
    if (args == nullptr || args->struct_size < sizeof(cc1d_bwd_args)) cc1d::bind_bwd(args);  // throws
    cc1d_bwd_args a = *args;
    a.workspace = nullptr;  // the size asked for does not depend on it
    const cc1d::BwdProblem p = cc1d::bind_bwd(&a);
    *elements = static_cast<int64_t>(cc1d::bwd_geometry(p).workspace_bytes / sizeof(float));
  });
}
