/* csrc/optim/optim.h — fused AdamW step and the float64 sum of squares.
 *
 * AdamW (docs/DESIGN.md), per element, one pass over (p, g, m, v):
 *   g' = g * gscale                      (gradient clipping / unscaling, fused)
 *   m  = b1 m + (1 - b1) g'
 *   v  = b2 v + (1 - b2) g' g'
 *   s  = (m * (lr / bc1)) / (sqrt(v) * (1 / sqrt(bc2)) + eps);  non-finite s -> 0
 *        (torch's arrangement: one division and one square root per element;
 *        lr/bc1 and 1/sqrt(bc2) are formed once per step in double)
 *   s  = clamp(s, -max_delta, max_delta)   when max_delta > 0 (trust region)
 *   p  = p (1 - lr wd) - s                 (decoupled decay, outside the region)
 * float32 arithmetic in exactly this order, no FMA: the portable, AVX2 and
 * AVX-512 bodies give the same bits, and any thread count too (elementwise).
 *
 * Sum of squares: float64 over fixed chunks of LC_SS_CHUNK elements, each
 * chunk summed in 4 interleaved lanes then ((l0+l1)+(l2+l3)); chunk partials
 * are added serially in order — independent of the thread count.  Threads take
 * groups of four chunks, whose add chains run side by side.
 */
#ifndef LUTCORE_OPTIM_H
#define LUTCORE_OPTIM_H

#include "core/common.h"
#include "core/dispatch.h"
#include <math.h>

#define LC_OPT_CHUNK 32768
#define FLT_MAX_ 3.40282347e+38f
#define LC_SS_CHUNK 16384

typedef struct {
    float b1, b2, c1, c2, eps, step_size, inv_sqrt_bc2, decay, max_delta, gscale;
} lc_adamw_hp;

static inline void lc_adamw_generic(float *p, const float *g, float *m, float *v, int64_t n,
                                    const lc_adamw_hp *h) {
    for (int64_t i = 0; i < n; i++) {
        float gg = g[i] * h->gscale;
        float mi = h->b1 * m[i] + h->c1 * gg;
        float vi = h->b2 * v[i] + h->c2 * (gg * gg);
        m[i] = mi;
        v[i] = vi;
        float s = (mi * h->step_size) / (sqrtf(vi) * h->inv_sqrt_bc2 + h->eps);
        if (!(fabsf(s) <= FLT_MAX_)) s = 0.0f;
        if (h->max_delta > 0.0f) s = s > h->max_delta ? h->max_delta : (s < -h->max_delta ? -h->max_delta : s);
        p[i] = p[i] * h->decay - s;
    }
}

/* the AVX2 body lc_adamw_avx2: csrc/optim/vadamw.h at 8 lanes (x86/avx512.c compiles it at 16) */
#if LC_X86
#define LC_VEC_W 8
#include "core/vec.h"
#undef LC_VEC_W
#define LC_VR_NAME(n) lc_##n##_avx2
#define LC_VR_FN LC_TARGET_AVX2 static
#include "optim/vadamw.h"
#undef LC_VR_NAME
#undef LC_VR_FN
#endif

static inline double lc_sumsq_chunk_generic(const float *x, int64_t n) {
    double l[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) { double d = (double)x[i + j]; l[j] = l[j] + d * d; }
    for (int j = 0; i < n; i++, j++) { double d = (double)x[i]; l[j] = l[j] + d * d; }
    return (l[0] + l[1]) + (l[2] + l[3]);
}
#if LC_X86
LC_TARGET_AVX2 static double lc_sumsq_chunk_avx2(const float *x, int64_t n) {
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        acc = _mm256_add_pd(acc, _mm256_mul_pd(d, d));
    }
    double l[4];
    _mm256_storeu_pd(l, acc);
    for (int j = 0; i < n; i++, j++) { double d = (double)x[i]; l[j] = l[j] + d * d; }
    return (l[0] + l[1]) + (l[2] + l[3]);
}
/* Four whole chunks at once: each keeps its own accumulator (so its own bits), and
 * the four add chains overlap (one chain waits on the adder's latency: half the
 * memory bandwidth). */
