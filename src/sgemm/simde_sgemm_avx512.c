/* src/sgemm/simde_sgemm_avx512.c — sgemm_avx512.c compiled against SIMDe (AVX2+FMA flags) for the test-only
 * extension lutcore._native._simde_sgemm: the same source, the intrinsics emulated exactly. */
#define LC_SIMDE 1
#include "sgemm_avx512.c"
