/* csrc/gemm/table_packed.h — the any-table path with the right operand packed once (a weight).
 * Part of the gemm family (gemm.h includes every part; a part includes the parts it uses).
 *
 * Design: the wide table bodies (gemm/x86/: vpermi2b planes, vpermi2w) read B as staged
 * indices of one unit's 256 columns (and their permutes' masks), which table_unit builds per
 * unit on every call.  A weight multiplied many times is staged once instead: Bq holds, per
 * column block of LC_TABLE_WNB, the body's staged form over all of K (table_stage), so a call
 * does only the A side — no transposes, no staging, no per-unit scratch — and runs
 * A (M, K) x B (K, N) as it is (rows = activations, columns = output channels): each loaded
 * table row serves up to 256 columns.  The table itself is passed in the body's form (lc_table16_rows,
 * built once per units by the caller).  The staged form differs per body, so Bq starts with a
 * header naming the body, K and N; a mismatch is refused (-2), never read.  The same per-unit
 * row loops as lc_gemm_table_wide: the same integer sums, the same bits.
 *
 *   Bq   uint8 (lc_table_pack_size(K, N, isa),)  header (LC_TABLE_PACK_HDR bytes) then
 *        ceil(N / 256) units of unit_bytes: the staged columns 256 u .. 256 u + nc     IN (built once)
 *   T16  int16 (65536,)   the table in the body's form (lc_table_form)                  IN
 *   A    int8 (M, K) rows lda apart                                                     IN
 *   C    int32 (M, N) rows ldc apart                                                    OUT
 * No staged body for isa (AVX2, generic): lc_table_pack_size is 0 and the caller runs
 * lc_gemm_table_auto on the plain B. */
#ifndef LUTCORE_GEMM_TABLE_PACKED_H
#define LUTCORE_GEMM_TABLE_PACKED_H

#include "gemm/pack.h"
#include "gemm/table.h"

#define LC_TABLE_PACK_HDR LC_FORM_HDR                 /* gemm/pack.h's header; extra = a unit's bytes */
#define LC_TABLE_PACK_MAGIC 0x31304b5042544c43ULL   /* "CLTBPK01" little-endian */

/* The body the packed path runs for isa (NULL: none, the caller keeps the plain B), and its id. */
static inline const lc_gemm_tbody *lc_table_packed_body(int isa, int64_t *id) {
    const lc_gemm_tbody *xb = lc_gemm_table_pick(isa);
    if (!xb->table_unit_staged) return NULL;
    *id = xb->planes ? 2 : 1;     /* 2: VBMI byte planes, 1: vpermi2w int16 rows */
    return xb;
}

/* Bytes of B (K, N) packed for isa's table body; 0 when isa has none. */
static inline size_t lc_table_pack_size(int64_t K, int64_t N, int isa) {
    int64_t id;
    const lc_gemm_tbody *xb = lc_table_packed_body(isa, &id);
    if (!xb || K < 1 || N < 1) return 0;
    return LC_TABLE_PACK_HDR + (size_t)((N + LC_TABLE_WNB - 1) / LC_TABLE_WNB) * xb->table_stage_bytes(K, LC_TABLE_WNB);
}

/* The table in isa's body form (65536 int16; lc_table16_rows), for lc_gemm_table_packed. */
static inline void lc_table_form(int16_t *T16, const int32_t *T, int isa) {
    int64_t id = 0;
    lc_table_packed_body(isa, &id);
    lc_table16_rows((int32_t *)T16, T, id == 2, 0, 256);
}

/* A column block's staged form is its own bytes: one unit per block (K x 256 columns). */
typedef struct {
    const lc_gemm_tbody *xb;
    uint8_t *Bq;
    const int8_t *B;
    int64_t ldb, N, K;
    size_t ub;
} lc_table_pack_job;

static void lc_table_pack_unit(void *p, int64_t u, int tid) {
    const lc_table_pack_job *j = (const lc_table_pack_job *)p;
    int64_t n0 = u * LC_TABLE_WNB;
    int nc = (int)(j->N - n0 < LC_TABLE_WNB ? j->N - n0 : LC_TABLE_WNB);
    (void)tid;
    j->xb->table_stage(j->Bq + LC_TABLE_PACK_HDR + (size_t)u * j->ub, j->B, j->ldb, n0, nc, 0, j->K);
}

