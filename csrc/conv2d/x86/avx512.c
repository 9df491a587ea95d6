/* csrc/conv2d/x86/avx512.c — the direct small-K convolution's AVX-512 body (conv2d.h):
 * 16 consecutive output pixels of one row a vector.  Per block the pixels' patch columns
 * go to an L1 buffer once (exact: int16 pairs (x[2p], x[2p+1]) per pixel; any table: the
 * row offset x << 8 of the table per pixel), then per 16 output channels 16 int32
 * accumulators: exact, one int16 pair dot product per (pair, channel) against the
 * broadcast weight pair (madd + add; vpdpwssd when LC_C2D_DOT_VNNI, avx512_vnni.c); any
 * table, one 16-lane gather per (k, channel) from the table's column of the weight code.
 * Then float32(acc) * scale[o] (+ bias[o]) and a 16-pixel store into y's channel row.
 * Integer sums: the generic body's bits.  One thread over rows r0..r1-1. */
#ifndef LC_BODY_ISA
#define LC_BODY_ISA avx512
#endif
#include "core/simd.h"
#include "conv2d/x86.h"

#if LC_X86
#if defined(LC_C2D_DOT_VNNI)
#define LC_C2D_DOT(acc, x, w) _mm512_dpwssd_epi32(acc, x, w)
#else
#define LC_C2D_DOT(acc, x, w) _mm512_add_epi32(acc, _mm512_madd_epi16(x, w))
#endif

/* the 16-lane gather (SIMDe 0.8.2 has no native alias for it: lane by lane, the same values) */
#if defined(LC_SIMDE)
LC_AI __m512i lc_c2d_gather(__m512i iv, const int32_t *base) {
    int32_t ix[16], out[16];
    _mm512_storeu_si512((void *)ix, iv);
    for (int t = 0; t < 16; t++) out[t] = base[ix[t]];
    return _mm512_loadu_si512((const void *)out);
}
#else
#define lc_c2d_gather(iv, base) _mm512_i32gather_epi32(iv, (const void *)(base), 4)
#endif

/* 16 (or oc < 16) channels o0.. of one 16-pixel block: accumulate, dequantize, store */
LC_AI void lc_c2d_block(float *yb, int64_t P, const int16_t *xs, const int32_t *xi, const int32_t *wp,
                        const int8_t *Wt, const int32_t *mul, int exact, const float *scale,
                        const float *bias, int64_t O, int64_t K, int64_t o0, const int oc, __mmask16 mask) {
    __m512i acc[16];
#pragma GCC unroll 16
    for (int oo = 0; oo < 16; oo++) acc[oo] = _mm512_setzero_si512();   /* all 16: no maybe-uninitialized */
    if (exact) {
        for (int64_t p = 0; p < (K + 1) / 2; p++) {
            const __m512i xv = _mm512_load_si512((const void *)(xs + p * 32));
            const int32_t *w = wp + p * O + o0;
#pragma GCC unroll 16
            for (int oo = 0; oo < oc; oo++) acc[oo] = LC_C2D_DOT(acc[oo], xv, _mm512_set1_epi32(w[oo]));
        }
    } else {
        for (int64_t k = 0; k < K; k++) {
            const __m512i iv = _mm512_load_si512((const void *)(xi + k * 16));
            const uint8_t *w = (const uint8_t *)Wt + k * O + o0;
#pragma GCC unroll 16
            for (int oo = 0; oo < oc; oo++)
                acc[oo] = _mm512_add_epi32(acc[oo], lc_c2d_gather(iv, mul + w[oo]));
        }
    }
#pragma GCC unroll 16
    for (int oo = 0; oo < oc; oo++) {
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[oo]), _mm512_set1_ps(scale[o0 + oo]));
        if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[o0 + oo]));
        lc_x_mask_storeu_ps(yb + (o0 + oo) * P, mask, v);
    }
}

void LC_BODY(c2d_rows)(float *y, const int8_t *q, const lc_c2d_geo *g, const int32_t *wp, const int8_t *Wt,
                       const int32_t *mul, int exact, const float *scale, const float *bias, int64_t r0,
                       int64_t r1) {
    const int64_t O = g->O, K = g->K, C = g->C, P = g->OH * g->OW;
    /* exact: xs[p*32 + t*2 + (k & 1)] = x[t, k], p = k / 2; table: xi[k*16 + t] = (uint8)x[t, k] << 8.
     * Zeroed once: the odd K's last pair slot stays 0 (its weight half is 0 too). */
    int16_t xs[LC_C2D_KMAX / 2 * 32] __attribute__((aligned(64)));
    int32_t xi[LC_C2D_KMAX * 16] __attribute__((aligned(64)));
    memset(xs, 0, sizeof xs);
    memset(xi, 0, sizeof xi);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / g->OH, oh = r % g->OH;
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 16) {
            const int nt = g->OW - ow0 < 16 ? (int)(g->OW - ow0) : 16;
            for (int64_t i = 0; i < g->KH; i++) {
                const int64_t ih = oh * g->sh - g->ph + i * g->dh;
                const int rowok = ih >= 0 && ih < g->H;
                for (int64_t j = 0; j < g->KW; j++) {
                    const int64_t k0 = (i * g->KW + j) * C;
                    for (int t = 0; t < nt; t++) {
                        const int64_t iw = (ow0 + t) * g->sw - g->pw + j * g->dw;
                        const int8_t *px = rowok && iw >= 0 && iw < g->W ? q + ((n * g->H + ih) * g->W + iw) * C : NULL;
                        if (exact) {
                            for (int64_t c = 0; c < C; c++) {
                                const int64_t k = k0 + c;
                                xs[(k >> 1) * 32 + t * 2 + (k & 1)] = px ? px[c] : 0;
                            }
                        } else {
                            for (int64_t c = 0; c < C; c++)
                                xi[(k0 + c) * 16 + t] = px ? (int32_t)(uint8_t)px[c] << 8 : 0;
                        }
                    }
                }
            }
            const __mmask16 mask = lc_x_mask(nt);
            float *yb = y + n * O * P + oh * g->OW + ow0;
            int64_t o0 = 0;
            for (; o0 + 16 <= O; o0 += 16)
                lc_c2d_block(yb, P, xs, xi, wp, Wt, mul, exact, scale, bias, O, K, o0, 16, mask);
            if (o0 < O)
                lc_c2d_block(yb, P, xs, xi, wp, Wt, mul, exact, scale, bias, O, K, o0, (int)(O - o0), mask);
        }
    }
}
#endif
