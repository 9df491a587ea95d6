/* csrc/mxgemm/mxgemm.h — the MX GEMM: block-scaled FP8/FP6/FP4/INT8 operands (OCP MX: uint8
 * element codes, one E8M0 scale per block of bk along K) multiplied through ANY product table,
 * summed in a declared way (docs/DESIGN.md, "MX GEMM").
 *
 *   Y     float32 (M, N)           OUT  Y[m, n] below; C-contiguous
 *   A     uint8   (M, Kp)          IN   element codes of a (< 2^ba), quantized along K
 *   SA    uint8   (M, nblk)        IN   a's E8M0 scale codes: 2^(s - 127), 0xFF = NaN
 *   B     uint8   (Kp, N)          IN   element codes of b (< 2^bb), quantized along K (axis 0)
 *   SB    uint8   (nblk, N)        IN   b's E8M0 scale codes
 *   T     float32 (2^ba, 2^bb)     IN   T[ca, cb] = the unit's product of the decoded codes
 *                                       (lc_mx_products: the forms the bodies read, job.h)
 *   K <= Kp = nblk * bk; k >= K is the operands' zero padding: never read (so a table whose
 *   T[0, 0] is not 0 changes nothing there either); xa = SA[m, k / bk] - 127, xb = SB[k / bk, n] - 127.
 *
 * exact  (lc_mx_run, narrow 0): S_b = sum over k of block b of T[A[m,k], B[k,n]], EXACT; y = 0;
 *        for b ascending: y = fl32(y + fl32(fl32(S_b) * 2^(xa + xb))) — fl32(S_b) the exact sum
 *        rounded once (nearest even), the scaling a correctly rounded ldexp (subnormals nearest
 *        even, overflow inf).  A NaN scale, or NaN/inf products, give NaN/inf per IEEE (the block's
 *        sum of its specials; inf - inf = NaN).  How the sums are exact (the table's analysis,
 *        lutcore.ops.mxgemm): every finite entry a multiple of 2^e0, every partial sum of a block
 *        below 2^(53 + e0) — float64 additions are exact (one part); else each product split at a
 *        fixed 2^c into hi + lo, each part's sums exact in float64, fl32(hi + lo) by TwoSum and
 *        rounding to odd (two parts).  The exact table of the decoded values with one part takes
 *        the FMA route: decoded values, float64 FMA, no lookups.
 * narrow (lc_mx_run, narrow 1): acc = 0, y = 0; for k = 0 .. K-1: p = T[A[m,k], B[k,n]] *
 *        2^(xa + xb) (exact, float64); acc = round(acc + p) to mbits + 1 significant bits,
 *        float32's exponent range (job.h lc_mx_narrow: nearest even or toward zero; overflow inf
 *        or the maximum); if (k + 1) % promote == 0 or k == K - 1: y = fl32(y + acc), acc = 0.
 *        The register steps (TwoSum rounded to odd, then the integer rounding between exact
 *        scalings) are job.h's.
 * Every NaN output is the canonical 0x7fc00000; zeros are +0.  The same bits at any thread count
 * and on every body: the sums are exact, and narrow runs each output's k in order in one unit.
 *
 * Layout: job.h the shared structs and scalar steps; this header the generic bodies, the body
 * table and the drivers; x86/x86.h + x86/avx512.c the AVX-512 bodies (the FMA route's register
 * tile; any table through row tables; narrow mode on the same row tables, its register stepped
 * lane for lane as job.h's) and x86/avx2.c the same routes on ymm, compiled alone with their flags.
 */
#ifndef LUTCORE_MXGEMM_H
#define LUTCORE_MXGEMM_H

#include "core/common.h"
#include "core/dispatch.h"
#include "mxgemm/job.h"
#include "mxgemm/x86/x86.h"

#ifndef LC_MXGEMM_SIMDE
#define LC_MXGEMM_SIMDE 0
#endif

#define LC_MX_GENERIC_NB 64       /* the generic bodies' columns per unit */
#define LC_MX_MIN_ROWS 16         /* a row chunk's least rows when rows are split to feed the threads */
#define LC_MX_MAX_ROWS 1024       /* and its most (the row bodies' scratch grows with it) */

/* ------------------------------------------------------------------ generic bodies */

