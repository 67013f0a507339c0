// update_op.cpp — the decode-step update op: its argument table, validation (including the
// index values of host tensors), launch plan, registry entry and C entry point.
#include "ops/update/update_op.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "api/guard.h"
#include "core/arg_table.h"
#include "core/checked.h"
#include "core/gpu_limits.h"
#include "kernels_src/update_params.h"

namespace cc1d {

namespace {

enum Sym { B, D, L, W, POOL };
const SymbolSpec kSyms[] = {{"batch"}, {"dim"}, {"seqlen", 1}, {"width", 1, CC1D_MAX_WIDTH}, {"pool"}};

enum Row { X, WEIGHT, BIAS, STATE, CACHE, INDICES, OUT };
constexpr DtypeRule kLikeX{DtypeRule::SameAs, X, "conv_state and out have x's dtype"};
constexpr DtypeRule kLikeW{DtypeRule::SameAs, WEIGHT, "bias has weight's dtype"};

#define CC1D_MEMBER(m) offsetof(cc1d_update_args, m)
const ArgRow kRows[] = {
    {"x", CC1D_MEMBER(x), true, Role::In, kFloat, 2, 3, {dim(B), dim(D), dim(L)}},
    {"weight", CC1D_MEMBER(weight), true, Role::In, kFloat, 2, 2, {dim(D), dim(W)}},
    {"bias", CC1D_MEMBER(bias), false, Role::In, kLikeW, 1, 1, {dim(D)}},
    {"conv_state", CC1D_MEMBER(conv_state), true, Role::InOut, kLikeX, 3, 3, {dim(POOL), dim(D), at_least(W, -1)}},
    {"cache_seqlens", CC1D_MEMBER(cache_seqlens), false, Role::In, kInt32, 1, 1, {dim(B)}},
    {"conv_state_indices", CC1D_MEMBER(conv_state_indices), false, Role::In, kInt32, 1, 1, {dim(B)}},
    {"out", CC1D_MEMBER(out), true, Role::Out, kLikeX, 2, 3, {dim(B), dim(D), dim(L)}},
};
#undef CC1D_MEMBER

const OpTable kTable{"cc1d_causal_conv1d_update", "cc1d_update_args", sizeof(cc1d_update_args), kSyms, 5, kRows, 7};

int32_t value_at(const TensorRef& t, int64_t i) { return static_cast<const int32_t*>(t.data)[i * t.strides[0]]; }

// Host tensors: values libcc1d can read before writing anything. (A kernel on CUDA tensors treats
// such rows as padding instead; the host framework can check them on request.)
void check_host_values(const UpdateProblem& p) {
  if (p.cache_seqlens.present())
    for (int64_t b = 0; b < p.batch; ++b)
      if (value_at(p.cache_seqlens, b) < 0)
        bad_arg(kTable, "cache_seqlens", "cache_seqlens[" + std::to_string(b) + "] is " +
                                             std::to_string(value_at(p.cache_seqlens, b)) + "; expected >= 0");
  if (!p.conv_state_indices.present()) return;
  std::vector<int32_t> seen;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int32_t i = value_at(p.conv_state_indices, b);
    if (i < 0) continue;  // a padding slot
    if (i >= p.pool)
      bad_arg(kTable, "conv_state_indices", "conv_state_indices[" + std::to_string(b) + "] is " + std::to_string(i) +
                                                "; expected < pool = conv_state.shape[0] = " + std::to_string(p.pool) +
                                                " (or < 0 for a padding slot)");
    seen.push_back(i);
  }
  std::sort(seen.begin(), seen.end());
  const auto dup = std::adjacent_find(seen.begin(), seen.end());
  if (dup != seen.end())
    bad_arg(kTable, "conv_state_indices", "index " + std::to_string(*dup) +
                                              " appears twice; two rows would update one state slot");
}

}  // namespace

