/* lutcore/gradtables.h — backward="table": gradients through a unit's gradient tables.
 *
 * Contract (lutcore/torch/_gradtables.py, docs/DESIGN.md): with Ga = df/da, Gb = df/db
 * float32 (65536,) indexed (a & 0xff) * 256 + (b & 0xff), codes qx (M, K) and qw (O, K):
 *   lc_gt_dx  dx[m, k] = sum_o g[m, o] * Ga[qx[m, k], qw[o, k]]    g float32 (M, O)   -> dx (M, K)
 *   lc_gt_dw  s[o, k]  = sum_m dy[m, o] * Gb[qx[m, k], qw[o, k]]   dy float32 (M, O)  -> s (O, K)
 *             (given the transposed table GbT[b * 256 + a] = Gb[a * 256 + b])
 * Each sum runs in index order (o = 0, 1, ... / m = 0, 1, ...) from 0 in float32, a
 * product rounded before its add (-ffp-contract=off).  dx is threaded over rows m, s
 * over rows o: every output has one thread and one order, so the bits are the same at
 * any thread count and on every ISA (the bodies differ only in how the compiler
 * vectorises the gathers: generic, AVX2 and AVX-512 function targets, x86 GCC/clang).
 * dx's order is the numpy fallback's; s's is not (numpy adds per-block sums).
 */
#ifndef LUTCORE_GRADTABLES_H
#define LUTCORE_GRADTABLES_H

#include "common.h"

#define LC_GT_PAR_MIN (1 << 15)

#define LC_GT_KC 16          /* k's per accumulator block (one AVX-512 vector, two AVX2) */

/* dx: for each row m and block of 16 k's, the 16 sums over o stay in registers; lane j
 * gathers from the table row Ga[qx[m, k+j], .] (16 rows, 16 KiB: L1).  dw: the same with
 * the roles of (m, o) swapped, gathering from the transposed table GbT[qw[o, k+j], .]. */
#define LC_GT_BODIES(SUF, ATTR)                                                                      \
static ATTR void lc_gt_dx_##SUF(float *dx, const int8_t *qx, const uint8_t *qw, const float *g,      \
                                const float *ga, int64_t M, int64_t K, int64_t O, int nthreads) {    \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN)) \
    for (int64_t m = 0; m < M; m++) {                                                                \
        const uint8_t *a = (const uint8_t *)(qx + m * K);                                            \
        const float *gm = g + m * O;                                                                 \
        int64_t k0 = 0;                                                                              \
        for (; k0 + LC_GT_KC <= K; k0 += LC_GT_KC) {                                                 \
            int32_t row[LC_GT_KC];                                                                   \
            float acc[LC_GT_KC];                                                                     \
            for (int j = 0; j < LC_GT_KC; j++) { row[j] = (int32_t)a[k0 + j] << 8; acc[j] = 0.0f; }  \
            for (int64_t o = 0; o < O; o++) {                                                        \
                const float gv = gm[o];                                                              \
                const uint8_t *b = qw + o * K + k0;                                                  \
                for (int j = 0; j < LC_GT_KC; j++) acc[j] += gv * ga[row[j] | (int32_t)b[j]];        \
            }                                                                                        \
            for (int j = 0; j < LC_GT_KC; j++) dx[m * K + k0 + j] = acc[j];                          \
        }                                                                                            \
        for (; k0 < K; k0++) {                                                                       \
            const int32_t r = (int32_t)a[k0] << 8;                                                   \
            float acc = 0.0f;                                                                        \
            for (int64_t o = 0; o < O; o++) acc += gm[o] * ga[r | (int32_t)qw[o * K + k0]];          \
            dx[m * K + k0] = acc;                                                                    \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
static ATTR void lc_gt_dw_##SUF(float *s, const int8_t *qx, const uint8_t *qw, const float *dy,      \
                                const float *gbt, int64_t M, int64_t K, int64_t O, int nthreads) {   \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN)) \
    for (int64_t o = 0; o < O; o++) {                                                                \
        const uint8_t *b = qw + o * K;                                                               \
        int64_t k0 = 0;                                                                              \
        for (; k0 + LC_GT_KC <= K; k0 += LC_GT_KC) {                                                 \
            int32_t row[LC_GT_KC];                                                                   \
            float acc[LC_GT_KC];                                                                     \
            for (int j = 0; j < LC_GT_KC; j++) { row[j] = (int32_t)b[k0 + j] << 8; acc[j] = 0.0f; }  \
            for (int64_t m = 0; m < M; m++) {                                                        \
                const float dv = dy[m * O + o];                                                      \
                const uint8_t *a = (const uint8_t *)(qx + m * K + k0);                               \
                for (int j = 0; j < LC_GT_KC; j++) acc[j] += dv * gbt[row[j] | (int32_t)a[j]];       \
            }                                                                                        \
            for (int j = 0; j < LC_GT_KC; j++) s[o * K + k0 + j] = acc[j];                           \
        }                                                                                            \
        for (; k0 < K; k0++) {                                                                       \
            const int32_t r = (int32_t)b[k0] << 8;                                                   \
            float acc = 0.0f;                                                                        \
            for (int64_t m = 0; m < M; m++)                                                          \
                acc += dy[m * O + o] * gbt[r | (int32_t)(uint8_t)qx[m * K + k0]];                    \
            s[o * K + k0] = acc;                                                                     \
        }                                                                                            \
    }                                                                                                \
}

