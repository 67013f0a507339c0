// simd_base.cpp — the CPU kernels for the compiler's baseline instruction set (SSE2 on x86-64,
// NEON on AArch64): every CPU runs them. See simd.h.
#if defined(__SSE__)
#include <xmmintrin.h>  // the reciprocal estimate of silu
#elif defined(__aarch64__)
#include <arm_neon.h>  // fp16 conversions, the clamp and the reciprocal estimate of silu
#endif
#define CC1D_SIMD_WIDTH 4
#define CC1D_SIMD_NAME base
#include "fallback/cpu/simd_unit.inc"
