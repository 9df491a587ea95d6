/* lutcore/norm.h — RMSNorm rows, forward and backward (float32).
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
 */
#ifndef LUTCORE_NORM_H
#define LUTCORE_NORM_H

#include <math.h>
#include "common.h"
#include "mathfn.h"   /* lc_rowsum_f */

#define LC_NORM_ROWS 64

static float lc_rmsnorm_row(float *out, const float *x, const float *w, int64_t C, float eps) {
    for (int64_t i = 0; i < C; i++) out[i] = x[i] * x[i];
    float ms = lc_rowsum_f(out, C) / (float)C;
    float r = 1.0f / sqrtf(ms + eps);
    for (int64_t i = 0; i < C; i++) out[i] = (x[i] * r) * w[i];
    return r;
}

/* rows [0, R) of x (R, C) -> y, rstd (or NULL) */
static void lc_rmsnorm_rows(float *y, float *rstd, const float *x, const float *w, int64_t R, int64_t C,
                            float eps, int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(R > 1))
    for (int64_t r = 0; r < R; r++) {
        float q = lc_rmsnorm_row(y + r * C, x + r * C, w, C, eps);
        if (rstd) rstd[r] = q;
    }
}

/* dx (R, C) from dy, x, w, rstd; dw (C) += the weight's gradient.  work: C floats per
 * chunk of LC_NORM_ROWS rows. */
static void lc_rmsnorm_rows_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                const float *rstd, int64_t R, int64_t C, float *work, int nthreads) {
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(nch > 1))
    for (int64_t ch = 0; ch < nch; ch++) {
        float *part = work + ch * C;
        const int64_t r1 = (ch + 1) * LC_NORM_ROWS < R ? (ch + 1) * LC_NORM_ROWS : R;
        for (int64_t j = 0; j < C; j++) part[j] = 0.0f;
        for (int64_t r = ch * LC_NORM_ROWS; r < r1; r++) {
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
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t j = 0; j < C; j++) work[j] = work[j] + work[ch * C + j];
    if (nch > 0)
        for (int64_t j = 0; j < C; j++) dw[j] = dw[j] + work[j];
}

/* rows of x (R, C) -> y, xhat (R, C) and rstd (R) */
static void lc_layernorm_rows(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                              int64_t R, int64_t C, float eps, int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(R > 1))
    for (int64_t r = 0; r < R; r++) {
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

/* dx (R, C); dw, db (C) += their gradients.  work: 2 C floats per chunk of LC_NORM_ROWS rows. */
static void lc_layernorm_rows_bwd(float *dx, float *dw, float *db, const float *dy, const float *xhat,
                                  const float *w, const float *rstd, int64_t R, int64_t C, float *work,
                                  int nthreads) {
    const int64_t nch = (R + LC_NORM_ROWS - 1) / LC_NORM_ROWS;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(nch > 1))
    for (int64_t ch = 0; ch < nch; ch++) {
        float *pw = work + ch * 2 * C, *pb = pw + C;
        const int64_t r1 = (ch + 1) * LC_NORM_ROWS < R ? (ch + 1) * LC_NORM_ROWS : R;
        for (int64_t j = 0; j < 2 * C; j++) pw[j] = 0.0f;
        for (int64_t r = ch * LC_NORM_ROWS; r < r1; r++) {
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
    for (int64_t ch = 1; ch < nch; ch++)
        for (int64_t j = 0; j < 2 * C; j++) work[j] = work[j] + work[ch * 2 * C + j];
    if (nch > 0)
        for (int64_t j = 0; j < C; j++) {
            dw[j] = dw[j] + work[j];
            db[j] = db[j] + work[C + j];
        }
}

#endif /* LUTCORE_NORM_H */
