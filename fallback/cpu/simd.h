// simd.h — the CPU backend's vectorised inner loops (fallback/cpu/simd_kernels.inc, simd_fwd.inc,
// simd_decode.inc, simd_decode_ring.inc, simd_transpose.inc, simd_packed.inc and
// simd_bwd_steps.inc), built once per instruction set (simd_base.cpp: the compiler's baseline,
// SSE2 on x86-64, NEON on AArch64; simd_avx2.cpp: AVX2+FMA+F16C; simd_avx512.cpp: AVX-512
// F/BW/VL/DQ; simd_avx512bf16.cpp: the same plus AVX512_BF16's conversion and dot products;
// simd_avx512bf16_div.cpp: that again with silu divided, for AMD's cores; simd_neon_bf16.cpp:
// AArch64's baseline plus FEAT_BF16's conversion) and chosen once at run time from the CPU's
// features. CAUSAL_CONV1D_CPU_ISA=<a name of kSimdBuilds> caps the choice, the named build
// taken wherever the CPU runs it (tests run each).
#pragma once

namespace cc1d {

// The update's decode kernels (see SimdKernels::decode_rows and decode_ring).
using DecodeRowsFn = void (*)(int xd, void* state, const void* x, int wd, const void* w, const void* bias, bool silu,
                              void* out, long long n);
using DecodeRingFn = void (*)(int xd, void* state, long long cs, const long long* pos, long long head, const void* x,
                              int wd, const void* w, const void* bias, bool silu, void* out, long long n);

// Whether the decode kernels exist at width W: a power of two from 2 (their row sums pair lanes).
// A constant, not a function: the SIMD units include this header, and no function of theirs may
// be shared with another unit (simd_kernels.inc).
template <int W>
constexpr bool kHasDecodeKernel = W > 1 && (W & (W - 1)) == 0;

// Whether the decode kernels serve x of dtype xd with weights (and bias) of dtype wd: weights in
// x's dtype or in fp32, as upstream allows; the caller takes its scalar step for the other pairs.
// static, so that each unit keeps its own copy (see kHasDecodeKernel).
static constexpr bool decode_dtypes(int xd, int wd) { return wd == xd || wd == 0 /* CC1D_FLOAT32 */; }

// The widest build's floats per vector (AVX-512): buffers of a vector's lanes are this long.
constexpr int kMaxSimdWidth = 16;
// The most tokens split_tokens and join_tokens move at once, and a call's decode steps take (a
// SIMD step a token: update_cpu.cpp); the tokens as rows of channels move more in blocks of it.
constexpr int kMaxSimdTokens = 16;

// Whether the one-pass walk exists at width W: upstream's widths, 2 to 4; the others take the
// tiles (the walk's instances for every width and dtype, with and without seq_idx, doubled each
// SIMD unit's compile time).
template <int W>
constexpr bool kHasBwdWalk = W >= 2 && W <= 4;
// The backward's one pass over a channel-last run of steps (SimdKernels::bwd_steps), walked from
// step hi-1 down to lo: per step s, the pre-activation from x, g = dout * silu'(it) (or dout),
// dx[s] = sum_k wt[k] * g[s + W-1-k], and the sums. Two rings of W rows carry x and g from one
// call to the next: x at step s in row (s + W) % W, g likewise. On entry xring holds x at steps
// hi-(W-1)..hi-1 and gring g at hi..hi+W-2 (zeros past the row's end); on return, x at
// lo-(W-1)..lo-1 and g at lo..lo+W-2. The float arrays have rows of nc floats, ls floats apart.
struct BwdStepsArgs {
  int dtype;  // of x, dout and dx
  bool silu;
  const void* x;  // step 0 of the first channel; channels contiguous, steps xs elements apart
  const void* dout;
  void* dx;
  long long xs, ds, dxs;  // time strides of x, dout and dx, elements
  long long lo, hi, nc, ls;
  const float* halo;  // W-1 rows: x at steps -(W-1)..-1 (initial states or zeros), row s + W-1
  const float* wt;    // W rows of taps
  const float* bias;  // a row
  float *xring, *gring;
  float *dw, *db;  // W rows and a row: dw[k] += g[s] * x[s - (W-1) + k], db += g[s], s in walk order
  // Null (no seq_idx), or step s's keep bits at keep[s] for s in [lo, hi): bit k (k < W) set
  // when x's tap k (x at s-(W-1)+k) is of s's segment, bit W+k when dx's (g at s+W-1-k) is, bit
  // 2W when s is padding (id -1). A tap of another segment counts as 0, and a padding step has
  // g = 0, as in the forward.
  const unsigned* keep;
};
// The keep bits of a plain step (every tap in its segment, not padding), the most common. A
// constant, as kHasDecodeKernel.
template <int W>
constexpr unsigned kBwdKeepAll = (1u << 2 * W) - 1;
using BwdStepsFn = void (*)(const BwdStepsArgs& a);

// The backward over steps [0, n) of one channel-first row with unit time strides, in one pass
// (SimdKernels::bwd_time, simd_bwd_steps.inc): g = dout * silu'(pre-activation) (or dout), dx =
// sum_k w[k] * g[s + W-1-k], and the sums in `width` lanes, lane l taking the steps s = l mod width.
struct BwdRowArgs {
  int dtype;  // of x, dout and dx
  bool silu;
  const void* x;  // the row's step 0
  const void* dout;
  void* dx;
  long long n;
  const float* halo;  // W-1 floats: x before step 0
  float* carry;       // W-1 floats: g at steps n.. on entry (0 past the row's end; dx's only, not the
                      // sums'); g at 0.. on return
  const float* w;     // W taps
  float bias;
  float *dw, *db;  // W rows of `width` lanes and a row: dw[k][l] += g[s] * x[s - (W-1) + k], db[l] += g[s]
};
using BwdRowFn = void (*)(const BwdRowArgs& a);

// dtype arguments are cc1d_dtype values (CC1D_FLOAT32 for a float buffer); all arrays are
// contiguous unless a stride is given (in elements).
struct SimdKernels {
  const char* name;  // one of kSimdBuilds
  int width;         // floats per vector
  // The forward, x read and out written in one dtype (CC1D_FLOAT32 for float buffers), W-1 steps
  // of history given as floats (`halo`: x before the first output, initial states or zeros).
  // Channel-first row: out[t] = act(bias + sum_k w[k] * x[t - (W-1) + k]), t < n, x and out n
  // contiguous elements, halo W-1 floats. Index W-1.
  void (*const* conv_time)(int dtype, const void* x, const float* halo, const float* w, float bias, bool silu,
                           void* out, long long n);
  // Channel-last tile of nt steps x nc contiguous channels: x and out time strides xs and os
  // elements, halo (W-1) x nc floats, weights wt W x nc floats, bias nc floats. `stream`: out's
  // whole vectors go around the caches where the build and their alignment allow (non-temporal
  // stores, for an output over half the last-level cache: stream_out.h); the same values. Index W-1.
  void (*const* conv_channels)(int dtype, const void* x, long long xs, const float* halo, const float* wt,
                               const float* bias, bool silu, bool stream, void* out, long long os, long long nt,
                               long long nc);
  // Channel-first rows of len steps stored back to back (row c at element c * len of x and out),
  // nc rows, x read as 0 before each row's step 0 (simd_packed.inc): out[c*len + t] =
  // act(wt[W*ws + c] + sum_k wt[k*ws + c] * x[c*len + t - (W-1) + k]). wt: W rows of ws taps, then
  // the bias row, each readable `width` floats past the last row; tab: packed_rows.h's. Index W-1.
  void (*const* conv_packed)(int dtype, const void* x, long long len, const int* tab, const float* wt, long long ws,
                             bool silu, void* out, long long nc);
  // Its backward over the same rows: g = dout * silu'(pre-activation) (or dout) into g (nc*len
  // floats, then width + W of scratch); dx (unless null) = sum_k wt[k*ws + c] * g[c*len + t + W-1-k],
  // 0 past the row's end; and unless sums is null, per element e of the rows, sums[k*sn + e] +=
  // g[e] * x[e - (W-1-k)] (0 before the row) and sums[W*sn + e] += g[e] (sn: nc*len rounded up
  // to whole vectors). Index W-1.
  void (*const* bwd_packed)(int dtype, const void* x, const void* dout, long long len, const int* tab, const float* wt,
                            long long ws, bool silu, void* dx, float* g, float* sums, long long sn, long long nc);
  // The backward over channel-last steps in one pass (BwdStepsArgs; simd_bwd_steps.inc). Index W-1;
  // nullptr where !kHasBwdWalk<W>.
  const BwdStepsFn* bwd_steps;
  // The backward over a channel-first row in one pass (BwdRowArgs). Index W-1; nullptr where
  // !kHasBwdWalk<W>.
  const BwdRowFn* bwd_time;
  // The backward's dweight and dbias over a channel-last tile of nt steps x nc channels (rows
  // of nc floats: g, and x with its W-1 steps of history first): per channel q,
  // dw[k*nc + q] += sum_i g[i*nc + q] x[(i+k)*nc + q] and db[q] += sum_i g[i*nc + q], i in order.
  // Index W-1.
  void (*const* tap_sums)(const float* g, const float* x, long long nt, long long nc, float* dw, float* db);
  // The same over one row, vectorised over time: g (n floats) and x (n + W - 1, the W-1 steps
  // before g's first first); lane l of `width` accumulates the steps i = l mod width in order:
  // dw[k*ds + l] += g[i] x[i+k], db[l] += g[i]. Index W-1.
  void (*const* row_sums)(const float* g, const float* x, long long n, float* dw, long long ds, float* db);
  // One decode step of n channels (the update op's common case): state rows of W contiguous
  // elements, row after row, in dtype xd, shift left by one and take x (n contiguous elements);
  // out[c] = act(bias[c] + sum_k w[c*W+k] * new_state[c*W+k]), weights n x W contiguous and bias
  // (n, or NULL) in dtype wd, out n contiguous elements of xd; only for the pairs (xd, wd) that
  // decode_dtypes accepts. Index W-1; nullptr for a width other than 2, 4 and 8.
  const DecodeRowsFn* decode_rows;
  // The same with state rows of W-1 elements (vLLM's layout): out[c] = act(bias[c] + sum_k
  // w[c*W+k] * (old row c, then x[c])[k]); each row then shifts left by one and takes x.
  const DecodeRowsFn* decode_rows_short;
  // The decode step of a ring buffer (cache_seqlens) for n channels of one batch row: row c of
  // the state at element c*cs, its window at positions pos[0..W-2] and x written at `head` (the
  // same in every row); weights, bias, x and out as above. Needs n*cs*element size + 4 < 2^31.
  // nullptr on the baseline build (no gather instruction) and for widths other than 2, 4 and 8.
  const DecodeRingFn* decode_ring;
  void (*to_f32)(int dtype, const void* src, float* dst, long long n);
  void (*from_f32)(int dtype, const float* src, void* dst, long long n);
  // Tiles of channel-first rows (simd_transpose.inc): n rows of m contiguous elements in dtype,
  // row i at element i * rs, to floats transposed, dst[j * ds + i] = row i's element j; and back,
  // row i's element j from src[j * ss + i]. The same bits as to_f32 and from_f32.
  void (*rows_to_f32_t)(int dtype, const void* src, long long rs, long long n, long long m, float* dst, long long ds);
  void (*rows_from_f32_t)(int dtype, const float* src, long long ss, long long n, long long m, void* dst,
                          long long rs);
  // A few tokens of the update (simd_transpose.inc), elements of `bytes` (2 or 4) moved as bits:
  // m channels of t tokens (2 <= t <= kMaxSimdTokens; channel c's from element c*cs of src, cs >=
  // t) to t rows of m contiguous elements (token j's at element j*m of dst); join_tokens the
  // reverse. Vectorised where cs == t or the vector's lanes divide t (16 tokens in every build).
  void (*split_tokens)(int bytes, int t, const void* src, long long cs, long long m, void* dst);
  void (*join_tokens)(int bytes, int t, const void* src, long long m, void* dst, long long cs);
  void (*silu_inplace)(float* v, long long n);
  // g[i] *= silu'(z[i]): the backward through silu.
  void (*mul_silu_grad)(const float* z, float* g, long long n);
};

// Every build's name for this architecture, the best first.
#if defined(__aarch64__)
constexpr const char* kSimdBuilds[] = {"neon_bf16", "base"};
#else
constexpr const char* kSimdBuilds[] = {"avx512bf16_div", "avx512bf16", "avx512", "avx2", "base"};
#endif

// The best build this CPU runs (capped by CAUSAL_CONV1D_CPU_ISA), chosen on first use.
const SimdKernels& simd();

// The build of that name, or nullptr when it is not compiled in or this CPU cannot run it.
const SimdKernels* simd_build(const char* name);

// Tests: simd() returns `k` from now on (nullptr: the automatic choice again).
void simd_override_for_testing(const SimdKernels* k);

}  // namespace cc1d
