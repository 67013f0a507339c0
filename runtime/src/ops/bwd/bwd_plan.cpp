// bwd_plan.cpp — the backward's kernel plan: which main-kernel variant, how a row is split into
// time segments, the workspace that follows, and the launches (zero, main, finalize). Followed by
// every kernel-running backend (nvrtc, emulate), so both run the same.
#include <algorithm>

#include "core/checked.h"
#include "core/error.h"
#include "core/gpu_limits.h"
#include "kernels_src/bwd_params.h"
#include "ops/bwd/bwd_op.h"

namespace cc1d {

std::string bwd_kernel_name(cc1d_dtype x, cc1d_dtype w, int width, int layout) {
  return std::string("cc1d::causal_conv1d_bwd_kernel<") + kernel_type_name(x) + ", " + kernel_type_name(w) + ", " +
         std::to_string(width) + ", " + std::to_string(layout) + ">";
}

const char* bwd_layout_name(int layout) {
  static const char* const names[kBwdNumLayouts] = {"time",        "time_vec",    "channel",        "time_seq",
                                                     "channel_seq", "channel_vec", "channel_vec_seq"};
  return layout >= 0 && layout < kBwdNumLayouts ? names[layout] : "unknown";
}

std::string bwd_finalize_kernel_name(cc1d_dtype w) {
  return std::string("cc1d::causal_conv1d_bwd_finalize_kernel<") + kernel_type_name(w) + ">";
}

std::vector<std::string> all_bwd_kernels() {
  std::vector<std::string> names;
  const cc1d_dtype dtypes[] = {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16};
  for (cc1d_dtype x : dtypes)
    for (cc1d_dtype w : dtypes)
      for (int width = 1; width <= CC1D_MAX_WIDTH; ++width)
        for (int layout = 0; layout < kBwdNumLayouts; ++layout) names.push_back(bwd_kernel_name(x, w, width, layout));
  for (cc1d_dtype w : dtypes) names.push_back(bwd_finalize_kernel_name(w));
  names.push_back(kBwdZeroKernel);
  return names;
}

namespace {

// Whether x, dout and dx (when wanted) all have 16-byte aligned unit-stride rows along `unit`.
bool vec_rows(const BwdProblem& p, int unit) {
  return rows_aligned16(p.x, unit) && rows_aligned16(p.dout, unit) && (!p.dx.present() || rows_aligned16(p.dx, unit));
}

// Whether their unit-stride rows along `unit` share each row's offset mod 16 bytes (TIME_VEC peels
// each row's unaligned head).
bool equally_aligned_rows(const BwdProblem& p, int unit) {
  return rows_equally_aligned16(p.x, p.dout, unit) && (!p.dx.present() || rows_equally_aligned16(p.x, p.dx, unit));
}

unsigned grid_for(int64_t items) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(ceil_div(items, kBwdThreads), 1), 4096));
}

}  // namespace

BwdGeometry bwd_geometry(const BwdProblem& p) {
  BwdGeometry g;
  if (p.time_major) {
    g.layout = p.seq_idx.present()           ? kBwdLayoutTimeSeq
               : equally_aligned_rows(p, 2) ? kBwdLayoutTimeVec
                                            : kBwdLayoutTime;
    if (g.layout == kBwdLayoutTimeVec) {  // a warp per segment of whole warp steps, at least kBwdVecMinSpans
      const int64_t spans = ceil_div(p.seqlen, kBwdWarpSpan);
      g.segment_len = std::max<int64_t>(kBwdVecMinSpans, ceil_div(spans, kBwdMaxSegments)) * kBwdWarpSpan;
    } else {
      const int64_t chunk = bwd_chunk(dtype_size(p.x_dtype));
      const int64_t chunks = ceil_div(p.seqlen, chunk);
      g.segment_len = ceil_div(chunks, std::min<int64_t>(chunks, kBwdMaxSegments)) * chunk;
    }
    g.num_channel_blocks = p.dim;
  } else if (p.dim % (16 / dtype_size(p.x_dtype)) == 0 && vec_rows(p, 1)) {
    g.layout = p.seq_idx.present() ? kBwdLayoutChannelVecSeq : kBwdLayoutChannelVec;  // segments of whole tiles
    const int64_t steps = std::max<int64_t>(kBwdMinChannelSegment, ceil_div(p.seqlen, kBwdMaxSegments));
    g.segment_len = ceil_div(steps, kBwdChannelTile) * kBwdChannelTile;
    g.num_channel_blocks = ceil_div(p.dim, kBwdTileChannels);
  } else {
    g.layout = p.seq_idx.present() ? kBwdLayoutChannelSeq : kBwdLayoutChannel;
    g.segment_len = std::max<int64_t>(kBwdMinChannelSegment, ceil_div(p.seqlen, kBwdMaxSegments));
    g.num_channel_blocks = ceil_div(p.dim, kBwdThreads);
  }
  g.num_segments = ceil_div(p.seqlen, g.segment_len);
  g.parts = p.deterministic ? mul_checked(p.batch, g.num_segments, "causal_conv1d backward partial sums") : 1;
  if (p.wants_sums()) {
    const int64_t floats = mul_checked(mul_checked(g.parts, p.dim, "causal_conv1d backward workspace"), p.width + 1,
                                       "causal_conv1d backward workspace");
    g.workspace_bytes = static_cast<size_t>(mul_checked(floats, sizeof(float), "causal_conv1d backward workspace"));
  }
  return g;
}

