/* csrc/norm/norm.h — RMSNorm rows, forward and backward (float32).
 *
 * Forward, per row of C:  ms = (in-order sum of x*x) / C;  r = 1 / sqrt(ms + eps);
 *                         y = (x * r) * w                    (returns r)
 * Backward, per row:      g = dy * w;  dot = in-order sum of g * x;
 *                         dx = r * g - ((x * ((r * r) * r)) * dot) / C
 * and the weight's gradient dw += sum over rows of (dy * x) * r, summed over fixed
 * chunks of LC_NORM_ROWS rows (rows in order within a chunk, chunks in order), so
 * the bits do not depend on the thread count.  Used by the pipeline stages (decode
 * and prefill) and by the Mamba models.
 *
 * LayerNorm (the GPT model), per row:  mu = sum(x) / C;  xc = x - mu;
 *   r = 1 / sqrt(sum(xc * xc) / C + eps);  xhat = xc * r;  y = xhat * w + b
 * backward:  g = dy * w;  m1 = sum(g) / C;  m2 = sum(g * xhat) / C;
 *   dx = r * ((g - m1) - xhat * m2);  dw += sum over rows of dy * xhat, db += of dy
 * (in-order sums; the same chunked column sums as above).
 *
 * Bodies: the generic one below runs row after row; the SIMD ones (norm/x86.h,
 * csrc/norm/x86/: avx2 8 rows a group, avx512 16) run the same chains for a group of rows
 * at once, lane r = row r, so each float output keeps these bits (csrc/norm/x86/body.h).
 * The drivers here split rows into groups of LC_NORM_GROUP (parallel over groups, a
 * group's rows run by one body call) and pick the body from `isa`.  The single row of
 * decoding (lc_rmsnorm_row) has one chain and runs the generic code.
 */
#ifndef LUTCORE_NORM_H
#define LUTCORE_NORM_H

#include <math.h>
#include "core/common.h"
#include "core/dispatch.h"
#include "mathfn/mathfn.h"   /* lc_rowsum_f */

#define LC_NORM_ROWS 64
#define LC_NORM_GROUP 16   /* rows a body call: a multiple of every body's width, divides LC_NORM_ROWS */

static float lc_rmsnorm_row(float *out, const float *x, const float *w, int64_t C, float eps) {
    for (int64_t i = 0; i < C; i++) out[i] = x[i] * x[i];
    float ms = lc_rowsum_f(out, C) / (float)C;
    float r = 1.0f / sqrtf(ms + eps);
    for (int64_t i = 0; i < C; i++) out[i] = (x[i] * r) * w[i];
    return r;
}

/* ---------------------------------------------------------------- generic bodies (groups of nr rows) */
static void lc_norm_rms_generic(float *y, float *rstd, const float *x, const float *w, int nr, int64_t C,
                                float eps) {
    for (int r = 0; r < nr; r++) {
        float q = lc_rmsnorm_row(y + r * C, x + r * C, w, C, eps);
        if (rstd) rstd[r] = q;
    }
}

static void lc_norm_rms_bwd_generic(float *dx, float *part, const float *dy, const float *x, const float *w,
                                    const float *rstd, int nr, int64_t C) {
    for (int r = 0; r < nr; r++) {
        const float *dyr = dy + r * C, *xr = x + r * C;
        float *dxr = dx + r * C;
        const float q = rstd[r], q3 = (q * q) * q;
        float dot = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float g = dyr[j] * w[j];
            float t = g * xr[j];
            dot = dot + t;
        }
        for (int64_t j = 0; j < C; j++) {
            float g = dyr[j] * w[j];
            float a = q * g, b = ((xr[j] * q3) * dot) / (float)C;
            dxr[j] = a - b;
            float t = (dyr[j] * xr[j]) * q;
            part[j] = part[j] + t;
        }
    }
}