/* exact: Y[m0..m1, n0..n0+nc) (nc <= LC_MX_GENERIC_NB), each output's blocks in order */
static void lc_mx_exact_unit_generic(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk;
    const int ex = P->expand, np = P->nparts;
    const double C = P->split;
    double hi[LC_MX_GENERIC_NB], lo[LC_MX_GENERIC_NB];
    float y[LC_MX_GENERIC_NB];
    (void)ws;
    for (int64_t m = m0; m < m1; m++) {
        for (int c = 0; c < nc; c++) y[c] = 0.0f;
        for (int64_t b = 0; b < nblk; b++) {
            const int64_t k0 = b * bk, k1 = k0 + bk < K ? k0 + bk : K;
            for (int c = 0; c < nc; c++) hi[c] = lo[c] = 0.0;
            for (int64_t k = k0; k < k1; k++) {
                const uint32_t *row = P->tab + ((int64_t)j->A[m * Kp + k] << P->bb);
                const uint8_t *bk_ = j->B + k * N + n0;
                for (int c = 0; c < nc; c++) {
                    double x = lc_mx_value(row[bk_[c]], ex);
                    if (np == 1) {
                        hi[c] += x;
                    } else {
                        double h = (x + C) - C;
                        hi[c] += h;
                        lo[c] += x - h;
                    }
                }
            }
            const double sa = P->scale[j->SA[m * nblk + b]];
            for (int c = 0; c < nc; c++)
                y[c] = lc_mx_fold(y[c], lc_mx_sum32(hi[c], lo[c], np), sa * P->scale[j->SB[b * N + n0 + c]]);
        }
        for (int c = 0; c < nc; c++) j->Y[m * N + n0 + c] = lc_mx_canon(y[c]);
    }
}

/* narrow: Y[m0..m1, n0..n0+nc), each output's products in k order */
static void lc_mx_narrow_unit_generic(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, pr = j->promote;
    const int ex = P->expand, mb = j->mbits, tz = j->tz;
    double acc[LC_MX_GENERIC_NB], sc[LC_MX_GENERIC_NB];
    float y[LC_MX_GENERIC_NB];
    (void)ws;
    for (int64_t m = m0; m < m1; m++) {
        for (int c = 0; c < nc; c++) y[c] = 0.0f, acc[c] = 0.0;
        for (int64_t k = 0; k < K; k++) {
            if (k % bk == 0) {
                const int64_t b = k / bk;
                const double sa = P->scale[j->SA[m * nblk + b]];
                for (int c = 0; c < nc; c++) sc[c] = sa * P->scale[j->SB[b * N + n0 + c]];
            }
            const uint32_t *row = P->tab + ((int64_t)j->A[m * Kp + k] << P->bb);
            const uint8_t *bk_ = j->B + k * N + n0;
            const int flush = (pr > 0 && (k + 1) % pr == 0) || k == K - 1;
            for (int c = 0; c < nc; c++) {
                double p = lc_mx_value(row[bk_[c]], ex) * sc[c];          /* exact */
                double s = isfinite(acc[c]) && isfinite(p) ? lc_mx_add_odd(acc[c], p) : acc[c] + p;
                acc[c] = lc_mx_narrow(s, mb, tz);
                if (flush) {
                    y[c] = y[c] + (float)acc[c];                          /* acc is a float32 value */
                    acc[c] = 0.0;
                }
            }
        }
        for (int c = 0; c < nc; c++) j->Y[m * N + n0 + c] = lc_mx_canon(y[c]);
    }
}

/* ------------------------------------------------------------------ the body table */
typedef struct lc_mx_body {
    lc_body_head head;
    int nb_fma, nb_table;                           /* columns per unit: exact FMA route / row tables, narrow */
    size_t (*exact_ws)(const lc_mx_job *j);         /* per-thread scratch bytes of exact_unit */
    void (*exact_unit)(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws);
    size_t (*narrow_ws)(const lc_mx_job *j);        /* and of narrow_unit */
    void (*narrow_unit)(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws);
} lc_mx_body;

static size_t lc_mx_ws_none(const lc_mx_job *j) { (void)j; return 0; }

static const lc_mx_body lc_mx_bodies[] = {
#if LC_X86_BODIES
    {{"avx512 (float64 FMA tile; row tables)", LC_ISA_AVX512}, LC_MX_X86_NB_FMA, LC_MX_X86_NB_TABLE,
     LC_XBODY(LC_MXGEMM_SIMDE, avx512, mx_exact_ws), LC_XBODY(LC_MXGEMM_SIMDE, avx512, mx_exact_unit),
     LC_XBODY(LC_MXGEMM_SIMDE, avx512, mx_narrow_ws), LC_XBODY(LC_MXGEMM_SIMDE, avx512, mx_narrow_unit)},
    {{"avx2 (float64 FMA tile; row tables)", LC_ISA_AVX2}, LC_MX_AVX2_NB, LC_MX_AVX2_NB,
     LC_XBODY(LC_MXGEMM_SIMDE, avx2, mx_exact_ws), LC_XBODY(LC_MXGEMM_SIMDE, avx2, mx_exact_unit),
     LC_XBODY(LC_MXGEMM_SIMDE, avx2, mx_narrow_ws), LC_XBODY(LC_MXGEMM_SIMDE, avx2, mx_narrow_unit)},
#endif
    {{"generic", LC_ISA_GENERIC}, LC_MX_GENERIC_NB, LC_MX_GENERIC_NB, lc_mx_ws_none, lc_mx_exact_unit_generic,
     lc_mx_ws_none, lc_mx_narrow_unit_generic},
};
LC_BODY_TABLE(lc_mx_body, lc_mx, lc_mx_bodies)

