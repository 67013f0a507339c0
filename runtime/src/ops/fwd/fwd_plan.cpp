// fwd_plan.cpp — the forward's kernel launch: which variant, the FwdParams block and the
// geometry. Followed by every kernel-running backend (nvrtc, emulate), so both run the same.
//
// The path (the kernel's 4th template argument) follows the layout the op's validation chose
// (time-major or channel-major), then the fastest one the call allows: seq_idx has its own
// paths (channel-last rows that the vector path takes get its seq_idx variant); without it,
// unit-stride rows get the vector paths: channel-first ones where x's and out's rows share their
// offset mod 16 bytes (the kernel peels the unaligned head), channel-last ones where they are
// 16-byte aligned; anything else (strided views, odd alignments) the generic ones.
#include <algorithm>
#include <cstdint>

#include "core/checked.h"
#include "core/error.h"
#include "core/gpu_limits.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"

namespace cc1d {

std::string fwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int path) {
  return std::string("cc1d::causal_conv1d_fwd_kernel<") + kernel_type_name(x) + ", " + kernel_type_name(w) + ", " +
         std::to_string(width) + ", " + std::to_string(path) + ">";
}

const char* fwd_path_name(int path) {
  static const char* const names[kFwdNumPaths] = {"time",     "channel",     "time_seq",      "channel_seq",
                                                  "time_vec", "channel_vec", "time_vec_silu", "channel_vec_silu",
                                                  "channel_vec_seq"};
  return path >= 0 && path < kFwdNumPaths ? names[path] : "unknown";
}

std::vector<std::string> all_fwd_kernels() {
  std::vector<std::string> names;
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (cc1d_dtype x : dtypes)
    for (cc1d_dtype w : dtypes)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width)
        for (int path = 0; path < kFwdNumPaths; ++path) names.push_back(fwd_kernel_name(x, w, width, path));
  return names;
}

namespace {

int choose_path(const FwdProblem& pr) {
  const bool seq = pr.seq_idx.present();
  if (pr.time_major) {
    if (seq) return kFwdPathTimeSeq;
    if (!rows_equally_aligned16(pr.x, pr.out, 2)) return kFwdPathTime;
    return pr.silu ? kFwdPathTimeVecSilu : kFwdPathTimeVec;
  }
  const int64_t per_vector = 16 / dtype_size(pr.x_dtype);
  if (pr.dim % per_vector != 0 || !rows_aligned16(pr.x, 1) || !rows_aligned16(pr.out, 1))
    return seq ? kFwdPathChannelSeq : kFwdPathChannel;
  if (seq) return kFwdPathChannelVecSeq;
  return pr.silu ? kFwdPathChannelVecSilu : kFwdPathChannelVec;
}

}  // namespace

KernelLaunch plan_fwd(const Problem& problem) {
  const auto& pr = static_cast<const FwdProblem&>(problem);
  FwdParams p{};
  fill_conv_params(p, pr);
  p.out = pr.out.data;
  p.final_states = pr.final_states.data;
  copy_strides(p.out_stride, pr.out, 3);
  copy_strides(p.final_stride, pr.final_states, 3);

  const int path = choose_path(pr);
  switch (path) {
    case kFwdPathTimeVec:
    case kFwdPathTimeVecSilu:
      p.num_time_chunks = ceil_div(pr.seqlen, kFwdVecSegment);
      p.num_channel_blocks = pr.dim;
      break;
    case kFwdPathTime:
    case kFwdPathTimeSeq:
      p.num_time_chunks = ceil_div(pr.seqlen, (long long)kFwdThreads * kFwdItemsTime);
      p.num_channel_blocks = pr.dim;
      break;
    case kFwdPathChannelVec:
    case kFwdPathChannelVecSilu:
    case kFwdPathChannelVecSeq:  // kFwdTileChannels channels x kFwdChannelTiles tiles per item
      p.num_time_chunks = ceil_div(pr.seqlen, (long long)kFwdChannelTile * kFwdChannelTiles);
      p.num_channel_blocks = ceil_div(pr.dim, kFwdTileChannels);
      break;
    default:  // CHANNEL, CHANNEL_SEQ: 32 channels x kFwdWarps runs per block
      p.num_time_chunks = ceil_div(pr.seqlen, (long long)kFwdWarps * kFwdChunkChannel);
      p.num_channel_blocks = ceil_div(pr.dim, 32);
  }
  const long long items = mul_checked(p.num_channel_blocks, p.num_time_chunks, "causal_conv1d forward work items");
  if (items >= (1LL << 32))
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d forward: " + std::to_string(items) +
                                   " work items per batch row exceed the kernel's 32-bit index; "
                                   "split the call along dim or seqlen");
  const bool per_warp = path == kFwdPathTimeVec || path == kFwdPathTimeVecSilu;
  p.blocks_per_batch = per_warp ? ceil_div(items, kFwdWarps) : items;
  KernelLaunch l;
  l.kernel = fwd_kernel_name(pr.x_dtype, pr.w_dtype, pr.width, path);
  l.set_params(p);
  // The kernel strides over both axes, so the grid is capped under the hardware limits.
  l.grid[0] = (unsigned)std::min<long long>(std::max<long long>(p.blocks_per_batch, 1), kMaxGridX);
  l.grid[1] = (unsigned)std::min<long long>(std::max<long long>(pr.batch, 1), kMaxGridYZ);
  l.block[0] = kFwdThreads;
  l.grid_strided = true;
  return l;
}

}  // namespace cc1d