static void lc_norm_ln_generic(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                               int nr, int64_t C, float eps) {
    for (int r = 0; r < nr; r++) {
        const float *xr = x + r * C;
        float *xh = xhat + r * C, *yr = y + r * C;
        float mu = lc_rowsum_f(xr, C) / (float)C;
        for (int64_t j = 0; j < C; j++) xh[j] = xr[j] - mu;
        float var = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float t = xh[j] * xh[j];
            var = var + t;
        }
        var = var / (float)C;
        const float q = 1.0f / sqrtf(var + eps);
        for (int64_t j = 0; j < C; j++) {
            xh[j] = xh[j] * q;
            float t = xh[j] * w[j];
            yr[j] = t + b[j];
        }
        rstd[r] = q;
    }
}

static void lc_norm_ln_bwd_generic(float *dx, float *pw, float *pb, const float *dy, const float *xhat,
                                   const float *w, const float *rstd, int nr, int64_t C) {
    for (int r = 0; r < nr; r++) {
        const float *dyr = dy + r * C, *xh = xhat + r * C;
        float *dxr = dx + r * C;
        float s1 = 0.0f, s2 = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float g = dyr[j] * w[j];
            float t = g * xh[j];
            s1 = s1 + g;
            s2 = s2 + t;
        }
        const float m1 = s1 / (float)C, m2 = s2 / (float)C, q = rstd[r];
        for (int64_t j = 0; j < C; j++) {
            float g = dyr[j] * w[j];
            float u = g - m1, v = xh[j] * m2;
            dxr[j] = q * (u - v);
            float t = dyr[j] * xh[j];
            pw[j] = pw[j] + t;
            pb[j] = pb[j] + dyr[j];
        }
    }
}

/* ---------------------------------------------------------------- the body table
 * The SIMD bodies live in their own translation units (norm/x86/x86.h, csrc/norm/x86/: the
 * AVX2 one needs no twin, it runs natively wherever the twins do); LC_NORM_SIMDE (setup.py:
 * 1 in the test twins' builds) binds the SIMDe copy of the AVX-512 one. */
#include "norm/x86/x86.h"
#ifndef LC_NORM_SIMDE
#define LC_NORM_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    int w;   /* rows a call (<= LC_NORM_GROUP, divides it) */
    void (*rms)(float *, float *, const float *, const float *, int, int64_t, float);
    void (*rms_bwd)(float *, float *, const float *, const float *, const float *, const float *, int, int64_t);
    void (*ln)(float *, float *, float *, const float *, const float *, const float *, int, int64_t, float);
    void (*ln_bwd)(float *, float *, float *, const float *, const float *, const float *, const float *, int,
                   int64_t);
} lc_norm_body;
#define LC_NORM_X(fn) LC_XBODY(LC_NORM_SIMDE, avx512, fn)
static const lc_norm_body lc_norm_bodies[] = {
#if LC_X86_BODIES
    {{"avx512 (16 rows a vector)", LC_ISA_AVX512}, 16, LC_NORM_X(norm_rms), LC_NORM_X(norm_rms_bwd),
     LC_NORM_X(norm_ln), LC_NORM_X(norm_ln_bwd)},
    {{"avx2 (8 rows a vector)", LC_ISA_AVX2}, 8, lc_avx2_norm_rms, lc_avx2_norm_rms_bwd, lc_avx2_norm_ln,
     lc_avx2_norm_ln_bwd},
#endif
    {{"generic", LC_ISA_GENERIC}, LC_NORM_GROUP, lc_norm_rms_generic, lc_norm_rms_bwd_generic, lc_norm_ln_generic,
     lc_norm_ln_bwd_generic},
};
LC_BODY_TABLE(lc_norm_body, lc_norm, lc_norm_bodies)   /* lc_norm_pick(isa), lc_norm_body_name(isa) */

/* rows [r0, r0 + n) in calls of the body's width, in row order (CALL sees rr, nr) */
#define LC_NORM_CALLS(B, r0, n, CALL)                                              \
    for (int64_t s_ = (r0); s_ < (r0) + (n); s_ += (B)->w) {                       \
        const int nr = (int)((r0) + (n) - s_ < (B)->w ? (r0) + (n) - s_ : (B)->w); \
        const int64_t rr = s_;                                                     \
        CALL;                                                                      \
    }