/* Bq (lc_table_pack_size(K, N, isa) bytes, 64-byte aligned) <- B (K, N) rows ldb apart;
 * returns -1 (nothing written) when isa has no staged body. */
static int lc_table_pack_b(uint8_t *Bq, const int8_t *B, int64_t K, int64_t N, int64_t ldb, int isa, int nthreads) {
    int64_t id;
    const lc_gemm_tbody *xb = lc_table_packed_body(isa, &id);
    if (!xb || K < 1 || N < 1) return -1;
    int64_t ncb = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB;
    size_t ub = xb->table_stage_bytes(K, LC_TABLE_WNB);
    lc_form_header_write(Bq, LC_TABLE_PACK_MAGIC, id, K, N, (int64_t)ub);
    lc_table_pack_job j = {xb, Bq, B, ldb, N, K, ub};
    lc_team_for(nthreads, ncb, lc_table_pack_unit, &j);
    return 0;
}

/* Whether Bq was packed for isa's body and this (K, N): 0 yes, -2 no. */
static inline int lc_table_pack_check(const uint8_t *Bq, int64_t K, int64_t N, int isa) {
    int64_t id;
    const lc_gemm_tbody *xb = lc_table_packed_body(isa, &id);
    if (!xb || !lc_form_header_ok(Bq, LC_TABLE_PACK_MAGIC, id, K, N, (int64_t)xb->table_stage_bytes(K, LC_TABLE_WNB)))
        return -2;
    return 0;
}

/* The wide drivers' units (lc_table_wide_plan), each computed whole by one table_unit_staged call. */
typedef struct {
    const lc_gemm_tbody *xb;
    int32_t *C;
    int64_t ldc;
    const int8_t *A;
    int64_t lda;
    const uint8_t *Bq;
    const int16_t *T16;
    int64_t M, N, K;
    size_t ub;
    int64_t nrc, rows_per;
} lc_table_packed_job;

static void lc_table_packed_unit(void *p, int64_t u, int tid) {
    const lc_table_packed_job *j = (const lc_table_packed_job *)p;
    int64_t m0, m1, n0;
    int nc;
    (void)tid;
    if (!lc_table_unit(u, j->nrc, j->rows_per, j->M, j->N, LC_TABLE_WNB, &m0, &m1, &n0, &nc)) return;
    j->xb->table_unit_staged(j->C + m0 * j->ldc + n0, j->ldc, j->A + m0 * j->lda, j->lda,
                             j->Bq + LC_TABLE_PACK_HDR + (size_t)(n0 / LC_TABLE_WNB) * j->ub, j->T16, m1 - m0, nc,
                             j->K);
}

/* C (M, N) int32 = A (M, K) B (K, N) through the table, B packed (Bq) and the table in the
 * body's form (T16).  Returns 0, or -2 (nothing written) when Bq was not packed for isa's body
 * and this (K, N). */
static int lc_gemm_table_packed(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *Bq,
                                const int16_t *T16, int64_t M, int64_t N, int64_t K, int isa, int nthreads) {
    if (lc_table_pack_check(Bq, K, N, isa)) return -2;
    int64_t id;
    const lc_gemm_tbody *xb = lc_table_packed_body(isa, &id);
    size_t ub = xb->table_stage_bytes(K, LC_TABLE_WNB);
    int64_t nrc, rows_per, units = lc_table_wide_plan(M, N, &nthreads, &nrc, &rows_per);
    lc_table_packed_job j = {.xb = xb, .C = C, .ldc = ldc, .A = A, .lda = lda, .Bq = Bq, .T16 = T16, .M = M,
                             .N = N, .K = K, .ub = ub, .nrc = nrc, .rows_per = rows_per};
    lc_team_for(nthreads, units, lc_table_packed_unit, &j);
    return 0;
}

#endif /* LUTCORE_GEMM_TABLE_PACKED_H */
