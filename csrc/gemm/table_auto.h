/* csrc/gemm/table_auto.h — the any-table drivers' orientation: the transposes and the _auto entry points.
 * Part of the gemm family (gemm.h includes every part; a part includes the parts it uses). */
#ifndef LUTCORE_GEMM_TABLE_AUTO_H
#define LUTCORE_GEMM_TABLE_AUTO_H

#include "gemm/table.h"

/* ------------------------------------------------------ any-table drivers: orientation */

/* Whether an (M, N) product runs as its transpose, B^T A^T through the swapped table
 * (the same integer products and sums, and the same scale products, so the same
 * bits): the kernels build a row table per k and column block of the right operand
 * and reuse it for every left row, so the longer side belongs in the rows, unless
 * it is short enough for direct lookups. */
static inline int lc_table_transposed(int64_t M, int64_t N) {
    return N > M && M >= LC_TABLE_DIRECT_M;
}

/* int32 words the kernels (lc_gemm_table / lc_qmatmul_table) need for an (M, N) product. */
static inline size_t lc_table_kernel_work(int64_t M, int64_t N, int nthreads, int with_float) {
    int64_t nrc, rows_per;
    return lc_table_layout(M, N, nthreads, with_float, &nrc, &rows_per) * (size_t)nthreads;
}

/* int32 words lc_gemm_table_auto (nblk 0) / lc_qmatmul_table_auto need: the kernel's,
 * and when transposed the transposed operands (int8), scales and result. */
static inline size_t lc_table_auto_work(int64_t M, int64_t N, int64_t K, int64_t nblk, int nthreads,
                                        int with_float) {
    if (!lc_table_transposed(M, N))
        return lc_table_kernel_work(M, N, nthreads, with_float);
    size_t bytes = (size_t)N * K + (size_t)K * M;
    return lc_table_kernel_work(N, M, nthreads, with_float) + (size_t)N * M + (size_t)nblk * (N + M) +
           (bytes + 3) / 4;
}

/* An 8 x 8 block of bytes transposed in eight 64-bit words (row i's 8 bytes a little-endian
 * word: byte j = column j): 2 x 2 blocks of bytes, then of 16-bit pairs, then of 32-bit
 * quads swapped across the diagonal; then word i is column i. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ || \
    defined(_M_X64) || defined(_M_IX86) || defined(_M_ARM64)
#define LC_TRANSPOSE_SWAR 1
static inline void lc_transpose_8x8_i8(int8_t *dst, int64_t ldd, const int8_t *src, int64_t lds) {
    uint64_t x[8], t;
    for (int i = 0; i < 8; i++) memcpy(&x[i], src + i * lds, 8);
    for (int i = 0; i < 8; i += 2) {
        t = ((x[i] >> 8) ^ x[i + 1]) & UINT64_C(0x00FF00FF00FF00FF);
        x[i + 1] ^= t;
        x[i] ^= t << 8;
    }
    for (int h = 0; h < 8; h += 4)
        for (int i = h; i < h + 2; i++) {
            t = ((x[i] >> 16) ^ x[i + 2]) & UINT64_C(0x0000FFFF0000FFFF);
            x[i + 2] ^= t;
            x[i] ^= t << 16;
        }
    for (int i = 0; i < 4; i++) {
        t = ((x[i] >> 32) ^ x[i + 4]) & UINT64_C(0x00000000FFFFFFFF);
        x[i + 4] ^= t;
        x[i] ^= t << 32;
    }
    for (int i = 0; i < 8; i++) memcpy(dst + i * ldd, &x[i], 8);
}
#else
#define LC_TRANSPOSE_SWAR 0
static inline void lc_transpose_8x8_i8(int8_t *dst, int64_t ldd, const int8_t *src, int64_t lds) {
    for (int c = 0; c < 8; c++)
        for (int r = 0; r < 8; r++) dst[c * ldd + r] = src[r * lds + c];
}
#endif

/* dst (cols, rows; row stride ldd) = src (rows, cols; row stride lds), for 1- and
 * 4-byte elements, in 32 x 32 tiles (bytes: a whole tile in 8 x 8 blocks of words), ranges
 * of at least LC_TRANSPOSE_GRAIN tiles shared out over the threads (a copy: no bits to lose;
 * a small transpose runs on the caller alone). */
