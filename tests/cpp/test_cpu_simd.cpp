// The CPU backend's machinery apart from the op grid: every SIMD build this CPU runs (special
// values, conversions, a result independent of its position, the forward, the backward and the
// update's decode step on each), and the thread pool with concurrent callers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fallback/cpu/simd.h"
#include "fallback/cpu/stream_out.h"
#include "fallback/cpu/thread_pool.h"
#include "bwd_case.h"
#include "fwd_case.h"
#include "update_case.h"

using namespace cc1d_test;

namespace {

std::vector<const cc1d::SimdKernels*> builds() {
  std::vector<const cc1d::SimdKernels*> v;
  for (const char* n : cc1d::kSimdBuilds)
    if (const cc1d::SimdKernels* k = cc1d::simd_build(n)) v.push_back(k);
  return v;
}

// f(build) once under each build (simd_override_for_testing), the automatic choice again after.
template <typename F>
void under_each_build(F f) {
  struct Restore {
    ~Restore() { cc1d::simd_override_for_testing(nullptr); }
  } restore;
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    cc1d::simd_override_for_testing(k);
    f(k);
  }
}

std::string build_names() {
  std::string s;
  for (const cc1d::SimdKernels* k : builds()) s += (s.empty() ? "" : ",") + std::string(k->name);
  return s;
}

float silu_ref(float z) { return static_cast<float>(static_cast<double>(z) / (1.0 + std::exp(-static_cast<double>(z)))); }

}  // namespace

// CC1D_TEST_SIMD_BUILDS names the builds this machine must run, best first (scripts/aarch64_test.sh:
// qemu has FEAT_BF16), so that a unit left out of the build or refused by its feature check fails
// here instead of going untested.
TEST_CASE("the SIMD builds this CPU runs") {
  MESSAGE("SIMD builds: " << build_names());
  if (const char* want = std::getenv("CC1D_TEST_SIMD_BUILDS")) CHECK(build_names() == want);
}

TEST_CASE("every SIMD build: silu special values in every lane, as aten and the GPU") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  REQUIRE_FALSE(builds().empty());
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    // Each special value at every position modulo the vector width, tails included.
    for (int n = 1; n <= 9 * k->width + 1; ++n)  // (eight vectors at a time on AVX2, else four; then one)
      for (int pos = 0; pos < n; ++pos) {
        const float specials[] = {-inf, inf, nan, -100.f, 100.f, 0.f, -0.f};
        for (float sv : specials) {
          std::vector<float> v(n, 0.5f);
          v[pos] = sv;
          k->silu_inplace(v.data(), n);
          INFO("n " << n << " pos " << pos << " value " << sv);
          if (std::isnan(sv) || sv == -inf)
            CHECK(std::isnan(v[pos]));  // -inf * sigmoid(-inf) = -inf * 0
          else if (sv == inf)
            CHECK(v[pos] == inf);
          else
            CHECK(std::fabs(v[pos] - silu_ref(sv)) <= 1e-6f * (1.f + std::fabs(silu_ref(sv))));
          if (n > 1) CHECK(std::fabs(v[(pos + 1) % n] - silu_ref(0.5f)) <= 1e-6f);  // the other lanes
        }
      }
    // Accuracy over a sweep.
    std::vector<float> v, want;
    for (float z = -90.f; z <= 90.f; z += 0.0137f) v.push_back(z), want.push_back(silu_ref(z));
    k->silu_inplace(v.data(), static_cast<long long>(v.size()));
    for (size_t i = 0; i < v.size(); ++i)
      REQUIRE_MESSAGE(std::fabs(v[i] - want[i]) <= 2e-6f * (1.f + std::fabs(want[i])), "silu(" << want[i] << ")");
  }
}

TEST_CASE("every SIMD build: bf16 and fp16 conversions round like the kernels' (subnormals, inf, NaN)") {
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    // Every 16-bit pattern -> float -> back.
    std::vector<unsigned short> bits(65536);
    for (int i = 0; i < 65536; ++i) bits[i] = static_cast<unsigned short>(i);
    for (int dt : {CC1D_BFLOAT16, CC1D_FLOAT16}) {
      std::vector<float> f(65536);
      k->to_f32(dt, bits.data(), f.data(), 65536);
      std::vector<unsigned short> back(65536);
      k->from_f32(dt, f.data(), back.data(), 65536);
      for (int i = 0; i < 65536; ++i) {
        const float want = dt == CC1D_BFLOAT16 ? cc1d::bf16_bits_to_float(bits[i]) : cc1d::half_bits_to_float(bits[i]);
        INFO("dtype " << dt << " bits " << i);
        if (std::isnan(want)) {
          REQUIRE(std::isnan(f[i]));
          REQUIRE(((back[i] & 0x7fff) > (dt == CC1D_BFLOAT16 ? 0x7f80 : 0x7c00)));  // still a NaN
        } else {
          REQUIRE(std::memcmp(&f[i], &want, 4) == 0);
          REQUIRE(back[i] == bits[i]);
        }
      }
    }
    // Floats between representable values: round to nearest even, overflow to inf.
    std::mt19937 rng = test_rng(201);
    std::vector<float> f(4099);
    std::uniform_int_distribution<uint32_t> any;
    for (float& x : f) {
      const uint32_t u = any(rng);
      std::memcpy(&x, &u, 4);
      if (std::isnan(x)) x = 1.f;
    }
    for (int dt : {CC1D_BFLOAT16, CC1D_FLOAT16}) {
      std::vector<unsigned short> got(f.size());
      k->from_f32(dt, f.data(), got.data(), static_cast<long long>(f.size()));
      for (size_t i = 0; i < f.size(); ++i) {
        const unsigned short want = dt == CC1D_BFLOAT16 ? cc1d::float_to_bf16_bits(f[i]) : cc1d::float_to_half_bits(f[i]);
        REQUIRE_MESSAGE(got[i] == want, "dtype " << dt << " value " << f[i]);
      }
    }
  }
}

