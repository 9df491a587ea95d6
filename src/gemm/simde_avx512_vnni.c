/* src/gemm/simde_avx512_vnni.c — avx512_vnni.c compiled against SIMDe (AVX2+FMA flags) for the test-only
 * extension lutcore._native._simde: the same source, the intrinsics emulated exactly. */
#define LC_SIMDE 1
#include "avx512_vnni.c"
