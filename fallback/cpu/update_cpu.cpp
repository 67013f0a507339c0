// update_cpu.cpp — the update op's native CPU implementation (run by the cpu backend): the same
// semantics as kernels_src/update.cuh. Work items are (batch row, run of channels). The decode
// step of Mamba's and vLLM's layouts (one token, shift mode, state rows of `width` or width-1
// contiguous elements, width 2/4/8, contiguous rows, weights in x's dtype or fp32) and of a ring
// buffer (AVX2/AVX-512, the same cases) is one SIMD kernel per run (simd.h decode_rows,
// decode_rows_short, decode_ring, decode_dtypes); up to 5 tokens take that kernel once a token.
// 6 tokens or more, and any number where no such kernel serves the width, dtype pair or state
// layout, go as rows of channels through the forward's channel-last kernel (tokens_as_rows).
// Otherwise (strided weights; states neither channel-last nor rows back to back; one token on a
// shift-mode state of more than 16 steps; up to 16 on a ring that long without its SIMD step), with the
// taps converted to floats once a call (StagedTaps), one token takes decode_step (state rows of
// any strides) and several the general taps, x's element type fixed at compile time; the
// activation and the conversion of the outputs run vectorised over the run. Small calls stay on
// the calling thread: a decode step of one row is done before a pool thread would wake.
// Validation has already rejected out-of-range indices, duplicated indices and negative
// cache_seqlens for host tensors.
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "fallback/cpu/convert.h"
#include "fallback/cpu/simd.h"
#include "fallback/cpu/thread_pool.h"
#include "ops/update/update_op.h"