// Channel-first short rows' tiles (x_rows.h's x_steps and put_steps): rows of m elements turned
// into rows of n floats and back, with partial blocks both ways, rows and outputs with gaps (which
// must stay untouched) and any bits (NaNs, infinities, subnormals), against to_f32 and from_f32 of
// the same build bit for bit.
TEST_CASE("every SIMD build: the transposes move every element as to_f32 and from_f32 convert it") {
  std::mt19937 rng = test_rng(205);
  std::uniform_int_distribution<uint32_t> any;
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    const long long L = k->width;
    for (int dt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (auto [n, m] : {std::pair<long long, long long>{1, 1}, {3, 8}, {L, L}, {L + 3, 2 * L + 5}, {2 * L + 1, 3}}) {
        INFO("dtype " << dt << " n " << n << " m " << m);
        const size_t es = dt == CC1D_FLOAT32 ? 4 : 2;
        const long long rs = m + 3, ds = n + 2;  // gaps after each row and each output row
        std::vector<unsigned char> src(n * rs * es);
        for (auto& byte : src) byte = static_cast<unsigned char>(any(rng));
        std::vector<float> dst(m * ds, 12345.f);
        k->rows_to_f32_t(dt, src.data(), rs, n, m, dst.data(), ds);
        std::vector<float> row(m);
        for (long long i = 0; i < n; ++i) {
          k->to_f32(dt, src.data() + i * rs * es, row.data(), m);
          for (long long j = 0; j < m; ++j) REQUIRE(std::memcmp(&dst[j * ds + i], &row[j], 4) == 0);
        }
        for (long long j = 0; j < m; ++j)
          for (long long i = n; i < ds; ++i) REQUIRE(dst[j * ds + i] == 12345.f);
        // And back, into rows whose gaps hold a pattern.
        std::vector<unsigned char> back(n * rs * es, 0xa5);
        k->rows_from_f32_t(dt, dst.data(), ds, n, m, back.data(), rs);
        std::vector<unsigned char> want(m * es);
        for (long long i = 0; i < n; ++i) {
          for (long long j = 0; j < m; ++j) row[j] = dst[j * ds + i];
          k->from_f32(dt, row.data(), want.data(), m);
          REQUIRE(std::memcmp(back.data() + i * rs * es, want.data(), m * es) == 0);
          for (size_t g = m * es; g < rs * es; ++g) REQUIRE(back[i * rs * es + g] == 0xa5);
        }
      }
  }
}

TEST_CASE("every SIMD build: the forward's bf16 stores keep subnormals in every lane (out = x)") {
  // Width 1, weight 1, no bias: each output is its input, so a store path that reads subnormals
  // as zero (vcvtneps2bf16's) fails wherever one lands, in either vector of a pair.
  std::mt19937 rng = test_rng(204);
  std::uniform_int_distribution<int> pick(0, 0xffff);
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    const long long n = 8 * k->width + 5;  // a group of by_vectors (4 or 8), then the rest
    std::vector<unsigned short> x(n), out(n);
    for (int trial = 0; trial < 64; ++trial) {
      for (auto& e : x) {
        const int r = pick(rng);
        e = static_cast<unsigned short>(r % 40 ? 0x3f80 + (r & 0x7f) : (r & 0x807f));  // 1 in 40 subnormal or 0
      }
      const float w = 1.f;
      const std::vector<float> ws(n, 1.f), bs(n, 0.f);  // channel-last: one step of n channels
      std::fill(out.begin(), out.end(), 0x7fc0);
      k->conv_time[0](CC1D_BFLOAT16, x.data(), nullptr, &w, 0.f, false, out.data(), n);
      for (long long i = 0; i < n; ++i)
        REQUIRE_MESSAGE(cc1d::bf16_bits_to_float(out[i]) == cc1d::bf16_bits_to_float(x[i]), "channel-first " << i);
      std::fill(out.begin(), out.end(), 0x7fc0);
      k->conv_channels[0](CC1D_BFLOAT16, x.data(), n, nullptr, ws.data(), bs.data(), false, false, out.data(), n, 1, n);
      for (long long i = 0; i < n; ++i)
        REQUIRE_MESSAGE(cc1d::bf16_bits_to_float(out[i]) == cc1d::bf16_bits_to_float(x[i]), "channel-last " << i);
    }
  }
}