/* The drivers run on the team (core/team.h).  Forward: rows are independent and a row's
 * bits do not depend on the group it falls in, but the body calls stay whole groups of
 * LC_NORM_GROUP rows: a unit is the same number of whole groups, about LC_NORM_UNIT elements
 * (small enough that the last unit's tail is short, large enough to be worth its claim).
 * Backward: one unit per chunk of LC_NORM_ROWS rows, into its own partial (the partials'
 * partition), the partials summed after the job in chunk order.
 * Home blocks (lc_norm_take): the pieces (forward: units of gpu groups; backward: chunks) are
 * split into one contiguous block per thread; the team runs one unit per piece, and a unit
 * takes the next piece of its thread's block, else of the next block with pieces left.  So
 * with every thread running, each walks its own block, the same rows call after call (what
 * the static schedule gave: its rows stay in that core's caches), and a late thread's pieces
 * go to the others.  Which thread computes a piece changes no bit. */
#define LC_NORM_BLOCKS 16   /* home blocks at most (threads beyond share them) */
#define LC_NORM_UNIT 65536   /* elements a forward unit, about (~8 µs of RMSNorm, ~20 of LayerNorm) */

typedef struct { int64_t next; char pad[64 - sizeof(int64_t)]; } lc_norm_cursor;

typedef struct {
    const lc_norm_body *B;
    int64_t np, per;   /* pieces, and per home block */
    int nb;            /* home blocks */
    lc_norm_cursor *cur;   /* each block's next piece */
    float *y, *xhat, *rstd, *dx, *work;
    const float *x, *w, *b, *dy, *xh, *rs;   /* xh: the backward's xhat */
    int64_t R, C, gpu;   /* gpu: the forward's groups a piece */
    float eps;
} lc_norm_job;

/* groups [g0, g1) of rows: the first row and the row count */
static inline void lc_norm_groups(const lc_norm_job *j, int64_t g0, int64_t g1, int64_t *r0, int64_t *n) {
    *r0 = g0 * LC_NORM_GROUP;
    int64_t r1 = g1 * LC_NORM_GROUP < j->R ? g1 * LC_NORM_GROUP : j->R;
    *n = r1 - *r0;
}
/* the forward's groups a unit: about LC_NORM_UNIT elements, fewer when that would leave
 * under two units a thread, at least one */
static inline int64_t lc_norm_unit_groups(int64_t ng, int64_t C, int nthreads) {
    const int64_t per = LC_NORM_GROUP * (C > 0 ? C : 1), g = per >= LC_NORM_UNIT ? 1 : LC_NORM_UNIT / per;
    const int64_t t2 = 2 * (int64_t)(nthreads > 1 ? nthreads : 1), most = (ng + t2 - 1) / t2;
    return g < most ? g : (most > 1 ? most : 1);
}

/* np pieces in home blocks, one per thread (at most LC_NORM_BLOCKS), cursors in cur */
static inline void lc_norm_home(lc_norm_job *j, int64_t np, int nthreads, lc_norm_cursor *cur) {
    j->np = np;
    j->nb = nthreads < 1 ? 1 : (nthreads > LC_NORM_BLOCKS ? LC_NORM_BLOCKS : nthreads);
    if (j->nb > np) j->nb = np > 0 ? (int)np : 1;
    j->per = (np + j->nb - 1) / j->nb;
    j->cur = cur;
    for (int b = 0; b < j->nb; b++) cur[b].next = b * j->per;
}
/* the piece of a unit on thread tid: the next of its home block, else of the next block with
 * pieces left (there is one: a job has as many units as pieces) */
static inline int64_t lc_norm_take(const lc_norm_job *j, int tid) {
    for (int k = 0; k < j->nb; k++) {
        const int b = (tid + k) % j->nb;
        const int64_t end = (b + 1) * j->per < j->np ? (b + 1) * j->per : j->np;
        if (__atomic_load_n(&j->cur[b].next, __ATOMIC_RELAXED) >= end) continue;
        const int64_t i = __atomic_fetch_add(&j->cur[b].next, 1, __ATOMIC_RELAXED);
        if (i < end) return i;
    }
    return -1;
}

