#include "fwd_plan.h"

#include <algorithm>
#include <vector>

#include "error.h"

namespace cc1d {

const char* kernel_type_name(cc1d_dtype dtype) {
  switch (dtype) {
    case CC1D_FLOAT16: return "cc1d::half_t";
    case CC1D_BFLOAT16: return "cc1d::bf16_t";
    default: return "float";
  }
}

static std::string fwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int layout) {
  return std::string("cc1d::causal_conv1d_fwd_kernel<") + kernel_type_name(x) + ", " +
         kernel_type_name(w) + ", " + std::to_string(width) + ", " + std::to_string(layout) + ">";
}

std::vector<std::string> all_fwd_kernels() {
  std::vector<std::string> names;
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (cc1d_dtype x : dtypes)
    for (cc1d_dtype w : dtypes)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width)
        for (int layout : {kLayoutTime, kLayoutChannel})
          names.push_back(fwd_kernel_name(x, w, width, layout));
  return names;
}

static void copy_strides(long long* dst, const TensorRef& t, int n) {
  for (int i = 0; i < n; ++i) dst[i] = t.strides[i];
}

FwdLaunch plan_fwd(const FwdProblem& pr) {
  FwdLaunch l;
  FwdParams& p = l.params;
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

  // Walk time when time is the contiguous axis of x (channel-first); walk channels otherwise
  // (channel-last and most other views), so that a warp's loads are adjacent.
  const bool time_major = pr.x.strides[2] == 1 || (pr.x.strides[1] != 1 && pr.dim == 1);
  const int layout = time_major ? kLayoutTime : kLayoutChannel;
  long long span;
  if (layout == kLayoutTime) {
    span = (long long)kFwdThreads * kFwdItemsTime;
    p.num_channel_blocks = pr.dim;
  } else {
    span = kFwdChunkChannel;
    p.num_channel_blocks = (pr.dim + kFwdThreads - 1) / kFwdThreads;
  }
  p.num_time_chunks = (pr.seqlen + span - 1) / span;
  const long long per_batch = p.num_channel_blocks * p.num_time_chunks;
  if (per_batch >= (1LL << 32))
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d forward: " + std::to_string(per_batch) +
                                   " thread blocks per batch row exceed the kernel's 32-bit block index; "
                                   "split the call along dim or seqlen");
  // The kernel strides over both axes, so the grid is capped under the hardware limits.
  l.grid = (unsigned)std::min<long long>(std::max<long long>(per_batch, 1), (1LL << 31) - 1);
  l.grid_y = (unsigned)std::min<long long>(std::max<long long>(pr.batch, 1), 65535);
  l.block = kFwdThreads;
  l.kernel = fwd_kernel_name(pr.x_dtype, pr.w_dtype, pr.width, layout);
  return l;
}

}  // namespace cc1d