TEST_CASE("every SIMD build: bf16 rows with bf16 weights, tiny and subnormal sums kept (AVX512_BF16's dot products)") {
  // Channel-first bf16 rows whose weights are bf16 values: AVX512_BF16 sums them by vdpbf16ps,
  // which reads subnormals as 0 and flushes subnormal sums, so a vector with a pre-activation
  // under 2^-95 is summed again by FMAs. Rows of random values with runs planted in them: zeros
  // (the sum is the bias, 0), values near 2^-100 against weights near 2^-30 (products and sums
  // subnormal) and subnormal inputs; weights of four kinds: ordinary, near 2^-30, too large for
  // the dot products (2^9) or not bf16 values (the FMAs throughout). Each output against the
  // float64 sum rounded once to float and then to bf16: within 2 bf16 ulps, plus the float sum's own
  // rounding (2^-20 of the terms' magnitudes: a cancelling sum), plus an absolute 2^-133
  // (bf16's smallest subnormal), which a flushed output misses (with silu 2^-118: silu(z) is 0
  // below z = -88.3 or so, as on the GPU, where the exact value is under 1e-36).
  std::mt19937 rng = test_rng(206);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const cc1d::SimdKernels* k : builds()) {
    const long long n = 40 * k->width + 7;
    INFO("build " << std::string(k->name));
    for (int width : {2, 3, 4, 8})
      for (int weights : {0, 1, 2, 3})  // ordinary, tiny, too large, not bf16 values
        for (bool silu : {false, true})
          for (int trial = 0; trial < 4; ++trial) {
            INFO("width " << width << ", weights " << weights << ", silu " << silu << ", trial " << trial);
            std::vector<float> w(width), halo(width - 1);
            for (float& e : w) {
              const float v = normal(rng) * (weights == 1 ? 0x1p-30f : weights == 2 ? 0x1p9f : 1.f);
              e = weights == 3 ? v : cc1d::bf16_bits_to_float(cc1d::float_to_bf16_bits(v));
            }
            for (float& e : halo) e = cc1d::bf16_bits_to_float(cc1d::float_to_bf16_bits(normal(rng)));
            std::vector<unsigned short> x(n), out(n, 0x7fc0);
            for (long long i = 0; i < n; ++i) {
              const long long run = (i / 37 + trial) % 6;  // runs of 37: three kinds planted, then ordinary
              const float v = normal(rng);
              x[i] = run == 1   ? 0
                     : run == 2 ? cc1d::float_to_bf16_bits(v * 0x1p-100f)
                     : run == 3 ? static_cast<unsigned short>((v < 0 ? 0x8000 : 0) | (1 + (i % 0x7f)))  // subnormal
                                : cc1d::float_to_bf16_bits(v);
            }
            const float bias = trial % 2 ? 0.f : cc1d::bf16_bits_to_float(cc1d::float_to_bf16_bits(normal(rng)));
            k->conv_time[width - 1](CC1D_BFLOAT16, x.data(), halo.data(), w.data(), bias, silu, out.data(), n);
            for (long long t = 0; t < n; ++t) {
              double z = bias, size = std::fabs(bias);  // size: the float sum's rounding scale
              for (int j = 0; j < width; ++j) {
                const long long s = t - (width - 1) + j;
                const float xs = s < 0 ? halo[s + width - 1] : cc1d::bf16_bits_to_float(x[s]);
                const double term = static_cast<double>(w[j]) * xs;
                z += term;
                size += std::fabs(term);
              }
              if (silu) z = z / (1.0 + std::exp(-z));
              const double want = cc1d::bf16_bits_to_float(cc1d::float_to_bf16_bits(static_cast<float>(z)));
              const double got = cc1d::bf16_bits_to_float(out[t]);
              const double tol = std::fabs(want) * 0x1p-7 + size * 0x1p-20 + (silu ? 0x1p-118 : 0x1p-133);
              REQUIRE_MESSAGE(std::fabs(got - want) <= tol, "element " << t << ": got " << got << ", want " << want);
            }
          }
  }
}

