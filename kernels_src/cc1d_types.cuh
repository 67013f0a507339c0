// cc1d_types.cuh — scalar types and conversions for the kernels in kernels_src/.
//
// Self-contained on purpose: NVRTC compiles this with no toolkit headers (no cuda_fp16.h,
// no <cstdint>), and the host compiler compiles it for the emulator. 16-bit floats are
// plain structs holding the bits; conversions use PTX cvt where the SM has it (fp16 on every
// supported SM, bf16 from sm_80) and bit operations otherwise, so bf16 works on sm_75 too.
#pragma once

#ifndef CC1D_HD
#define CC1D_HD __device__ __forceinline__
#endif

namespace cc1d {

struct half_t { unsigned short bits; };
struct bf16_t { unsigned short bits; };

union F32Bits { float f; unsigned int u; };

CC1D_HD float bits_to_float(unsigned int u) { F32Bits v; v.u = u; return v.f; }
CC1D_HD unsigned int float_to_bits(float f) { F32Bits v; v.f = f; return v.u; }

// Software fp16 -> fp32 (used where PTX is unavailable: the emulator).
CC1D_HD float half_bits_to_float(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
  unsigned int exp = (h >> 10) & 0x1fu;
  unsigned int man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp == 0) {
    if (man == 0) return bits_to_float(sign);
    // subnormal: value = man * 2^-24
    float v = (float)man * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// Software fp32 -> fp16, round to nearest even, with overflow to inf and subnormals.
CC1D_HD unsigned short float_to_half_bits(float f) {
  unsigned int u = float_to_bits(f);
  unsigned int sign = (u >> 16) & 0x8000u;
  unsigned int exp = (u >> 23) & 0xffu;
  unsigned int man = u & 0x7fffffu;
  if (exp == 0xffu) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u : 0u));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    man |= 0x800000u;
    unsigned int shift = (unsigned int)(14 - e);
    unsigned int half_man = man >> shift;
    unsigned int rem = man & ((1u << shift) - 1u);
    unsigned int halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_man & 1u))) ++half_man;
    return (unsigned short)(sign | half_man);
  }
  unsigned int out = sign | ((unsigned int)e << 10) | (man >> 13);
  unsigned int rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) ++out;  // may carry into exp: correct
  return (unsigned short)out;
}

CC1D_HD float bf16_bits_to_float(unsigned short b) { return bits_to_float((unsigned int)b << 16); }

// Round to nearest even; NaN stays a (quiet) NaN. Branch-free, so host loops vectorise.
CC1D_HD unsigned short float_to_bf16_bits(float f) {
  const unsigned int u = float_to_bits(f);
  const unsigned int rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const unsigned int quiet_nan = (u >> 16) | 0x40u;
  return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

CC1D_HD float to_float(float v) { return v; }
CC1D_HD float to_float(bf16_t v) { return bf16_bits_to_float(v.bits); }
CC1D_HD float to_float(half_t v) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
#else
  return half_bits_to_float(v.bits);
#endif
}

// fp32 -> bf16 bits. sm_80 and later convert in hardware (one instruction, same rounding);
// older SMs and the host round in software.
CC1D_HD unsigned short bf16_bits_rn(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  return float_to_bf16_bits(f);
#endif
}

template <typename T> struct FromFloat;
template <> struct FromFloat<float> { static CC1D_HD float cvt(float f) { return f; } };
template <> struct FromFloat<bf16_t> {
  static CC1D_HD bf16_t cvt(float f) { bf16_t r; r.bits = bf16_bits_rn(f); return r; }
};
template <> struct FromFloat<half_t> {
  static CC1D_HD half_t cvt(float f) {
    half_t r;
#if defined(__CUDA_ARCH__)
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
    r.bits = float_to_half_bits(f);
#endif
    return r;
  }
};
template <typename T> CC1D_HD T from_float(float f) { return FromFloat<T>::cvt(f); }

// ---- packed words: the vector paths move elements as 32-bit words (two 16-bit elements or
// one fp32), which a 16-byte access loads and stores without aliasing a struct type.
template <typename T> struct Words {
  static constexpr int kPerWord = 4 / (int)sizeof(T);  // elements per 32-bit word: 1 or 2
};

// Element i of a packed array of words, as float.
template <typename T> CC1D_HD float word_elem(const unsigned* w, int i);
template <> CC1D_HD float word_elem<float>(const unsigned* w, int i) { return bits_to_float(w[i]); }
template <> CC1D_HD float word_elem<bf16_t>(const unsigned* w, int i) {
  const unsigned u = w[i >> 1];
  return bits_to_float((i & 1) ? (u & 0xffff0000u) : (u << 16));
}
template <> CC1D_HD float word_elem<half_t>(const unsigned* w, int i) {
  half_t h;
  h.bits = (unsigned short)(w[i >> 1] >> ((i & 1) * 16));
  return to_float(h);
}

// The word holding elements (lo, hi) of 16-bit type T converted from fp32 (round to nearest
// even). sm_80 and later pack two values in one instruction.
template <typename T> struct IsBf16 { static constexpr bool value = false; };
template <> struct IsBf16<bf16_t> { static constexpr bool value = true; };

template <typename T> CC1D_HD unsigned pack_word(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  if constexpr (IsBf16<T>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (unsigned)from_float<T>(lo).bits | ((unsigned)from_float<T>(hi).bits << 16);
#endif
}

// N floats (N a multiple of the elements per word) into packed words of type T.
template <typename T, int N>
CC1D_HD void pack_words(const float (&f)[N], unsigned* w) {
  if constexpr (sizeof(T) == 4) {
    for (int i = 0; i < N; ++i) w[i] = float_to_bits(f[i]);
  } else {
    for (int i = 0; i < N / 2; ++i) w[i] = pack_word<T>(f[2 * i], f[2 * i + 1]);
  }
}

}  // namespace cc1d
