/* src/gemm/x86_simd.h — what every x86 body file of the gemm family includes.
 *
 * Native build: the CPU's intrinsics (the file is compiled with its ISA's
 * flags).  LC_SIMDE build (the test-only copy): SIMDe's portable AVX-512 with
 * native aliases, so the same source names (_mm512_*, __m512i) compile to
 * SIMDe's exact emulation on an AVX2+FMA build.  LC_BODY(name) names a
 * function with the file's prefix (lc_<isa>_ or lc_simde_<isa>_).
 */
#ifndef LUTCORE_SRC_GEMM_X86_SIMD_H
#define LUTCORE_SRC_GEMM_X86_SIMD_H

#include "lutcore/common.h"
#include "lutcore/gemm/x86.h"

#if defined(LC_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define LC_BODY_(isa, n) lc_simde_##isa##_##n
#else
#include <immintrin.h>
#define LC_BODY_(isa, n) lc_##isa##_##n
#endif
/* Masked loads and stores.  SIMDe 0.8.2 emulates them as a full 64-byte load or
 * store (masked-off lanes zeroed), which reads and writes past a buffer's end
 * where the instruction does not touch memory; the SIMDe build uses these exact
 * lane-by-lane versions instead. */
#if defined(LC_SIMDE)
static inline __m512i lc_x_maskz_loadu_epi64(__mmask8 k, const void *p) {
    int64_t t[8] = {0};
    for (int i = 0; i < 8; i++)
        if ((k >> i) & 1) memcpy(&t[i], (const char *)p + 8 * i, 8);
    return _mm512_loadu_si512((const void *)t);
}
static inline void lc_x_mask_storeu_epi32(void *p, __mmask16 k, __m512i v) {
    int32_t t[16];
    _mm512_storeu_si512((void *)t, v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) memcpy((char *)p + 4 * i, &t[i], 4);
}
static inline void lc_x_mask_storeu_ps(void *p, __mmask16 k, __m512 v) {
    lc_x_mask_storeu_epi32(p, k, _mm512_castps_si512(v));
}
#else
#define lc_x_maskz_loadu_epi64(k, p) _mm512_maskz_loadu_epi64(k, p)
#define lc_x_mask_storeu_epi32(p, k, v) _mm512_mask_storeu_epi32(p, k, v)
#define lc_x_mask_storeu_ps(p, k, v) _mm512_mask_storeu_ps(p, k, v)
#endif
#define LC_BODY_X(isa, n) LC_BODY_(isa, n)
#define LC_BODY(n) LC_BODY_X(LC_BODY_ISA, n)

#define LC_AI static inline __attribute__((always_inline))
#define LC_XNR 16            /* columns per packed panel (gemm.h LC_NR) */
#define LC_XTR 12            /* rows per register tile: 12 x 2 panels = 24 zmm accumulators */

static inline int32_t lc_x_ld32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }
/* the low `cols` (<= 16) lanes */
static inline __mmask16 lc_x_mask(int cols) { return cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1); }

/* Per-row register variables (named, not an array: compilers keep an array of
 * vectors in memory): X(r) for r = 0..11; a row r >= R is dead code. */
#define LC_X_REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define LC_X_REP4(X) X(0) X(1) X(2) X(3)
#define LC_X_REP8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* tile instantiations: rows 1..12 x 1..2 panels, picked at run time from a table */
#define LC_X_ROWS(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP) X(5, NP) X(6, NP) X(7, NP) X(8, NP) \
    X(9, NP) X(10, NP) X(11, NP) X(12, NP)
#define LC_X_ROWS8(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP) X(5, NP) X(6, NP) X(7, NP) X(8, NP)

#endif
