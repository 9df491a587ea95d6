/* csrc/q8/q8.h — the Q8 block quantizer: the one scalar code (lc_q8_code), max |x|, and the
 * row / column block quantizers (generic and AVX2, same bits).  Included by the gemm family,
 * im2col and the decode layer; depends on csrc/core only.
 */
#ifndef LUTCORE_Q8_H
#define LUTCORE_Q8_H

#include "core/common.h"
#include "core/dispatch.h"
#include <math.h>
#include <float.h>

/* ------------------------------------------------------ quantization */

/* The Q8 code of x at scale sc: x / sc rounded half to even, clamped to +-127; 0 for
 * a zero scale (an all-zero block). */
static inline int8_t lc_q8_code(float x, float sc) {
    float v = sc != 0.0f ? nearbyintf(x / sc) : 0.0f;
    return (int8_t)(v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v));
}

/* max |x[i]| over n floats (NaN and inf count into *bad, not into the max). */
static inline float lc_absmax_generic(const float *x, int64_t n, int64_t *bad) {
    float m = 0.0f;
    int64_t nf = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        nf += !(a <= FLT_MAX);
        m = a > m ? a : m;
    }
    *bad += nf;
    return m;
}

/* One Q8 block of a row: returns the count of non-finite values. */
static inline int64_t lc_q8_block_generic(int8_t *q, float *s, const float *x, int64_t len, int64_t bk) {
    int64_t nf = 0;
    float amax = lc_absmax_generic(x, len, &nf);
    float sc = amax / 127.0f;
    *s = sc;
    for (int64_t k = 0; k < len; k++) q[k] = lc_q8_code(x[k], sc);
    for (int64_t k = len; k < bk; k++) q[k] = 0;
    return nf;
}

#if LC_X86
/* Same bits as the generic block: IEEE division, round-half-even, clamp. */
LC_TARGET_AVX2 static int64_t lc_q8_block_avx2(int8_t *q, float *s, const float *x, int64_t len, int64_t bk) {
    if (len != bk || (bk & 7)) return lc_q8_block_generic(q, s, x, len, bk);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    __m256 m = _mm256_setzero_ps();
    int bad = 0;
    for (int64_t k = 0; k < bk; k += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k), absmask);
        bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));
        m = _mm256_max_ps(m, a);
    }
    if (bad) return lc_q8_block_generic(q, s, x, len, bk);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float sc = _mm_cvtss_f32(h) / 127.0f;
    *s = sc;
    if (sc == 0.0f) { memset(q, 0, (size_t)bk); return 0; }
    const __m256 vs = _mm256_set1_ps(sc), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (int64_t k = 0; k < bk; k += 8) {
        __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), vs),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        __m256i i32 = _mm256_cvtps_epi32(v);
        __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(i16, i16));
    }
    return 0;
}
#endif

/* Columns [c0, c1) of block rows [k0, k0 + bk) (rows past k1 = K's end are zero):
 * the scales, then the codes.  Returns the count of non-finite values. */
static int64_t lc_q8_cols_generic(int8_t *q, float *s, const float *x, int64_t ldx, int64_t N, int64_t k0,
                                  int64_t k1, int64_t bk, int64_t c0, int64_t c1) {
    float amax[256];
    int64_t nf = 0;
    for (int64_t c = c0; c < c1; c++) amax[c - c0] = 0.0f;
    for (int64_t k = k0; k < k1; k++)
        for (int64_t c = c0; c < c1; c++) {
            float a = fabsf(x[k * ldx + c]);
            nf += !(a <= FLT_MAX);
            amax[c - c0] = a > amax[c - c0] ? a : amax[c - c0];
        }
    for (int64_t c = c0; c < c1; c++) {
        amax[c - c0] = amax[c - c0] / 127.0f;
        s[c] = amax[c - c0];
    }
    for (int64_t k = k0; k < k0 + bk; k++)
        for (int64_t c = c0; c < c1; c++) q[k * N + c] = k < k1 ? lc_q8_code(x[k * ldx + c], amax[c - c0]) : 0;
    return nf;
}
#if LC_X86
/* The same, eight columns at a time (c1 - c0 a multiple of 8): max as the scalar's
 * "a > m ? a : m" (vmaxps returns its second operand on NaN), one division and one
 * round-to-nearest-even per value; non-finite input only counts (the caller raises). */
LC_TARGET_AVX2 static int64_t lc_q8_cols_avx2(int8_t *q, float *s, const float *x, int64_t ldx, int64_t N,
                                             int64_t k0, int64_t k1, int64_t bk, int64_t c0, int64_t c1) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f), zero = _mm256_setzero_ps();
    const __m256i lanes = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t nf = 0;
    for (int64_t c = c0; c < c1; c += 8) {
        __m256 m = zero;
        for (int64_t k = k0; k < k1; k++) {
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k * ldx + c), absmask);
            nf += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ)));
            m = _mm256_max_ps(a, m);
        }
        __m256 sc = _mm256_div_ps(m, hi), live = _mm256_cmp_ps(sc, zero, _CMP_NEQ_OQ);
        _mm256_storeu_ps(s + c, sc);
        for (int64_t k = k0; k < k0 + bk; k++) {
            __m256 v = zero;
            if (k < k1) {
                v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k * ldx + c), sc),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v = _mm256_and_ps(v, live);
            }
            v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
            __m256i i16 = _mm256_packs_epi32(_mm256_cvtps_epi32(v), _mm256_setzero_si256());
            __m256i i8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16, _mm256_setzero_si256()), lanes);
            _mm_storel_epi64((__m128i *)(q + k * N + c), _mm256_castsi256_si128(i8));
        }
    }
    return nf;
}
#endif

