// simd_avx2.cpp — the CPU kernels built with -mavx2 -mfma -mf16c (set in CMakeLists.txt); run
// only where the CPU has them. See simd.h.
#include <immintrin.h>
#define CC1D_SIMD_WIDTH 8
#define CC1D_SIMD_NAME avx2
#include "fallback/cpu/simd_unit.inc"