namespace cc1d {

namespace {

constexpr int64_t kChannelRun = 512;        // channels per work item
constexpr int64_t kSerialWork = 1 << 17;    // below this many channel steps, no pool
// From this many tokens a call the SIMD decode steps' layouts take tokens_as_rows too: at 6 on
// Zen 4 (AVX-512) 1-11% faster than a step a token, at 8 14-31%, at 16 2x; at 4 up to 19% slower.
constexpr int64_t kRowsMinTokens = 6;

int32_t index_at(const TensorRef& t, int64_t i) { return static_cast<const int32_t*>(t.data)[i * t.strides[0]]; }

// Whether a dim of `size` elements steps by `stride` (a size-1 dim's stride is 0 after validation).
bool steps(int64_t stride, int64_t size, int64_t want) { return size == 1 || stride == want; }

// Where input i (0..W-2) of the window before the first new token sits in a state row of sl
// elements: before the ring's head (circular mode), or among the row's last W-1 (shift mode).
int64_t window_pos(bool circular, int64_t head, int64_t sl, int W, int i) {
  const int64_t at = (circular ? head : sl) - (W - 1) + i;
  return at < 0 ? at + sl : at;
}

// The taps as floats, tap k of every channel at w[k * dim], and the bias (zeros without one),
// through the SIMD conversions: once a call (at batch 1, by the pool as it takes each run of
// channels). Converted a channel and a tap at a time (a scalar fp16 conversion each), they took
// most of an fp16 step: 6.4-7.2 ns a channel at batch 64, against bf16's 2.4.
struct StagedTaps {
  std::unique_ptr<float[]> w, bias;
  StagedTaps() = default;  // none: the SIMD steps read the taps themselves
  explicit StagedTaps(const UpdateProblem& p) : w(new float[p.width * p.dim]), bias(new float[p.dim]) {}
  // Channels [c0, c1).
  void fill(const UpdateProblem& p, int64_t c0, int64_t c1) {
    const GatherFn g = gather_fn(p.w_dtype);
    const int64_t ws = p.weight.strides[0];
    for (int k = 0; k < p.width; ++k)
      g(p.weight.data, c0 * ws + k * p.weight.strides[1], ws, c1 - c0, &w[k * p.dim + c0]);
    if (p.bias.present())
      g(p.bias.data, c0 * p.bias.strides[0], p.bias.strides[0], c1 - c0, &bias[c0]);
    else
      std::fill(&bias[c0], &bias[c1], 0.f);
  }
};

// A decode step (one token) on state rows of any strides, of any state_len and in either mode,
// for channels [c0, c1) of batch row b with state row `row`: the taps into acc, then the state
// update, in two passes. The first, in fp16, takes the window a column at a time (input i of
// every channel, where it sits in its row, then x), each gathered into floats by the SIMD
// conversions; in bf16 and fp32 (a shift or nothing to convert) a channel at a time, as columns
// lost 1.3x in fp32. The second shifts a block of back-to-back rows by one element with one
// memmove (channel-last states: each time row's run of channels with one) and puts x at each
// row's end, or writes x at the ring's head. What no SIMD decode kernel takes comes here: longer
// states in shift mode, widths 3 and 5-7, strided layouts, and the ring on the baseline build.
// The general taps below took 40-44 us for 4096 bf16 channels at width 4 and state_len 5; this
// takes 21.
template <typename TX, int W>
void decode_step(const UpdateProblem& p, const StagedTaps& taps, int64_t b, int64_t c0, int64_t c1, int64_t row,
                 int64_t cache, float* acc) {
  const int64_t sl = p.state_len, cs = p.conv_state.strides[1], ss = p.conv_state.strides[2], xs = p.x.strides[1];
  const bool circular = p.cache_seqlens.present();
  const int64_t head = circular ? cache % sl : 0;
  TX* const state = static_cast<TX*>(p.conv_state.data) + row * p.conv_state.strides[0] + c0 * cs;
  const TX* __restrict x = static_cast<const TX*>(p.x.data) + b * p.x.strides[0] + c0 * xs;
  const int64_t n = c1 - c0;
  const float *w0 = &taps.w[c0], *bias = &taps.bias[c0];  // tap k at w0[k * D]
  const int64_t D = p.dim;
  int64_t pos[W];  // the window's W-1 state positions, as offsets in the row
  for (int i = 0; i < W - 1; ++i) pos[i] = window_pos(circular, head, sl, W, i) * ss;
  if constexpr (std::is_same<TX, half_t>::value) {
    const GatherFn gx = gather_fn(p.x_dtype);
    float col[kChannelRun];
    std::copy(bias, bias + n, acc);
    for (int i = 0; i < W; ++i) {
      if (i < W - 1)
        gx(state, pos[i], cs, n, col);
      else
        gx(x, 0, xs, n, col);
      const float* w = w0 + i * D;
      for (int64_t c = 0; c < n; ++c) acc[c] += w[c] * col[c];
    }
  } else {
    const TX* __restrict s = state;
    for (int64_t c = 0; c < n; ++c) {
      float a = bias[c];
      for (int k = 0; k < W - 1; ++k) a += w0[k * D + c] * to_float(s[c * cs + pos[k]]);
      acc[c] = a + w0[(W - 1) * D + c] * to_float(x[c * xs]);
    }
  }
  // The state takes x's elements unconverted (same type).
  if (circular) {
    for (int64_t c = 0; c < n; ++c) state[c * cs + head * ss] = x[c * xs];
  } else if (ss != 1 && sl > 1) {
    for (int64_t i = 0; i + 1 < sl; ++i) {
      if (cs == 1) {  // channel-last: a time row's channels are contiguous
        std::memmove(state + i * ss, state + (i + 1) * ss, n * sizeof(TX));
      } else {
        for (int64_t c = 0; c < n; ++c) state[c * cs + i * ss] = state[c * cs + (i + 1) * ss];
      }
    }
    for (int64_t c = 0; c < n; ++c) state[c * cs + (sl - 1) * ss] = x[c * xs];
  } else if (cs == sl) {  // rows back to back: the block moves down one element, x at each row's end
    std::memmove(state, state + 1, (n * sl - 1) * sizeof(TX));
    for (int64_t c = 0; c < n; ++c) state[c * sl + sl - 1] = x[c * xs];
  } else {
    for (int64_t c = 0; c < n; ++c) {
      std::memmove(state + c * cs, state + c * cs + 1, (sl - 1) * sizeof(TX));
      state[c * cs + sl - 1] = x[c * xs];
    }
  }
}

// Taps of channels [c0, c1) of batch row b with state row `row` into acc ((c1-c0) x seqlen,
// channel-major), and the state updated, for any seqlen and strides; TX: x/state type (the taps
// converted once, StagedTaps). The width is a template argument, so the window lives in registers.
template <typename TX, int W>
void taps(const UpdateProblem& p, const StagedTaps& staged, int64_t b, int64_t c0, int64_t c1, int64_t row,
          int64_t cache, float* acc) {
  const int64_t L = p.seqlen, sl = p.state_len;
  const TensorRef& st = p.conv_state;
  const TX* x = static_cast<const TX*>(p.x.data) + b * p.x.strides[0];
  TX* state = static_cast<TX*>(st.data) + row * st.strides[0];
  const bool circular = p.cache_seqlens.present();
  const int64_t head = circular ? cache % sl : 0, ss = st.strides[2], xs = p.x.strides[2];
  int64_t wpos[W];  // where the W-1 inputs before the first new token sit in a state row
  for (int i = 0; i < W - 1; ++i) wpos[i] = window_pos(circular, head, sl, W, i) * ss;
  for (int64_t c = c0; c < c1; ++c) {
    float wk[W], win[W];
    for (int k = 0; k < W; ++k) wk[k] = staged.w[k * p.dim + c];
    const float b0 = staged.bias[c];
    TX* s = state + c * st.strides[1];
    const TX* xc = x + c * p.x.strides[1];
    for (int i = 0; i < W - 1; ++i) win[i] = to_float(s[wpos[i]]);
    float* a = acc + (c - c0) * L;
    for (int64_t t = 0; t < L; ++t) {
      win[W - 1] = to_float(xc[t * xs]);
      float v = b0;
      for (int k = 0; k < W; ++k) v += wk[k] * win[k];
      a[t] = v;
      for (int k = 0; k < W - 1; ++k) win[k] = win[k + 1];
    }
    // The state takes x's elements unconverted (same type).
    if (circular) {
      for (int64_t t = std::max<int64_t>(0, L - sl); t < L; ++t) s[((head + t) % sl) * ss] = xc[t * xs];
    } else {
      const int64_t keep = std::max<int64_t>(0, sl - L);
      for (int64_t i = 0; i < keep; ++i) s[i * ss] = s[(i + L) * ss];
      for (int64_t i = keep; i < sl; ++i) s[i * ss] = xc[(L - (sl - i)) * xs];
    }
  }
}

using TapsFn = void (*)(const UpdateProblem&, const StagedTaps&, int64_t, int64_t, int64_t, int64_t, int64_t, float*);

template <typename TX, int... Ws>
struct TapsTable {
  static constexpr TapsFn general[] = {taps<TX, Ws>...};
  static constexpr TapsFn decode[] = {decode_step<TX, Ws>...};
};
template <typename TX>
TapsFn taps_for(int width, bool decode) {
  using T = TapsTable<TX, 1, 2, 3, 4, 5, 6, 7, 8>;
  return (decode ? T::decode : T::general)[width - 1];
}
TapsFn taps_for(const UpdateProblem& p) {
  const bool decode = p.seqlen == 1;
  return p.x_dtype == CC1D_FLOAT16    ? taps_for<half_t>(p.width, decode)
         : p.x_dtype == CC1D_BFLOAT16 ? taps_for<bf16_t>(p.width, decode)
                                      : taps_for<float>(p.width, decode);
}

// What the SIMD decode steps need besides their state layout: up to kMaxSimdTokens tokens of a
// dtype pair they take, state rows contiguous along time, the weights (rows of W) and the bias
// contiguous along channels, and for one token x and out too (several copy them through buffers).
bool decode_fits(const UpdateProblem& p) {
  const int64_t W = p.width, D = p.dim;
  return p.seqlen <= kMaxSimdTokens && decode_dtypes(p.x_dtype, p.w_dtype) &&
         steps(p.conv_state.strides[2], p.state_len, 1) && p.weight.strides[1] == 1 &&
         steps(p.weight.strides[0], D, W) && (!p.bias.present() || steps(p.bias.strides[0], D, 1)) &&
         (p.seqlen > 1 || (steps(p.x.strides[1], D, 1) && steps(p.out.strides[1], D, 1)));
}

// The SIMD kernel of a ring buffer's decode step (cache_seqlens, state rows contiguous along time),
// or nullptr; its 32-bit offsets must reach every row of the call. Tokens as simd_decode's, the
// head advancing one slot a token.
DecodeRingFn simd_ring(const UpdateProblem& p, const SimdKernels& k) {
  const int64_t S = p.state_len, rows = std::max<int64_t>(p.conv_state.strides[1], S) * p.dim;
  const bool fits =
      p.cache_seqlens.present() && decode_fits(p) && rows * dtype_size(p.x_dtype) + 4 < (int64_t(1) << 31);
  return fits ? k.decode_ring[p.width - 1] : nullptr;
}

// The SIMD kernel that shifts the state and writes out a token, or nullptr: shift mode, state rows
// of W (Mamba's layout) or W-1 (vLLM's) elements back to back, and decode_fits. Several tokens
// take it once a token, in order: the same state updates and outputs as the general taps.
DecodeRowsFn simd_decode(const UpdateProblem& p, const SimdKernels& k) {
  const int64_t W = p.width, S = p.state_len, D = p.dim;
  const DecodeRowsFn f = S == W ? k.decode_rows[W - 1] : S == W - 1 ? k.decode_rows_short[W - 1] : nullptr;
  const bool fits = !p.cache_seqlens.present() && decode_fits(p) && steps(p.conv_state.strides[1], D, S);
  return fits ? f : nullptr;
}

// n elements of `bytes` (2 or 4) bytes each, from src (every src_step elements) to dst (every
// dst_step).
template <typename E>
void copy_as(E* d, int64_t dst_step, const E* s, int64_t src_step, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i * dst_step] = s[i * src_step];
}
void copy_elements(void* dst, int64_t dst_step, const void* src, int64_t src_step, int64_t n, int bytes) {
  if (dst_step == 1 && src_step == 1)
    std::memcpy(dst, src, n * bytes);
  else if (bytes == 2)
    copy_as(static_cast<uint16_t*>(dst), dst_step, static_cast<const uint16_t*>(src), src_step, n);
  else
    copy_as(static_cast<uint32_t*>(dst), dst_step, static_cast<const uint32_t*>(src), src_step, n);
}

// Whether the state's rows of state_len elements lie back to back (Mamba's and vLLM's layouts).
bool state_rows(const UpdateProblem& p) {
  return steps(p.conv_state.strides[2], p.state_len, 1) && steps(p.conv_state.strides[1], p.dim, p.state_len);
}

// Whether the tokens can go through the forward's channel-last kernel (tokens_as_rows): the
// state's steps with their channels contiguous, or its rows back to back, in shift mode or a
// ring; weights rows of W contiguous elements, bias contiguous. Any number of tokens, width and
// dtype pair, any strides of x and out. The route moves a state of rows back to back whole: a
// longer one than kMaxSimdTokens in shift mode from 2 tokens (21 steps, bf16, batch 64: 2 tokens
// 915 against 4062 us by the general taps, but one token 895 against decode_step's 391), a ring
// beyond the ring step's 16 tokens (32 or 64 steps: 2.0-4.1x faster than the general taps; at 6
// tokens up to 1.7x slower than the ring step).
bool rows_fit(const UpdateProblem& p) {
  const int64_t S = p.state_len, D = p.dim, W = p.width;
  const bool long_ok = p.cache_seqlens.present() ? p.seqlen > kMaxSimdTokens : p.seqlen > 1;
  const bool state = (state_rows(p) && (S <= kMaxSimdTokens || long_ok)) || steps(p.conv_state.strides[1], D, 1);
  return state && p.weight.strides[1] == 1 && steps(p.weight.strides[0], D, W) &&
         (!p.bias.present() || steps(p.bias.strides[0], D, 1));
}

// Blocks of b = min(n, kMaxSimdTokens) tokens covering tokens [0, n), f(first token, b); the last
// block overlaps the one before (some tokens moved twice, the same bits).
template <typename F>
void token_blocks(int64_t n, F&& f) {
  const int b = static_cast<int>(std::min<int64_t>(n, kMaxSimdTokens));
  for (int64_t t0 = 0; t0 < n; t0 += b) f(std::min(t0, n - b), b);
}

// n tokens of m channels, channel c's from element c * cs of src, to n rows of m channels (token
// t's at element t * m of dst), the bits moved; join_rows the reverse. More than kMaxSimdTokens
// go in blocks (20 and 32 bf16 tokens took 3.4 and 2.4 ns an output through the general taps
// before, 0.86 and 0.76 now).
void split_rows(const SimdKernels& k, int bytes, int64_t n, const char* src, int64_t cs, int64_t m, char* dst) {
  if (n == 1) return copy_elements(dst, 1, src, cs, m, bytes);
  token_blocks(n, [&](int64_t t, int b) { k.split_tokens(bytes, b, src + t * bytes, cs, m, dst + t * m * bytes); });
}
void join_rows(const SimdKernels& k, int bytes, int64_t n, const char* src, int64_t m, char* dst, int64_t cs) {
  if (n == 1) return copy_elements(dst, cs, src, 1, m, bytes);
  token_blocks(n, [&](int64_t t, int b) { k.join_tokens(bytes, b, src + t * m * bytes, m, dst + t * bytes, cs); });
}

// The taps and bias of rows_fit's calls as floats, a run of kChannelRun channels at a time, tap k
// of the run from c0 at w[W * c0 + k * m + j] (m: the run's channels): conv_channels' layout.
struct RunTaps {
  std::unique_ptr<float[]> w, bias;  // not value-initialised: zeroing them cost 4% of 4 tokens
  // Each run's rows of W split into W rows of its channels (the bits), then converted: a
  // transpose of 4096 rows of 4 taps by rows_to_f32_t took 3x the conv of two tokens.
  RunTaps(const UpdateProblem& p, const SimdKernels& k) : w(new float[p.width * p.dim]), bias(new float[p.dim]) {
    const int W = p.width, wb = dtype_size(p.w_dtype);
    const std::unique_ptr<char[]> rows(new char[W * std::min(p.dim, kChannelRun) * wb]);
    for (int64_t c0 = 0; c0 < p.dim; c0 += kChannelRun) {
      const int64_t m = std::min(kChannelRun, p.dim - c0);
      const char* src = static_cast<const char*>(p.weight.data) + c0 * W * wb;
      if (W > 1) k.split_tokens(wb, W, src, W, m, rows.get());
      k.to_f32(p.w_dtype, W > 1 ? rows.get() : src, &w[W * c0], W * m);
    }
    if (p.bias.present())
      k.to_f32(p.w_dtype, p.bias.data, bias.get(), p.dim);
    else
      std::fill(&bias[0], &bias[p.dim], 0.f);
  }
};

// rows_fit's tokens for channels [c0, c0 + m) of batch row b with state row `row`, through
// buffers of (S + 2T) x m elements (2T where the state is channel-last) and (W-1) x m floats: the
// state's S steps as rows of channels (split_rows; a channel-last state's are rows already) with
// x's T tokens after them, so that in shift mode the new state is their last S rows; the window's
// W-1 rows as floats; conv_channels over x's rows into T rows of out, joined back. A ring writes
// x's last rows at their slots instead. The state takes x's bits unconverted. Where no decode
// kernel serves the width or the layout, 2-7x faster than the general taps for 2 to 8 tokens,
// 2-4x for 20 to 64 tokens in any layout (bench/RESULTS.md).
void tokens_as_rows(const UpdateProblem& p, const SimdKernels& k, const RunTaps& taps, int64_t b, int64_t c0,
                    int64_t m, int64_t row, char* buf, float* halo) {
  const int64_t T = p.seqlen, S = p.state_len, W = p.width, xb = dtype_size(p.x_dtype);
  const int64_t xs = p.x.strides[1], os = p.out.strides[1];
  const int64_t cs = p.conv_state.strides[1], ss = p.conv_state.strides[2];
  char* st = static_cast<char*>(p.conv_state.data) + (row * p.conv_state.strides[0] + c0 * cs) * xb;
  const bool cf = state_rows(p);  // else each step's channels are contiguous: a row in place
  const int64_t s0 = cf ? S : 0;  // the buffer's rows: the state's (cf), then x's, then out's
  const auto rows = [&](int64_t i) { return buf + i * m * xb; };
  const char* x = static_cast<const char*>(p.x.data) + (b * p.x.strides[0] + c0 * xs) * xb;
  char* out = static_cast<char*>(p.out.data) + (b * p.out.strides[0] + c0 * os) * xb;
  // Token t's row of channels: where it is when a token's channels are contiguous, else in the buffer.
  const bool x_here = steps(xs, p.dim, 1), o_here = steps(os, p.dim, 1);
  const int64_t xstep = x_here ? p.x.strides[2] : m, ostep = o_here ? p.out.strides[2] : m;
  const auto xrow = [&](int64_t t) { return x_here ? x + t * xstep * xb : rows(s0 + t); };
  const auto orow = [&](int64_t t) { return o_here ? out + t * ostep * xb : rows(s0 + T + t); };
  const bool circular = p.cache_seqlens.present();
  const int64_t head = circular ? index_at(p.cache_seqlens, b) % S : 0;
  // The state's step i as a row of channels: split into the buffer, or where it is.
  const auto srow = [&](int64_t i) { return cf ? rows(i) : st + i * ss * xb; };
  if (cf) split_rows(k, xb, S, st, S, m, rows(0));
  if (x_here) {  // (a shift of rows back to back joins the state's new rows from the buffer)
    if (cf && !circular)
      for (int64_t t = std::max<int64_t>(0, T - S); t < T; ++t) std::memcpy(rows(S + t), xrow(t), m * xb);
  } else if (steps(p.x.strides[2], T, 1)) {
    split_rows(k, xb, T, x, xs, m, rows(s0));
  } else {
    for (int64_t t = 0; t < T; ++t) copy_elements(rows(s0 + t), 1, x + t * p.x.strides[2] * xb, xs, m, xb);
  }
  for (int i = 0; i + 1 < W; ++i) k.to_f32(p.x_dtype, srow(window_pos(circular, head, S, (int)W, i)), halo + i * m, m);
  k.conv_channels[W - 1](p.x_dtype, xrow(0), xstep, halo, &taps.w[W * c0], &taps.bias[c0], p.silu, false, orow(0),
                         ostep, T, m);
  if (!o_here && steps(p.out.strides[2], T, 1))
    join_rows(k, xb, T, orow(0), m, out, os);
  else if (!o_here)
    for (int64_t t = 0; t < T; ++t) copy_elements(out + t * p.out.strides[2] * xb, os, orow(t), 1, m, xb);
  if (circular) {  // the last S tokens at their slots
    for (int64_t t = std::max<int64_t>(0, T - S); t < T; ++t) std::memcpy(srow((head + t) % S), xrow(t), m * xb);
    if (cf) join_rows(k, xb, S, rows(0), m, st, S);
  } else if (cf) {  // the last S of the state's rows and x's
    join_rows(k, xb, S, rows(T), m, st, S);
  } else {  // the same, moved in place: step i takes step i + T, or x's token i + T - S
    for (int64_t i = 0; i < S; ++i) std::memcpy(srow(i), i + T < S ? srow(i + T) : xrow(i + T - S), m * xb);
  }
}

}  // namespace

