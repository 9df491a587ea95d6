/* csrc/conv2d/x86/avx512.c — the direct small-K convolution's AVX-512 body (conv2d.h):
 * 16 consecutive output pixels of one row a vector.  Per block the 16 pixels' patches go to
 * a 16 x 32-byte L1 buffer, pixel t's row the codes x[t, 0..K-1] (with dilation 1, each
 * kernel row's KW*C codes are contiguous in the NHWC input: one masked 32-byte copy per
 * pixel and kernel row, taps in the padding byte by byte as the code 0), then a 16 x 8
 * dword transpose (three rounds of two-source permutes) turns it into one pixel-major vector
 * per quad k = 4p..4p+3 (dword t = x[t, 4p..4p+3]):
 *   exact, avx512.c       two int16 pair vectors per quad, (x[4p], x[4p+2]) and (x[4p+1],
 *                         x[4p+3]) sign-extended in place (shifts), madd + add per channel
 *   exact, avx512_vnni.c  the quad as unsigned bytes x + 128 (xor 0x80), one vpdpbusd per
 *                         channel, the accumulator started at -128 * sum_k w[k, o] (exact
 *                         integers: the same sum)
 *   any table             the row offsets x << 8 of the table per k, one 16-lane gather per
 *                         (k, channel) from the table's column of the weight code
 * Then float32(acc) * scale[o] (+ bias[o]) and a 16-pixel store into y's channel row.
 * Integer sums: the generic body's bits.  One thread over rows r0..r1-1.  wp: x86.h. */
#ifndef LC_BODY_ISA
#define LC_BODY_ISA avx512
#endif
#include "core/simd.h"
#include "conv2d/x86/x86.h"

#if LC_X86
#if defined(LC_C2D_DOT_VNNI)
#define LC_C2D_QUADS 1
#else
#define LC_C2D_QUADS 0
#endif

/* the 16-lane gather (SIMDe 0.8.2 has no native alias for it: lane by lane, the same values) */
#if defined(LC_SIMDE)
LC_AI __m512i lc_c2d_gather(__m512i iv, const int32_t *base) {
    int32_t ix[16], out[16];
    _mm512_storeu_si512((void *)ix, iv);
    for (int t = 0; t < 16; t++) out[t] = base[ix[t]];
    return _mm512_loadu_si512((const void *)out);
}
/* n (1..32) codes src -> dst (SIMDe's masked loads read past the end: a plain copy) */
LC_AI void lc_c2d_seg(int8_t *dst, const int8_t *src, int n) { memcpy(dst, src, (size_t)n); }
#else
#define lc_c2d_gather(iv, base) _mm512_i32gather_epi32(iv, (const void *)(base), 4)
LC_AI void lc_c2d_seg(int8_t *dst, const int8_t *src, int n) {
    const __mmask32 m = n >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << n) - 1);
    _mm256_mask_storeu_epi8((void *)dst, m, _mm256_maskz_loadu_epi8(m, (const void *)src));
}
#endif

/* 16 (or oc < 16) channels o0.. of one 16-pixel block: accumulate, dequantize, store.
 * xv: the exact table's vectors (NV of them: pairs, or VNNI quads), xi: the table's offsets. */