LC_TARGET_AVX2 static void lc_sumsq_chunk4_avx2(double *out, const float *const *x) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    for (int64_t i = 0; i < LC_SS_CHUNK; i += 4) {
        __m256d d0 = _mm256_cvtps_pd(_mm_loadu_ps(x[0] + i)), d1 = _mm256_cvtps_pd(_mm_loadu_ps(x[1] + i));
        __m256d d2 = _mm256_cvtps_pd(_mm_loadu_ps(x[2] + i)), d3 = _mm256_cvtps_pd(_mm_loadu_ps(x[3] + i));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(d2, d2));
        a3 = _mm256_add_pd(a3, _mm256_mul_pd(d3, d3));
    }
    __m256d acc[4] = {a0, a1, a2, a3};
    for (int q = 0; q < 4; q++) {
        double l[4];
        _mm256_storeu_pd(l, acc[q]);
        out[q] = (l[0] + l[1]) + (l[2] + l[3]);
    }
}
#endif

/* ------------------------------------------------------------ the body table
 * AdamW's AVX-512 body lives in its own translation unit (optim/x86/x86.h,
 * csrc/optim/x86/avx512.c); LC_OPTIM_SIMDE (setup.py: 1 in the test twin's build) binds its
 * SIMDe copy.  The sum of squares has no AVX-512 body: that entry runs the AVX2 one. */
#include "optim/x86/x86.h"
#ifndef LC_OPTIM_SIMDE
#define LC_OPTIM_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*adamw)(float *, const float *, float *, float *, int64_t, const lc_adamw_hp *);   /* one chunk */
    double (*sumsq_chunk)(const float *, int64_t);
    void (*sumsq_chunk4)(double *, const float *const *);   /* four whole chunks (NULL: one by one) */
} lc_optim_body;
static const lc_optim_body lc_optim_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_OPTIM_SIMDE, avx512, adamw), lc_sumsq_chunk_avx2, lc_sumsq_chunk4_avx2},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_adamw_avx2, lc_sumsq_chunk_avx2, lc_sumsq_chunk4_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_adamw_generic, lc_sumsq_chunk_generic, NULL},
};
LC_BODY_TABLE(lc_optim_body, lc_optim, lc_optim_bodies)   /* lc_optim_pick(isa), lc_optim_body_name(isa) */

/* One piece (a chunk) of the update on the ISA's body. */
static inline void lc_adamw_piece(float *p, const float *g, float *m, float *v, int64_t len, const lc_adamw_hp *h,
                                  int isa) {
    lc_optim_pick(isa)->adamw(p, g, m, v, len, h);
}

/* cnt <= 4 chunks (xs[q], ls[q]) into part[0 .. cnt): four whole ones together,
 * else one by one; the same sums either way. */
static inline void lc_sumsq_group(double *part, const float *const *xs, const int64_t *ls, int cnt, int isa) {
    const lc_optim_body *b = lc_optim_pick(isa);
    if (b->sumsq_chunk4 && cnt == 4 && ls[0] == LC_SS_CHUNK && ls[1] == LC_SS_CHUNK && ls[2] == LC_SS_CHUNK &&
        ls[3] == LC_SS_CHUNK) {
        b->sumsq_chunk4(part, xs);
        return;
    }
    for (int q = 0; q < cnt; q++) part[q] = b->sumsq_chunk(xs[q], ls[q]);
}

/* The drivers run on the team (core/team.h): one unit per chunk (LC_OPT_CHUNK elements, or a
 * piece of a chunk list), whichever thread computes it; the sums of squares' units are the
 * groups of four LC_SS_CHUNK pieces, their partials added after the job in piece order. */
typedef struct {
    const lc_optim_body *B;
    const lc_adamw_hp *h;
    int isa;
    /* one tensor (lc_adamw) */
    float *p, *m, *v;
    const float *g;
    int64_t n;
    /* a chunk list (the multi-tensor passes) */
    float **ps, **ms, **vs;
    const float *const *gs;
    const int64_t *ns, *tix, *off;
    int64_t total, ngr;
    double *part;
} lc_optim_job;

static void lc_adamw_unit(void *q, int64_t u, int tid) {
    const lc_optim_job *j = (const lc_optim_job *)q;
    const int64_t i0 = u * LC_OPT_CHUNK, len = j->n - i0 < LC_OPT_CHUNK ? j->n - i0 : LC_OPT_CHUNK;
    (void)tid;
    j->B->adamw(j->p + i0, j->g + i0, j->m + i0, j->v + i0, len, j->h);
}

static void lc_adamw(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h,
                     int isa, int nthreads) {
    lc_optim_job j = {.B = lc_optim_pick(isa), .h = h, .isa = isa, .p = p, .m = m, .v = v, .g = g, .n = n};
    lc_team_for(nthreads, (n + LC_OPT_CHUNK - 1) / LC_OPT_CHUNK, lc_adamw_unit, &j);
}

