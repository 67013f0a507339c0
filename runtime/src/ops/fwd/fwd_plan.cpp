// fwd_plan.cpp — the forward's kernel launch: which variant, the FwdParams block and the
// geometry. Followed by every kernel-running backend (nvrtc, emulate), so both run the same.
#include <algorithm>

#include "core/checked.h"
#include "core/error.h"
#include "core/gpu_limits.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"

namespace cc1d {

std::string fwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int layout) {
  return std::string("cc1d::causal_conv1d_fwd_kernel<") + kernel_type_name(x) + ", " + kernel_type_name(w) + ", " +
         std::to_string(width) + ", " + std::to_string(layout) + ">";
}

std::vector<std::string> all_fwd_kernels() {
  std::vector<std::string> names;
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (cc1d_dtype x : dtypes)
    for (cc1d_dtype w : dtypes)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width)
        for (int layout : {kLayoutTime, kLayoutChannel}) names.push_back(fwd_kernel_name(x, w, width, layout));
  return names;
}

KernelLaunch plan_fwd(const Problem& problem) {
  const auto& pr = static_cast<const FwdProblem&>(problem);
  FwdParams p{};
  p.x = pr.x.data;
  p.weight = pr.weight.data;
  p.bias = pr.bias.data;
  p.seq_idx = static_cast<const int*>(pr.seq_idx.data);
  p.initial_states = pr.initial_states.data;
  p.out = pr.out.data;
  p.final_states = pr.final_states.data;
  p.batch = pr.batch;
  p.dim = pr.dim;
  p.seqlen = pr.seqlen;
  copy_strides(p.x_stride, pr.x, 3);
  copy_strides(p.w_stride, pr.weight, 2);
  p.bias_stride = pr.bias.strides[0];
  copy_strides(p.seq_stride, pr.seq_idx, 2);
  copy_strides(p.init_stride, pr.initial_states, 3);
  copy_strides(p.out_stride, pr.out, 3);
  copy_strides(p.final_stride, pr.final_states, 3);
  p.silu = pr.silu ? 1 : 0;

  const int layout = pr.time_major ? kLayoutTime : kLayoutChannel;
  if (layout == kLayoutTime) {
    p.num_time_chunks = ceil_div(pr.seqlen, (long long)kFwdThreads * kFwdItemsTime);
    p.num_channel_blocks = pr.dim;
  } else {
    p.num_time_chunks = ceil_div(pr.seqlen, kFwdChunkChannel);
    p.num_channel_blocks = ceil_div(pr.dim, kFwdThreads);
  }
  const long long per_batch = mul_checked(p.num_channel_blocks, p.num_time_chunks, "causal_conv1d forward blocks");
  if (per_batch >= (1LL << 32))
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d forward: " + std::to_string(per_batch) +
                                   " thread blocks per batch row exceed the kernel's 32-bit block index; "
                                   "split the call along dim or seqlen");
  KernelLaunch l;
  l.kernel = fwd_kernel_name(pr.x_dtype, pr.w_dtype, pr.width, layout);
  l.set_params(p);
  // The kernel strides over both axes, so the grid is capped under the hardware limits.
  l.grid[0] = (unsigned)std::min<long long>(std::max<long long>(per_batch, 1), kMaxGridX);
  l.grid[1] = (unsigned)std::min<long long>(std::max<long long>(pr.batch, 1), kMaxGridYZ);
  l.block[0] = kFwdThreads;
  return l;
}

}  // namespace cc1d
