/* src/conv/simde_avx512.c — avx512.c built with the AVX2 flags for the test-only extension
 * lutcore._native._simde_mamba (plain C: the same source, the same per-element operations). */
#define LC_SIMDE 1
#include "avx512.c"
