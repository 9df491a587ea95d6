/* src/gradtables/simde_avx512.c — avx512.c compiled against SIMDe (AVX2+FMA flags) for the
 * test-only extension lutcore._native._simde_gt: the same source, the intrinsics emulated exactly. */
#define LC_SIMDE 1
#include "avx512.c"
