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

/* rows [0, R) of x (R, C) -> y, rstd (or NULL) */
static void lc_rmsnorm_rows(float *y, float *rstd, const float *x, const float *w, int64_t R, int64_t C,
                            float eps, int isa, int nthreads) {
    const lc_norm_body *B = lc_norm_pick(isa);
    const int64_t ng = (R + LC_NORM_GROUP - 1) / LC_NORM_GROUP;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(ng > 1))
    for (int64_t g = 0; g < ng; g++) {
        const int64_t r0 = g * LC_NORM_GROUP, n = R - r0 < LC_NORM_GROUP ? R - r0 : LC_NORM_GROUP;
        LC_NORM_CALLS(B, r0, n, B->rms(y + rr * C, rstd ? rstd + rr : NULL, x + rr * C, w, nr, C, eps))
    }
}

/* dx (R, C) from dy, x, w, rstd; dw (C) += the weight's gradient.  work: C floats per
 * chunk of LC_NORM_ROWS rows. */
static void lc_rmsnorm_rows_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                const float *rstd, int64_t R, int64_t C, float *work, int isa, int nthreads) {
    const lc_norm_body *B = lc_norm_pick(isa);
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(nch > 1))
    for (int64_t ch = 0; ch < nch; ch++) {
        float *part = work + ch * C;
        const int64_t r0 = ch * LC_NORM_ROWS, n = R - r0 < LC_NORM_ROWS ? R - r0 : LC_NORM_ROWS;
        for (int64_t j = 0; j < C; j++) part[j] = 0.0f;
        LC_NORM_CALLS(B, r0, n, B->rms_bwd(dx + rr * C, part, dy + rr * C, x + rr * C, w, rstd + rr, nr, C))
    }
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t j = 0; j < C; j++) work[j] = work[j] + work[ch * C + j];
    if (nch > 0)
        for (int64_t j = 0; j < C; j++) dw[j] = dw[j] + work[j];
}

/* rows of x (R, C) -> y, xhat (R, C) and rstd (R) */
static void lc_layernorm_rows(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                              int64_t R, int64_t C, float eps, int isa, int nthreads) {
    const lc_norm_body *B = lc_norm_pick(isa);
    const int64_t ng = (R + LC_NORM_GROUP - 1) / LC_NORM_GROUP;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(ng > 1))
    for (int64_t g = 0; g < ng; g++) {
        const int64_t r0 = g * LC_NORM_GROUP, n = R - r0 < LC_NORM_GROUP ? R - r0 : LC_NORM_GROUP;
        LC_NORM_CALLS(B, r0, n, B->ln(y + rr * C, xhat + rr * C, rstd + rr, x + rr * C, w, b, nr, C, eps))
    }
}

/* dx (R, C); dw, db (C) += their gradients.  work: 2 C floats per chunk of LC_NORM_ROWS rows. */
static void lc_layernorm_rows_bwd(float *dx, float *dw, float *db, const float *dy, const float *xhat,
                                  const float *w, const float *rstd, int64_t R, int64_t C, float *work,
                                  int isa, int nthreads) {
    const lc_norm_body *B = lc_norm_pick(isa);
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(nch > 1))
    for (int64_t ch = 0; ch < nch; ch++) {
        float *pw = work + ch * 2 * C, *pb = pw + C;
        const int64_t r0 = ch * LC_NORM_ROWS, n = R - r0 < LC_NORM_ROWS ? R - r0 : LC_NORM_ROWS;
        for (int64_t j = 0; j < 2 * C; j++) pw[j] = 0.0f;
        LC_NORM_CALLS(B, r0, n, B->ln_bwd(dx + rr * C, pw, pb, dy + rr * C, xhat + rr * C, w, rstd + rr, nr, C))
    }
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t j = 0; j < 2 * C; j++) work[j] = work[j] + work[ch * 2 * C + j];
    if (nch > 0)
        for (int64_t j = 0; j < C; j++) {
            dw[j] = dw[j] + work[j];
            db[j] = db[j] + work[C + j];
        }
}

#endif /* LUTCORE_NORM_H */
