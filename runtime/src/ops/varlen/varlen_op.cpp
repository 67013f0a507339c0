// varlen_op.cpp — the varlen-states op: its argument table, validation (including the values of
// host cu_seqlens), the choice of the 16-byte path, launch plan, registry entry and C entry point.
#include "ops/varlen/varlen_op.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "api/guard.h"
#include "core/arg_table.h"
#include "core/checked.h"
#include "core/gpu_limits.h"
#include "kernels_src/varlen_params.h"

namespace cc1d {

namespace {

enum Sym { TOTAL, D, B, S };
const SymbolSpec kSyms[] = {{"total_tokens"}, {"dim"}, {"batch"}, {"state_len", 1, CC1D_MAX_VARLEN_STATE_LEN}};

enum Row { X, CU, OUT };
constexpr DtypeRule kLikeX{DtypeRule::SameAs, X, "the states have x's dtype"};

#define CC1D_MEMBER(m) offsetof(cc1d_varlen_states_args, m)
const ArgRow kRows[] = {
    {"x", CC1D_MEMBER(x), true, Role::In, kFloat, 2, 2, {dim(TOTAL), dim(D)}},
    {"cu_seqlens", CC1D_MEMBER(cu_seqlens), true, Role::In, kInt32, 1, 1, {dim(B, 1)}},
    {"out", CC1D_MEMBER(out), true, Role::Out, kLikeX, 3, 3, {dim(B), dim(D), dim(S)}},
};
#undef CC1D_MEMBER

const OpTable kTable{"cc1d_causal_conv1d_varlen_states", "cc1d_varlen_states_args",
                     sizeof(cc1d_varlen_states_args), kSyms, 4, kRows, 3};

int64_t cu_at(const VarlenProblem& p, int64_t i) {
  return static_cast<const int32_t*>(p.cu_seqlens.data)[i * p.cu_seqlens.strides[0]];
}

// Host tensors: the values, read before anything is written (CUDA kernels clamp instead).
void check_host_values(const VarlenProblem& p) {
  for (int64_t i = 0; i <= p.batch; ++i) {
    const int64_t v = cu_at(p, i);
    const std::string at = "cu_seqlens[" + std::to_string(i) + "] is " + std::to_string(v);
    if (v < 0 || v > p.total)
      bad_arg(kTable, "cu_seqlens", at + "; expected cumulative lengths in [0, total_tokens = x.shape[0] = " +
                                        std::to_string(p.total) + "]");
    if (i > 0 && v < cu_at(p, i - 1))
      bad_arg(kTable, "cu_seqlens", at + ", below cu_seqlens[" + std::to_string(i - 1) + "] = " +
                                        std::to_string(cu_at(p, i - 1)) + "; expected non-decreasing cumulative lengths");
  }
}

// Whether every access of the 16-byte path is an aligned 16-byte vector of consecutive elements.
bool vector_layout(const VarlenProblem& p) {
  const int64_t n = 16 / dtype_size(p.dtype);  // elements per vector
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.x.strides[1] == 1 && p.out.strides[1] == 1 && p.dim % n == 0 && p.x.strides[0] % n == 0 &&
         p.out.strides[0] % n == 0 && p.out.strides[2] % n == 0 && aligned(p.out.data) &&
         (p.total == 0 || aligned(p.x.data));
}

}  // namespace

VarlenProblem validate_varlen(const cc1d_varlen_states_args* a) {
  const BoundArgs b = bind_args(kTable, a);
  VarlenProblem p;
  p.bind(b);
  p.total = b.sym[TOTAL];
  p.dim = b.sym[D];
  p.batch = b.sym[B];
  p.state_len = b.sym[S];
  p.x = b.t[X];
  p.cu_seqlens = b.t[CU];
  p.out = b.t[OUT];
  p.dtype = p.x.dtype;
  if (p.device_type == CC1D_DEVICE_CPU) check_host_values(p);
  p.nothing_to_do = p.batch == 0 || p.dim == 0;
  p.vec = !p.nothing_to_do && vector_layout(p);
  return p;
}

void varlen_bounds(const VarlenProblem& p, int64_t b, int64_t* begin, int64_t* end) {
  const int64_t e = std::clamp<int64_t>(cu_at(p, b + 1), 0, p.total);
  *begin = std::max(std::clamp<int64_t>(cu_at(p, b), 0, e), e - p.state_len);
  *end = e;
}

std::string varlen_kernel_name(cc1d_dtype x, bool vec) {
  return std::string("cc1d::causal_conv1d_varlen_states_kernel<") + kernel_type_name(x) + ", " +
         (vec ? "true" : "false") + ">";
}

std::vector<std::string> all_varlen_kernels() {
  std::vector<std::string> names;
  for (cc1d_dtype x : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
    for (bool vec : {false, true}) names.push_back(varlen_kernel_name(x, vec));
  return names;
}

KernelLaunch plan_varlen(const Problem& problem) {
  const auto& pr = static_cast<const VarlenProblem&>(problem);
  VarlenParams p{};
  p.x = pr.x.data;
  p.cu_seqlens = static_cast<const int*>(pr.cu_seqlens.data);
  p.out = pr.out.data;
  p.total = pr.total;
  p.dim = pr.dim;
  p.batch = pr.batch;
  p.state_len = pr.state_len;
  copy_strides(p.x_stride, pr.x, 2);
  p.cu_stride = pr.cu_seqlens.strides[0];
  copy_strides(p.out_stride, pr.out, 3);
  KernelLaunch l;
  l.kernel = varlen_kernel_name(pr.dtype, pr.vec);
  l.set_params(p);
  const int64_t per_thread = pr.vec ? 16 / dtype_size(pr.dtype) : 1;
  const int64_t blocks = ceil_div(ceil_div(pr.dim, per_thread), kVarlenThreads);
  if (blocks > kMaxGridX)
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d_varlen_states: dim " + std::to_string(pr.dim) +
                                   " needs more thread blocks than a grid holds; split the call along dim");
  l.grid[0] = static_cast<unsigned>(blocks);
  // The kernel strides over state slots and sequences beyond the grid's y and z limits.
  l.grid[1] = static_cast<unsigned>(std::min<int64_t>(pr.state_len, kMaxGridYZ));
  l.grid[2] = static_cast<unsigned>(std::min<int64_t>(pr.batch, kMaxGridYZ));
  l.block[0] = kVarlenThreads;
  return l;
}

#ifdef CC1D_WITH_EMULATOR
namespace emu {
void add_varlen_kernels(std::vector<HostKernel>&);
}
static void (*const varlen_host_kernels)(std::vector<emu::HostKernel>&) = emu::add_varlen_kernels;
#else
static void (*const varlen_host_kernels)(std::vector<emu::HostKernel>&) = nullptr;
#endif

const OpEntry kVarlenOp{CC1D_OP_VARLEN_STATES, "varlen_states", varlen_cpu, one_launch<plan_varlen>,
                        all_varlen_kernels, "varlen.cuh", varlen_host_kernels};

}  // namespace cc1d

extern "C" CC1D_API cc1d_status cc1d_causal_conv1d_varlen_states(const cc1d_varlen_states_args* args) {
  return cc1d::run_entry_point("cc1d_causal_conv1d_varlen_states", cc1d::kVarlenOp, args, cc1d::validate_varlen);
}
