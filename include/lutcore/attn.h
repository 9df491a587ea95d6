/* lutcore/attn.h — one query row's attention products against a KV cache.
 *
 * Decoding computes, per KV head, the scores of its g query heads against the
 * S cached keys and the weighted sum of the S cached values.  The stage's
 * full-sequence path does both with lutcore's sgemm, whose contract is one
 * fused multiply-add chain per output element, in k order, from zero.  These
 * kernels run exactly those chains — so the bits equal the sgemm's — without
 * its per-call packing of the (growing) cache:
 *
 *   lc_attn_scores   sc[r][j] = chain over i < hd of q[r][i] * K[j][i]
 *                    (8 keys at a time: an 8 x 8 transpose puts key j in lane j)
 *   lc_attn_values   out[r][d] = chain over j < S of p[r][j] * V[j][d]
 *                    (8 dims per vector, value rows read in place)
 *
 * Layouts: q (R, ldq), sc/p (R, lds), K/V rows hd apart (S, hd), out (R, ldo).
 * The generic body is the scalar chain (fmaf), the reference, for both.  The
 * AVX-512 bodies (attn/x86.h, src/attn/avx512.c) run the same chains 16 lanes wide
 * (16 keys a transposed block; 16 dims a vector).  kt, the scores' scratch: LC_ATTN_KT(hd)
 * floats (enough for either body's transposed block).
 */
#ifndef LUTCORE_ATTN_H
#define LUTCORE_ATTN_H

#include <math.h>
#include "core/common.h"

#define LC_ATTN_KT(hd) ((hd) * 16 + 16)

/* The AVX-512 bodies, built where setup.py defines LC_HAVE_X86_BODIES; LC_ATTN_SIMDE binds
 * their SIMDe copies (the test-only extension _simde_decode). */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#include "attn/x86.h"
#define LC_ATTN_X86 1
#if defined(LC_ATTN_SIMDE)
#define LC_ATTN_X(fn) lc_simde_avx512_##fn
#else
#define LC_ATTN_X(fn) lc_avx512_##fn
#endif
#else
#define LC_ATTN_X86 0
#endif

/* out[r][c] = the fma chain over k < nk of a[r][k] * b[k * sbk + c * sbc], from zero */
static void lc_attn_chain_generic(float *out, int64_t ldo, const float *a, int64_t lda, int64_t R,
                                  const float *b, int64_t sbk, int64_t sbc, int64_t nk, int64_t nc) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < nc; c++) {
            float s = 0.0f;
            for (int64_t k = 0; k < nk; k++) s = fmaf(a[r * lda + k], b[k * sbk + c * sbc], s);
            out[r * ldo + c] = s;
        }
}

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

/* kt: scratch of hd * 8 floats (the block's keys, transposed) */
LC_TARGET_AVX2 static void lc_attn_scores_avx2(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R,
                                               const float *K, int64_t S, int64_t hd, float *kt) {
    for (int64_t j0 = 0; j0 < S; j0 += 8) {
        const int64_t nj = S - j0 < 8 ? S - j0 : 8;
        int64_t i0 = 0;
        for (; i0 + 8 <= hd; i0 += 8) {           /* kt[i][jj] = K[j0 + jj][i]: 8 x 8 at a time */
            __m256 v[8];
            for (int jj = 0; jj < 8; jj++)
                v[jj] = jj < nj ? _mm256_loadu_ps(K + (j0 + jj) * hd + i0) : _mm256_setzero_ps();
            lc_tr8x8(v);
            for (int c = 0; c < 8; c++) _mm256_storeu_ps(kt + (i0 + c) * 8, v[c]);
        }
        for (; i0 < hd; i0++)
            for (int jj = 0; jj < 8; jj++) kt[i0 * 8 + jj] = jj < nj ? K[(j0 + jj) * hd + i0] : 0.0f;
        for (int64_t r0 = 0; r0 < R; r0 += 8) {     /* up to 8 query rows: independent chains overlap */
            const int64_t nr = R - r0 < 8 ? R - r0 : 8;
            __m256 a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
            for (int64_t i = 0; i < hd; i++) {
                __m256 kv = _mm256_loadu_ps(kt + i * 8);
                for (int k = 0; k < nr; k++) a[k] = _mm256_fmadd_ps(_mm256_set1_ps(q[(r0 + k) * ldq + i]), kv, a[k]);
            }
            for (int k = 0; k < nr; k++) {
                float *dst = sc + (r0 + k) * lds + j0;
                if (nj == 8) _mm256_storeu_ps(dst, a[k]);
                else {
                    float t[8];
                    _mm256_storeu_ps(t, a[k]);
                    for (int jj = 0; jj < nj; jj++) dst[jj] = t[jj];
                }
            }
        }
    }
}

