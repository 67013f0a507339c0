// test_support.h — shared helpers for the C++ tests: host tensors in any dtype and layout,
// fresh random data, NaN poisoning, and a float64 reference of the forward.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cc1d/cc1d.h"

#define CC1D_HD inline
#include "kernels_src/cc1d_types.cuh"

namespace cc1d_test {

// The random seed of this test process: CC1D_TEST_SEED when set (to replay a failure), else a
// fresh one. Printed once, so that any failure can be replayed.
inline uint32_t test_seed() {
  static const uint32_t seed = [] {
    const char* v = std::getenv("CC1D_TEST_SEED");
    const uint32_t s = v != nullptr && *v != '\0' ? static_cast<uint32_t>(std::strtoul(v, nullptr, 0))
                                                 : std::random_device{}();
    std::printf("[cc1d test] random seed %u (replay with CC1D_TEST_SEED=%u)\n", s, s);
    std::fflush(stdout);
    return s;
  }();
  return seed;
}

// A generator for one test case: the process seed mixed with a per-case salt.
inline std::mt19937 test_rng(uint32_t salt) {
  std::seed_seq seq{test_seed(), salt};
  return std::mt19937(seq);
}

inline size_t dtype_size(int dt) { return dt == CC1D_FLOAT32 || dt == CC1D_INT32 ? 4 : 2; }

// A host tensor with owned storage, addressed through explicit strides.
struct HostTensor {
  std::vector<unsigned char> storage;
  cc1d_tensor t{};
  int64_t base = 0;  // the element of storage where the tensor starts
  HostTensor() = default;
  // dims/strides in elements; storage covers `base` elements before the tensor and its largest offset.
  HostTensor(int dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t base_elems = 0)
      : base(base_elems) {
    t.dtype = dtype;
    t.device_type = CC1D_DEVICE_CPU;
    t.ndim = static_cast<int32_t>(shape.size());
    int64_t extent = 1 + base;
    for (size_t i = 0; i < shape.size(); ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
      if (shape[i] > 0) extent += (shape[i] - 1) * strides[i];
    }
    storage.assign(static_cast<size_t>(extent) * dtype_size(dtype), 0);
    t.data = storage.data() + base * dtype_size(dtype);
  }
  // Copies and moves keep the descriptor pointing into their own storage (at the same offset; a
  // moved buffer keeps its address).
  HostTensor(const HostTensor& o) : storage(o.storage), t(o.t), base(o.base) { repoint(o); }
  HostTensor(HostTensor&& o) noexcept : storage(std::move(o.storage)), t(o.t), base(o.base) {}
  HostTensor& operator=(const HostTensor& o) {
    storage = o.storage;
    t = o.t;
    base = o.base;
    repoint(o);
    return *this;
  }
  HostTensor& operator=(HostTensor&& o) noexcept {
    storage = std::move(o.storage);
    t = o.t;
    base = o.base;
    return *this;
  }
  void repoint(const HostTensor& o) {
    const auto* base = o.storage.data();
    const auto* p = static_cast<const unsigned char*>(o.t.data);
    if (p >= base && p < base + o.storage.size()) t.data = storage.data() + (p - base);
  }
  // Row-major contiguous.
  static HostTensor contiguous(int dtype, std::vector<int64_t> shape) {
    std::vector<int64_t> st(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * std::max<int64_t>(shape[i + 1], 1);
    return HostTensor(dtype, shape, st);
  }
  // The storage element of an index.
  int64_t off(std::initializer_list<int64_t> idx) const {
    int64_t o = base, i = 0;
    for (int64_t v : idx) o += v * t.strides[i++];
    return o;
  }
  double get(int64_t o) const {
    switch (t.dtype) {
      case CC1D_FLOAT16: return cc1d::to_float(reinterpret_cast<const cc1d::half_t*>(storage.data())[o]);
      case CC1D_BFLOAT16: return cc1d::to_float(reinterpret_cast<const cc1d::bf16_t*>(storage.data())[o]);
      case CC1D_INT32: return reinterpret_cast<const int32_t*>(storage.data())[o];
      default: return reinterpret_cast<const float*>(storage.data())[o];
    }
  }
  void set(int64_t o, double v) {
    switch (t.dtype) {
      case CC1D_FLOAT16: reinterpret_cast<cc1d::half_t*>(storage.data())[o] = cc1d::from_float<cc1d::half_t>((float)v); break;
      case CC1D_BFLOAT16: reinterpret_cast<cc1d::bf16_t*>(storage.data())[o] = cc1d::from_float<cc1d::bf16_t>((float)v); break;
      case CC1D_INT32: reinterpret_cast<int32_t*>(storage.data())[o] = static_cast<int32_t>(v); break;
      default: reinterpret_cast<float*>(storage.data())[o] = (float)v;
    }
  }
  // Fills every storage element (including gaps between strided elements).
  void fill_all(double v) {
    const int64_t n = static_cast<int64_t>(storage.size() / dtype_size(t.dtype));
    for (int64_t i = 0; i < n; ++i) set(i, v);
  }
  void randomize(std::mt19937& rng, double scale = 1.0) {
    std::normal_distribution<double> d(0.0, scale);
    const int64_t n = static_cast<int64_t>(storage.size() / dtype_size(t.dtype));
    for (int64_t i = 0; i < n; ++i) set(i, d(rng));
  }
};

// Layouts of x: channel-first contiguous, channel-last (B, L, D) transposed, a strided view
// (every other channel of a wider tensor, time stride 1 with padding), or channel-first rows
// padded to a multiple of 8 elements plus 8 (16-byte aligned rows for any seqlen: the vector path).
// ChannelLastSlice: channel-last, half of a tensor twice as wide (as x from xBC.split): a step
// 2D elements after the last. OddRows: channel-first rows of unit stride, an odd number of
// elements apart with a gap of 9 or 10 after each, the tensor 3 elements into its storage (so
// the rows start at every offset mod 16 bytes, row 0 too, and a write before a row's start lands
// in a gap).
enum class Layout { ChannelFirst, ChannelLast, View, Padded, ChannelLastSlice, OddRows };
inline const char* layout_name(Layout l) {
  static const char* const names[] = {"channel-first", "channel-last", "view", "padded", "channel-last slice",
                                      "odd rows"};
  return names[int(l)];
}

inline HostTensor make_x(int dtype, int64_t B, int64_t D, int64_t L, Layout layout) {
  const int64_t padded = (L + 7) / 8 * 8 + 8;
  switch (layout) {
    case Layout::ChannelLast: return HostTensor(dtype, {B, D, L}, {L * D, 1, D});
    case Layout::ChannelLastSlice: return HostTensor(dtype, {B, D, L}, {2 * L * D, 1, 2 * D});
    case Layout::View: return HostTensor(dtype, {B, D, L}, {2 * D * (L + 3), 2 * (L + 3), 1});
    case Layout::Padded: return HostTensor(dtype, {B, D, L}, {D * padded, padded, 1});
    case Layout::OddRows: {
      const int64_t stride = L + 9 + L % 2;
      return HostTensor(dtype, {B, D, L}, {D * stride, stride, 1}, 3);
    }
    default: return HostTensor::contiguous(dtype, {B, D, L});
  }
}

// (B, L) int32 segment ids: runs of random length, some of them padding (-1).
// Segments of 1..max_len steps; one in four is padding (-1), after which half the time the
// segment before it goes on (an id that reappears: taps across the padding count).
inline HostTensor random_segments(int64_t B, int64_t L, std::mt19937& rng, int max_len = 9) {
  HostTensor seq = HostTensor::contiguous(CC1D_INT32, {B, L});
  std::uniform_int_distribution<int> len(1, max_len), pad(0, 3);
  for (int64_t b = 0; b < B; ++b) {
    int id = 0;
    bool after_pad = false;
    for (int64_t t = 0; t < L;) {
      const int n = len(rng);
      const bool is_pad = pad(rng) == 0, resume = after_pad && id > 0 && pad(rng) < 2;
      const int v = is_pad ? -1 : resume ? id - 1 : id++;
      after_pad = is_pad;
      for (int i = 0; i < n && t < L; ++i, ++t) seq.set(seq.off({b, t}), v);
    }
  }
  return seq;
}

// Under AddressSanitizer (about ten times slower: the asan job) the long cases run on rows of at
// most this many steps (a multiple of 8, so aligned rows stay aligned); every variant and path
// that fits still runs.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
constexpr int64_t kMaxLen = 296;
#else
constexpr bool kSanitized = false;
constexpr int64_t kMaxLen = INT64_MAX;
#endif

// The cases of the CPU seq_idx tests (forward and backward), as f(i, layout, x dtype, width, dim,
// max segment length): every layout and dtype, rows of kSegmentCaseLen steps (across the
// channel-first tile of 2048 steps, but under ASan, and many channel-last tiles of 64), 300
// channels in every fourth channel-last case (several channel tiles), segments of up to 9 steps
// (tiles of short runs: the unfused path) or of 80 and 3000 (a fused pass per run, tiles
// starting inside a run).
constexpr int64_t kSegmentCaseLen = kMaxLen < 2349 ? kMaxLen + 5 : 2349;
template <typename F>
void for_each_segment_case(F f) {
  int i = 0;
  for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View})
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int width : {2, 4, 5, 8})
        for (int max_segment : {9, 80, 3000}) {
          const int64_t D = layout == Layout::ChannelLast && i % 4 == 0 ? 300 : 5;
          f(i++, layout, xdt, width, D, max_segment);
        }
}

