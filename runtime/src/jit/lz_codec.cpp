// lz_codec.cpp — LZ77 codec for embedded PTX: hash-chain lazy compressor, bounds-checked decoder.
#include "jit/lz_codec.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cc1d {
namespace {

constexpr size_t kMinMatch = 4;                  // hash4 reads 4 bytes; shorter matches rarely pay
constexpr unsigned kLitMax = 7, kLenMax = 31;    // token: 3 bits of literals, 5 of match length - 4
constexpr size_t kWindow = size_t(1) << 21;      // codes fit 3 varint bytes (2 MiB): a kernel's PTX
constexpr size_t kMaxOff = kWindow - 2;          // code = offset + 1 < 2^21
constexpr int kHashBits = 16;
constexpr int kMaxChain = 32;                    // candidates per position: ratio against build-time speed
constexpr size_t kGoodLen = 256;                 // a match this long is taken without looking further

uint32_t hash4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return (v * 2654435761u) >> (32 - kHashBits);
}

// Length of the common prefix of a and b, at most `limit`; 8 bytes at a time.
size_t common(const uint8_t* a, const uint8_t* b, size_t limit) {
  size_t n = 0;
  while (n + 8 <= limit) {
    uint64_t x, y;
    std::memcpy(&x, a + n, 8);
    std::memcpy(&y, b + n, 8);
    if (x != y) return n + size_t(__builtin_ctzll(x ^ y) >> 3);  // little-endian: lowest differing byte
    n += 8;
  }
  while (n < limit && a[n] == b[n]) ++n;
  return n;
}

size_t code_bytes(size_t code) { return code < (1u << 7) ? 1 : code < (1u << 14) ? 2 : 3; }

// A length at or over its field's maximum: the field holds the maximum, the rest follows as 255, ..., < 255.
void put_ext(std::string* out, size_t v) {
  for (; v >= 255; v -= 255) out->push_back(char(255));
  out->push_back(char(v));
}

// One token; mlen == 0 makes the last one (literals only).
void emit(std::string* out, const uint8_t* lit, size_t nlit, size_t mlen, size_t code) {
  const size_t m = mlen ? mlen - kMinMatch : 0;
  out->push_back(char((std::min<size_t>(nlit, kLitMax) << 5) | std::min<size_t>(m, kLenMax)));
  if (nlit >= kLitMax) put_ext(out, nlit - kLitMax);
  out->append(reinterpret_cast<const char*>(lit), nlit);
  if (mlen == 0) return;
  for (; code >= 128; code >>= 7) out->push_back(char(0x80 | (code & 127)));  // 7 bits a byte, low first
  out->push_back(char(code));
  if (m >= kLenMax) put_ext(out, m - kLenMax);
}

// Adds an extension run to *v; false if the input ends inside it.
bool get_ext(const uint8_t** ip, const uint8_t* end, size_t* v) {
  for (;;) {
    if (*ip == end) return false;
    const uint8_t b = *(*ip)++;
    *v += b;
    if (b != 255) return true;
  }
}

bool fail(std::string* out) {
  out->clear();
  return false;
}

struct Match {
  size_t len = 0;   // 0: none
  size_t code = 0;  // 0, 1: the last or the one-before-last offset; else offset + 1
  long score = 0;   // bytes saved, roughly: length minus the code's bytes
};

}  // namespace