/* the body isa runs (which 0 exact, 1 narrow: the same entry) */
static const char *lc_mx_name(int isa, int which) { (void)which; return lc_mx_body_name(isa); }

/* ------------------------------------------------------------------ drivers */

/* The plan of a call (units, scratch) on at most nthreads; returns the threads it uses.  j holds
 * the operands' sizes and P.  Units: column blocks of the body's width x row chunks, the rows
 * split only when there are too few column blocks to feed the threads. */
static int lc_mx_plan(lc_mx_job *j, int narrow, int isa, int nthreads) {
    const lc_mx_body *body = lc_mx_pick(isa);
    if (nthreads < 1) nthreads = 1;
    j->body = body;
    j->nb = !narrow && j->P->route == LC_MX_ROUTE_FMA ? body->nb_fma : body->nb_table;
    int64_t ncb = j->N > 0 ? (j->N + j->nb - 1) / j->nb : 1, M = j->M > 0 ? j->M : 1;
    int64_t nrc = 1;
    if (ncb < 2 * nthreads) {
        nrc = (2 * nthreads + ncb - 1) / ncb;
        int64_t most = M / LC_MX_MIN_ROWS > 0 ? M / LC_MX_MIN_ROWS : 1;
        if (nrc > most) nrc = most;
    }
    if ((M + nrc - 1) / nrc > LC_MX_MAX_ROWS) nrc = (M + LC_MX_MAX_ROWS - 1) / LC_MX_MAX_ROWS;
    j->rows_per = (M + nrc - 1) / nrc;
    j->nrc = (M + j->rows_per - 1) / j->rows_per;
    j->units = j->M > 0 && j->N > 0 ? ncb * j->nrc : 0;
    if (j->units < nthreads) nthreads = j->units > 0 ? (int)j->units : 1;
    size_t ws = narrow ? body->narrow_ws(j) : body->exact_ws(j);
    j->ws_per = (ws + 63) & ~(size_t)63;
    return nthreads;
}

/* scratch bytes a call needs (lc_mx_plan's threads x its per-thread bytes) */
static size_t lc_mx_work_size(lc_mx_job *j, int narrow, int isa, int nthreads) {
    int nt = lc_mx_plan(j, narrow, isa, nthreads);
    return (size_t)nt * j->ws_per;
}

typedef struct { const lc_mx_job *j; int narrow; } lc_mx_run_ctx;

static void lc_mx_run_unit(void *p, int64_t u, int tid) {
    const lc_mx_run_ctx *r = (const lc_mx_run_ctx *)p;
    const lc_mx_job *j = r->j;
    int64_t m0 = (u % j->nrc) * j->rows_per, m1 = m0 + j->rows_per < j->M ? m0 + j->rows_per : j->M;
    int64_t n0 = (u / j->nrc) * j->nb;
    int nc = (int)(j->N - n0 < j->nb ? j->N - n0 : j->nb);
    if (m1 <= m0 || nc <= 0) return;
    void *ws = j->ws ? j->ws + (size_t)tid * j->ws_per : NULL;
    if (r->narrow)
        j->body->narrow_unit(j, m0, m1, n0, nc, ws);
    else
        j->body->exact_unit(j, m0, m1, n0, nc, ws);
}

/* Y (j's operands) in mode narrow 0 (exact) or 1; ws: lc_mx_work_size(j, narrow, isa, nthreads)
 * bytes, 64-byte aligned (NULL when that is 0).  The plan is made here again (the same one). */
static void lc_mx_run(lc_mx_job *j, int narrow, char *ws, int isa, int nthreads) {
    int nt = lc_mx_plan(j, narrow, isa, nthreads);
    j->ws = ws;
    if (j->M <= 0 || j->N <= 0) return;
    if (j->K <= 0) {
        for (int64_t i = 0; i < j->M * j->N; i++) j->Y[i] = 0.0f;
        return;
    }
    lc_mx_run_ctx r = {j, narrow};
    lc_team_for(nt, j->units, lc_mx_run_unit, &r);
}

#endif /* LUTCORE_MXGEMM_H */
