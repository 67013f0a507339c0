/* x86_port_pairs.c — which AVX-512 instructions the CPU issues beside its 512-bit FMAs, and which
 * compete with them: the question behind each shuffle and conversion chosen in fallback/cpu/'s
 * AVX-512 loops (bench/RESULTS.md, "Channel-first bf16 rows in pairs on AVX-512").
 *
 * For each instruction: eight independent chains of it alone, then of it followed by one FMA, so
 * latency never binds; the time of one step is printed in units of one FMA alone (about one
 * cycle where the FMA issues once a cycle). "alone" 1.0 is one a cycle, 0.5 two; "+ FMA" 1.0 means
 * it issues beside the FMA for free, 2.0 that the two take turns on the same pipes.
 *
 *     gcc -O2 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 bench/x86_port_pairs.c \
 *         -o /tmp/port_pairs && /tmp/port_pairs
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define STEPS 20000000L
#define PS(x) _mm512_castsi512_ps(x)
#define SI(x) _mm512_castps_si512(x)

/* The best of 5 runs of STEPS steps of OP on eight chains, seconds per chain step. (Eight named
 * variables: an array of them went through memory, which timed the stores.) */
#define TIME(OP, out)                                                                              \
  do {                                                                                             \
    __m512i c0 = _mm512_set1_epi32(1), c1 = _mm512_set1_epi32(2), c2 = _mm512_set1_epi32(3),       \
            c3 = _mm512_set1_epi32(4), c4 = _mm512_set1_epi32(5), c5 = _mm512_set1_epi32(6),       \
            c6 = _mm512_set1_epi32(7), c7 = _mm512_set1_epi32(8);                                  \
    double best = 1e30;                                                                            \
    for (int run = 0; run < 5; ++run) {                                                            \
      const double t0 = seconds();                                                                 \
      for (long i = 0; i < STEPS; ++i) {                                                           \
        c0 = OP(c0), c1 = OP(c1), c2 = OP(c2), c3 = OP(c3);                                        \
        c4 = OP(c4), c5 = OP(c5), c6 = OP(c6), c7 = OP(c7);                                        \
      }                                                                                            \
      const double t = seconds() - t0;                                                             \
      if (t < best) best = t;                                                                      \
    }                                                                                              \
    const __m512i all = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(c0, c1), _mm512_xor_si512(c2, c3)), \
                                         _mm512_xor_si512(_mm512_xor_si512(c4, c5), _mm512_xor_si512(c6, c7))); \
    sink ^= _mm512_reduce_add_epi32(all); /* the results used, so that no chain is dropped */      \
    out = best / (8.0 * STEPS);                                                                    \
  } while (0)

static volatile int sink;
static __m512i other, index16;

#define FMA(x) SI(_mm512_fmadd_ps(PS(x), PS(other), PS(other)))
#define PERMT2PS(x) SI(_mm512_permutex2var_ps(PS(x), index16, PS(other)))
#define PERMT2W(x) _mm512_permutex2var_epi16(x, index16, other)
#define PERMW(x) _mm512_permutexvar_epi16(index16, x)
#define ALIGND(x) _mm512_alignr_epi32(x, other, 3)
#define SHUFI32X4(x) _mm512_shuffle_i32x4(x, other, 0x44)
#define UNPCKLDQ(x) _mm512_unpacklo_epi32(x, other)
#define SLLD(x) _mm512_slli_epi32(x, 1)
#define ANDD(x) _mm512_and_si512(x, other)
#define PMOVZXWD(x) _mm512_cvtepu16_epi32(_mm512_castsi512_si256(x))
#define CVTNE2PS2BF16(x) ((__m512i)_mm512_cvtne2ps_pbh(PS(x), PS(other)))
#define FPCLASS_MASKZ(x) SI(_mm512_maskz_mov_ps(_mm512_fpclass_ps_mask(PS(x), 0x20), PS(x)))
#define ADDPS(x) SI(_mm512_add_ps(PS(x), PS(other)))
#define MULPS(x) SI(_mm512_mul_ps(PS(x), PS(other)))
#define RANGEPS(x) SI(_mm512_range_ps(PS(x), PS(other), 0x02))
#define RNDSCALEPS(x) SI(_mm512_roundscale_ps(PS(x), 0))
#define SCALEFPS(x) SI(_mm512_scalef_ps(PS(x), PS(other)))
#define RCP14PS(x) SI(_mm512_rcp14_ps(PS(x)))

#define ROW(OP)                                                                                    \
  do {                                                                                             \
    double alone, paired;                                                                          \
    TIME(OP, alone);                                                                               \
    TIME(FMA_AFTER_##OP, paired);                                                                  \
    printf("| %s | %.2f | %.2f |\n", #OP, alone / fma, paired / fma);                              \
  } while (0)
#define PAIRED(OP) static inline __m512i FMA_AFTER_##OP(__m512i x) { return FMA(OP(x)); }
PAIRED(PERMT2PS) PAIRED(PERMT2W) PAIRED(PERMW) PAIRED(ALIGND) PAIRED(SHUFI32X4) PAIRED(UNPCKLDQ)
PAIRED(SLLD) PAIRED(ANDD) PAIRED(PMOVZXWD) PAIRED(CVTNE2PS2BF16) PAIRED(FPCLASS_MASKZ) PAIRED(ADDPS)
PAIRED(MULPS) PAIRED(RANGEPS) PAIRED(RNDSCALEPS) PAIRED(SCALEFPS) PAIRED(RCP14PS) PAIRED(FMA)

int main(void) {
  other = _mm512_set1_epi32(0x3f800001);
  index16 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  double fma;
  TIME(FMA, fma); /* once to warm the core up (its clock), then the unit */
  TIME(FMA, fma);
  printf("one 512-bit FMA alone: %.3f ns a step\n\n| instruction | alone | + FMA |\n|---|---|---|\n", fma * 1e9);
  ROW(FMA);
  ROW(PERMT2PS); ROW(PERMT2W); ROW(PERMW); ROW(ALIGND); ROW(SHUFI32X4); ROW(UNPCKLDQ);
  ROW(SLLD); ROW(ANDD); ROW(PMOVZXWD); ROW(CVTNE2PS2BF16); ROW(FPCLASS_MASKZ); ROW(ADDPS);
  ROW(MULPS); ROW(RANGEPS); ROW(RNDSCALEPS); ROW(SCALEFPS); ROW(RCP14PS);
  return 0;
}
