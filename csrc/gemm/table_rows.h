/* csrc/gemm/table_rows.h — the any-table path's kernels here (generic and AVX2): the row tables
 * (or direct lookups for few rows) accumulating one column block, and the table in the wide x86
 * bodies' int16 forms.  Part of the gemm family: the body table (gemm/body.h) names them. */
#ifndef LUTCORE_GEMM_TABLE_ROWS_H
#define LUTCORE_GEMM_TABLE_ROWS_H

#include "core/common.h"

#define LC_TABLE_NB 32      /* output columns per row-table block (a multiple of 16: the AVX2 int16 rows) */
#define LC_TABLE_KB 4       /* k values per row-table batch */
#define LC_TABLE_DIRECT_M 48
#define LC_TABLE_WNB 256    /* columns per x86 table_unit (each loaded table row serves them all) */

/* ------------------------------------------------------ any-table path */

/* The table twice as int32, a and b as unsigned bytes: T[a*256+b] = mul(a,b) and
 * Tt[b*256+a] = mul(a,b) (rows of T by a, of Tt by b); passing them swapped
 * multiplies with the operands swapped.  Work: per thread LC_TABLE_KB*256*LC_TABLE_NB int32
 * for the row tables plus M*LC_TABLE_NB int32 accumulators.
 *
 * Computes acc[m][c] += sum_{k in [k0,k1)} mul(A[m,k], B[k, n0+c]) for c < nc. */
static inline __attribute__((always_inline)) void
lc_table_accum(int32_t *acc /* [M][NB] */, int32_t *Pbuf, const int8_t *A, int64_t lda,
               const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t n0, int nc,
               int64_t k0, int64_t k1) {
    if (M < LC_TABLE_DIRECT_M) {
        for (int64_t m = 0; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            for (int64_t k = k0; k < k1; k++) {
                const int32_t *row = T + (int64_t)(uint8_t)A[m * lda + k] * 256;
                const uint8_t *bk = (const uint8_t *)(B + k * ldb + n0);
                for (int c = 0; c < nc; c++) am[c] += row[bk[c]];
            }
        }
        return;
    }
    for (int64_t kb = k0; kb < k1; kb += LC_TABLE_KB) {
        int kn = (int)(k1 - kb < LC_TABLE_KB ? k1 - kb : LC_TABLE_KB);
        /* P[j][a][c] = mul(a, B[kb+j, n0+c]): columns of the table, transposed */
        for (int j = 0; j < kn; j++) {
            const uint8_t *bk = (const uint8_t *)(B + (kb + j) * ldb + n0);
            int32_t *P = Pbuf + (int64_t)j * 256 * LC_TABLE_NB;
            const int32_t *src[LC_TABLE_NB];
            for (int c = 0; c < LC_TABLE_NB; c++) src[c] = Tt + (int64_t)(c < nc ? bk[c] : 0) * 256;
            for (int a = 0; a < 256; a += 8)
                for (int c = 0; c < LC_TABLE_NB; c++)
                    for (int i = 0; i < 8; i++) P[(a + i) * LC_TABLE_NB + c] = src[c][a + i];
        }
        for (int64_t m = 0; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            const uint8_t *ar = (const uint8_t *)(A + m * lda + kb);
            for (int j = 0; j < kn; j++) {
                const int32_t *prow = Pbuf + (int64_t)j * 256 * LC_TABLE_NB + (int64_t)ar[j] * LC_TABLE_NB;
                for (int c = 0; c < LC_TABLE_NB; c++) am[c] += prow[c];
            }
        }
    }
}

