// The LZ77 codec of embedded PTX (jit/lz_codec.h): round trips, ratio on PTX-like text, and a decoder
// that rejects every truncated, resized or corrupted stream without reading or writing out of bounds
// (run under -fsanitize=address,undefined to prove the latter).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "jit/lz_codec.h"

using namespace cc1d;

namespace {

std::string round_trip(const std::string& in) {
  const std::string c = lz_compress(in);
  std::string out = "stale";
  const bool ok = lz_decompress(c.data(), c.size(), in.size(), &out);
  CHECK(ok);
  CHECK(out == in);
  return c;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = char(rng() & 255);
  return s;
}

// PTX-shaped text: a few instruction shapes, register numbers drifting as nvcc's do.
std::string ptx_like(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s = ".version 9.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(\n)\n{\n";
  int r = 10, rd = 4, f = 1, p = 1;
  char line[160];
  while (s.size() < size) {
    switch (rng() % 6) {
      case 0:
        std::snprintf(line, sizeof line, "\tld.global.nc.v4.u32 \t{%%r%d, %%r%d, %%r%d, %%r%d}, [%%rd%d];\n", r, r + 1,
                      r + 2, r + 3, rd);
        r += 4;
        break;
      case 1:
        std::snprintf(line, sizeof line, "\tadd.s64 \t%%rd%d, %%rd%d, %d;\n", rd + 1, rd, int(rng() % 4 + 1) * 16);
        ++rd;
        break;
      case 2:
        std::snprintf(line, sizeof line, "\tfma.rn.f32 \t%%f%d, %%f%d, %%f%d, %%f%d;\n", f + 3, f, f + 1, f + 2);
        f += 3;
        break;
      case 3:
        std::snprintf(line, sizeof line, "\tmov.b32 \t%%f%d, %%r%d;\n", f, r - int(rng() % 4) - 1);
        ++f;
        break;
      case 4:
        std::snprintf(line, sizeof line, "\tsetp.ge.s32 \t%%p%d, %%r%d, %%r%d;\n\t@%%p%d bra \t$L__BB0_%d;\n", p, r - 1,
                      r - 2, p, p + 3);
        ++p;
        break;
      default:
        std::snprintf(line, sizeof line, "\tst.global.v4.f32 \t[%%rd%d+%d], {%%f%d, %%f%d, %%f%d, %%f%d};\n", rd,
                      int(rng() % 8) * 16, f - 4, f - 3, f - 2, f - 1);
        break;
    }
    s += line;
  }
  return s + "\tret;\n}\n";
}

// A small input that reaches every part of the format: long literal runs, long and overlapping matches,
// repeat codes, and offset codes of 1, 2 and 3 bytes (a copy from over 16 KiB back).
std::string mixed_input() {
  std::mt19937 rng(7);
  const std::string ptx = ptx_like(20000, 3);
  return ptx + random_bytes(rng, 700) + std::string(1000, 'x') + ptx.substr(100, 3000) + "abc" +
         std::string(600, 'z') + ptx.substr(50, 40);
}

}  // namespace

TEST_CASE("lz codec: empty and one-byte inputs round trip") {
  CHECK(round_trip("").size() == 1);  // a lone literals-only token
  round_trip("q");
  round_trip(std::string(1, '\0'));
  round_trip("abcd");
  round_trip("abcdabcd");
}

TEST_CASE("lz codec: hand-made streams decode as the format says") {
  std::string out;
  const std::string run = std::string("\x25") + "a" + '\x02' + '\0';  // 'a' then offset 1 for 9 bytes: overlapping
  CHECK(lz_decompress(run.data(), run.size(), 10, &out));
  CHECK(out == std::string(10, 'a'));
  const std::string reps = std::string("\x40") + "ab" + '\x03' + '\x00' + '\x00' + "\x20" + "c";  // offset 2, repeated
  CHECK(lz_decompress(reps.data(), reps.size(), 11, &out));
  CHECK(out == "abababababc");
  const std::string bad[] = {
      std::string("\x25") + "a" + '\x03' + '\0',                // offset 2 reaches before the output
      std::string("\x25") + "a" + '\x00' + '\0',                // a repeat code before any offset
      std::string("\x25") + "a" + '\x01' + '\0',                // the one-before-last offset before any offset
      std::string("\x25") + "a" + "\x82\x80\x80" + '\0' + '\0',  // an offset code of 4 bytes
      std::string("\x21") + "a",                                // the last token with a match length
      std::string("\xe0"),                                      // a literal count's extension cut off
      std::string("\xe0") + "a",                                // 7 + 97 literals promised, none there
  };
  for (const std::string& s : bad) {
    CAPTURE(s.size());
    for (size_t raw = 0; raw < 16; ++raw) CHECK_FALSE(lz_decompress(s.data(), s.size(), raw, &out));
  }
  CHECK_FALSE(lz_decompress("", 0, 0, &out));  // not even the last token
  CHECK_FALSE(lz_decompress(nullptr, 0, 0, &out));
  CHECK(out.empty());
}