TEST_CASE("every SIMD build: the forward's bf16 rows round ties to even and keep NaN a NaN, in every lane") {
  // Width 2, weights 1 and no bias over x = v0, h, v1, h, ... with h = 2^-8 and v in [1, 2) (and
  // channel-last, steps h, v, h): every output is v + h, halfway between two bf16 values, so
  // rounding to nearest even gives v for an even mantissa and the next value up for an odd one
  // (the float64 reference cannot see a tie rounded the wrong way). Then a NaN bias whose low bits
  // are all ones: a rounding that carries into the sign would store -0 or +0.
  std::mt19937 rng = test_rng(205);
  std::uniform_int_distribution<int> pick(0, 0x7f);
  const unsigned short h = 0x3b80;  // 2^-8
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    const long long n = 16 * k->width + 7;  // groups of pairs of vectors, single ones, the rest
    std::vector<unsigned short> x(n), out(n);
    for (int trial = 0; trial < 16; ++trial) {
      for (long long i = 0; i < n; ++i) x[i] = i % 2 ? h : static_cast<unsigned short>(0x3f80 + pick(rng));
      const float w[2] = {1.f, 1.f}, halo = cc1d::bf16_bits_to_float(h);
      std::fill(out.begin(), out.end(), 0x7fc0);
      k->conv_time[1](CC1D_BFLOAT16, x.data(), &halo, w, 0.f, false, out.data(), n);
      for (long long i = 0; i < n; ++i) {
        const float v = cc1d::bf16_bits_to_float(x[i % 2 ? i - 1 : i]) + cc1d::bf16_bits_to_float(h);  // exact
        REQUIRE_MESSAGE(out[i] == cc1d::float_to_bf16_bits(v), "channel-first element " << i << " of " << n);
      }
      // Channel-last, two steps of n channels: h before the first (the halo), then x's v, then h.
      std::vector<unsigned short> steps(2 * n, h), out2(2 * n, 0x7fc0);
      for (long long c = 0; c < n; ++c) steps[c] = x[c % 2 ? c - 1 : c];
      const std::vector<float> halos(n, halo), ws(2 * n, 1.f), bs(n, 0.f);
      k->conv_channels[1](CC1D_BFLOAT16, steps.data(), n, halos.data(), ws.data(), bs.data(), false, false,
                          out2.data(), n, 2, n);
      for (long long i = 0; i < 2 * n; ++i) {
        const float v = cc1d::bf16_bits_to_float(steps[i % n]) + cc1d::bf16_bits_to_float(h);
        REQUIRE_MESSAGE(out2[i] == cc1d::float_to_bf16_bits(v), "channel-last step " << i / n << ", channel " << i % n);
      }
    }
    for (unsigned bits : {0x7fffffffu, 0xffffffffu, 0x7fc00000u}) {
      float nan_bias;
      std::memcpy(&nan_bias, &bits, sizeof nan_bias);
      const float w = 1.f;
      std::fill(out.begin(), out.end(), 0x3f80);
      k->conv_time[0](CC1D_BFLOAT16, x.data(), nullptr, &w, nan_bias, false, out.data(), n);
      for (long long i = 0; i < n; ++i)
        REQUIRE_MESSAGE(std::isnan(cc1d::bf16_bits_to_float(out[i])), "element " << i << ", bias bits " << bits);
      const std::vector<float> ws(n, 1.f), bs(n, nan_bias);
      std::fill(out.begin(), out.end(), 0x3f80);
      k->conv_channels[0](CC1D_BFLOAT16, x.data(), n, nullptr, ws.data(), bs.data(), false, false, out.data(), n, 1, n);
      for (long long i = 0; i < n; ++i)
        REQUIRE_MESSAGE(std::isnan(cc1d::bf16_bits_to_float(out[i])), "channel " << i << ", bias bits " << bits);
    }
  }
}

TEST_CASE("every SIMD build: the forward against the float64 reference") {
  std::mt19937 rng = test_rng(202);
  under_each_build([&](const cc1d::SimdKernels* k) {
    REQUIRE(std::string(cc1d::simd().name) == k->name);
    // Channel-last 149 channels, channel-first 317 steps: groups of by_vectors (8 or 4 vectors),
    // single vectors and a partial one on every build (channel-first rows take 53 channels: more
    // would add rows, not paths); 3 steps: a partial vector only; channel-first rows of 21 steps
    // (channel-major, through the transposes). silu at widths 1 and 4, not 8.
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int width : {1, 4, 8})
        for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View})
          for (int64_t L : {int64_t(3), int64_t(21), int64_t(317)}) {
            const int64_t D = layout == Layout::ChannelFirst ? 53 : 149;
            run_fwd_case({xdt, CC1D_FLOAT32, width, layout, 2, D, L, true, width != 8, false, width != 4, true}, rng,
                         CC1D_BACKEND_CPU);
          }
  });
}