static void lc_table_accum_generic(int32_t *acc, int32_t *Pbuf, const int8_t *A, int64_t lda,
                                   const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M,
                                   int64_t n0, int nc, int64_t k0, int64_t k1) {
    lc_table_accum(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1);
}
#if LC_X86
/* 8x8 int32 transpose: r[i] holds row i; on return r[i] holds column i. */
LC_TARGET_AVX2 static inline void lc_transpose8_epi32(__m256i r[8]) {
    __m256 t0 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[0], r[1]));
    __m256 t1 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[0], r[1]));
    __m256 t2 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[2], r[3]));
    __m256 t3 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[2], r[3]));
    __m256 t4 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[4], r[5]));
    __m256 t5 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[4], r[5]));
    __m256 t6 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[6], r[7]));
    __m256 t7 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[6], r[7]));
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_castps_si256(_mm256_permute2f128_ps(s0, s4, 0x20));
    r[1] = _mm256_castps_si256(_mm256_permute2f128_ps(s1, s5, 0x20));
    r[2] = _mm256_castps_si256(_mm256_permute2f128_ps(s2, s6, 0x20));
    r[3] = _mm256_castps_si256(_mm256_permute2f128_ps(s3, s7, 0x20));
    r[4] = _mm256_castps_si256(_mm256_permute2f128_ps(s0, s4, 0x31));
    r[5] = _mm256_castps_si256(_mm256_permute2f128_ps(s1, s5, 0x31));
    r[6] = _mm256_castps_si256(_mm256_permute2f128_ps(s2, s6, 0x31));
    r[7] = _mm256_castps_si256(_mm256_permute2f128_ps(s3, s7, 0x31));
}

LC_TARGET_AVX2 static void lc_table_accum_avx2(int32_t *acc, int32_t *Pbuf, const int8_t *A, int64_t lda,
                                               const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt,
                                               int64_t M, int64_t n0, int nc, int64_t k0, int64_t k1) {
    if (M < LC_TABLE_DIRECT_M) {
        lc_table_accum(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1);
        return;
    }
    /* The row tables as int16 (a mul8 product is an int16, docs/DESIGN.md): half the bytes
     * of int32 rows, so twice as many stay close; each row is widened as it is added. */
    int16_t *P16 = (int16_t *)Pbuf;
    for (int64_t kb = k0; kb < k1; kb += LC_TABLE_KB) {
        int kn = (int)(k1 - kb < LC_TABLE_KB ? k1 - kb : LC_TABLE_KB);
        for (int j = 0; j < kn; j++) {
            const uint8_t *bk = (const uint8_t *)(B + (kb + j) * ldb + n0);
            int16_t *P = P16 + (int64_t)j * 256 * LC_TABLE_NB;
            const int32_t *src[LC_TABLE_NB];
            for (int c = 0; c < LC_TABLE_NB; c++) src[c] = Tt + (int64_t)(c < nc ? bk[c] : 0) * 256;
            for (int a0 = 0; a0 < 256; a0 += 8) {
                for (int cg = 0; cg < LC_TABLE_NB; cg += 16) {     /* two groups of 8 columns */
                    __m256i r[8], q[8];
                    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(src[cg + i] + a0));
                    for (int i = 0; i < 8; i++) q[i] = _mm256_loadu_si256((const __m256i *)(src[cg + 8 + i] + a0));
                    lc_transpose8_epi32(r);
                    lc_transpose8_epi32(q);
                    for (int i = 0; i < 8; i++)   /* columns cg..cg+15 of row a0+i, in order */
                        _mm256_storeu_si256((__m256i *)(P + (a0 + i) * LC_TABLE_NB + cg),
                                            _mm256_permute4x64_epi64(_mm256_packs_epi32(r[i], q[i]), 0xD8));
                }
            }
        }
#define LC_ROW16(p, o) _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)((p) + (o))))
        int64_t m = 0;
        for (; m + 2 <= M; m += 2) {
            int32_t *a0p = acc + m * LC_TABLE_NB, *a1p = a0p + LC_TABLE_NB;
            __m256i x0 = _mm256_loadu_si256((const __m256i *)(a0p + 0));
            __m256i x1 = _mm256_loadu_si256((const __m256i *)(a0p + 8));
            __m256i x2 = _mm256_loadu_si256((const __m256i *)(a0p + 16));
            __m256i x3 = _mm256_loadu_si256((const __m256i *)(a0p + 24));
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(a1p + 0));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(a1p + 8));
            __m256i y2 = _mm256_loadu_si256((const __m256i *)(a1p + 16));
            __m256i y3 = _mm256_loadu_si256((const __m256i *)(a1p + 24));
            const uint8_t *ar0 = (const uint8_t *)(A + m * lda + kb), *ar1 = ar0 + lda;
            for (int j = 0; j < kn; j++) {
                const int16_t *Pj = P16 + (int64_t)j * 256 * LC_TABLE_NB;
                const int16_t *p = Pj + (int64_t)ar0[j] * LC_TABLE_NB, *q = Pj + (int64_t)ar1[j] * LC_TABLE_NB;
                x0 = _mm256_add_epi32(x0, LC_ROW16(p, 0));
                x1 = _mm256_add_epi32(x1, LC_ROW16(p, 8));
                x2 = _mm256_add_epi32(x2, LC_ROW16(p, 16));
                x3 = _mm256_add_epi32(x3, LC_ROW16(p, 24));
                y0 = _mm256_add_epi32(y0, LC_ROW16(q, 0));
                y1 = _mm256_add_epi32(y1, LC_ROW16(q, 8));
                y2 = _mm256_add_epi32(y2, LC_ROW16(q, 16));
                y3 = _mm256_add_epi32(y3, LC_ROW16(q, 24));
            }
            _mm256_storeu_si256((__m256i *)(a0p + 0), x0);
            _mm256_storeu_si256((__m256i *)(a0p + 8), x1);
            _mm256_storeu_si256((__m256i *)(a0p + 16), x2);
            _mm256_storeu_si256((__m256i *)(a0p + 24), x3);
            _mm256_storeu_si256((__m256i *)(a1p + 0), y0);
            _mm256_storeu_si256((__m256i *)(a1p + 8), y1);
            _mm256_storeu_si256((__m256i *)(a1p + 16), y2);
            _mm256_storeu_si256((__m256i *)(a1p + 24), y3);
        }
        for (; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            const uint8_t *ar = (const uint8_t *)(A + m * lda + kb);
            for (int j = 0; j < kn; j++) {
                const int16_t *prow = P16 + (int64_t)j * 256 * LC_TABLE_NB + (int64_t)ar[j] * LC_TABLE_NB;
                for (int c = 0; c < LC_TABLE_NB; c += 8)
                    _mm256_storeu_si256((__m256i *)(am + c),
                                        _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(am + c)), LC_ROW16(prow, c)));
            }
        }
