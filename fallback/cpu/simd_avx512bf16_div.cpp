// simd_avx512bf16_div.cpp — simd_avx512bf16.cpp's kernels with silu's and sigmoid's reciprocal
// taken by vdivps instead of the estimate and its Newton step (simd_kernels.inc, recip). Chosen
// on AMD's cores (simd.cpp): Zen 4's divider takes 16 floats every few cycles beside the FMAs, so
// one instruction for five made a bf16 or fp32 forward with silu 15% faster there, where Intel's
// (a zmm division every 10 cycles, by its published tables) would make it slower. See simd.h.
#include <immintrin.h>
#define CC1D_SIMD_WIDTH 16
#define CC1D_SIMD_NAME avx512bf16_div
#define CC1D_SIMD_DIVIDE
#include "fallback/cpu/simd_unit.inc"
