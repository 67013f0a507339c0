// simd_neon_bf16.cpp — the baseline AArch64 kernels again with FEAT_BF16 (set in CMakeLists.txt),
// whose bfcvtn converts 4 floats to bf16 in one instruction instead of about seven; run only
// where the CPU has it (Neoverse V1 and V2: Graviton 3 and 4, Grace). See simd.h.
#include <arm_neon.h>
#define CC1D_SIMD_WIDTH 4
#define CC1D_SIMD_NAME neon_bf16
#include "fallback/cpu/simd_unit.inc"