struct RefInputs {
  const HostTensor* x = nullptr;
  const HostTensor* w = nullptr;
  const HostTensor* bias = nullptr;
  const HostTensor* seq = nullptr;
  const HostTensor* init = nullptr;
  bool silu = false;
};

// float64 reference: out (B, D, L) and final states (B, D, W-1), row-major vectors.
inline void reference_fwd(const RefInputs& in, std::vector<double>& out, std::vector<double>& fin) {
  const int64_t B = in.x->t.shape[0], D = in.x->t.shape[1], L = in.x->t.shape[2];
  const int W = static_cast<int>(in.w->t.shape[1]);
  out.assign(B * D * L, 0.0);
  fin.assign(B * D * (W - 1), 0.0);
  auto xv = [&](int64_t b, int64_t c, int64_t s) -> double {
    if (s >= 0) return in.x->get(in.x->off({b, c, s}));
    if (!in.init) return 0.0;
    return in.init->get(in.init->off({b, c, W - 1 + s}));
  };
  auto seg = [&](int64_t b, int64_t s) -> int64_t {
    return static_cast<int64_t>(in.seq->get(in.seq->off({b, std::max<int64_t>(s, 0)})));
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < D; ++c) {
      for (int64_t t = 0; t < L; ++t) {
        double acc = in.bias ? in.bias->get(in.bias->off({c})) : 0.0;
        const int64_t cur = in.seq ? seg(b, t) : 0;
        for (int k = 0; k < W; ++k) {
          const int64_t s = t - W + 1 + k;
          if (in.seq && seg(b, s) != cur) continue;
          acc += in.w->get(in.w->off({c, k})) * xv(b, c, s);
        }
        if (in.silu) acc = acc / (1.0 + std::exp(-acc));
        if (in.seq && cur < 0) acc = 0.0;
        out[(b * D + c) * L + t] = acc;
      }
      for (int j = 0; j < W - 1; ++j) fin[(b * D + c) * (W - 1) + j] = xv(b, c, L - (W - 1) + j);
    }
}

