// simd_avx512.cpp — the CPU kernels built with AVX-512 F/BW/VL/DQ (set in CMakeLists.txt); run
// only where the CPU has them. See simd.h.
#include <immintrin.h>
#define CC1D_SIMD_WIDTH 16
#define CC1D_SIMD_NAME avx512
#include "fallback/cpu/simd_unit.inc"
