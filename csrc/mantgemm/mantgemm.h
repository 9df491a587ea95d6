/* csrc/mantgemm/mantgemm.h — the mantissa-product GEMM: float32 operands rounded to bf16 or fp16 and
 * multiplied through a table of significand products (ApproxTrain's form of an approximate FP
 * multiplier), summed in float32 in k order (docs/DESIGN.md, "Mantissa-product units").
 *
 *   Y     float32 (M, N)          OUT  C-contiguous
 *   A     float32 (M, K)          IN   C-contiguous
 *   B     float32 (K, N)          IN   C-contiguous
 *   T     float32 (2^m, 2^m)      IN   T[ma][mb]: the unit's (1.ma)(1.mb), finite, >= 0 (m = 7 bf16,
 *                                      10 fp16); the mul route (the exact table) never reads it
 *
 *   each operand rounded to the format (nearest even; fp16 overflows to inf), a subnormal flushed to
 *   zero; per product p = inf/NaN operands: the IEEE product of the values (inf x 0 = NaN); a zero
 *   operand: 0; else fl32((-1)^(sa ^ sb) T[ma][mb] 2^(ea + eb)) (exact in float64, rounded once:
 *   nearest even, float32's subnormals, overflow to inf);  y = 0; for k = 0 .. K-1: y = fl32(y + p_k).
 *   Every NaN output is the canonical 0x7fc00000; zeros are +0.  The same bits at any thread count
 *   and on every body: threads split rows and columns, never k.
 *
 * The mul route (lutcore.ops.mantgemm takes it for the exact table, T = (1.ma)(1.mb) exactly): the
 * product of two rounded operands is exact in float32 before its rounding, so fl32(va * vb), one
 * float32 multiply, is the table's product bit for bit — specials included (a flushed subnormal is
 * a zero value) — and the route needs no lookups.
 *
 * Layout: job.h the rounding, the operand forms, the scalar product and row; this header the
 * pre-pass, the generic bodies, the body table and the drivers; x86/x86.h + x86/avx512.c the
 * AVX-512 bodies (the mul route's register tile; the table route by gathers, or for bf16 by
 * permutes of the table's row), compiled alone with their flags.
 */
#ifndef LUTCORE_MANTGEMM_H
#define LUTCORE_MANTGEMM_H

#include "core/common.h"
#include "core/dispatch.h"
#include "core/team.h"
#include "mantgemm/job.h"
#include "mantgemm/x86/x86.h"

#ifndef LC_MANTGEMM_SIMDE
#define LC_MANTGEMM_SIMDE 0
#endif

#define LC_MT_MIN_ROWS 16         /* a row chunk's least rows when rows are split to feed the threads */
#define LC_MT_MAX_ROWS 256        /* and its most (the bodies' per-thread scratch grows with it) */
#define LC_MT_PREP_ROWS 64        /* A's, or B's, rows per pre-pass unit */

/* ------------------------------------------------------------------ the pre-pass (generic) */

/* the value of x rounded to fmt, a subnormal flushed to zero of its sign (lc_mt_form's v) */
static inline float lc_mt_value(float x, int fmt) {
    lc_mt_op o;
    lc_mt_form(x, fmt, 0, &o);
    return o.v;
}

/* y (n,) = x rounded to fmt, subnormals flushed */
static void lc_mt_round_generic(float *y, const float *x, int64_t n, int fmt) {
    for (int64_t i = 0; i < n; i++) y[i] = lc_mt_value(x[i], fmt);
}

/* A's rows m0..m1 in the route's form */
static void lc_mt_prep_a_generic(const lc_mt_job *j, int64_t m0, int64_t m1) {
    const int64_t K = j->K;
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->A + m * K;
        if (j->route == LC_MT_ROUTE_MUL) {
            lc_mt_round_generic(j->av + m * K, x, K, j->fmt);
            continue;
        }
        int special = 0;
        for (int64_t k = 0; k < K; k++) special |= lc_mt_form_a(j, m * K + k, x[k]);
        j->fa[m] = (uint8_t)special;
    }
}