#define LC_TRANSPOSE_GRAIN 16
typedef struct { void *dst; const void *src; int64_t ldd, rows, cols, lds, ct; } lc_transpose_job;
#define LC_TRANSPOSE_DEF(NAME, T, BYTES)                                                     \
    static void NAME##_range(void *p, int64_t t0, int64_t t1, int tid) {                     \
        const lc_transpose_job *j = (const lc_transpose_job *)p;                             \
        T *dst = (T *)j->dst;                                                                \
        const T *src = (const T *)j->src;                                                    \
        const int64_t rows = j->rows, cols = j->cols, ldd = j->ldd, lds = j->lds, ct = j->ct; \
        (void)tid;                                                                           \
        for (int64_t t = t0; t < t1; t++) {                                                  \
            int64_t r0 = (t / ct) * 32, c0 = (t % ct) * 32;                                  \
            int64_t r1 = r0 + 32 < rows ? r0 + 32 : rows, c1 = c0 + 32 < cols ? c0 + 32 : cols; \
            if (BYTES && r1 - r0 == 32 && c1 - c0 == 32) {                                   \
                for (int64_t rb = r0; rb < r1; rb += 8)                                      \
                    for (int64_t cb = c0; cb < c1; cb += 8)                                  \
                        lc_transpose_8x8_i8((int8_t *)(dst + cb * ldd + rb), ldd,            \
                                            (const int8_t *)(src + rb * lds + cb), lds);     \
                continue;                                                                    \
            }                                                                                \
            for (int64_t c = c0; c < c1; c++)                                                \
                for (int64_t r = r0; r < r1; r++) dst[c * ldd + r] = src[r * lds + c];       \
        }                                                                                    \
    }                                                                                        \
    static void NAME(T *dst, int64_t ldd, const T *src, int64_t rows, int64_t cols, int64_t lds,    \
                     int nthreads) {                                                         \
        int64_t rt = (rows + 31) / 32, ct = (cols + 31) / 32;                                \
        lc_transpose_job j = {dst, src, ldd, rows, cols, lds, ct};                           \
        lc_team_range(nthreads, rt * ct, LC_TRANSPOSE_GRAIN, NAME##_range, &j);              \
    }
LC_TRANSPOSE_DEF(lc_transpose_i8, int8_t, LC_TRANSPOSE_SWAR)
LC_TRANSPOSE_DEF(lc_transpose_u32, uint32_t, 0)
#undef LC_TRANSPOSE_DEF

/* C (M,N) int32 = A (M,K) B (K,N) through the table (T[a*256+b] = mul(a,b), Tt its
 * transpose), run as C^T = B^T A^T with the tables swapped where lc_table_transposed
 * says so.  work: lc_table_auto_work(M, N, K, 0, nthreads, 0) words. */
static void lc_gemm_table_auto(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                               int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N,
                               int64_t K, int32_t *work, int isa, int nthreads) {
    if (!lc_table_transposed(M, N)) {
        lc_gemm_table(C, ldc, A, lda, B, ldb, T, Tt, M, N, K, work, isa, nthreads);
        return;
    }
    int32_t *ct = work + lc_table_kernel_work(N, M, nthreads, 0);      /* (N, M) */
    int8_t *bt = (int8_t *)(ct + N * M), *at = bt + N * K;             /* (N, K), (K, M) */
    lc_transpose_i8(bt, K, B, K, N, ldb, nthreads);
    lc_transpose_i8(at, M, A, M, K, lda, nthreads);
    lc_gemm_table(ct, M, bt, K, at, M, Tt, T, N, M, K, work, isa, nthreads);
    lc_transpose_u32((uint32_t *)C, ldc, (const uint32_t *)ct, N, M, M, nthreads);
}

/* Y (M,N) float32 = the block-scaled product through the table (as lc_qmatmul_table),
 * run transposed where lc_table_transposed says so: Y^T from (qb^T, sb^T) and
 * (qa^T, sa^T) with the tables swapped (sa sb = sb sa: the same bits).
 * work: lc_table_auto_work(M, N, nblk*bk, nblk, nthreads, 1) words. */
static void lc_qmatmul_table_auto(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                                  const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N,
                                  int64_t nblk, int64_t bk, int32_t *work, int isa, int nthreads) {
    if (!lc_table_transposed(M, N)) {
        lc_qmatmul_table(Y, ldy, qa, sa, qb, sb, T, Tt, M, N, nblk, bk, work, isa, nthreads);
        return;
    }
    int64_t Kq = nblk * bk;
    float *yt = (float *)(work + lc_table_kernel_work(N, M, nthreads, 1));      /* (N, M) */
    float *sbt = yt + N * M, *sat = sbt + N * nblk;                             /* (N, nblk), (nblk, M) */
    int8_t *bt = (int8_t *)(sat + nblk * M), *at = bt + N * Kq;                /* (N, Kq), (Kq, M) */
    lc_transpose_i8(bt, Kq, qb, Kq, N, N, nthreads);
    lc_transpose_i8(at, M, qa, M, Kq, Kq, nthreads);
    lc_transpose_u32((uint32_t *)sbt, nblk, (const uint32_t *)sb, nblk, N, N, nthreads);
    lc_transpose_u32((uint32_t *)sat, M, (const uint32_t *)sa, M, nblk, nblk, nthreads);
    lc_qmatmul_table(yt, M, bt, sbt, at, sat, Tt, T, N, M, nblk, bk, work, isa, nthreads);
    lc_transpose_u32((uint32_t *)Y, ldy, (const uint32_t *)yt, N, M, M, nthreads);
}


#endif /* LUTCORE_GEMM_TABLE_AUTO_H */