// Streamed stores (stream_out.h) write what the plain ones do, bit for bit, on rows aligned for
// them (every row, or every other) and on rows that are not (they store as usual), for every
// dtype, with and without silu: whole groups of vectors, single ones and a partial one. The
// plain output is the one the float64 reference checks (the case above); both start poisoned.
TEST_CASE("every SIMD build: streamed channel-last stores write what plain ones do") {
  std::mt19937 rng = test_rng(203);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    const long long nc = 19 * k->width + 3, nt = 6, W = 4;
    for (int dt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (long long os : {nc, (nc + 31) / 32 * 32, (nc + 31) / 32 * 32 + 16})  // rows unaligned, aligned, halves
        for (bool silu : {false, true}) {
          INFO("dtype " << dt << ", row stride " << os << ", silu " << silu);
          const size_t eb = dt == CC1D_FLOAT32 ? 4 : 2, bytes = (nt * os * eb + 63) / 64 * 64;
          std::vector<float> xf(nt * nc), halo((W - 1) * nc), wt(W * nc), bias(nc);
          for (auto* v : {&xf, &halo, &wt, &bias})
            for (float& e : *v) e = normal(rng);
          std::vector<unsigned char> x(nt * nc * eb);
          k->from_f32(dt, xf.data(), x.data(), nt * nc);
          unsigned char* plain = static_cast<unsigned char*>(std::aligned_alloc(64, bytes));
          unsigned char* streamed = static_cast<unsigned char*>(std::aligned_alloc(64, bytes));
          std::memset(plain, 0xff, bytes);  // NaN in every dtype
          std::memset(streamed, 0xff, bytes);
          k->conv_channels[W - 1](dt, x.data(), nc, halo.data(), wt.data(), bias.data(), silu, false, plain, os, nt,
                                  nc);
          k->conv_channels[W - 1](dt, x.data(), nc, halo.data(), wt.data(), bias.data(), silu, true, streamed, os, nt,
                                  nc);
          for (long long t = 0; t < nt; ++t) {
            CHECK(std::memcmp(plain + t * os * eb, streamed + t * os * eb, nc * eb) == 0);
            std::vector<float> back(nc);
            k->to_f32(dt, streamed + t * os * eb, back.data(), nc);
            for (long long c = 0; c < nc; ++c) REQUIRE_MESSAGE(!std::isnan(back[c]), "step " << t << ", channel " << c);
          }
          std::free(plain);
          std::free(streamed);
        }
  }
}

TEST_CASE("CAUSAL_CONV1D_CPU_STREAM: outputs beyond half the last-level cache, always, or never") {
  const size_t llc = cc1d::last_level_cache_bytes();
  CHECK(llc >= (size_t(64) << 10));
  for (const char* v : {"", "auto", static_cast<const char*>(nullptr)}) {
    if (v) setenv("CAUSAL_CONV1D_CPU_STREAM", v, 1);
    else unsetenv("CAUSAL_CONV1D_CPU_STREAM");
    CHECK_FALSE(cc1d::stream_output(llc / 2));
    CHECK(cc1d::stream_output(llc / 2 + 1));
  }
  setenv("CAUSAL_CONV1D_CPU_STREAM", "1", 1);
  CHECK(cc1d::stream_output(64));
  setenv("CAUSAL_CONV1D_CPU_STREAM", "off", 1);
  CHECK_FALSE(cc1d::stream_output(size_t(1) << 40));
  unsetenv("CAUSAL_CONV1D_CPU_STREAM");
}

TEST_CASE("every SIMD build: channel-first rows packed back to back, no row reaching into the next") {
  // Short channel-first rows stored back to back are one array to the cpu backend (vectors span
  // rows, each lane with its channel's taps). Every other row ends in NaN and inf, which must not
  // reach the next row's first outputs; the rows between are checked against the float64
  // reference. Batch rows a gap apart; 300 channels: tiles of rows, the last one partial.
  std::mt19937 rng = test_rng(207);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  under_each_build([&](const cc1d::SimdKernels* k) {
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int width : {2, 3, 4, 8})
        for (int64_t L : {1, 2, 3, 5, 8, 12, 16, 17, 21, 39, 127}) {
          const int64_t B = 2, D = 300;
          INFO("dtype " << xdt << " width " << width << " L " << L);
          const std::vector<int64_t> shape{B, D, L}, strides{D * L + 13, L, 1};
          HostTensor x(xdt, shape, strides), out(xdt, shape, strides), w = HostTensor::contiguous(xdt, {D, width});
          HostTensor bias = HostTensor::contiguous(xdt, {D});
          x.randomize(rng);
          w.randomize(rng, 0.5);
          bias.randomize(rng);
          for (int64_t b = 0; b < B; ++b)
            for (int64_t c = 0; c < D; c += 2) {
              x.set(x.off({b, c, L - 1}), nan);
              if (L > 1) x.set(x.off({b, c, L - 2}), inf);
            }
          out.fill_all(-7.0);
          cc1d_fwd_args a{};
          a.struct_size = sizeof a;
          a.x = &x.t;
          a.weight = &w.t;
          a.bias = &bias.t;
          a.out = &out.t;
          a.activation = CC1D_ACT_SILU;
          a.backend = CC1D_BACKEND_CPU;
          REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, std::string(cc1d_last_error()));
          RefInputs in;
          in.x = &x;
          in.w = &w;
          in.bias = &bias;
          in.silu = true;
          std::vector<double> want, fin;
          reference_fwd(in, want, fin);
          const double tol = tolerance(xdt);
          for (int64_t b = 0; b < B; ++b)
            for (int64_t c = 0; c < D; ++c)
              for (int64_t t = 0; t < L; ++t) {
                const double got = out.get(out.off({b, c, t})), ref = want[(b * D + c) * L + t];
                if (c % 2 == 0 && t >= L - 2) {  // NaN (silu(+-inf) or a NaN tap) or, at t = L-2, +-inf or NaN
                  REQUIRE_MESSAGE(!std::isfinite(got), "row " << c << " step " << t << ": " << got);
                  continue;
                }
                REQUIRE_MESSAGE(std::fabs(got - ref) <= tol * (1.0 + std::fabs(ref)),
                                "(" << b << ", " << c << ", " << t << "): got " << got << ", want " << ref);
              }
          for (int64_t g : gaps(out)) REQUIRE_MESSAGE(out.get(g) == -7.0, "stray write at element " << g);
        }
  });
}