/* ------------------------------------------------------------ the body table
 * (no bodies of other translation units: generic and AVX2, here) */
typedef struct {
    lc_body_head head;
    int64_t (*block)(int8_t *, float *, const float *, int64_t, int64_t);     /* one block of a row */
    /* columns [c0, c1) of a block row, c1 - c0 a multiple of 8 (NULL: the generic loop takes all) */
    int64_t (*cols8)(int8_t *, float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
} lc_q8_body;
static const lc_q8_body lc_q8_bodies[] = {
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_q8_block_avx2, lc_q8_cols_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_q8_block_generic, NULL},
};
LC_BODY_TABLE(lc_q8_body, lc_q8, lc_q8_bodies)   /* lc_q8_pick(isa), lc_q8_body_name(isa) */

/* Q8 along contiguous rows: x (R, K) -> q (R, nblk*bk), s (R, nblk).
 * Returns the number of non-finite inputs seen (0 = ok). */
static int64_t lc_quantize_row(int8_t *qr, float *sr, const float *xr, int64_t K, int64_t bk, int64_t nblk,
                               int isa) {
    const lc_q8_body *B = lc_q8_pick(isa);
    int64_t bad = 0;
    for (int64_t b = 0; b < nblk; b++) {
        int64_t k0 = b * bk, len = K - k0 < bk ? (K - k0 > 0 ? K - k0 : 0) : bk;
        bad += B->block(qr + k0, sr + b, xr + k0, len, bk);
    }
    return bad;
}
/* Rows (and column blocks) are quantized independently, each into its own bytes: ranges of
 * them on the team, at least ~LC_Q8_GRAIN inputs a range; the non-finite count is an integer
 * sum, added per range (__atomic_add_fetch: the same total in any order). */
#define LC_Q8_GRAIN ((int64_t)1 << 14)
typedef struct {
    int8_t *q;
    float *s;
    const float *x;
    int64_t R, K, N, ldx, bk, nblk, ncb;
    int isa;
    int64_t bad;
} lc_q8_job;

static void lc_quantize_rows_range(void *p, int64_t r0, int64_t r1, int tid) {
    lc_q8_job *j = (lc_q8_job *)p;
    int64_t bad = 0;
    (void)tid;
    for (int64_t r = r0; r < r1; r++)
        bad += lc_quantize_row(j->q + r * j->nblk * j->bk, j->s + r * j->nblk, j->x + r * j->ldx, j->K, j->bk,
                               j->nblk, j->isa);
    if (bad) __atomic_add_fetch(&j->bad, bad, __ATOMIC_RELAXED);
}

static int64_t lc_quantize_rows(int8_t *q, float *s, const float *x, int64_t R, int64_t K, int64_t ldx,
                                int64_t bk, int64_t nblk, int isa, int nthreads) {
    lc_q8_job j = {.q = q, .s = s, .x = x, .R = R, .K = K, .ldx = ldx, .bk = bk, .nblk = nblk, .isa = isa, .bad = 0};
    int64_t row = nblk * bk;
    lc_team_range(nthreads, R, LC_Q8_GRAIN / (row > 0 ? row : 1) + 1, lc_quantize_rows_range, &j);
    return __atomic_load_n(&j.bad, __ATOMIC_ACQUIRE);
}

#define LC_Q8_CB 256   /* columns a unit of lc_quantize_cols */

static void lc_quantize_cols_range(void *p, int64_t u0, int64_t u1, int tid) {
    lc_q8_job *j = (lc_q8_job *)p;
    const lc_q8_body *B = lc_q8_pick(j->isa);
    const int64_t ncb = j->ncb, N = j->N, K = j->K, bk = j->bk, ldx = j->ldx;
    int64_t bad = 0;
    (void)tid;
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / ncb, c0 = (u % ncb) * LC_Q8_CB, c1 = c0 + LC_Q8_CB < N ? c0 + LC_Q8_CB : N;
        int64_t k0 = b * bk, k1 = k0 + bk < K ? k0 + bk : K;
        int64_t cv = c0;
        if (B->cols8) {
            cv = c0 + (c1 - c0) / 8 * 8;
            bad += B->cols8(j->q, j->s + b * N, j->x, ldx, N, k0, k1, bk, c0, cv);
        }
        bad += lc_q8_cols_generic(j->q, j->s + b * N, j->x, ldx, N, k0, k1, bk, cv, c1);
    }
    if (bad) __atomic_add_fetch(&j->bad, bad, __ATOMIC_RELAXED);
}

/* Q8 along the leading axis: x (K, N) (row stride ldx) -> q (nblk*bk, N), s (nblk, N). */
static int64_t lc_quantize_cols(int8_t *q, float *s, const float *x, int64_t K, int64_t N, int64_t ldx,
                                int64_t bk, int64_t nblk, int isa, int nthreads) {
    int64_t ncb = (N + LC_Q8_CB - 1) / LC_Q8_CB;
    lc_q8_job j = {.q = q, .s = s, .x = x, .K = K, .N = N, .ldx = ldx, .bk = bk, .nblk = nblk, .ncb = ncb,
                   .isa = isa, .bad = 0};
    int64_t unit = bk * LC_Q8_CB;
    lc_team_range(nthreads, nblk * ncb, LC_Q8_GRAIN / (unit > 0 ? unit : 1) + 1, lc_quantize_cols_range, &j);
    return __atomic_load_n(&j.bad, __ATOMIC_ACQUIRE);
}


#endif /* LUTCORE_Q8_H */
