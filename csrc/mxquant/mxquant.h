/* csrc/mxquant/mxquant.h — the MX quantizer: float32 to OCP MX blocks (E8M0 scales + element
 * codes) with round-to-nearest-even, exactly lutcore.mx.mx_quantize(x, fmt, block, axis,
 * rounding="nearest") (docs/DESIGN.md, "Floating-point element formats and MX blocks").
 *
 *   rows: blocks of bk along x's last axis           cols: blocks of bk along axis 0
 *   x       float32 (R, L)       IN                   x       float32 (L, N)       IN
 *   codes   uint8   (R, Lp)      OUT                  codes   uint8   (Lp, N)      OUT
 *   scales  uint8   (R, nb)      OUT                  scales  uint8   (nb, N)      OUT
 *   nb = ceil(L / bk), Lp = nb * bk; all C-contiguous; codes past L are 0 (the zero padding)
 *
 * Per block (job.h: the two scalar steps, integer arithmetic on the bits): the scale code
 * floor(log2 max|x|) - emax + 127, clamped to [0, 254], or 0xFF and codes 0 where the block holds
 * a NaN or an infinity; each element the format's code of x / 2^(scale - 127), nearest even,
 * saturating to ±max normal.  Element formats: e4m3, e5m2, e3m2, e2m3, e2m1 (kind 0) and int8
 * (MXINT8, kind 1), from lutcore.units.fp's fields (lc_mxq_format).
 *
 * Threads: every block is computed whole by one thread and depends on its own values only, so
 * the bits do not depend on the thread count or on who takes what.  rows: the R * nb blocks in
 * row-major order are the items, dealt in ranges (core/team.h lc_team_range, at least
 * LC_MXQ_GRAIN elements a range); cols: the items are (block, strip of LC_MXQ_CW columns),
 * block-major, dealt the same way.
 *
 * Layout: job.h the format, the job and the scalar steps; this header the generic bodies, the
 * body table and the drivers; x86/x86.h + x86/avx2.c (8 lanes) and x86/avx512.c (16 lanes) the
 * vector bodies (the same steps lane for lane: rows vectorise along a block, cols across the
 * columns), compiled alone with their flags.
 */
#ifndef LUTCORE_MXQUANT_H
#define LUTCORE_MXQUANT_H

#include "core/common.h"
#include "core/dispatch.h"
#include "mxquant/job.h"
#include "mxquant/x86/x86.h"

#ifndef LC_MXQUANT_SIMDE
#define LC_MXQUANT_SIMDE 0
#endif

#define LC_MXQ_GRAIN 16384      /* least elements a range of items (rows and cols) */
/* LC_MXQ_CW (x86/x86.h): the columns of a cols item */

/* ------------------------------------------------------------------ generic bodies */

/* rows: the blocks i0..i1-1 in row-major order (row i / nb, block i % nb) */
static void lc_mxq_rows_generic(const lc_mxq_job *j, int64_t i0, int64_t i1) {
    const int64_t L = j->L, bk = j->bk, nb = j->nb, Lp = j->Lp;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = i / nb, b = i % nb, k0 = b * bk, n = L - k0 < bk ? L - k0 : bk;
        const uint32_t *x = j->x + r * L + k0;
        uint8_t *c = j->codes + r * Lp + k0;
        uint32_t amax = 0;
        for (int64_t e = 0; e < n; e++) {
            const uint32_t a = x[e] & 0x7fffffffu;
            amax = a > amax ? a : amax;
        }
        int32_t s23;
        const uint8_t sc = lc_mxq_scale(amax, &j->f, &s23);
        j->scales[r * nb + b] = sc;
        int64_t e = 0;
        if (sc != LC_MXQ_NAN)
            for (; e < n; e++) c[e] = lc_mxq_code(x[e], s23, &j->f);
        memset(c + e, 0, (size_t)(bk - e));
    }
}

/* the padding rows L..Lp-1 of block b (the last) in columns n0..n1-1: codes 0 */
static inline void lc_mxq_cols_pad(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1) {
    const int64_t k1 = (b + 1) * j->bk;
    for (int64_t k = j->L; k < k1; k++) memset(j->codes + k * j->N + n0, 0, (size_t)(n1 - n0));
}