UpdateProblem validate_update(const cc1d_update_args* a) {
  const BoundArgs b = bind_args(kTable, a);
  UpdateProblem p;
  p.bind(b);
  p.batch = b.sym[B];
  p.dim = b.sym[D];
  p.seqlen = b.sym[L];
  p.width = static_cast<int>(b.sym[W]);
  p.pool = b.sym[POOL];
  p.silu = silu_activation(kTable, a->activation);
  p.x = b.t[X];
  p.weight = b.t[WEIGHT];
  p.bias = b.t[BIAS];
  p.conv_state = b.t[STATE];
  p.cache_seqlens = b.t[CACHE];
  p.conv_state_indices = b.t[INDICES];
  p.out = b.t[OUT];
  p.x_dtype = p.x.dtype;
  p.w_dtype = p.weight.dtype;
  p.state_len = p.conv_state.shape[2];
  if (!p.conv_state_indices.given && p.pool != p.batch)
    bad_arg(kTable, "conv_state", "has " + std::to_string(p.pool) + " rows but x has batch " +
                                      std::to_string(p.batch) + "; without conv_state_indices they must be equal");
  if (p.state_len == 0 && p.batch > 0 && p.dim > 0)
    bad_arg(kTable, "conv_state", "state_len (conv_state.shape[2]) is 0; it must hold at least one step");
  if (p.device_type == CC1D_DEVICE_CPU) check_host_values(p);
  p.nothing_to_do = p.batch == 0 || p.dim == 0;
  return p;
}

std::string update_kernel_name(cc1d_dtype x, cc1d_dtype w, int width) {
  return std::string("cc1d::causal_conv1d_update_kernel<") + kernel_type_name(x) + ", " + kernel_type_name(w) +
         ", " + std::to_string(width) + ">";
}

std::vector<std::string> all_update_kernels() {
  std::vector<std::string> names;
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (cc1d_dtype x : dtypes)
    for (cc1d_dtype w : dtypes)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width) names.push_back(update_kernel_name(x, w, width));
  return names;
}

KernelLaunch plan_update(const Problem& problem) {
  const auto& pr = static_cast<const UpdateProblem&>(problem);
  UpdateParams p{};
  p.x = pr.x.data;
  p.conv_state = pr.conv_state.data;
  p.weight = pr.weight.data;
  p.bias = pr.bias.data;
  p.cache_seqlens = static_cast<const int*>(pr.cache_seqlens.data);
  p.conv_state_indices = static_cast<const int*>(pr.conv_state_indices.data);
  p.out = pr.out.data;
  p.batch = pr.batch;
  p.dim = pr.dim;
  p.seqlen = pr.seqlen;
  p.state_len = pr.state_len;
  p.pool = pr.pool;
  copy_strides(p.x_stride, pr.x, 3);
  copy_strides(p.state_stride, pr.conv_state, 3);
  copy_strides(p.w_stride, pr.weight, 2);
  p.bias_stride = pr.bias.strides[0];
  p.cache_stride = pr.cache_seqlens.strides[0];
  p.index_stride = pr.conv_state_indices.strides[0];
  copy_strides(p.out_stride, pr.out, 3);
  p.silu = pr.silu ? 1 : 0;
  KernelLaunch l;
  l.kernel = update_kernel_name(pr.x_dtype, pr.w_dtype, pr.width);
  l.set_params(p);
  const int64_t channel_blocks = ceil_div(pr.dim, kUpdateThreads);
  if (channel_blocks > kMaxGridX)
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d_update: dim " + std::to_string(pr.dim) +
                                   " needs more thread blocks than a grid holds; split the call along dim");
  l.grid[0] = static_cast<unsigned>(channel_blocks);
  l.grid[1] = static_cast<unsigned>(std::min<int64_t>(pr.batch, kMaxGridYZ));  // the kernel strides over batch
  l.block[0] = kUpdateThreads;
  return l;
}

#ifdef CC1D_WITH_EMULATOR
namespace emu {
void add_update_kernels(std::vector<HostKernel>&);
}
static void (*const update_host_kernels)(std::vector<emu::HostKernel>&) = emu::add_update_kernels;
#else
static void (*const update_host_kernels)(std::vector<emu::HostKernel>&) = nullptr;
#endif

const OpEntry kUpdateOp{CC1D_OP_UPDATE, "update", update_cpu, one_launch<plan_update>, all_update_kernels,
                        "update.cuh", update_host_kernels};

}  // namespace cc1d

extern "C" CC1D_API cc1d_status cc1d_causal_conv1d_update(const cc1d_update_args* args) {
  return cc1d::run_entry_point("cc1d_causal_conv1d_update", cc1d::kUpdateOp, args, cc1d::validate_update);
}
