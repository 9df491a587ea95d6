/* src/attn/tr16.h — a 16 x 16 float transpose in zmm registers, for the AVX-512 bodies that
 * put 16 rows in the lanes of a vector: attention's scores (keys) and the norms (rows).
 * Include after core/simd.h. */
#ifndef LUTCORE_SRC_ATTN_TR16_H
#define LUTCORE_SRC_ATTN_TR16_H

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