LC_GT_BODIES(generic, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#define LC_GT_X86 1
#include <immintrin.h>

/* The x86 bodies: the generic loops with the lanes of a block (16 for AVX-512, 8 for AVX2)
 * as one vector and the lookups as hardware gathers; mul then add, in the generic body's
 * order (the same bits).  which 0: rows r = m (fixed codes a), inner i = o (codes b);
 * which 1: rows r = o (fixed codes b), inner i = m (codes a), the table transposed. */
#define LC_GT_SCALAR_TAIL                                                                              \
        for (; k0 < K; k0++) {                                                                          \
            const int32_t rr = (int32_t)f[k0] << 8;                                                     \
            float acc = 0.0f;                                                                           \
            for (int64_t i = 0; i < I; i++)                                                             \
                acc += (which ? w[i * O + r] : w[r * O + i]) * t[rr | (int32_t)var[i * K + k0]];        \
            out[r * K + k0] = acc;                                                                      \
        }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
static void lc_gt_pass_avx512(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
                              const float *t, int64_t M, int64_t K, int64_t O, int nthreads) {
    const int64_t R = which ? O : M, I = which ? M : O;
    const uint8_t *fix = which ? qw : (const uint8_t *)qx;
    const uint8_t *var = which ? (const uint8_t *)qx : qw;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN))
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *f = fix + r * K;
        int64_t k0 = 0;
        for (; k0 + 32 <= K; k0 += 32) {
            __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
            const __m512i r0 = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(f + k0))), 8);
            const __m512i r1 = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(f + k0 + 16))), 8);
            for (int64_t i = 0; i < I; i++) {
                const __m512 s = _mm512_set1_ps(which ? w[i * O + r] : w[r * O + i]);
                const uint8_t *v = var + i * K + k0;
                const __m512i i0 = _mm512_or_si512(r0, _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)v)));
                const __m512i i1 = _mm512_or_si512(r1, _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(v + 16))));
                acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(s, _mm512_i32gather_ps(i0, t, 4)));
                acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(s, _mm512_i32gather_ps(i1, t, 4)));
            }
            _mm512_storeu_ps(out + r * K + k0, acc0);
            _mm512_storeu_ps(out + r * K + k0 + 16, acc1);
        }
        for (; k0 + 16 <= K; k0 += 16) {
            __m512 acc0 = _mm512_setzero_ps();
            const __m512i r0 = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(f + k0))), 8);
            for (int64_t i = 0; i < I; i++) {
                const __m512 s = _mm512_set1_ps(which ? w[i * O + r] : w[r * O + i]);
                const __m512i i0 = _mm512_or_si512(r0, _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(var + i * K + k0))));
                acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(s, _mm512_i32gather_ps(i0, t, 4)));
            }
            _mm512_storeu_ps(out + r * K + k0, acc0);
        }
        LC_GT_SCALAR_TAIL
    }
}

__attribute__((target("avx2,fma")))
static void lc_gt_pass_avx2(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
                            const float *t, int64_t M, int64_t K, int64_t O, int nthreads) {
    const int64_t R = which ? O : M, I = which ? M : O;
    const uint8_t *fix = which ? qw : (const uint8_t *)qx;
    const uint8_t *var = which ? (const uint8_t *)qx : qw;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN))
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *f = fix + r * K;
        int64_t k0 = 0;
        for (; k0 + 16 <= K; k0 += 16) {
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
            const __m256i r0 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0))), 8);
            const __m256i r1 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0 + 8))), 8);
            for (int64_t i = 0; i < I; i++) {
                const __m256 s = _mm256_set1_ps(which ? w[i * O + r] : w[r * O + i]);
                const uint8_t *v = var + i * K + k0;
                const __m256i i0 = _mm256_or_si256(r0, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)v)));
                const __m256i i1 = _mm256_or_si256(r1, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(v + 8))));
                acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i0, 4)));
                acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i1, 4)));
            }
            _mm256_storeu_ps(out + r * K + k0, acc0);
            _mm256_storeu_ps(out + r * K + k0 + 8, acc1);
        }
        for (; k0 + 8 <= K; k0 += 8) {
            __m256 acc0 = _mm256_setzero_ps();
            const __m256i r0 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0))), 8);
            for (int64_t i = 0; i < I; i++) {
                const __m256 s = _mm256_set1_ps(which ? w[i * O + r] : w[r * O + i]);
                const __m256i i0 = _mm256_or_si256(r0, _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(var + i * K + k0))));
                acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i0, 4)));
            }
            _mm256_storeu_ps(out + r * K + k0, acc0);
        }
        LC_GT_SCALAR_TAIL
    }
}
#else
#define LC_GT_X86 0
#endif

/* which: 0 = dx (table Ga, weights g), 1 = s (table GbT, weights dy); isa as common.h */
static void lc_gt(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
                  const float *table, int64_t M, int64_t K, int64_t O, int isa, int nthreads) {
#if LC_GT_X86
    const int lvl = isa & 3;
    if (lvl >= LC_ISA_AVX512) { lc_gt_pass_avx512(which, out, qx, qw, w, table, M, K, O, nthreads); return; }
    if (lvl >= LC_ISA_AVX2) { lc_gt_pass_avx2(which, out, qx, qw, w, table, M, K, O, nthreads); return; }
#else
    (void)isa;
#endif
    if (which) lc_gt_dw_generic(out, qx, qw, w, table, M, K, O, nthreads);
    else lc_gt_dx_generic(out, qx, qw, w, table, M, K, O, nthreads);
}

#endif