LC_AI void lc_c2d_block(float *yb, int64_t P, const __m512i *xv, int64_t NV, const int32_t *xi,
                        const int32_t *wp, const int8_t *Wt, const int32_t *mul, int exact, const float *scale,
                        const float *bias, int64_t O, int64_t K, int64_t o0, const int oc, __mmask16 mask) {
    __m512i acc[16];
#if LC_C2D_QUADS
    const int32_t *cb = wp + NV * O;           /* -128 * sum_k w[k, o] after the quads */
    if (exact) {
#pragma GCC unroll 16
        for (int oo = 0; oo < 16; oo++) acc[oo] = _mm512_set1_epi32(oo < oc ? cb[o0 + oo] : 0);
    } else
#endif
    {
#pragma GCC unroll 16
        for (int oo = 0; oo < 16; oo++) acc[oo] = _mm512_setzero_si512();   /* all 16: no maybe-uninitialized */
    }
    if (exact) {
        for (int64_t p = 0; p < NV; p++) {
            const __m512i x = xv[p];
            const int32_t *w = wp + p * O + o0;
#pragma GCC unroll 16
            for (int oo = 0; oo < oc; oo++)
#if LC_C2D_QUADS
                acc[oo] = _mm512_dpbusd_epi32(acc[oo], x, _mm512_set1_epi32(w[oo]));
#else
                acc[oo] = _mm512_add_epi32(acc[oo], _mm512_madd_epi16(x, _mm512_set1_epi32(w[oo])));
#endif
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
    const int64_t O = g->O, K = g->K, C = g->C, P = g->OH * g->OW, KQ = (K + 3) / 4;
    const int64_t KW = g->KW, KWC = KW * C;
    /* xb[t*32 + k] = x[t, k]; zeroed once: k >= K stays 0 (its weights are 0 too); each block
     * rewrites every k < K of its pixels (a pixel past the row's end keeps old codes: its
     * lanes are not stored) */
    int8_t xb[16 * 32] __attribute__((aligned(64)));
    int32_t xi[LC_C2D_KMAX * 16] __attribute__((aligned(64)));
    __m512i xv[16];
    memset(xb, 0, sizeof xb);
    __m512i tix[3][2];                  /* the transpose's permute indices (below) */
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 2; v++) {
            int32_t ix[16];
            for (int L = 0; L < 16; L++) {
                const int l = s < 2 ? L : ((L & 1) << 3) | (L >> 1);   /* the last round puts lane t at t */
                ix[L] = ((l >> s) & 1 ? 16 : 0) + ((l & ~(1 << s)) | (v << s));
            }
            tix[s][v] = _mm512_loadu_si512((const void *)ix);
        }
    const int fast = g->dw == 1 && KWC <= 32;    /* a kernel row's codes: one contiguous run */
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / g->OH, oh = r % g->OH;
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 16) {
            const int nt = g->OW - ow0 < 16 ? (int)(g->OW - ow0) : 16;
            for (int64_t i = 0; i < g->KH; i++) {
                const int64_t ih = oh * g->sh - g->ph + i * g->dh;
                const int rowok = ih >= 0 && ih < g->H;
                const int8_t *row = q + (n * g->H + (rowok ? ih : 0)) * g->W * C;
                for (int t = 0; t < nt; t++) {
                    int8_t *xt = xb + t * 32 + i * KWC;
                    const int64_t iw0 = (ow0 + t) * g->sw - g->pw;
                    if (fast && rowok && iw0 >= 0 && iw0 + KW <= g->W) {
                        lc_c2d_seg(xt, row + iw0 * C, (int)KWC);
                        continue;
                    }
                    for (int64_t j = 0; j < KW; j++) {
                        const int64_t iw = iw0 + j * g->dw;
                        const int ok = rowok && iw >= 0 && iw < g->W;
                        for (int64_t c = 0; c < C; c++) xt[j * C + c] = ok ? row[iw * C + c] : 0;
                    }
                }
            }
            /* quads: dword t of Q[p] = x[t, 4p..4p+3]: the 16 x 8 dword transpose of xb in three
             * rounds of two-source permutes (round s swaps register bit s with lane bit s) */
            __m512i Z[8];
            for (int s = 0; s < 8; s++) Z[s] = _mm512_load_si512((const void *)(xb + 64 * s));
            for (int s = 0; s < 3; s++) {
                __m512i Zn[8];
                for (int a = 0; a < 8; a++) {
                    if (a & (1 << s)) continue;
                    Zn[a] = _mm512_permutex2var_epi32(Z[a], tix[s][0], Z[a | (1 << s)]);
                    Zn[a | (1 << s)] = _mm512_permutex2var_epi32(Z[a], tix[s][1], Z[a | (1 << s)]);
                }
                for (int a = 0; a < 8; a++) Z[a] = Zn[a];
            }
            for (int64_t p = 0; p < KQ; p++) {
                const __m512i Q = Z[p];
                if (!exact) {
                    for (int rr = 0; rr < 4; rr++) {
                        const __m512i b = rr == 0 ? _mm512_slli_epi32(Q, 8) : _mm512_srli_epi32(Q, 8 * rr - 8);
                        _mm512_store_si512((void *)(xi + (4 * p + rr) * 16),
                                           _mm512_and_si512(b, _mm512_set1_epi32(0xFF00)));
                    }
                } else if (LC_C2D_QUADS) {
                    xv[p] = _mm512_xor_si512(Q, _mm512_set1_epi32((int32_t)0x80808080u));
                } else {
                    xv[2 * p] = _mm512_srai_epi16(_mm512_slli_epi16(Q, 8), 8);     /* x[4p], x[4p+2] */
                    xv[2 * p + 1] = _mm512_srai_epi16(Q, 8);                        /* x[4p+1], x[4p+3] */
                }
            }
            const int64_t NV = LC_C2D_QUADS ? KQ : 2 * KQ;
            const __mmask16 mask = lc_x_mask(nt);
            float *yb = y + n * O * P + oh * g->OW + ow0;
            int64_t o0 = 0;
            for (; o0 + 16 <= O; o0 += 16)
                lc_c2d_block(yb, P, xv, NV, xi, wp, Wt, mul, exact, scale, bias, O, K, o0, 16, mask);
            if (o0 < O)
                lc_c2d_block(yb, P, xv, NV, xi, wp, Wt, mul, exact, scale, bias, O, K, o0, (int)(O - o0), mask);
        }
    }
}
#endif
