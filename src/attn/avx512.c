/* src/attn/avx512.c — decode attention's AVX-512 bodies (lutcore/attn.h's contract).
 *
 * Design: compiled alone with the AVX-512 flags (setup.py), and once more against SIMDe
 * for the tests (simde_avx512.c).  attn.h's AVX2 bodies at 16 lanes, chain for chain:
 *   attn_scores  16 keys at a time: a 16 x 16 transpose puts key j in lane j of kt's
 *                row i, then up to 8 query rows run their fma chains over i in order
 *   attn_values  16 dims a vector: 128 dims of 2 rows, 64 of 4 rows or 16 of 8 rows of
 *                running chains over j (each V row loaded once for those rows), then an
 *                8-dim ymm and scalar fmaf for the last dims
 * so every output is the sgemm's in-order fused multiply-add chain from zero (vfmadd and
 * fmaf round once per step): the generic and AVX2 bodies' bits.
 *
 *   sc  (R, lds) OUT   q (R, ldq) IN   K (S, hd) IN   kt  hd * 16 floats of scratch
 *   out (R, ldo) OUT   p (R, ldp) IN   V (S, hd) IN
 */
#define LC_BODY_ISA avx512
#include <math.h>
#include "core/simd.h"
#include "lutcore/attn/x86.h"
#include "attn/tr16.h"

#if LC_X86

void LC_BODY(attn_scores)(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                          int64_t S, int64_t hd, float *kt) {
    for (int64_t j0 = 0; j0 < S; j0 += 16) {
        const int64_t nj = S - j0 < 16 ? S - j0 : 16;
        int64_t i0 = 0;
        for (; i0 + 16 <= hd; i0 += 16) {          /* kt[i][jj] = K[j0 + jj][i]: 16 x 16 at a time */
            __m512 v[16];
            for (int jj = 0; jj < 16; jj++)
                v[jj] = jj < nj ? _mm512_loadu_ps(K + (j0 + jj) * hd + i0) : _mm512_setzero_ps();
            lc_a_tr16(v);
            for (int c = 0; c < 16; c++) _mm512_storeu_ps(kt + (i0 + c) * 16, v[c]);
        }
        for (; i0 < hd; i0++)
            for (int jj = 0; jj < 16; jj++) kt[i0 * 16 + jj] = jj < nj ? K[(j0 + jj) * hd + i0] : 0.0f;
        for (int64_t r0 = 0; r0 < R; r0 += 8) {     /* up to 8 query rows: independent chains overlap */
            const int64_t nr = R - r0 < 8 ? R - r0 : 8;
            __m512 a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm512_setzero_ps();
            for (int64_t i = 0; i < hd; i++) {
                __m512 kv = _mm512_loadu_ps(kt + i * 16);
                for (int k = 0; k < nr; k++) a[k] = _mm512_fmadd_ps(_mm512_set1_ps(q[(r0 + k) * ldq + i]), kv, a[k]);
            }
            for (int k = 0; k < nr; k++) {
                float *dst = sc + (r0 + k) * lds + j0;
                if (nj == 16) _mm512_storeu_ps(dst, a[k]);
                else lc_x_mask_storeu_ps(dst, lc_x_mask((int)nj), a[k]);
            }
        }
    }
}

/* values of rows [r0, r0 + nr) (nr <= RB), dims [d0, d0 + 16 NV): each V row's NV vectors
 * loaded once for the RB rows' chains (RB x NV <= 16 accumulators) */
LC_AI void lc_a_values_blk(float *out, int64_t ldo, const float *p, int64_t ldp, int nr, const float *V, int64_t S,
                           int64_t hd, int64_t d0, const int NV, const int RB) {
    __m512 a[8][8];
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < NV; v++) a[r][v] = _mm512_setzero_ps();
    for (int64_t j = 0; j < S; j++) {
        const float *vr = V + j * hd + d0;
        __m512 vv[8];
        for (int v = 0; v < NV; v++) vv[v] = _mm512_loadu_ps(vr + 16 * v);
        for (int r = 0; r < RB; r++)
            if (r < nr) {
                const __m512 pj = _mm512_set1_ps(p[r * ldp + j]);
                for (int v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(pj, vv[v], a[r][v]);
            }
    }
    for (int r = 0; r < RB; r++)
        if (r < nr)
            for (int v = 0; v < NV; v++) _mm512_storeu_ps(out + r * ldo + d0 + 16 * v, a[r][v]);
}
#define LC_A_VALUES(NV, RB)                                                                              \
    static void lc_a_values_##NV(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R,          \
                                 const float *V, int64_t S, int64_t hd, int64_t d0) {                     \
        for (int64_t r0 = 0; r0 < R; r0 += RB)                                                            \
            lc_a_values_blk(out + r0 * ldo, ldo, p + r0 * ldp, ldp, (int)(R - r0 < RB ? R - r0 : RB), V, S,  \
                            hd, d0, NV, RB);                                                              \
    }
LC_A_VALUES(8, 2)
LC_A_VALUES(4, 4)
LC_A_VALUES(1, 8)

void LC_BODY(attn_values)(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                          int64_t S, int64_t hd) {
    int64_t d0 = 0;
    for (; d0 + 128 <= hd; d0 += 128) lc_a_values_8(out, ldo, p, ldp, R, V, S, hd, d0);
    if (d0 + 64 <= hd) {
        lc_a_values_4(out, ldo, p, ldp, R, V, S, hd, d0);
        d0 += 64;
    }
    for (; d0 + 16 <= hd; d0 += 16) lc_a_values_1(out, ldo, p, ldp, R, V, S, hd, d0);
    if (d0 == hd) return;
    for (int64_t r = 0; r < R; r++) {               /* the last dims (< 16): an 8-dim ymm, then scalar */
        const float *pr = p + r * ldp;
        float *o = out + r * ldo;
        int64_t d = d0;
        if (d + 8 <= hd) {
            __m256 a = _mm256_setzero_ps();
            for (int64_t j = 0; j < S; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(pr[j]), _mm256_loadu_ps(V + j * hd + d), a);
            _mm256_storeu_ps(o + d, a);
            d += 8;
        }
        for (; d < hd; d++) {
            float s = 0.0f;
            for (int64_t j = 0; j < S; j++) s = fmaf(pr[j], V[j * hd + d], s);
            o[d] = s;
        }
    }
}

#endif /* LC_X86 */