std::vector<KernelLaunch> plan_bwd(const Problem& problem, void* workspace) {
  const auto& pr = static_cast<const BwdProblem&>(problem);
  const BwdGeometry g = bwd_geometry(pr);
  BwdParams p{};
  fill_conv_params(p, pr);
  p.dout = pr.dout.data;
  p.dfinal_states = pr.dfinal_states.data;
  p.dx = pr.dx.data;
  p.dinitial_states = pr.dinitial_states.data;
  p.dweight = pr.dweight.data;
  p.dbias = pr.dbias.data;
  p.acc = pr.wants_sums() ? static_cast<float*>(workspace) : nullptr;
  copy_strides(p.dout_stride, pr.dout, 3);
  copy_strides(p.dfinal_stride, pr.dfinal_states, 3);
  copy_strides(p.dx_stride, pr.dx, 3);
  copy_strides(p.dinit_stride, pr.dinitial_states, 3);
  copy_strides(p.dw_stride, pr.dweight, 2);
  p.db_stride = pr.dbias.strides[0];
  p.num_segments = g.num_segments;
  p.segment_len = g.segment_len;
  p.num_channel_blocks = g.num_channel_blocks;
  p.parts = g.parts;
  p.width = pr.width;
  p.deterministic = pr.deterministic ? 1 : 0;

  const long long per_batch = mul_checked(g.num_channel_blocks, g.num_segments, "causal_conv1d backward blocks");
  if (per_batch >= (1LL << 32))
    fail(CC1D_ERR_UNSUPPORTED, "causal_conv1d backward: " + std::to_string(per_batch) +
                                   " work items per batch row exceed the kernel's 32-bit index; "
                                   "split the call along dim");
  const long long blocks = g.layout == kBwdLayoutTimeVec ? ceil_div(per_batch, kBwdWarps) : per_batch;
  std::vector<KernelLaunch> launches;
  const int64_t sums = pr.dim * (pr.width + 1);
  if (pr.wants_sums() && !pr.deterministic) {
    KernelLaunch zero;
    zero.kernel = kBwdZeroKernel;
    zero.set_params(p);
    zero.grid[0] = grid_for(sums);
    zero.block[0] = kBwdThreads;
    zero.grid_strided = true;
    launches.push_back(zero);
  }
  KernelLaunch main;
  main.kernel = bwd_kernel_name(pr.x_dtype, pr.w_dtype, pr.width, g.layout);
  main.set_params(p);
  main.grid[0] = static_cast<unsigned>(std::min<long long>(std::max<long long>(blocks, 1), kMaxGridX));
  main.grid[1] = static_cast<unsigned>(std::min<long long>(std::max<long long>(pr.batch, 1), kMaxGridYZ));
  main.block[0] = kBwdThreads;
  main.shared_bytes = bwd_smem_bytes(g.layout, dtype_size(pr.x_dtype), pr.width);
  main.grid_strided = true;
  launches.push_back(main);
  if (pr.wants_sums()) {
    KernelLaunch fin;
    fin.kernel = bwd_finalize_kernel_name(pr.w_dtype);
    fin.set_params(p);
    fin.grid[0] = grid_for(sums);
    fin.block[0] = kBwdThreads;
    fin.grid_strided = true;
    launches.push_back(fin);
  }
  return launches;
}

}  // namespace cc1d