TEST_CASE("every SIMD build: the backward against the float64 reference") {
  // The rows' pre-activation and dx (the forward's kernels on float tiles, dx with the taps
  // reversed) and the channel-last tile sums (tap_sums): without seq_idx, and with segments of
  // up to 80 steps (the same kernels a run at a time) or 9 (the plain loops).
  std::mt19937 rng = test_rng(205);
  under_each_build([&](const cc1d::SimdKernels* k) {
    for (int xdt : {CC1D_FLOAT32, CC1D_BFLOAT16})
      for (int width : {2, 4, 8})
        for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast})
          for (int max_segment : {0, 9, 80}) {
            const int64_t D = layout == Layout::ChannelLast ? 149 : 53;
            BwdCase c{xdt, CC1D_FLOAT32, width, layout, 2, D, 150, true, true, max_segment > 0, true, true};
            c.max_segment = std::max(max_segment, 1);
            run_bwd_case(c, rng, CC1D_BACKEND_CPU);
          }
  });
}

TEST_CASE("every SIMD build: the backward of channel-first rows packed back to back") {
  // The packed kernels' backward (rows under 128 steps, no seq_idx or states of either end):
  // dx masked to the row's end, the sums of a tile's elements per channel, batch rows in groups
  // of 256 / L (two groups at 127 steps); 300 channels: tiles of rows, the last one partial.
  std::mt19937 rng = test_rng(208);
  under_each_build([&](const cc1d::SimdKernels* k) {
    const int widths[] = {2, 3, 4, 8, 5};
    int i = 0;
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int64_t L : {1, 2, 3, 5, 8, 16, 17, 21, 39, 127}) {
        const int width = widths[i % 5];
        BwdCase c{xdt, i % 3 == 0 ? xdt : CC1D_FLOAT32, width, Layout::ChannelFirst, 3, 300, L, i % 2 == 0,
                  i % 4 != 1, false, false, false};
        c.dx = i % 7 != 3;
        c.dweight = i % 7 != 5;
        c.dbias = i % 7 != 6;
        c.dinit = i % 6 == 2;  // dinitial_states without initial states: not the packed kernels
        run_bwd_case(c, rng, CC1D_BACKEND_CPU);
        ++i;
      }
  });
}

TEST_CASE("every SIMD build: the backward's one pass over channel-last steps") {
  // bwd_steps (simd_bwd_steps.inc): contiguous channels, widths 2-4 (the others: the tiles);
  // dinitial_states in a quarter of the cases, dfinal_states in 2 of 5 (the last W-1 steps' dx
  // summed again, and in rows shorter than W-1, dinitial_states).
  // 300, 149 and 16 channels (a partial vector in the first two), rows shorter than the width
  // (the halo only), of 9 steps (groups of 2 or 4 steps and single ones) and over 256 (two and
  // three calls, the rings carried between them); x, dout and dx a step 2D apart in the slice;
  // seq_idx in a third of the cases, segments of up to 3 or 40 steps with padding among them
  // (the masked steps, alone, between plain groups).
  std::mt19937 rng = test_rng(209);
  under_each_build([&](const cc1d::SimdKernels* k) {
    const int widths[] = {2, 3, 4, 2, 3, 4};
    const int64_t lengths[] = {1, 2, 3, 9, 257, 600}, dims[] = {16, 149, 300};
    int i = 0;
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (Layout layout : {Layout::ChannelLast, Layout::ChannelLastSlice})
        for (int j = 0; j < 3; ++j, ++i) {
          const int64_t L = lengths[(i + j) % 6], D = dims[i % 3];
          BwdCase c{xdt, i % 4 == 0 ? xdt : CC1D_FLOAT32, widths[i % 6], layout, 2, D, L, i % 2 == 0, i % 3 != 2,
                    false, i % 4 < 2, false};
          c.dinit = i % 4 == 3;  // from the g rings after the walk
          c.dfinal = i % 5 == 1 || i % 5 == 2;
          c.seq = i % 3 == 1;
          c.max_segment = i % 2 ? 3 : 40;
          c.dweight = i % 5 != 3;
          c.dbias = i % 7 != 4;
          run_bwd_case(c, rng, CC1D_BACKEND_CPU);
        }
  });
}

