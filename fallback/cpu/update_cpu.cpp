// update_cpu.cpp — the update op's native CPU implementation (run by the cpu backend): the same
// semantics as kernels_src/update.cuh, one (batch row, channel) at a time, channels of a row
// spread over the thread pool. Validation has already rejected out-of-range indices, duplicated
// indices and negative cache_seqlens for host tensors.
#include <algorithm>
#include <vector>

#include "fallback/cpu/convert.h"
#include "fallback/cpu/simd.h"
#include "fallback/cpu/thread_pool.h"
#include "ops/update/update_op.h"

namespace cc1d {

namespace {

constexpr int64_t kChannelGrain = 64;  // channels per task

int32_t index_at(const TensorRef& t, int64_t i) { return static_cast<const int32_t*>(t.data)[i * t.strides[0]]; }

void update_channel(const UpdateProblem& p, int64_t b, int64_t c, int64_t row, int64_t cache, std::vector<float>& xs) {
  const int W = p.width;
  const int64_t L = p.seqlen, sl = p.state_len;
  const GatherFn gx = gather_fn(p.x_dtype);
  float w[CC1D_MAX_WIDTH];
  gather_fn(p.w_dtype)(p.weight.data, c * p.weight.strides[0], p.weight.strides[1], W, w);
  float bias = 0.f;
  if (p.bias.present()) gather_fn(p.w_dtype)(p.bias.data, c * p.bias.strides[0], 1, 1, &bias);
  const TensorRef& st = p.conv_state;
  const int64_t base = row * st.strides[0] + c * st.strides[1], ss = st.strides[2];
  const int64_t head = p.cache_seqlens.present() ? cache % sl : 0;
  // xs = the W-1 state values before the first new token, then the L new tokens.
  xs.resize(W - 1 + L);
  for (int i = 0; i < W - 1; ++i) {
    int64_t pos = p.cache_seqlens.present() ? head - (W - 1) + i : sl - (W - 1) + i;
    if (pos < 0) pos += sl;
    gx(st.data, base + pos * ss, 1, 1, &xs[i]);
  }
  gx(p.x.data, b * p.x.strides[0] + c * p.x.strides[1], p.x.strides[2], L, xs.data() + W - 1);
  std::vector<float> out(L);
  for (int64_t t = 0; t < L; ++t) {
    float acc = bias;
    for (int k = 0; k < W; ++k) acc += w[k] * xs[t + k];
    out[t] = acc;
  }
  if (p.silu) simd().silu_inplace(out.data(), L);
  scatter_fn(p.x_dtype)(p.out.data, b * p.out.strides[0] + c * p.out.strides[1], p.out.strides[2], L, out.data());
  // The state takes x's values unconverted (same dtype): copy elements, not floats.
  const size_t es = static_cast<size_t>(dtype_size(p.x_dtype));
  auto* sp = static_cast<unsigned char*>(st.data);
  const auto* xp = static_cast<const unsigned char*>(p.x.data) + (b * p.x.strides[0] + c * p.x.strides[1]) * es;
  auto state_at = [&](int64_t pos) { return sp + (base + pos * ss) * es; };
  auto x_at = [&](int64_t t) { return xp + t * p.x.strides[2] * es; };
  if (p.cache_seqlens.present()) {
    for (int64_t t = std::max<int64_t>(0, L - sl); t < L; ++t) std::memcpy(state_at((head + t) % sl), x_at(t), es);
  } else {
    const int64_t keep = std::max<int64_t>(0, sl - L);
    for (int64_t i = 0; i < keep; ++i) std::memcpy(state_at(i), state_at(i + L), es);
    for (int64_t i = keep; i < sl; ++i) std::memcpy(state_at(i), x_at(L - (sl - i)), es);
  }
}

}  // namespace

void update_cpu(const Problem& problem) {
  const auto& p = static_cast<const UpdateProblem&>(problem);
  const int64_t chunks = p.dim / kChannelGrain + (p.dim % kChannelGrain != 0);
  parallel_for(p.batch * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> xs;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / chunks, c0 = (item % chunks) * kChannelGrain;
      const int64_t c1 = std::min(p.dim, c0 + kChannelGrain);
      const int64_t row = p.conv_state_indices.present() ? index_at(p.conv_state_indices, b) : b;
      const int64_t cache = p.cache_seqlens.present() ? index_at(p.cache_seqlens, b) : 0;
      if (row < 0) {  // a padding slot: outputs 0, state untouched
        std::vector<float> zeros(p.seqlen, 0.f);
        for (int64_t c = c0; c < c1; ++c)
          scatter_fn(p.x_dtype)(p.out.data, b * p.out.strides[0] + c * p.out.strides[1], p.out.strides[2],
                                p.seqlen, zeros.data());
        continue;
      }
      for (int64_t c = c0; c < c1; ++c) update_channel(p, b, c, row, cache, xs);
    }
  });
}

}  // namespace cc1d
