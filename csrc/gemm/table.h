/* csrc/gemm/table.h — the any-table path's drivers: the row tables (gemm/table_rows.h) or the x86
 * bodies' wide units, per the table-path body table (gemm/body.h).
 * Part of the gemm family (gemm.h includes every part; a part includes the parts it uses). */
#ifndef LUTCORE_GEMM_TABLE_H
#define LUTCORE_GEMM_TABLE_H

#include "gemm/body.h"

/* Work units for the table path: (column block, row chunk).  Row chunks only
 * when there are too few column blocks to feed the threads (row tables are then
 * built once per chunk). */
static inline int64_t lc_table_row_chunks(int64_t M, int64_t ncb, int nthreads) {
    if (M < 2 * LC_TABLE_DIRECT_M || ncb >= 2 * nthreads) return 1;
    int64_t want = (2 * nthreads + ncb - 1) / ncb;
    int64_t maxc = M / LC_TABLE_DIRECT_M;
    return want < maxc ? want : (maxc > 0 ? maxc : 1);
}

/* The table kernels' layout for an (M, N) product on nthreads: nrc row chunks of
 * rows_per rows; per thread, LC_TABLE_KB row tables of 256 x LC_TABLE_NB, then
 * rows_per x LC_TABLE_NB int32 accumulators (and as many floats with with_float).
 * Returns the per-thread int32 words. */