LC_TARGET_AVX2 static void lc_attn_values_avx2(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R,
                                               const float *V, int64_t S, int64_t hd) {
    for (int64_t r = 0; r < R; r++) {
        const float *pr = p + r * ldp;
        int64_t d0 = 0;
        for (; d0 + 64 <= hd; d0 += 64) {          /* 8 vectors of running chains */
            __m256 a[8];
            for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
            for (int64_t j = 0; j < S; j++) {
                __m256 pj = _mm256_set1_ps(pr[j]);
                const float *vr = V + j * hd + d0;
                for (int k = 0; k < 8; k++) a[k] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * k), a[k]);
            }
            for (int k = 0; k < 8; k++) _mm256_storeu_ps(out + r * ldo + d0 + 8 * k, a[k]);
        }
        for (; d0 + 8 <= hd; d0 += 8) {
            __m256 a = _mm256_setzero_ps();
            for (int64_t j = 0; j < S; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(pr[j]), _mm256_loadu_ps(V + j * hd + d0), a);
            _mm256_storeu_ps(out + r * ldo + d0, a);
        }
        for (; d0 < hd; d0++) {
            float s = 0.0f;
            for (int64_t j = 0; j < S; j++) s = fmaf(pr[j], V[j * hd + d0], s);
            out[r * ldo + d0] = s;
        }
    }
}
#endif

/* the body lc_attn_scores/values run for `isa`, for show_config */
static const char *lc_attn_body_name(int isa) {
#if LC_ATTN_X86
    if (isa >= LC_ISA_AVX512) return "avx512";
#endif
    return isa >= LC_ISA_AVX2 && LC_X86 ? "avx2" : "generic";
}

/* dispatch; kt: LC_ATTN_KT(hd) floats of scratch */
static void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                           int64_t S, int64_t hd, float *kt, int isa) {
#if LC_ATTN_X86
    if (isa >= LC_ISA_AVX512) { LC_ATTN_X(attn_scores)(sc, lds, q, ldq, R, K, S, hd, kt); return; }
#endif
#if LC_X86
    if (isa >= LC_ISA_AVX2) { lc_attn_scores_avx2(sc, lds, q, ldq, R, K, S, hd, kt); return; }
#endif
    (void)kt; (void)isa;
    lc_attn_chain_generic(sc, lds, q, ldq, R, K, 1, hd, hd, S);         /* K[j][i]: k = i, c = j */
}

static void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                           int64_t S, int64_t hd, int isa) {
#if LC_ATTN_X86
    if (isa >= LC_ISA_AVX512) { LC_ATTN_X(attn_values)(out, ldo, p, ldp, R, V, S, hd); return; }
#endif
#if LC_X86
    if (isa >= LC_ISA_AVX2) { lc_attn_values_avx2(out, ldo, p, ldp, R, V, S, hd); return; }
#endif
    (void)isa;
    lc_attn_chain_generic(out, ldo, p, ldp, R, V, hd, 1, S, hd);        /* V[j][d]: k = j, c = d */
}

#endif /* LUTCORE_ATTN_H */
