// fwd_op.cpp — the forward op: its argument table, validation, registry entry and C entry point.
#include "ops/fwd/fwd_op.h"

#include <cstddef>

#include "api/guard.h"
#include "core/arg_table.h"

namespace cc1d {

namespace {

enum Sym { B = kConvBatch, D = kConvDim, L = kConvSeqlen, W = kConvWidth };

enum Row {
  X = kConvX, WEIGHT = kConvWeight, BIAS = kConvBias, SEQ_IDX = kConvSeqIdx, INIT = kConvInit,  // shared
  OUT, FINAL
};
constexpr DtypeRule kLikeX{DtypeRule::SameAs, X, "states and out have x's dtype"};
constexpr DtypeRule kLikeW{DtypeRule::SameAs, WEIGHT, "bias has weight's dtype"};

#define CC1D_MEMBER(m) offsetof(cc1d_fwd_args, m)
const ArgRow kRows[] = {
    {"x", CC1D_MEMBER(x), true, Role::In, kFloat, 3, 3, {dim(B), dim(D), dim(L)}},
    {"weight", CC1D_MEMBER(weight), true, Role::In, kFloat, 2, 2, {dim(D), dim(W)}},
    {"bias", CC1D_MEMBER(bias), false, Role::In, kLikeW, 1, 1, {dim(D)}},
    {"seq_idx", CC1D_MEMBER(seq_idx), false, Role::In, kInt32, 2, 2, {dim(B), dim(L)}},
    {"initial_states", CC1D_MEMBER(initial_states), false, Role::In, kLikeX, 3, 3, {dim(B), dim(D), dim(W, -1)}},
    {"out", CC1D_MEMBER(out), true, Role::Out, kLikeX, 3, 3, {dim(B), dim(D), dim(L)}},
    {"final_states", CC1D_MEMBER(final_states), false, Role::Out, kLikeX, 3, 3, {dim(B), dim(D), dim(W, -1)}},
};
#undef CC1D_MEMBER

const OpTable kTable{"cc1d_causal_conv1d_fwd", "cc1d_fwd_args", sizeof(cc1d_fwd_args), kConvSyms, kConvSymCount, kRows, 7};

}  // namespace

FwdProblem validate_fwd(const cc1d_fwd_args* a) {
  const BoundArgs b = bind_args(kTable, a);
  FwdProblem p;
  p.bind_conv(b, kTable, a->activation);
  p.out = b.t[OUT];
  p.final_states = b.t[FINAL];
  p.nothing_to_do = p.batch == 0 || p.dim == 0;
  return p;
}

#ifdef CC1D_WITH_EMULATOR
namespace emu {
void add_fwd_kernels_f32(std::vector<HostKernel>&);
void add_fwd_kernels_f16(std::vector<HostKernel>&);
void add_fwd_kernels_bf16(std::vector<HostKernel>&);
}  // namespace emu
static void fwd_host_kernels(std::vector<emu::HostKernel>& out) {
  emu::add_fwd_kernels_f32(out);
  emu::add_fwd_kernels_f16(out);
  emu::add_fwd_kernels_bf16(out);
}
#else
static constexpr void (*fwd_host_kernels)(std::vector<emu::HostKernel>&) = nullptr;
#endif

const OpEntry kFwdOp{CC1D_OP_FWD, "fwd", fwd_cpu, one_launch<plan_fwd>, all_fwd_kernels, "fwd.cuh", fwd_host_kernels};

}  // namespace cc1d

extern "C" CC1D_API cc1d_status cc1d_causal_conv1d_fwd(const cc1d_fwd_args* args) {
  return cc1d::run_entry_point("cc1d_causal_conv1d_fwd", cc1d::kFwdOp, args, cc1d::validate_fwd);
}