/* The chunks of many tensors as one flat list: chunk k is tensor tix[k] from element
 * off[k] = tix[*total + k].  Returns tix (the caller frees it), NULL when out of memory. */
static int64_t *lc_chunk_list(const int64_t *n, int64_t ntensors, int64_t chunk, int64_t *total) {
    int64_t tot = 0, c = 0;
    for (int64_t t = 0; t < ntensors; t++) tot += (n[t] + chunk - 1) / chunk;
    int64_t *tix = (int64_t *)malloc((size_t)(tot > 0 ? tot : 1) * 2 * sizeof(int64_t));
    if (!tix) return NULL;
    for (int64_t t = 0; t < ntensors; t++)
        for (int64_t i = 0; i < n[t]; i += chunk) { tix[c] = t; tix[tot + c] = i; c++; }
    *total = tot;
    return tix;
}

/* piece k of a chunk list of pieces of `chunk` elements, updated with the hyperparameters hp */
static inline void lc_adamw_list_piece(const lc_optim_job *j, int64_t k, int64_t chunk, const lc_adamw_hp *hp) {
    const int64_t t = j->tix[k], i0 = j->off[k], len = j->ns[t] - i0 < chunk ? j->ns[t] - i0 : chunk;
    lc_adamw_piece(j->ps[t] + i0, j->gs[t] + i0, j->ms[t] + i0, j->vs[t] + i0, len, hp, j->isa);
}

static void lc_adamw_multi_unit(void *q, int64_t k, int tid) {
    const lc_optim_job *j = (const lc_optim_job *)q;
    (void)tid;
    lc_adamw_list_piece(j, k, LC_OPT_CHUNK, j->h);
}

/* Many tensors in one job over their chunk list.  Elementwise, so the bits equal one call
 * per tensor. */
static void lc_adamw_multi(float **p, float **g, float **m, float **v, const int64_t *n, int64_t ntensors,
                           const lc_adamw_hp *h, int isa, int nthreads) {
    int64_t total = 0;
    int64_t *tix = lc_chunk_list(n, ntensors, LC_OPT_CHUNK, &total);
    if (!tix) { for (int64_t t = 0; t < ntensors; t++) lc_adamw(p[t], g[t], m[t], v[t], n[t], h, isa, nthreads); return; }
    lc_optim_job j = {.h = h, .isa = isa, .ps = p, .ms = m, .vs = v, .gs = (const float *const *)g, .ns = n,
                      .tix = tix, .off = tix + total, .total = total};
    lc_team_for(nthreads, total, lc_adamw_multi_unit, &j);
    free(tix);
}

/* Sum of squares of many tensors (the order above): out[t] for tensor t. */
/* Norm group w of a chunk list (tix: each piece's tensor, off: its first element; pieces of
 * LC_SS_CHUNK): the sums of squares of its up to four pieces into part[4w ..]. */
static inline void lc_sumsq_group_at(double *part, const float **x, const int64_t *n, const int64_t *tix,
                                     const int64_t *off, int64_t total, int64_t w, int isa) {
    const float *xs[4];
    int64_t ls[4];
    int cnt = 0;
    for (int64_t k = 4 * w; k < total && cnt < 4; k++, cnt++) {
        int64_t t = tix[k], i0 = off[k];
        xs[cnt] = x[t] + i0;
        ls[cnt] = n[t] - i0 < LC_SS_CHUNK ? n[t] - i0 : LC_SS_CHUNK;
    }
    lc_sumsq_group(part + 4 * w, xs, ls, cnt, isa);
}

static void lc_sumsq_unit(void *q, int64_t w, int tid) {
    const lc_optim_job *j = (const lc_optim_job *)q;
    (void)tid;
    lc_sumsq_group_at(j->part, (const float **)j->gs, j->ns, j->tix, j->off, j->total, w, j->isa);
}

static int lc_sumsq_multi(double *out, const float **x, const int64_t *n, int64_t ntensors, int isa, int nthreads) {
    int64_t total = 0;
    int64_t *tix = lc_chunk_list(n, ntensors, LC_SS_CHUNK, &total);
    double *part = (double *)malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!tix || !part) { free(tix); free(part); return 1; }
    lc_optim_job j = {.isa = isa, .gs = x, .ns = n, .tix = tix, .off = tix + total, .total = total, .part = part};
    lc_team_for(nthreads, (total + 3) / 4, lc_sumsq_unit, &j);
    int64_t c = 0;
    for (int64_t t = 0; t < ntensors; t++) {
        double s = 0.0;
        for (int64_t i = 0; i < n[t]; i += LC_SS_CHUNK) s = s + part[c++];
        out[t] = s;
    }
    free(tix);
    free(part);
    return 0;
}