/* rows k0..k1 of B's panel p in the route's form; 1 where they hold an inf or a NaN */
static int lc_mt_prep_b_panel(const lc_mt_job *j, int64_t p, int64_t k0, int64_t k1) {
    const int64_t K = j->K, N = j->N, n0 = p * LC_MT_NB;
    const int nc = (int)(N - n0 < LC_MT_NB ? N - n0 : LC_MT_NB);
    int special = 0;
    for (int64_t k = k0; k < k1; k++) {
        const float *x = j->B + k * N + n0;
        if (j->route == LC_MT_ROUTE_MUL) {
            float *v = j->bv + (p * K + k) * LC_MT_NB;
            for (int c = 0; c < LC_MT_NB; c++) v[c] = lc_mt_value(c < nc ? x[c] : 0.0f, j->fmt);
            continue;
        }
        lc_mt_bk *b = &j->bo[p * K + k];
        for (int c = 0; c < LC_MT_NB; c++) {
            lc_mt_op o;
            special |= lc_mt_form(c < nc ? x[c] : 0.0f, j->fmt, 0, &o);
            b->v[c] = o.v, b->i[c] = o.i, b->e[c] = o.e, b->s[c] = o.s;
        }
    }
    return special;
}

/* B's rows k0..k1 in the route's form, into every panel (columns p NB .. p NB + NB; past N the form
 * of +0); the table route: fl[p] = 1 where these rows of panel p hold an inf or a NaN, else 0 */
static void lc_mt_prep_b_generic(const lc_mt_job *j, int64_t k0, int64_t k1, uint8_t *fl) {
    for (int64_t p = 0; p < j->np; p++) {
        const int special = lc_mt_prep_b_panel(j, p, k0, k1);
        if (fl) fl[p] = (uint8_t)special;
    }
}

/* ------------------------------------------------------------------ generic bodies */

/* the mul route: Y[m0..m1, panel p] = sum over k of fl32(va * vb), in k order */
static void lc_mt_mul_unit_generic(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws) {
    const int64_t K = j->K;
    float y[LC_MT_NB];
    (void)ws;
    for (int64_t m = m0; m < m1; m++) {
        for (int c = 0; c < LC_MT_NB; c++) y[c] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float a = j->av[m * K + k], *b = j->bv + (p * K + k) * LC_MT_NB;
            for (int c = 0; c < LC_MT_NB; c++) y[c] = y[c] + a * b[c];
        }
        float *out = j->Y + m * j->N + p * LC_MT_NB;
        for (int c = 0; c < nc; c++) out[c] = lc_mt_canon(y[c]);
    }
}

/* the table route: job.h's rows, row by row (the fast one where neither row nor panel holds inf/NaN) */
static void lc_mt_table_unit_generic(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws) {
    (void)ws;
    for (int64_t m = m0; m < m1; m++) {
        if (j->fa[m] || j->fb[p])
            lc_mt_table_row(j, m, p, nc);
        else
            lc_mt_table_row_finite(j, m, p, nc);
    }
}

/* ------------------------------------------------------------------ the body table */
typedef struct lc_mt_body {
    lc_body_head head;
    void (*round)(float *y, const float *x, int64_t n, int fmt);     /* y = x rounded to fmt, flushed */
    void (*prep_a)(const lc_mt_job *j, int64_t m0, int64_t m1);       /* A's rows in the route's form */
    void (*prep_b)(const lc_mt_job *j, int64_t k0, int64_t k1, uint8_t *fl);   /* B's rows, every panel */
    size_t (*ws)(const lc_mt_job *j);                                 /* per-thread scratch bytes of a unit */
    void (*mul_unit)(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws);
    void (*table_unit)(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws);
} lc_mt_body;

static size_t lc_mt_ws_none(const lc_mt_job *j) { (void)j; return 0; }