/* cols: block b of columns n0..n1-1 (n1 - n0 <= LC_MXQ_CW) */
static void lc_mxq_cols_generic(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1) {
    const int64_t N = j->N, k0 = b * j->bk, k1 = k0 + j->bk < j->L ? k0 + j->bk : j->L;
    const int nc = (int)(n1 - n0);
    uint32_t amax[LC_MXQ_CW];
    int32_t s23[LC_MXQ_CW];
    uint8_t sc[LC_MXQ_CW];
    for (int c = 0; c < nc; c++) amax[c] = 0;
    for (int64_t k = k0; k < k1; k++) {
        const uint32_t *x = j->x + k * N + n0;
        for (int c = 0; c < nc; c++) {
            const uint32_t a = x[c] & 0x7fffffffu;
            amax[c] = a > amax[c] ? a : amax[c];
        }
    }
    for (int c = 0; c < nc; c++) sc[c] = lc_mxq_scale(amax[c], &j->f, &s23[c]);
    memcpy(j->scales + b * N + n0, sc, (size_t)nc);
    for (int64_t k = k0; k < k1; k++) {
        const uint32_t *x = j->x + k * N + n0;
        uint8_t *o = j->codes + k * N + n0;
        for (int c = 0; c < nc; c++) o[c] = sc[c] == LC_MXQ_NAN ? 0 : lc_mxq_code(x[c], s23[c], &j->f);
    }
    lc_mxq_cols_pad(j, b, n0, n1);
}

/* ------------------------------------------------------------------ the body table */
typedef struct {
    lc_body_head head;
    void (*rows)(const lc_mxq_job *j, int64_t i0, int64_t i1);
    void (*cols)(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1);
} lc_mxq_body;

#define LC_MXQ_X(isa, fn) LC_XBODY(LC_MXQUANT_SIMDE, isa, fn)
static const lc_mxq_body lc_mxq_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_MXQ_X(avx512, mxq_rows), LC_MXQ_X(avx512, mxq_cols)},
    {{"avx2", LC_ISA_AVX2}, LC_MXQ_X(avx2, mxq_rows), LC_MXQ_X(avx2, mxq_cols)},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_mxq_rows_generic, lc_mxq_cols_generic},
};
LC_BODY_TABLE(lc_mxq_body, lc_mxq, lc_mxq_bodies)

/* ------------------------------------------------------------------ drivers */
typedef struct {
    const lc_mxq_job *j;
    const lc_mxq_body *B;
    int64_t nstrips;          /* cols: strips of LC_MXQ_CW columns */
} lc_mxq_ctx;

static void lc_mxq_rows_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_mxq_ctx *c = (const lc_mxq_ctx *)p;
    (void)tid;
    c->B->rows(c->j, i0, i1);
}

static void lc_mxq_cols_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_mxq_ctx *c = (const lc_mxq_ctx *)p;
    const int64_t N = c->j->N;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t b = i / c->nstrips, n0 = (i % c->nstrips) * LC_MXQ_CW;
        c->B->cols(c->j, b, n0, n0 + LC_MXQ_CW < N ? n0 + LC_MXQ_CW : N);
    }
}

/* j: x, codes, scales, L, bk, nb, Lp, f and R (rows) or N (cols) set by the caller */
static void lc_mxq_rows(const lc_mxq_job *j, int isa, int nthreads) {
    if (j->R <= 0 || j->nb <= 0) return;
    lc_mxq_ctx c = {j, lc_mxq_pick(isa), 0};
    const int64_t grain = LC_MXQ_GRAIN / j->bk > 0 ? LC_MXQ_GRAIN / j->bk : 1;
    lc_team_range(nthreads, j->R * j->nb, grain, lc_mxq_rows_range, &c);
}

static void lc_mxq_cols(const lc_mxq_job *j, int isa, int nthreads) {
    if (j->N <= 0 || j->nb <= 0) return;
    lc_mxq_ctx c = {j, lc_mxq_pick(isa), (j->N + LC_MXQ_CW - 1) / LC_MXQ_CW};
    const int64_t per = j->bk * LC_MXQ_CW, grain = LC_MXQ_GRAIN / per > 0 ? LC_MXQ_GRAIN / per : 1;
    lc_team_range(nthreads, j->nb * c.nstrips, grain, lc_mxq_cols_range, &c);
}

#endif /* LUTCORE_MXQUANT_H */