/* The whole step of lutcore.train.AdamW in one native call, two team jobs:
 *   1. the norm pass: the chunk list of LC_SS_CHUNK pieces in groups of four, exactly as
 *      lc_sumsq_multi (the same units and partials, so the same sums);
 *   2. on the caller, Python's arithmetic of AdamW.step written out in double, in its order:
 *      total = ((0 + s_0) + s_1) + ... over the tensors in the caller's (sorted) order,
 *      norm = sqrt(total) (NaN when total is not finite) * |grad_scale|; a norm that is not
 *      finite or >= safe_norm stops here (return 1, nothing written: the caller skips the step
 *      or checks the overflow exactly and calls lc_adamw_multi itself); clip =
 *      max_grad_norm / (norm + 1e-6) when 0 < max_grad_norm < norm, else 1;
 *      h->gscale = (float)(grad_scale * clip);
 *   3. the update, the same element-wise body per piece, one unit per norm group, the groups
 *      handed out last first and each group's pieces walked backwards: the first units start
 *      on the gradients read last (still in L2 / the L3) instead of those read first (long
 *      evicted).  Element-wise, so the pieces and their order change no bit.
 * Returns 0 (updated; io->norm, io->clip, h->gscale set), 1 (not updated; io->norm set), -1
 * (out of memory: nothing done).  The team's split depends on nthreads, the bits do not.
 *   p, m, v  [ntensors][n[t]] float32 IN/OUT     g [ntensors][n[t]] float32 IN
 *   io       IN grad_scale, max_grad_norm (0: none), safe_norm; OUT norm, clip
 *   h        the step's constants IN; gscale OUT (what the update used)
 */
typedef struct {
    double grad_scale, max_grad_norm, safe_norm; /* IN */
    double norm, clip;                           /* OUT */
} lc_adamw_step_io;

static void lc_adamw_step_unit(void *q, int64_t u, int tid) {
    const lc_optim_job *j = (const lc_optim_job *)q;
    const int64_t w = j->ngr - 1 - u, k1 = 4 * w + 4 < j->total ? 4 * w + 4 : j->total;
    (void)tid;
    for (int64_t k = k1 - 1; k >= 4 * w; k--) lc_adamw_list_piece(j, k, LC_SS_CHUNK, j->h);
}

static int lc_adamw_step_multi(lc_adamw_step_io *io, float **p, float **g, float **m, float **v, const int64_t *n,
                               int64_t ntensors, lc_adamw_hp *h, int isa, int nthreads) {
    int64_t total = 0;
    int64_t *tix = lc_chunk_list(n, ntensors, LC_SS_CHUNK, &total);
    double *part = (double *)malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!tix || !part) { free(tix); free(part); return -1; }
    lc_adamw_hp hl = *h;
    lc_optim_job j = {.h = &hl, .isa = isa, .ps = p, .ms = m, .vs = v, .gs = (const float *const *)g, .ns = n,
                      .tix = tix, .off = tix + total, .total = total, .ngr = (total + 3) / 4, .part = part};
    lc_team_for(nthreads, j.ngr, lc_sumsq_unit, &j);
    double tot = 0.0;
    int64_t c = 0;
    for (int64_t t = 0; t < ntensors; t++) {
        double st = 0.0;
        for (int64_t i = 0; i < n[t]; i += LC_SS_CHUNK) st = st + part[c++];
        tot = tot + st;
    }
    double norm = (isfinite(tot) ? sqrt(tot) : (double)NAN) * fabs(io->grad_scale), clip = 1.0;
    const int go = isfinite(norm) && norm < io->safe_norm;
    if (go) {
        if (io->max_grad_norm > 0.0 && norm > io->max_grad_norm) clip = io->max_grad_norm / (norm + 1e-6);
        hl.gscale = (float)(io->grad_scale * clip);
        lc_team_for(nthreads, j.ngr, lc_adamw_step_unit, &j);
    }
    io->norm = norm;
    io->clip = clip;
    free(tix);
    free(part);
    h->gscale = hl.gscale;
    return go ? 0 : 1;
}

#endif /* LUTCORE_OPTIM_H */