static const lc_mt_body lc_mt_bodies[] = {
#if LC_X86_BODIES
    {{"avx512 (float32 tile; table: bf16 row permutes, fp16 gathers)", LC_ISA_AVX512},
     LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_round), LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_prep_a),
     LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_prep_b), LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_ws),
     LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_mul_unit), LC_XBODY(LC_MANTGEMM_SIMDE, avx512, mt_table_unit)},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_mt_round_generic, lc_mt_prep_a_generic, lc_mt_prep_b_generic, lc_mt_ws_none,
     lc_mt_mul_unit_generic, lc_mt_table_unit_generic},
};
LC_BODY_TABLE(lc_mt_body, lc_mt, lc_mt_bodies)

/* ------------------------------------------------------------------ drivers */

static inline size_t lc_mt_al(size_t n) { return (n + 63) & ~(size_t)63; }

/* the forms' bytes: A's, B's panels, the two flag arrays */
static size_t lc_mt_forms_size(const lc_mt_job *j) {
    const size_t MK = (size_t)j->M * (size_t)j->K, KP = (size_t)j->K * (size_t)j->np;
    if (j->route == LC_MT_ROUTE_MUL) return lc_mt_al(MK * 4) + lc_mt_al(KP * LC_MT_NB * 4);
    const size_t nkb = (size_t)((j->K + LC_MT_PREP_ROWS - 1) / LC_MT_PREP_ROWS);
    return 4 * lc_mt_al(MK * 4) + lc_mt_al(KP * sizeof(lc_mt_bk)) + lc_mt_al((size_t)j->M) + lc_mt_al((size_t)j->np) +
           lc_mt_al(nkb * (size_t)j->np);
}

/* The plan of a call on at most nthreads (j holds the sizes, fmt and route); returns the threads
 * it uses.  Units: panels x row chunks, the rows split only when there are too few panels to
 * feed the threads. */
static int lc_mt_plan(lc_mt_job *j, int isa, int nthreads) {
    const lc_mt_body *body = lc_mt_pick(isa);
    if (nthreads < 1) nthreads = 1;
    j->body = body;
    j->mbits = j->fmt == LC_MT_BF16 ? 7 : 10;
    j->np = (j->N + LC_MT_NB - 1) / LC_MT_NB;
    const int64_t np = j->np > 0 ? j->np : 1, M = j->M > 0 ? j->M : 1;
    int64_t nrc = 1;
    if (np < 2 * nthreads) {
        nrc = (2 * nthreads + np - 1) / np;
        const int64_t most = M / LC_MT_MIN_ROWS > 0 ? M / LC_MT_MIN_ROWS : 1;
        if (nrc > most) nrc = most;
    }
    if ((M + nrc - 1) / nrc > LC_MT_MAX_ROWS) nrc = (M + LC_MT_MAX_ROWS - 1) / LC_MT_MAX_ROWS;
    j->rows_per = (M + nrc - 1) / nrc;
    j->nrc = (M + j->rows_per - 1) / j->rows_per;
    j->units = j->M > 0 && j->N > 0 ? j->np * j->nrc : 0;
    if (j->units < nthreads) nthreads = j->units > 0 ? (int)j->units : 1;
    j->ws_per = lc_mt_al(body->ws(j));
    return nthreads;
}

/* scratch bytes a call needs: the forms, then each thread's scratch */
static size_t lc_mt_work_size(lc_mt_job *j, int isa, int nthreads) {
    const int nt = lc_mt_plan(j, isa, nthreads);
    return lc_mt_forms_size(j) + (size_t)nt * j->ws_per;
}

/* the forms' pointers into ws (lc_mt_forms_size bytes, then the threads' scratch) */
static void lc_mt_place(lc_mt_job *j, char *ws) {
    const size_t MK = lc_mt_al((size_t)j->M * (size_t)j->K * 4), KP = (size_t)j->K * (size_t)j->np;
    j->ae = j->bv = NULL, j->ai = NULL, j->as = NULL, j->bo = NULL, j->fa = j->fb = j->fbk = NULL;
    j->av = (float *)ws;
    if (j->route == LC_MT_ROUTE_MUL) {
        j->bv = (float *)(ws + MK);
    } else {
        j->ai = (int32_t *)(ws + MK);
        j->ae = (float *)(ws + 2 * MK);
        j->as = (uint32_t *)(ws + 3 * MK);
        j->bo = (lc_mt_bk *)(ws + 4 * MK);
        j->fa = (uint8_t *)((char *)j->bo + lc_mt_al(KP * sizeof(lc_mt_bk)));
        j->fb = j->fa + lc_mt_al((size_t)j->M);
        j->fbk = j->fb + lc_mt_al((size_t)j->np);
    }
    j->ws = ws + lc_mt_forms_size(j);
}

