// simd_avx512bf16.cpp — the AVX-512 kernels again with AVX512_BF16 (set in CMakeLists.txt), whose
// vcvtneps2bf16 converts 16 floats to bf16 in one instruction and vdpbf16ps sums the channel-first
// bf16 rows' taps in pairs (simd_fwd.inc); run only where the CPU has it. See simd.h.
#include <immintrin.h>
#define CC1D_SIMD_WIDTH 16
#define CC1D_SIMD_NAME avx512bf16
#include "fallback/cpu/simd_unit.inc"