// Relative tolerance of an output stored in dtype (fp32 accumulation inside).
inline double tolerance(int dtype) {
  return dtype == CC1D_FLOAT32 ? 2e-5 : dtype == CC1D_FLOAT16 ? 2e-3 : 1.6e-2;
}

// Compares every element; returns "" or a description of the first mismatch (NaN fails).
inline std::string compare(const HostTensor& got, const std::vector<double>& want, double tol) {
  const int64_t d0 = got.t.shape[0], d1 = got.t.shape[1], d2 = got.t.shape[2];
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t k = 0; k < d2; ++k) {
        const double g = got.get(got.off({i, j, k}));
        const double w = want[(i * d1 + j) * d2 + k];
        if (!(std::fabs(g - w) <= tol * (1.0 + std::fabs(w))))
          return "at (" + std::to_string(i) + ", " + std::to_string(j) + ", " + std::to_string(k) +
                 "): got " + std::to_string(g) + ", want " + std::to_string(w);
      }
  return "";
}

// "" when out is the float64 reference forward of x, w and bias (null: none), with no seq_idx or
// initial states, within out's dtype's tolerance; else the first mismatch.
inline std::string reference_diff(const HostTensor& out, const HostTensor& x, const HostTensor& w,
                                  const HostTensor* bias, bool silu) {
  RefInputs in;
  in.x = &x;
  in.w = &w;
  in.bias = bias;
  in.silu = silu;
  std::vector<double> want, fin;
  reference_fwd(in, want, fin);
  return compare(out, want, tolerance(static_cast<int>(out.t.dtype)));
}

// Every libcc1d log line while alive.
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  LogCapture() { cc1d_set_log_callback(&record, this); }
  ~LogCapture() { cc1d_set_log_callback(nullptr, nullptr); }
  static void record(int32_t, const char* message, void* self) {
    auto* c = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(c->mu);
    c->lines.push_back(message);
  }
  int count(const std::string& fragment) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const auto& l : lines) n += l.find(fragment) != std::string::npos;
    return n;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

}  // namespace cc1d_test