TEST_CASE("lz codec: random bytes round trip at several sizes") {
  for (size_t n : {2, 3, 4, 5, 7, 8, 15, 16, 17, 100, 255, 256, 1000, 4096, 65537, 300000}) {
    const uint32_t seed = std::random_device{}();
    CAPTURE(n);
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const std::string c = round_trip(random_bytes(rng, n));
    CHECK(c.size() <= n + n / 100 + 16);  // incompressible: little overhead
  }
}

TEST_CASE("lz codec: long runs round trip through overlapping matches") {
  const std::string a(100000, 'a');
  CHECK(round_trip(a).size() < 500);
  std::string ab, abc;
  for (int i = 0; i < 50000; ++i) ab += "ab";
  for (int i = 0; i < 3000; ++i) abc += "abcdefg";
  CHECK(round_trip(ab).size() < 500);
  CHECK(round_trip(abc).size() < 200);
  round_trip("x" + std::string(30, 'y') + "x" + std::string(300, 'y') + "zz");
  for (size_t len = 1; len < 80; ++len) round_trip("head" + std::string(len, 'r') + "tail");  // every length field
}

TEST_CASE("lz codec: text with long repeats near and far") {
  std::mt19937 rng(std::random_device{}());
  const std::string block = random_bytes(rng, 5000);
  std::string near;
  for (int i = 0; i < 20; ++i) near += block + std::to_string(i);
  CHECK(round_trip(near).size() < 7000);
  const std::string big = random_bytes(rng, 200000);  // repeated from 200 KB back: 3-byte offset codes
  CHECK(round_trip(big + big + big).size() < 205000);  // 200 KB of literals, one match, ~2.4 KB of length bytes
  round_trip(mixed_input());
}

TEST_CASE("lz codec: PTX-like text compresses over 3x and deterministically") {
  const std::string ptx = ptx_like(100000, 1);
  const std::string c = round_trip(ptx);
  const double ratio = double(ptx.size()) / double(c.size());
  MESSAGE("PTX-like text: " << ptx.size() << " -> " << c.size() << " bytes, ratio " << ratio);
  CHECK(ratio > 3.0);
  CHECK(lz_compress(ptx) == c);
}

TEST_CASE("lz codec: every truncation and a wrong raw size are rejected") {
  const std::string in = mixed_input();
  const std::string c = lz_compress(in);
  std::string out;
  for (size_t n = 0; n < c.size(); ++n) {
    CAPTURE(n);
    REQUIRE_FALSE(lz_decompress(c.data(), n, in.size(), &out));
    REQUIRE(out.empty());
  }
  CHECK(lz_decompress(c.data(), c.size(), in.size(), &out));
  CHECK(out == in);
  CHECK_FALSE(lz_decompress(c.data(), c.size(), in.size() - 1, &out));
  CHECK_FALSE(lz_decompress(c.data(), c.size(), in.size() + 1, &out));
  CHECK_FALSE(lz_decompress(c.data(), c.size(), 0, &out));
  CHECK_FALSE(lz_decompress(c.data(), c.size(), SIZE_MAX, &out));  // must not try to allocate it
  for (int extra = 1; extra <= 8; ++extra) {                      // trailing bytes: more output than raw_size
    const std::string longer = c + std::string(size_t(extra), '\x02');
    CHECK_FALSE(lz_decompress(longer.data(), longer.size(), in.size(), &out));
  }
}

TEST_CASE("lz codec: corrupted streams fail or yield exactly raw_size bytes") {
  const uint32_t seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const std::string in = mixed_input();
  const std::string c = lz_compress(in);
  std::string out;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = c;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] ^= char(1 + rng() % 255);
    const size_t raw = iter % 5 == 0 ? rng() % (2 * in.size()) : in.size();
    if (lz_decompress(bad.data(), bad.size(), raw, &out)) {
      REQUIRE(out.size() == raw);
    } else {
      REQUIRE(out.empty());
    }
  }
  for (int iter = 0; iter < 2000; ++iter) {  // plain garbage
    const std::string junk = random_bytes(rng, rng() % 200);
    const size_t raw = rng() % 2000;
    if (lz_decompress(junk.data(), junk.size(), raw, &out)) REQUIRE(out.size() == raw);
  }
}
