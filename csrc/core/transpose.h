/* csrc/core/transpose.h — the float transposes in registers shared by the families that put
 * rows in the lanes of a vector: attention's scores (keys) and the norms (rows).
 *   lc_tr8x8   8 x 8 in ymm (AVX2, a target attribute: usable from the generic headers)
 *   lc_a_tr16  16 x 16 in zmm, for the AVX-512 bodies (and their SIMDe twins): defined
 *              only where the translation unit is compiled for AVX-512 or against SIMDe
 *              (include core/simd.h first there)
 */
#ifndef LUTCORE_CORE_TRANSPOSE_H
#define LUTCORE_CORE_TRANSPOSE_H

#include "core/common.h"

#if LC_X86
/* rows[0..7] (8 floats each) -> cols: cols[c] lane k = rows[k][c] */
LC_TARGET_AVX2 static inline void lc_tr8x8(__m256 *v) {
    __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
    __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    v[0] = _mm256_permute2f128_ps(u0, u4, 0x20); v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    v[2] = _mm256_permute2f128_ps(u2, u6, 0x20); v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    v[4] = _mm256_permute2f128_ps(u0, u4, 0x31); v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    v[6] = _mm256_permute2f128_ps(u2, u6, 0x31); v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#endif

#if defined(LC_SIMDE) || defined(__AVX512F__)

/* v[c] lane r <- v[r] lane c, 16 x 16: pairs interleaved within 128-bit lanes, then
 * quads, then 128-bit lanes across vectors (two steps) */
LC_AI void lc_a_tr16(__m512 *v) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);          /* rows i, i+1 interleaved per lane */
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {                        /* u[i + m], lane L: rows i..i+3 of column 4L+m */
        u[i + 0] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) {
        __m512 x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
        __m512 y0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
        v[m] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        v[8 + m] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
        v[4 + m] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        v[12 + m] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
    }
}

#endif

#endif /* LUTCORE_CORE_TRANSPOSE_H */
