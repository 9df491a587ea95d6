/* src/attn/avx512.c — decode attention's AVX-512 bodies (lutcore/attn.h's contract).
 *
 * Design: compiled alone with the AVX-512 flags (setup.py), and once more against SIMDe
 * for the tests (simde_avx512.c).  attn.h's AVX2 bodies at 16 lanes, chain for chain:
 *   attn_scores  16 keys at a time: a 16 x 16 transpose puts key j in lane j of kt's
 *                row i, then up to 8 query rows run their fma chains over i in order
 *   attn_values  16 dims a vector, 8 vectors (128 dims) of running chains over j, then
 *                single vectors, an 8-dim ymm, and scalar fmaf for the last dims
 * so every output is the sgemm's in-order fused multiply-add chain from zero (vfmadd and
 * fmaf round once per step): the generic and AVX2 bodies' bits.
 *
 *   sc  (R, lds) OUT   q (R, ldq) IN   K (S, hd) IN   kt  hd * 16 floats of scratch
 *   out (R, ldo) OUT   p (R, ldp) IN   V (S, hd) IN
 */
#define LC_BODY_ISA avx512
#include <math.h>
#include "gemm/x86_simd.h"
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

void LC_BODY(attn_values)(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                          int64_t S, int64_t hd) {
    for (int64_t r = 0; r < R; r++) {
        const float *pr = p + r * ldp;
        float *o = out + r * ldo;
        int64_t d0 = 0;
        for (; d0 + 128 <= hd; d0 += 128) {         /* 8 vectors of running chains */
            __m512 a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm512_setzero_ps();
            for (int64_t j = 0; j < S; j++) {
                __m512 pj = _mm512_set1_ps(pr[j]);
                const float *vr = V + j * hd + d0;
                for (int k = 0; k < 8; k++) a[k] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * k), a[k]);
            }
            for (int k = 0; k < 8; k++) _mm512_storeu_ps(o + d0 + 16 * k, a[k]);
        }
        if (d0 + 64 <= hd) {                        /* 4 vectors */
            __m512 a[4];
            for (int k = 0; k < 4; k++) a[k] = _mm512_setzero_ps();
            for (int64_t j = 0; j < S; j++) {
                __m512 pj = _mm512_set1_ps(pr[j]);
                const float *vr = V + j * hd + d0;
                for (int k = 0; k < 4; k++) a[k] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * k), a[k]);
            }
            for (int k = 0; k < 4; k++) _mm512_storeu_ps(o + d0 + 16 * k, a[k]);
            d0 += 64;
        }
        for (; d0 + 16 <= hd; d0 += 16) {
            __m512 a = _mm512_setzero_ps();
            for (int64_t j = 0; j < S; j++) a = _mm512_fmadd_ps(_mm512_set1_ps(pr[j]), _mm512_loadu_ps(V + j * hd + d0), a);
            _mm512_storeu_ps(o + d0, a);
        }
        if (d0 + 8 <= hd) {
            __m256 a = _mm256_setzero_ps();
            for (int64_t j = 0; j < S; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(pr[j]), _mm256_loadu_ps(V + j * hd + d0), a);
            _mm256_storeu_ps(o + d0, a);
            d0 += 8;
        }
        for (; d0 < hd; d0++) {
            float s = 0.0f;
            for (int64_t j = 0; j < S; j++) s = fmaf(pr[j], V[j * hd + d0], s);
            o[d0] = s;
        }
    }
}

#endif /* LC_X86 */