TEST_CASE("every SIMD build: the backward's one pass over channel-first rows") {
  // bwd_time (simd_bwd_steps.inc): unit time strides, widths 2-4, no seq_idx. Rows of 1-5 steps
  // (the row's end inside the first vector, the carry), 17 and 130, and 2047 to 4100 (tiles of
  // 2048 steps, the carry and halo between them); contiguous or padded rows, 5 channels (the
  // time-major tiling at every length); dinitial_states from the carry; dfinal_states in 2 of 5
  // (the last W-1 steps a call of their own, their dx summed again from the carry).
  std::mt19937 rng = test_rng(210);
  under_each_build([&](const cc1d::SimdKernels* k) {
    const int64_t lengths[] = {1, 2, 3, 5, 17, 130, 2047, 2048, 2049, 4100};
    int i = 0;
    for (int xdt : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int64_t L : lengths) {
        const Layout layout = i % 2 ? Layout::Padded : Layout::ChannelFirst;
        BwdCase c{xdt, i % 4 == 0 ? xdt : CC1D_FLOAT32, 2 + i % 3, layout, 2, 5, L, i % 2 == 0, i % 3 != 2, false,
                  i % 4 < 2, false};
        c.dinit = i % 5 < 2;
        c.dfinal = i % 5 == 1 || i % 5 == 2;
        c.dweight = i % 7 != 3;
        c.dbias = i % 6 != 4;
        run_bwd_case(c, rng, CC1D_BACKEND_CPU);
        ++i;
      }
  });
}

TEST_CASE("every SIMD build: the update's decode step against the float64 reference") {
  // decode_rows and decode_rows_short (widths 2, 4, 8, state rows of W and W-1: whole vectors of
  // channels, then a padded partial one), decode_ring (a ring of W-1: the whole row rotated, the
  // call's last row gathered; of W or W+3: its heads, random per batch row, take the one-load mode
  // or the wrapped two-load one; width 4 has AVX2 steps of its own for all three) and the
  // scalar steps beside them (widths 1, 3, and the dtype pairs decode_dtypes leaves out); padding
  // rows, gathered state rows, both x ranks.
  std::mt19937 rng = test_rng(203);
  under_each_build([&](const cc1d::SimdKernels* k) {
    for (int xdt = 0; xdt < 3; ++xdt)
      for (int wdt = 0; wdt < 3; ++wdt)
        for (int W : {1, 2, 3, 4, 8})
          for (int64_t D : {int64_t(5), int64_t(k->width), int64_t(600)})
            for (int64_t S : {int64_t(W), int64_t(W - 1), int64_t(W + 3)})  // Mamba's, vLLM's, a longer one
              for (bool ring : {false, true})
                if (S >= 1)
                  run_update_case(UpdateCase{xdt, wdt, W, 4, D, 1, S, ring, D != 5, false, D != 600, D != 5, true},
                                  rng, CC1D_BACKEND_CPU);
    // A few tokens a call (up to kMaxSimdTokens, each token the decode step; x's tokens split into
    // rows of channels and out joined back, or x read and out written a token at a time by strided
    // copies; past it the general taps), batch 2 with a padding row, in every layout of the step.
    for (int xdt = 0; xdt < 3; ++xdt)
      for (int64_t L : {2, 3, 5, 8, 12, 16})
        for (int64_t S : {4, 3, 16})
          for (bool x_tokens : {false, true}) {
            UpdateCase c{xdt, xdt, 4, 2, 600, L, S, S == 16, true, false, false, true, true};
            c.x_tokens = x_tokens;
            run_update_case(c, rng, CC1D_BACKEND_CPU);
          }
    // Enough rows for the pool: its chunks of 51 work items (2 runs of up to 512 channels a row)
    // start and end inside a row, and each call takes a chunk's runs of one row at once.
    for (int xdt : {CC1D_FLOAT32, CC1D_BFLOAT16})
      for (bool gather : {false, true})
        run_update_case(UpdateCase{xdt, xdt, 4, 60, 1000, 1, 4, false, gather, false, true, true, true}, rng,
                        CC1D_BACKEND_CPU);
  });
}