/* the pre-pass' units: A's rows by LC_MT_PREP_ROWS, then B's (each unit's flags a row of fbk) */
static void lc_mt_prep_unit(void *ctx, int64_t u, int tid) {
    const lc_mt_job *j = (const lc_mt_job *)ctx;
    const int64_t na = (j->M + LC_MT_PREP_ROWS - 1) / LC_MT_PREP_ROWS;
    (void)tid;
    if (u < na) {
        const int64_t m0 = u * LC_MT_PREP_ROWS, m1 = m0 + LC_MT_PREP_ROWS < j->M ? m0 + LC_MT_PREP_ROWS : j->M;
        j->body->prep_a(j, m0, m1);
    } else {
        const int64_t kb = u - na, k0 = kb * LC_MT_PREP_ROWS;
        const int64_t k1 = k0 + LC_MT_PREP_ROWS < j->K ? k0 + LC_MT_PREP_ROWS : j->K;
        j->body->prep_b(j, k0, k1, j->fbk ? j->fbk + kb * j->np : NULL);
    }
}

static void lc_mt_run_unit(void *ctx, int64_t u, int tid) {
    const lc_mt_job *j = (const lc_mt_job *)ctx;
    const int64_t m0 = (u % j->nrc) * j->rows_per, m1 = m0 + j->rows_per < j->M ? m0 + j->rows_per : j->M;
    const int64_t p = u / j->nrc, n0 = p * LC_MT_NB;
    const int nc = (int)(j->N - n0 < LC_MT_NB ? j->N - n0 : LC_MT_NB);
    if (m1 <= m0 || nc <= 0) return;
    void *ws = j->ws_per ? j->ws + (size_t)tid * j->ws_per : NULL;
    if (j->route == LC_MT_ROUTE_MUL)
        j->body->mul_unit(j, m0, m1, p, nc, ws);
    else
        j->body->table_unit(j, m0, m1, p, nc, ws);
}

/* Y (j's operands, fmt, route); ws: lc_mt_work_size(j, isa, nthreads) bytes, 64-byte aligned.  The
 * plan is made here again (the same one); the pre-pass runs first, then the units. */
static void lc_mt_run(lc_mt_job *j, char *ws, int isa, int nthreads) {
    const int nt = lc_mt_plan(j, isa, nthreads);
    if (j->M <= 0 || j->N <= 0) return;
    if (j->K <= 0) {
        for (int64_t i = 0; i < j->M * j->N; i++) j->Y[i] = 0.0f;
        return;
    }
    lc_mt_place(j, ws);
    const int64_t na = (j->M + LC_MT_PREP_ROWS - 1) / LC_MT_PREP_ROWS, nkb = (j->K + LC_MT_PREP_ROWS - 1) / LC_MT_PREP_ROWS;
    lc_team_for(nthreads, na + nkb, lc_mt_prep_unit, j);
    if (j->fb)
        for (int64_t p = 0; p < j->np; p++) {
            uint8_t any = 0;
            for (int64_t kb = 0; kb < nkb; kb++) any |= j->fbk[kb * j->np + p];
            j->fb[p] = any;
        }
    lc_team_for(nt, j->units, lc_mt_run_unit, j);
}

/* y (n,) = x (n,) rounded to fmt, subnormals flushed (the operands' values), on isa's body */
static void lc_mt_round(float *y, const float *x, int64_t n, int fmt, int isa) { lc_mt_pick(isa)->round(y, x, n, fmt); }

#endif /* LUTCORE_MANTGEMM_H */