std::string lz_compress(const std::string& in) {
  const uint8_t* s = reinterpret_cast<const uint8_t*>(in.data());
  const size_t n = in.size();  // positions are kept in 32 bits: inputs under 4 GiB
  std::string out;
  out.reserve(n / 3 + 16);
  // head: newest position + 1 per hash (0 = none); prev: the one before it, in a ring as large as the window
  // (or the input), so a position within the window is never overwritten while reachable.
  std::vector<uint32_t> head(size_t(1) << kHashBits, 0);
  size_t ring = 1;
  while (ring < std::min(n, kWindow)) ring <<= 1;
  std::vector<uint32_t> prev(ring, 0);
  size_t inserted = 0;         // positions [0, inserted) are in the chains
  size_t rep[2] = {0, 0};      // the decoder's two repeat offsets (0 = none yet)
  auto best = [&](size_t i) {  // the match at i; i + kMinMatch <= n
    for (; inserted < i; ++inserted) {
      uint32_t& h = head[hash4(s + inserted)];
      prev[inserted & (ring - 1)] = h;
      h = uint32_t(inserted + 1);
    }
    Match m;
    const size_t limit = n - i;
    uint32_t c = head[hash4(s + i)];
    for (int d = 0; d < kMaxChain && c != 0 && i - (c - 1) <= kMaxOff; ++d, c = prev[(c - 1) & (ring - 1)]) {
      const size_t p = c - 1;
      if (s[p + m.len] != s[i + m.len]) continue;  // cheap test first (m.len < limit here)
      const size_t l = common(s + p, s + i, limit);
      if (l <= m.len) continue;
      m.len = l, m.code = i - p + 1;  // the chain runs newest first: ties keep the nearer, cheaper offset
      if (l >= kGoodLen || l == limit) break;
    }
    if (m.len < kMinMatch) m.len = 0;
    m.score = m.len ? long(m.len) - long(code_bytes(m.code)) : 0;
    for (size_t r = 0; r < 2; ++r) {  // PTX repeats a line's shape with other registers: offsets recur
      if (rep[r] == 0 || rep[r] > i) continue;
      const size_t l = common(s + i - rep[r], s + i, limit);
      if (l >= kMinMatch && long(l) - 1 >= m.score) m.len = l, m.code = r, m.score = long(l) - 1;
    }
    return m;
  };
  size_t i = 0, anchor = 0, misses = 0;
  while (i + kMinMatch <= n) {  // the tail goes out as literals
    Match m = best(i);
    if (m.len == 0) {  // every 64 failed probes, probe one byte more sparsely: incompressible data stays fast
      i += 1 + (misses++ >> 6);
      continue;
    }
    misses = 0;
    // Lazy matching: a literal now for a match as good or better one byte on (ties going later measured best).
    while (m.len < kGoodLen && i + 1 + kMinMatch <= n) {
      const Match m2 = best(i + 1);
      if (m2.len == 0 || m2.score < m.score) break;
      ++i, m = m2;
    }
    emit(&out, s + anchor, i - anchor, m.len, m.code);
    if (m.code == 1) std::swap(rep[0], rep[1]);
    if (m.code >= 2) rep[1] = rep[0], rep[0] = m.code - 1;
    i += m.len;
    anchor = i;
  }
  emit(&out, s + anchor, n - anchor, 0, 0);
  return out;
}

bool lz_decompress(const char* data, size_t size, size_t raw_size, std::string* out) {
  out->clear();
  // Each stream byte yields at most 255 output bytes, so a larger raw_size is malformed (and a corrupt one
  // must not allocate gigabytes).
  if (data == nullptr || raw_size / 255 > size) return false;
  out->resize(raw_size);
  char* const ob = &(*out)[0];
  const uint8_t* ip = reinterpret_cast<const uint8_t*>(data);
  const uint8_t* const end = ip + size;
  size_t op = 0, rep[2] = {0, 0};
  for (;;) {
    if (ip == end) return fail(out);  // truncated: a stream ends with a literals-only token
    const unsigned tok = *ip++;
    size_t nlit = tok >> 5, len = tok & kLenMax;
    if (nlit == kLitMax && !get_ext(&ip, end, &nlit)) return fail(out);
    if (nlit > size_t(end - ip) || nlit > raw_size - op) return fail(out);
    std::memcpy(ob + op, ip, nlit);
    ip += nlit;
    op += nlit;
    if (ip == end) return len == 0 && op == raw_size ? true : fail(out);
    size_t code = 0;
    for (int k = 0;; k += 7) {
      if (ip == end || k == 21) return fail(out);  // at most 3 bytes
      code |= size_t(*ip & 127) << k;
      if (*ip++ < 128) break;
    }
    if (code == 1) std::swap(rep[0], rep[1]);
    if (code >= 2) rep[1] = rep[0], rep[0] = code - 1;
    const size_t off = rep[0];  // 0 when a repeat code comes before any offset
    if (len == kLenMax && !get_ext(&ip, end, &len)) return fail(out);
    len += kMinMatch;
    if (off == 0 || off > op || len > raw_size - op) return fail(out);
    char* d = ob + op;
    const char* src = d - off;
    if (off >= len) {
      std::memcpy(d, src, len);
    } else {
      for (size_t k = 0; k < len; ++k) d[k] = src[k];  // overlapping: repeats the last `off` bytes
    }
    op += len;
  }
}

}  // namespace cc1d