TEST_CASE("every SIMD build: the decode step moves state elements bit for bit, signalling NaNs too") {
  // Each row (W elements, or W-1: decode_rows_short) shifts down one element and takes x: the
  // state is data, never rounded through floats (a conversion would quiet a signalling NaN).
  // Random bit patterns, NaNs of both kinds among them; whole groups of vectors and a partial one.
  std::mt19937 rng = test_rng(206);
  std::uniform_int_distribution<uint32_t> any;
  for (const cc1d::SimdKernels* k : builds()) {
    INFO("build " << k->name);
    for (int xd : {CC1D_FLOAT32, CC1D_FLOAT16, CC1D_BFLOAT16})
      for (int W : {2, 4, 8})
        for (int S : {W, W - 1}) {
          const long long n = 8 * k->width + 3;
          const size_t eb = xd == CC1D_FLOAT32 ? 4 : 2;
          const uint32_t snan = xd == CC1D_FLOAT32 ? 0x7f800001u : xd == CC1D_FLOAT16 ? 0x7c01u : 0x7f81u;
          std::vector<unsigned char> state(n * S * eb), x(2 * n * eb), out(n * 4);
          const auto put = [&](unsigned char* p, uint32_t v) { std::memcpy(p, &v, eb); };
          for (size_t i = 0; i < state.size(); i += eb)
            put(&state[i], any(rng) % 5 ? any(rng) : snan | (any(rng) & 0x8000u));
          for (size_t i = 0; i < x.size(); i += eb) put(&x[i], any(rng) % 5 ? any(rng) : snan);
          std::vector<float> w(n * W, 0.25f);
          const std::vector<unsigned char> before = state;
          (S == W ? k->decode_rows : k->decode_rows_short)[W - 1](xd, state.data(), x.data(), CC1D_FLOAT32, w.data(),
                                                                  nullptr, true, out.data(), n);
          for (long long c = 0; c < n; ++c)
            for (int i = 0; i < S; ++i) {
              const unsigned char* want = i + 1 < S ? &before[(c * S + i + 1) * eb] : &x[c * eb];
              REQUIRE_MESSAGE(std::memcmp(&state[(c * S + i) * eb], want, eb) == 0,
                              "dtype " << xd << " width " << W << " state_len " << S << " channel " << c
                                       << " element " << i);
            }
        }
  }
}

TEST_CASE("every SIMD build: a few tokens split into rows of channels and joined back, bit for bit") {
  // split_tokens and join_tokens move bits: random patterns with signalling NaNs; whole blocks of
  // channels and a partial one, every token count the update sends them, channels back to back
  // and apart (x a slice of longer rows, or a block of the update's tokens beyond 16). The join
  // leaves the gaps between channels as they were, and the 64 bytes after the last.
  std::mt19937 rng = test_rng(207);
  std::uniform_int_distribution<uint32_t> any;
  const auto random_bits = [&](std::vector<unsigned char>& v) {
    for (size_t i = 0; i < v.size(); i += 2) {
      const uint32_t r = any(rng) % 5 ? any(rng) : 0x7f817f81u;  // a signalling NaN in either size
      std::memcpy(&v[i], &r, 2);
    }
  };
  for (const cc1d::SimdKernels* k : builds())
    for (int bytes : {2, 4})
      for (int t = 2; t <= cc1d::kMaxSimdTokens; ++t)
        for (long long cs : {(long long)t, t + 3LL, 40LL})
          for (long long m : {1LL, 3LL * k->width + 5, 600LL}) {
            INFO("build " << k->name << ", " << bytes << "-byte elements, " << t << " tokens, channels " << cs
                          << " elements apart, " << m << " channels");
            const size_t n = m * cs * bytes;
            std::vector<unsigned char> src(n), rows(m * t * bytes, 0xa5), back(n + 64);
            random_bits(src);
            random_bits(back);
            std::vector<unsigned char> want = back;
            for (long long c = 0; c < m; ++c)
              std::memcpy(&want[c * cs * bytes], &src[c * cs * bytes], t * bytes);
            k->split_tokens(bytes, t, src.data(), cs, m, rows.data());
            for (long long c = 0; c < m; ++c)
              for (int j = 0; j < t; ++j)
                REQUIRE_MESSAGE(std::memcmp(&rows[(j * m + c) * bytes], &src[(c * cs + j) * bytes], bytes) == 0,
                                "split: channel " << c << ", token " << j);
            k->join_tokens(bytes, t, rows.data(), m, back.data(), cs);
            REQUIRE(back == want);
          }
}

TEST_CASE("concurrent parallel_for callers run at the same time") {
  // Each run's first item waits until the other run's first item has started: callers
  // serialised one after the other would never get there.
  REQUIRE(cc1d::num_threads() >= 2);
  std::atomic<int> started{0};
  std::atomic<bool> timed_out{false};
  auto caller = [&] {
    cc1d::parallel_for(4, 1, [&](int64_t begin, int64_t) {
      if (begin != 0) return;
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (started.load() < 2)
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          return;
        }
    });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  CHECK_FALSE(timed_out.load());
  CHECK(started.load() == 2);
}