static void lc_rmsnorm_unit(void *p, int64_t u, int tid) {
    const lc_norm_job *j = (const lc_norm_job *)p;
    const lc_norm_body *B = j->B;
    const int64_t C = j->C;
    const int64_t q = lc_norm_take(j, tid);
    int64_t r0, n;
    (void)u;
    if (q < 0) return;
    lc_norm_groups(j, q * j->gpu, (q + 1) * j->gpu, &r0, &n);
    LC_NORM_CALLS(B, r0, n, B->rms(j->y + rr * C, j->rstd ? j->rstd + rr : NULL, j->x + rr * C, j->w, nr, C, j->eps))
}

/* rows [0, R) of x (R, C) -> y, rstd (or NULL) */
static void lc_rmsnorm_rows(float *y, float *rstd, const float *x, const float *w, int64_t R, int64_t C,
                            float eps, int isa, int nthreads) {
    const int64_t ng = (R + LC_NORM_GROUP - 1) / LC_NORM_GROUP;
    lc_norm_job j = {.B = lc_norm_pick(isa), .y = y, .rstd = rstd, .x = x, .w = w, .R = R, .C = C,
                     .gpu = lc_norm_unit_groups(ng, C, nthreads), .eps = eps};
    lc_norm_cursor cur[LC_NORM_BLOCKS];
    lc_norm_home(&j, (ng + j.gpu - 1) / j.gpu, ng > 1 ? nthreads : 1, cur);
    lc_team_for(ng > 1 ? nthreads : 1, j.np, lc_rmsnorm_unit, &j);
}

/* chunk ch of LC_NORM_ROWS rows: its first row and row count */
static inline void lc_norm_chunk(const lc_norm_job *j, int64_t ch, int64_t *r0, int64_t *n) {
    *r0 = ch * LC_NORM_ROWS;
    *n = j->R - *r0 < LC_NORM_ROWS ? j->R - *r0 : LC_NORM_ROWS;
}

/* chunks [c0, c1) of the backward, each into its own partial */
static void lc_rmsnorm_bwd_chunks(void *p, int64_t c0, int64_t c1, int tid) {
    const lc_norm_job *j = (const lc_norm_job *)p;
    const lc_norm_body *B = j->B;
    const int64_t C = j->C;
    (void)tid;
    for (int64_t ch = c0; ch < c1; ch++) {
        float *part = j->work + ch * C;
        int64_t r0, n;
        lc_norm_chunk(j, ch, &r0, &n);
        for (int64_t k = 0; k < C; k++) part[k] = 0.0f;
        LC_NORM_CALLS(B, r0, n, B->rms_bwd(j->dx + rr * C, part, j->dy + rr * C, j->x + rr * C, j->w, j->rs + rr, nr,
                                           C))
    }
}

static void lc_rmsnorm_bwd_unit(void *p, int64_t u, int tid) {
    const int64_t ch = lc_norm_take((const lc_norm_job *)p, tid);
    (void)u;
    if (ch >= 0) lc_rmsnorm_bwd_chunks(p, ch, ch + 1, tid);
}

/* dx (R, C) from dy, x, w, rstd; dw (C) += the weight's gradient.  work: C floats per
 * chunk of LC_NORM_ROWS rows. */
static void lc_rmsnorm_rows_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                const float *rstd, int64_t R, int64_t C, float *work, int isa, int nthreads) {
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    lc_norm_job j = {.B = lc_norm_pick(isa), .dx = dx, .work = work, .dy = dy, .x = x, .w = w, .rs = rstd,
                     .R = R, .C = C};
    lc_norm_cursor cur[LC_NORM_BLOCKS];
    lc_norm_home(&j, nch, nch > 1 ? nthreads : 1, cur);
    lc_team_for(nch > 1 ? nthreads : 1, nch, lc_rmsnorm_bwd_unit, &j);
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t k = 0; k < C; k++) work[k] = work[k] + work[ch * C + k];
    if (nch > 0)
        for (int64_t k = 0; k < C; k++) dw[k] = dw[k] + work[k];
}