void update_cpu(const Problem& problem) {
  const auto& p = static_cast<const UpdateProblem&>(problem);
  const int64_t runs = p.dim / kChannelRun + (p.dim % kChannelRun != 0);
  const int64_t per_item = std::min(p.dim, kChannelRun) * (p.seqlen + p.width);
  const TapsFn run_taps = taps_for(p);
  const SimdKernels& k = simd();
  const TensorRef& out = p.out;
  const bool out_rows = p.seqlen == 1 && steps(out.strides[1], p.dim, 1);  // a row's channels contiguous
  DecodeRowsFn simd_step = simd_decode(p, k);
  DecodeRingFn ring_step = simd_step ? nullptr : simd_ring(p, k);
  const bool as_rows = rows_fit(p) && (p.seqlen >= kRowsMinTokens || (!simd_step && !ring_step));
  if (as_rows) simd_step = nullptr, ring_step = nullptr;
  const bool fast = as_rows || simd_step != nullptr || ring_step != nullptr;
  const int xb = dtype_size(p.x_dtype), wb = dtype_size(p.w_dtype);
  const bool tokens = fast && p.seqlen > 1;  // one SIMD step a token, or rows
  // x and out of (dim, T) per batch row, each channel's tokens back to back (as upstream's callers
  // pass them): split into rows of a token's channels and joined back by the SIMD kernels; other
  // strides a token at a time by strided copies.
  const bool x_tile = tokens && p.x.strides[2] == 1 && p.x.strides[1] == p.seqlen;
  const bool out_tile = tokens && out.strides[2] == 1 && out.strides[1] == p.seqlen;
  StagedTaps staged = fast ? StagedTaps{} : StagedTaps(p);
  const bool stage_per_run = p.batch == 1;  // each run of channels is taken once: the pool stages it
  if (!fast && !stage_per_run) staged.fill(p, 0, p.dim);
  const std::unique_ptr<RunTaps> run_w(as_rows ? new RunTaps(p, k) : nullptr);
  parallel_for(p.batch * runs, std::max<int64_t>(1, kSerialWork / per_item), [&](int64_t begin, int64_t end) {
    std::vector<float> acc(fast ? 0 : std::min(p.dim, kChannelRun) * p.seqlen);
    // The tokens' x, then their out (as_rows: the state's rows first, a run of channels at a time).
    const int64_t run = std::min(p.dim, kChannelRun), state_steps = state_rows(p) ? p.state_len : 0;
    std::vector<char> io(as_rows ? (state_steps + 2 * p.seqlen) * run * xb : tokens ? 2 * p.seqlen * p.dim * xb : 0);
    std::vector<float> halo(as_rows ? (p.width - 1) * run : 0);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / runs, c0 = (item % runs) * kChannelRun;
      // The SIMD step takes this chunk's later runs of row b too: one call, one zero-padded tail.
      if (fast && !as_rows) item = std::min(end, (b + 1) * runs) - 1;
      const int64_t c1 = std::min(p.dim, (item % runs + 1) * kChannelRun);
      const int64_t row = p.conv_state_indices.present() ? index_at(p.conv_state_indices, b) : b;
      const int64_t n = (c1 - c0) * p.seqlen;
      const int64_t o = b * out.strides[0] + c0 * out.strides[1];
      if (fast) {
        char* dst = static_cast<char*>(out.data) + o * xb;
        if (row < 0) {  // a padding slot: outputs 0, state untouched
          if (!out_rows) {  // (one token's out may be strided on the way to tokens_as_rows)
            std::memset(io.data(), 0, (c1 - c0) * xb);
            for (int64_t t = 0; t < p.seqlen; ++t)
              copy_elements(dst + t * out.strides[2] * xb, out.strides[1], io.data(), 1, c1 - c0, xb);
          } else {
            std::memset(dst, 0, n * xb);
          }
          continue;
        }
        if (as_rows) {
          tokens_as_rows(p, k, *run_w, b, c0, c1 - c0, row, io.data(), halo.data());
          continue;
        }
        const int64_t cs = ring_step ? p.conv_state.strides[1] : p.state_len;
        char* st = static_cast<char*>(p.conv_state.data) + (row * p.conv_state.strides[0] + c0 * cs) * xb;
        const int64_t xs = p.x.strides[1], m = c1 - c0;
        const char* x = static_cast<const char*>(p.x.data) + (b * p.x.strides[0] + c0 * xs) * xb;
        const char* w = static_cast<const char*>(p.weight.data) + c0 * p.width * wb;
        const char* bias = p.bias.present() ? static_cast<const char*>(p.bias.data) + c0 * wb : nullptr;
        // A token at a time; one token reads x and writes out in place, several through io.
        char *xbuf = io.data(), *obuf = tokens ? io.data() + p.seqlen * p.dim * xb : nullptr;
        if (x_tile) k.split_tokens(xb, (int)p.seqlen, x, p.seqlen, m, xbuf);
        for (int64_t t = 0; t < p.seqlen; ++t) {
          const char* xt = x;
          char* ot = dst;
          if (tokens) {
            if (!x_tile) copy_elements(xbuf, 1, x + t * p.x.strides[2] * xb, xs, m, xb);
            xt = xbuf + (x_tile ? t * m * xb : 0);
            ot = obuf + (out_tile ? t * m * xb : 0);
          }
          if (simd_step) {
            simd_step(p.x_dtype, st, xt, p.w_dtype, w, bias, p.silu, ot, m);
          } else {  // the ring's head and the window's positions, the same in every row of batch row b
            const int64_t sl = p.state_len, head = (index_at(p.cache_seqlens, b) + t) % sl;
            long long pos[CC1D_MAX_WIDTH];
            for (int i = 0; i + 1 < p.width; ++i) pos[i] = window_pos(true, head, sl, p.width, i);
            ring_step(p.x_dtype, st, cs, pos, head, xt, p.w_dtype, w, bias, p.silu, ot, m);
          }
          if (tokens && !out_tile) copy_elements(dst + t * out.strides[2] * xb, out.strides[1], obuf, 1, m, xb);
        }
        if (out_tile) k.join_tokens(xb, (int)p.seqlen, obuf, m, dst, p.seqlen);
        continue;
      }
      if (row < 0) {  // a padding slot: outputs 0, state untouched
        std::fill(acc.begin(), acc.begin() + n, 0.f);
      } else {
        if (stage_per_run) staged.fill(p, c0, c1);
        run_taps(p, staged, b, c0, c1, row, p.cache_seqlens.present() ? index_at(p.cache_seqlens, b) : 0, acc.data());
        if (p.silu) k.silu_inplace(acc.data(), n);
      }
      if (out_rows) {
        k.from_f32(p.x_dtype, acc.data(), static_cast<char*>(out.data) + o * dtype_size(p.x_dtype), n);
      } else {
        const ScatterFn sx = scatter_fn(p.x_dtype);
        for (int64_t c = c0; c < c1; ++c)
          sx(out.data, o + (c - c0) * out.strides[1], out.strides[2], p.seqlen, acc.data() + (c - c0) * p.seqlen);
      }
    }
  });
}

}  // namespace cc1d