static inline size_t lc_table_layout(int64_t M, int64_t N, int nthreads, int with_float, int64_t *nrc,
                                     int64_t *rows_per) {
    *nrc = lc_table_row_chunks(M, (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nthreads);
    *rows_per = (M + *nrc - 1) / *nrc;
    return (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB + (size_t)(with_float ? 2 : 1) * *rows_per * LC_TABLE_NB;
}

/* C[m, n0+c] = sum_{k0 <= k < k1} mul(A[m,k], B[k, n0+c]) (m < rows, c < nc <= LC_TABLE_WNB)
 * through xb's table_unit, or by direct lookups (the same sums) when its scratch
 * allocation fails. */
static void lc_table_unit_run(const lc_gemm_tbody *xb, int32_t *C, int64_t ldc, const int8_t *A, int64_t lda,
                              const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Pbuf, int64_t rows,
                              int64_t n0, int nc, int64_t k0, int64_t k1) {
    if (xb->table_unit(C, ldc, A, lda, B, ldb, (const int16_t *)Pbuf, rows, n0, nc, k0, k1) == 0) return;
    for (int64_t m = 0; m < rows; m++)
        for (int c = 0; c < nc; c++) {
            int32_t s = 0;
            for (int64_t k = k0; k < k1; k++)
                s += T[(int64_t)(uint8_t)A[m * lda + k] * 256 + (uint8_t)B[k * ldb + n0 + c]];
            C[m * ldc + c] = s;
        }
}

/* The wide drivers' units: (LC_TABLE_WNB columns, row chunk of at most LC_TABLE_WMR rows),
 * handed out dynamically (an atomic counter: schedule(dynamic, 1)), so a thread that is
 * preempted holds back at most one unit and the others take the rest.  Each unit is
 * computed whole by one table_unit call, and a table_unit's sums per output element do
 * not depend on the rows or columns beside it (exact integer sums, the float fold per
 * element in block order), so the bits do not depend on who takes which.  The chunking
 * depends on (M, N) only: at least LC_TABLE_WUNITS units where the rows allow (chunks of
 * at least LC_TABLE_WMR_MIN rows, each restaging B's indices for its K: K x 4 x 64 bytes
 * against rows x K x 256 products), at most LC_TABLE_WMR rows. */
#define LC_TABLE_WMR 32
#define LC_TABLE_WMR_MIN 8
#define LC_TABLE_WUNITS 8
static inline int64_t lc_table_wide_chunks(int64_t M, int64_t N, int64_t *rows_per) {
    int64_t ncb = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB;
    int64_t nrc = ncb >= LC_TABLE_WUNITS ? 1 : (LC_TABLE_WUNITS + ncb - 1) / ncb;
    int64_t rp = (M + nrc - 1) / nrc;
    if (rp < LC_TABLE_WMR_MIN) rp = LC_TABLE_WMR_MIN;
    if (rp > LC_TABLE_WMR) rp = LC_TABLE_WMR;
    if (rp > M) rp = M;
    if (rp < 1) rp = 1;
    *rows_per = rp;
    return (M + rp - 1) / rp;
}

/* The wide drivers' plan: units (LC_TABLE_WNB-column blocks x row chunks of *rows_per), their
 * row-chunk count *nrc, and *nthreads capped at the units (a thread with none would only join). */
static inline int64_t lc_table_wide_plan(int64_t M, int64_t N, int *nthreads, int64_t *nrc, int64_t *rows_per) {
    *nrc = lc_table_wide_chunks(M, N, rows_per);
    int64_t units = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB * *nrc;
    if (units < *nthreads) *nthreads = (int)units;
    return units;
}

/* Work unit u of the table drivers (nrc row chunks of rows_per rows per column block of nb):
 * rows [m0, m1) of column block n0 .. n0 + nc; 0 when the unit's row chunk is empty (M not a
 * multiple of the chunk). */
static inline int lc_table_unit(int64_t u, int64_t nrc, int64_t rows_per, int64_t M, int64_t N, int nb,
                                int64_t *m0, int64_t *m1, int64_t *n0, int *nc) {
    *m0 = (u % nrc) * rows_per;
    *m1 = *m0 + rows_per < M ? *m0 + rows_per : M;
    *n0 = (u / nrc) * nb;
    *nc = (int)(N - *n0 < nb ? N - *n0 : nb);
    return *m1 > *m0;
}

/* C (M,N) int32 through a body's table_unit; units as lc_table_wide_chunks.  The table
 * (lc_table16_rows) is built once into work by the calling thread before the team starts,
 * read-only to all: a team barrier after a shared build would stall the call until every
 * thread has been scheduled, where now only the final join waits (a per-thread copy cost
 * each thread its own build before its first unit). */
typedef struct {
    const lc_gemm_tbody *xb;
    int32_t *C;
    int64_t ldc, lda, ldb, M, N, K, nrc, rows_per;
    const int8_t *A, *B;
    const int32_t *T, *Pbuf;
} lc_table_wide_job;

static void lc_table_wide_unit(void *p, int64_t u, int tid) {
    const lc_table_wide_job *j = (const lc_table_wide_job *)p;
    int64_t m0, m1, n0;
    int nc;
    (void)tid;
    if (!lc_table_unit(u, j->nrc, j->rows_per, j->M, j->N, LC_TABLE_WNB, &m0, &m1, &n0, &nc)) return;
    lc_table_unit_run(j->xb, j->C + m0 * j->ldc + n0, j->ldc, j->A + m0 * j->lda, j->lda, j->B, j->ldb, j->T,
                      (int32_t *)j->Pbuf, m1 - m0, n0, nc, 0, j->K);
}

static void lc_gemm_table_wide(const lc_gemm_tbody *xb, int32_t *C, int64_t ldc, const int8_t *A, int64_t lda,
                               const int8_t *B, int64_t ldb, const int32_t *T, int64_t M, int64_t N,
                               int64_t K, int32_t *work, int nthreads) {
    int64_t nrc, rows_per, units = lc_table_wide_plan(M, N, &nthreads, &nrc, &rows_per);
    int32_t *Pbuf = work;
    lc_table16_rows(Pbuf, T, xb->planes, 0, 256);
    lc_table_wide_job j = {.xb = xb, .C = C, .ldc = ldc, .lda = lda, .ldb = ldb, .M = M, .N = N, .K = K,
                           .nrc = nrc, .rows_per = rows_per, .A = A, .B = B, .T = T, .Pbuf = Pbuf};
    lc_team_for(nthreads, units, lc_table_wide_unit, &j);
}

/* The wide block-scaled driver's units (as lc_table_wide_unit), each with its thread's int32
 * scratch (acc: rows_per x LC_TABLE_WNB per thread). */
typedef struct {
    const lc_gemm_tbody *xb;
    float *Y;
    int64_t ldy, M, N, nblk, bk, Kq, nrc, rows_per;
    const int8_t *qa, *qb;
    const float *sa, *sb;
    const int32_t *T, *Pbuf;
    int32_t *accs;
} lc_qtable_wide_job;

static void lc_qtable_wide_unit(void *p, int64_t u, int tid) {
    const lc_qtable_wide_job *j = (const lc_qtable_wide_job *)p;
    const int64_t N = j->N, nblk = j->nblk, bk = j->bk, Kq = j->Kq, ldy = j->ldy;
    float *Y = j->Y;
    int32_t *acc = j->accs + (size_t)tid * j->rows_per * LC_TABLE_WNB;
    int64_t m0, m1, n0;
    int nc;
    if (!lc_table_unit(u, j->nrc, j->rows_per, j->M, N, LC_TABLE_WNB, &m0, &m1, &n0, &nc)) return;
    for (int64_t m = m0; m < m1; m++)
        for (int c = 0; c < nc; c++) Y[m * ldy + n0 + c] = 0.0f;
    for (int64_t b = 0; b < nblk; b++) {
        lc_table_unit_run(j->xb, acc, LC_TABLE_WNB, j->qa + m0 * Kq, Kq, j->qb, N, j->T, j->Pbuf, m1 - m0, n0, nc,
                          b * bk, (b + 1) * bk);
        for (int64_t m = m0; m < m1; m++) {
            float s = j->sa[m * nblk + b];
            const float *sbr = j->sb + b * N + n0;
            float *y = Y + m * ldy + n0;
            const int32_t *ai = acc + (m - m0) * LC_TABLE_WNB;
            for (int c = 0; c < nc; c++) y[c] = y[c] + (s * sbr[c]) * (float)ai[c];
        }
    }
}

/* Y (M,N) float32 as lc_qmatmul_table, each block's int32 sums from a body's table_unit
 * into a per-thread scratch, folded in the generic order straight into Y.  Returns -1
 * (nothing written) when a scratch allocation fails: the caller runs the AVX2 body. */
static int lc_qmatmul_table_wide(const lc_gemm_tbody *xb, float *Y, int64_t ldy, const int8_t *qa, const float *sa,
                                 const int8_t *qb, const float *sb, const int32_t *T, int64_t M, int64_t N,
                                 int64_t nblk, int64_t bk, int32_t *work, int nthreads) {
    int64_t Kq = nblk * bk, nrc, rows_per, units = lc_table_wide_plan(M, N, &nthreads, &nrc, &rows_per);
    int32_t *accs = (int32_t *)lc_aligned_alloc((size_t)nthreads * rows_per * LC_TABLE_WNB * sizeof(int32_t));
    if (!accs) return -1;
    int32_t *Pbuf = work;
    lc_table16_rows(Pbuf, T, xb->planes, 0, 256);
    lc_qtable_wide_job j = {.xb = xb, .Y = Y, .ldy = ldy, .M = M, .N = N, .nblk = nblk, .bk = bk, .Kq = Kq,
                            .nrc = nrc, .rows_per = rows_per, .qa = qa, .qb = qb, .sa = sa, .sb = sb, .T = T,
                            .Pbuf = Pbuf, .accs = accs};
    lc_team_for(nthreads, units, lc_qtable_wide_unit, &j);
    lc_aligned_free(accs);
    return 0;
}

/* The row-table drivers' units (lc_table_layout), each with its thread's slice of work (per
 * int32 words: the row tables, then the int32 and float accumulators). */
typedef struct {
    const lc_gemm_tbody *xb;
    int32_t *C;
    float *Y;
    int64_t ldc, M, N, K, nblk, bk, nrc, rows_per;
    const int8_t *A, *B;
    int64_t lda, ldb;
    const float *sa, *sb;
    const int32_t *T, *Tt;
    int32_t *work;
    size_t per;
} lc_table_rows_job;

static void lc_gemm_table_unit(void *p, int64_t u, int tid) {
    const lc_table_rows_job *j = (const lc_table_rows_job *)p;
    int32_t *mine = j->work + (size_t)tid * j->per;
    int32_t *Pbuf = mine, *acc = mine + (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB;
    int64_t m0, m1, n0;
    int nc;
    if (!lc_table_unit(u, j->nrc, j->rows_per, j->M, j->N, LC_TABLE_NB, &m0, &m1, &n0, &nc)) return;
    memset(acc, 0, (size_t)(m1 - m0) * LC_TABLE_NB * sizeof(int32_t));
    j->xb->accum(acc, Pbuf, j->A + m0 * j->lda, j->lda, j->B, j->ldb, j->T, j->Tt, m1 - m0, n0, nc, 0, j->K);
    for (int64_t m = m0; m < m1; m++)
        memcpy(j->C + m * j->ldc + n0, acc + (m - m0) * LC_TABLE_NB, (size_t)nc * sizeof(int32_t));
}

/* C (M,N) int32 = LUT GEMM with any table.  work: nthreads * per-thread int32. */
static void lc_gemm_table(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                          int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t K,
                          int32_t *work, int isa, int nthreads) {
    int64_t ncb = (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nrc, rows_per;
    size_t per = lc_table_layout(M, N, nthreads, 0, &nrc, &rows_per);
    int64_t units = ncb * nrc;
    const lc_gemm_tbody *xb = lc_gemm_table_pick(isa);
    if (xb->table_unit) {
        lc_gemm_table_wide(xb, C, ldc, A, lda, B, ldb, T, M, N, K, work, nthreads);
        return;
    }
    lc_table_rows_job j = {.xb = xb, .C = C, .ldc = ldc, .M = M, .N = N, .K = K, .nrc = nrc, .rows_per = rows_per,
                           .A = A, .B = B, .lda = lda, .ldb = ldb, .T = T, .Tt = Tt, .work = work, .per = per};
    lc_team_for(nthreads, units, lc_gemm_table_unit, &j);
}

static void lc_qmatmul_table_unit(void *p, int64_t u, int tid) {
    const lc_table_rows_job *j = (const lc_table_rows_job *)p;
    const int64_t N = j->N, nblk = j->nblk, bk = j->bk, Kq = nblk * bk;
    int32_t *mine = j->work + (size_t)tid * j->per;
    int32_t *Pbuf = mine, *acc = mine + (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB;
    float *yb = (float *)(acc + (size_t)j->rows_per * LC_TABLE_NB);
    int64_t m0, m1, n0;
    int nc;
    if (!lc_table_unit(u, j->nrc, j->rows_per, j->M, N, LC_TABLE_NB, &m0, &m1, &n0, &nc)) return;
    for (int64_t i = 0; i < (m1 - m0) * LC_TABLE_NB; i++) yb[i] = 0.0f;
    for (int64_t b = 0; b < nblk; b++) {
        memset(acc, 0, (size_t)(m1 - m0) * LC_TABLE_NB * sizeof(int32_t));
        j->xb->accum(acc, Pbuf, j->A + m0 * Kq, Kq, j->B, N, j->T, j->Tt, m1 - m0, n0, nc, b * bk, (b + 1) * bk);
        for (int64_t m = m0; m < m1; m++) {
            float s = j->sa[m * nblk + b];
            const float *sbr = j->sb + b * N + n0;
            float *y = yb + (m - m0) * LC_TABLE_NB;
            const int32_t *ai = acc + (m - m0) * LC_TABLE_NB;
            for (int c = 0; c < nc; c++) y[c] = y[c] + (s * sbr[c]) * (float)ai[c];
        }
    }
    for (int64_t m = m0; m < m1; m++)
        memcpy(j->Y + m * j->ldc + n0, yb + (m - m0) * LC_TABLE_NB, (size_t)nc * sizeof(float));
}

/* Y (M,N) float32 = block-scaled matmul with any table on quantized operands:
 * qa (M, Kq) int8, sa (M, nblk), qb (Kq, N) int8, sb (nblk, N); Kq = nblk*bk. */
static void lc_qmatmul_table(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                             const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t nblk,
                             int64_t bk, int32_t *work, int isa, int nthreads) {
    int64_t ncb = (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nrc, rows_per;
    size_t per = lc_table_layout(M, N, nthreads, 1, &nrc, &rows_per);
    int64_t units = ncb * nrc;
    const lc_gemm_tbody *xb = lc_gemm_table_pick(isa);
    if (xb->table_unit && lc_qmatmul_table_wide(xb, Y, ldy, qa, sa, qb, sb, T, M, N, nblk, bk, work, nthreads) == 0)
        return;
    lc_table_rows_job j = {.xb = xb, .Y = Y, .ldc = ldy, .M = M, .N = N, .nblk = nblk, .bk = bk, .nrc = nrc,
                           .rows_per = rows_per, .A = qa, .B = qb, .sa = sa, .sb = sb, .T = T, .Tt = Tt,
                           .work = work, .per = per};
    lc_team_for(nthreads, units, lc_qmatmul_table_unit, &j);
}


#endif /* LUTCORE_GEMM_TABLE_H */