static void lc_layernorm_unit(void *p, int64_t u, int tid) {
    const lc_norm_job *j = (const lc_norm_job *)p;
    const lc_norm_body *B = j->B;
    const int64_t C = j->C;
    const int64_t q = lc_norm_take(j, tid);
    int64_t r0, n;
    (void)u;
    if (q < 0) return;
    lc_norm_groups(j, q * j->gpu, (q + 1) * j->gpu, &r0, &n);
    LC_NORM_CALLS(B, r0, n, B->ln(j->y + rr * C, j->xhat + rr * C, j->rstd + rr, j->x + rr * C, j->w, j->b, nr, C,
                                  j->eps))
}

/* rows of x (R, C) -> y, xhat (R, C) and rstd (R) */
static void lc_layernorm_rows(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                              int64_t R, int64_t C, float eps, int isa, int nthreads) {
    const int64_t ng = (R + LC_NORM_GROUP - 1) / LC_NORM_GROUP;
    lc_norm_job j = {.B = lc_norm_pick(isa), .y = y, .xhat = xhat, .rstd = rstd, .x = x, .w = w, .b = b, .R = R,
                     .C = C, .gpu = lc_norm_unit_groups(ng, C, nthreads), .eps = eps};
    lc_norm_cursor cur[LC_NORM_BLOCKS];
    lc_norm_home(&j, (ng + j.gpu - 1) / j.gpu, ng > 1 ? nthreads : 1, cur);
    lc_team_for(ng > 1 ? nthreads : 1, j.np, lc_layernorm_unit, &j);
}

static void lc_layernorm_bwd_chunks(void *p, int64_t c0, int64_t c1, int tid) {
    const lc_norm_job *j = (const lc_norm_job *)p;
    const lc_norm_body *B = j->B;
    const int64_t C = j->C;
    (void)tid;
    for (int64_t ch = c0; ch < c1; ch++) {
        float *pw = j->work + ch * 2 * C, *pb = pw + C;
        int64_t r0, n;
        lc_norm_chunk(j, ch, &r0, &n);
        for (int64_t k = 0; k < 2 * C; k++) pw[k] = 0.0f;
        LC_NORM_CALLS(B, r0, n, B->ln_bwd(j->dx + rr * C, pw, pb, j->dy + rr * C, j->xh + rr * C, j->w, j->rs + rr,
                                          nr, C))
    }
}

static void lc_layernorm_bwd_unit(void *p, int64_t u, int tid) {
    const int64_t ch = lc_norm_take((const lc_norm_job *)p, tid);
    (void)u;
    if (ch >= 0) lc_layernorm_bwd_chunks(p, ch, ch + 1, tid);
}

/* dx (R, C); dw, db (C) += their gradients.  work: 2 C floats per chunk of LC_NORM_ROWS rows. */
static void lc_layernorm_rows_bwd(float *dx, float *dw, float *db, const float *dy, const float *xhat,
                                  const float *w, const float *rstd, int64_t R, int64_t C, float *work,
                                  int isa, int nthreads) {
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    lc_norm_job j = {.B = lc_norm_pick(isa), .dx = dx, .work = work, .dy = dy, .xh = xhat, .w = w, .rs = rstd,
                     .R = R, .C = C};
    lc_norm_cursor cur[LC_NORM_BLOCKS];
    lc_norm_home(&j, nch, nch > 1 ? nthreads : 1, cur);
    lc_team_for(nch > 1 ? nthreads : 1, nch, lc_layernorm_bwd_unit, &j);
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t k = 0; k < 2 * C; k++) work[k] = work[k] + work[ch * 2 * C + k];
    if (nch > 0)
        for (int64_t k = 0; k < C; k++) {
            dw[k] = dw[k] + work[k];
            db[k] = db[k] + work[C + k];
        }
}

#endif /* LUTCORE_NORM_H */