#undef LC_ROW16
    }
}
#endif

/* Rows [a0, a1) of the table in Pbuf (65536 int16: exactly the row tables' LC_TABLE_KB * 256 * LC_TABLE_NB
 * int32 words) = T, each entry an int16 product (docs/DESIGN.md's mul8 contract): as int16
 * rows (planes 0), or each row as its 256 low bytes then its 256 high bytes XOR 0x80
 * (the high byte + 128 as unsigned: planes 1, the VBMI body's form). */
_Static_assert(LC_TABLE_KB * 256 * LC_TABLE_NB * 2 >= 65536, "Pbuf holds the int16 table");
static inline void lc_table16_rows(int32_t *Pbuf, const int32_t *T, int planes, int a0, int a1) {
    int16_t *d = (int16_t *)Pbuf;
    uint8_t *p = (uint8_t *)Pbuf;
    for (int a = a0; a < a1; a++) {
        const int32_t *t = T + a * 256;
        if (planes) {
            uint8_t *lo = p + a * 512, *hi = lo + 256;
            for (int b = 0; b < 256; b++) {
                lo[b] = (uint8_t)t[b];
                hi[b] = (uint8_t)(((uint16_t)(int16_t)t[b] >> 8) ^ 0x80u);
            }
        } else {
            for (int b = 0; b < 256; b++) d[a * 256 + b] = (int16_t)t[b];
        }
    }
}

#endif /* LUTCORE_GEMM_TABLE_ROWS_H */
