/* csrc/conv/conv.h — causal depthwise conv1d (PyTorch tap order), fwd/bwd/step.
 *
 *   y[b,t,d] = bias[d] + sum_k w[d,k] x[b, t-(K-1)+k, d]   (zero before t = 0)
 *
 * Buffers: x, y, dx, dy (B, L, D); wt (K, D) = the weight transposed so a tap
 * is contiguous over channels; bias, db (D,); dwt (K, D); state (B, K-1, D).
 * Each output sums in a fixed order: bias first, then taps k = 0..K-1.  The
 * forward and dx split (batch, time) rows across threads; dw and db split
 * channels and sum over (b, t) in order, so no reduction depends on threads.
 * The inner loops run over contiguous channels; the same C is compiled once
 * portable, once for AVX2 and once, in csrc/conv/x86/avx512.c, for AVX-512
 * (per-element arithmetic identical, no FMA).
 */
#ifndef LUTCORE_CONV_H
#define LUTCORE_CONV_H

#include "core/common.h"
#include "core/dispatch.h"

#define LC_CONV_ROWS 16
#define LC_CONV_DCH 64

#define LC_CONV_BODIES(ST, SUF)                                                                      \
static inline __attribute__((always_inline)) void lc_conv_fwd_rows_##SUF(ST *y, const ST *x,         \
        const ST *wt, const ST *bias, int64_t b, int64_t t0, int64_t t1, int64_t L, int64_t D, int64_t K) { \
    for (int64_t t = t0; t < t1; t++) {                                                              \
        ST *yr = y + (b * L + t) * D;                                                                \
        if (bias) for (int64_t d = 0; d < D; d++) yr[d] = bias[d];                                   \
        else for (int64_t d = 0; d < D; d++) yr[d] = 0;                                              \
        for (int64_t k = 0; k < K; k++) {                                                            \
            int64_t s = t - (K - 1) + k;                                                             \
            if (s < 0) continue;                                                                     \
            const ST *xr = x + (b * L + s) * D, *w = wt + k * D;                                      \
            for (int64_t d = 0; d < D; d++) yr[d] = yr[d] + w[d] * xr[d];                             \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
static inline __attribute__((always_inline)) void lc_conv_dx_rows_##SUF(ST *dx, const ST *dy,         \
        const ST *wt, int64_t b, int64_t s0, int64_t s1, int64_t L, int64_t D, int64_t K) {           \
    for (int64_t s = s0; s < s1; s++) {                                                              \
        ST *o = dx + (b * L + s) * D;                                                                \
        for (int64_t d = 0; d < D; d++) o[d] = 0;                                                    \
        for (int64_t k = 0; k < K; k++) {                                                            \
            int64_t t = s + (K - 1) - k;                                                             \
            if (t >= L) continue;                                                                    \
            const ST *g = dy + (b * L + t) * D, *w = wt + k * D;                                      \
            for (int64_t d = 0; d < D; d++) o[d] = o[d] + w[d] * g[d];                                \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
static inline __attribute__((always_inline)) void lc_conv_dw_chunk_##SUF(ST *dwt, ST *db,             \
        const ST *dy, const ST *x, int64_t d0, int64_t d1, int64_t Bsz, int64_t L, int64_t D, int64_t K) { \
    for (int64_t k = 0; k < K; k++) for (int64_t d = d0; d < d1; d++) dwt[k * D + d] = 0;              \
    if (db) for (int64_t d = d0; d < d1; d++) db[d] = 0;                                             \
    for (int64_t b = 0; b < Bsz; b++)                                                                \
        for (int64_t t = 0; t < L; t++) {                                                            \
            const ST *g = dy + (b * L + t) * D;                                                      \
            if (db) for (int64_t d = d0; d < d1; d++) db[d] = db[d] + g[d];                          \
            for (int64_t k = 0; k < K; k++) {                                                        \
                int64_t s = t - (K - 1) + k;                                                         \
                if (s < 0) continue;                                                                 \
                const ST *xr = x + (b * L + s) * D;                                                  \
                ST *w = dwt + k * D;                                                                 \
                for (int64_t d = d0; d < d1; d++) w[d] = w[d] + g[d] * xr[d];                         \
            }                                                                                        \
        }                                                                                            \
}

LC_CONV_BODIES(float, f32)
LC_CONV_BODIES(double, f64)

#if LC_X86
LC_TARGET_AVX2 static void lc_conv_fwd_rows_f32_avx2(float *y, const float *x, const float *wt, const float *bias,
        int64_t b, int64_t t0, int64_t t1, int64_t L, int64_t D, int64_t K) {
    lc_conv_fwd_rows_f32(y, x, wt, bias, b, t0, t1, L, D, K);
}
LC_TARGET_AVX2 static void lc_conv_dx_rows_f32_avx2(float *dx, const float *dy, const float *wt, int64_t b,
        int64_t s0, int64_t s1, int64_t L, int64_t D, int64_t K) {
    lc_conv_dx_rows_f32(dx, dy, wt, b, s0, s1, L, D, K);
}
LC_TARGET_AVX2 static void lc_conv_dw_chunk_f32_avx2(float *dwt, float *db, const float *dy, const float *x,
        int64_t d0, int64_t d1, int64_t Bsz, int64_t L, int64_t D, int64_t K) {
    lc_conv_dw_chunk_f32(dwt, db, dy, x, d0, d1, Bsz, L, D, K);
}
#endif

/* ------------------------------------------------------------ the float32 body table
 * The AVX-512 body lives in its own translation unit (conv/x86/x86.h, csrc/conv/x86/avx512.c);
 * LC_CONV_SIMDE (setup.py: 1 in the test twin's build) binds its SIMDe copy. */
#include "conv/x86/x86.h"
#ifndef LC_CONV_SIMDE
#define LC_CONV_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*fwd_rows)(float *, const float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t,
                     int64_t, int64_t);
    void (*dx_rows)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
    void (*dw_chunk)(float *, float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t,
                     int64_t);
} lc_conv_body;
static const lc_conv_body lc_conv_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_CONV_SIMDE, avx512, conv_fwd_rows),
     LC_XBODY(LC_CONV_SIMDE, avx512, conv_dx_rows), LC_XBODY(LC_CONV_SIMDE, avx512, conv_dw_chunk)},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_conv_fwd_rows_f32_avx2, lc_conv_dx_rows_f32_avx2, lc_conv_dw_chunk_f32_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_conv_fwd_rows_f32, lc_conv_dx_rows_f32, lc_conv_dw_chunk_f32},
};
LC_BODY_TABLE(lc_conv_body, lc_conv, lc_conv_bodies)   /* lc_conv_pick(isa), lc_conv_body_name(isa) */

/* the row functions: float32 through the table's body for isa, float64 the generic ones */
#define LC_CONV_F32(fn, ...) lc_conv_pick(isa)->fn(__VA_ARGS__)
#define LC_CONV_F64(fn, ...) lc_conv_##fn##_f64(__VA_ARGS__)

#define LC_CONV_DRIVERS(ST, SUF, DISP)                                                               \
static void lc_conv_fwd_##SUF(ST *y, const ST *x, const ST *wt, const ST *bias, int64_t Bsz, int64_t L, \
                              int64_t D, int64_t K, int isa, int nthreads) {                         \
    int64_t nr = (L + LC_CONV_ROWS - 1) / LC_CONV_ROWS;                                              \
    (void)isa;                                                                                       \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))                               \
    for (int64_t w = 0; w < Bsz * nr; w++) {                                                         \
        int64_t b = w / nr, t0 = (w % nr) * LC_CONV_ROWS, t1 = t0 + LC_CONV_ROWS < L ? t0 + LC_CONV_ROWS : L; \
        DISP(fwd_rows, y, x, wt, bias, b, t0, t1, L, D, K);                                          \
    }                                                                                                \
}                                                                                                    \
static void lc_conv_bwd_##SUF(ST *dx, ST *dwt, ST *db, const ST *dy, const ST *x, const ST *wt,       \
                              int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads) {  \
    int64_t nr = (L + LC_CONV_ROWS - 1) / LC_CONV_ROWS;                                              \
    int64_t nd = (D + LC_CONV_DCH - 1) / LC_CONV_DCH;                                                \
    (void)isa;                                                                                       \
    LC_PRAGMA(omp parallel num_threads(nthreads))                                                    \
    {                                                                                                \
        if (dx) {                                                                                    \
            LC_PRAGMA(omp for schedule(static) nowait)                                               \
            for (int64_t w = 0; w < Bsz * nr; w++) {                                                 \
                int64_t b = w / nr, s0 = (w % nr) * LC_CONV_ROWS, s1 = s0 + LC_CONV_ROWS < L ? s0 + LC_CONV_ROWS : L; \
                DISP(dx_rows, dx, dy, wt, b, s0, s1, L, D, K);                                       \
            }                                                                                        \
        }                                                                                            \
        LC_PRAGMA(omp for schedule(static))                                                          \
        for (int64_t c = 0; c < nd; c++) {                                                           \
            int64_t d0 = c * LC_CONV_DCH, d1 = d0 + LC_CONV_DCH < D ? d0 + LC_CONV_DCH : D;           \
            DISP(dw_chunk, dwt, db, dy, x, d0, d1, Bsz, L, D, K);                                    \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
/* One decoding step: y (B, D) from x_t (B, D) and the previous K-1 inputs in    \
 * state (B, K-1, D), oldest first; then state shifts left and takes x_t. */    \
static void lc_conv_step_##SUF(ST *y, ST *state, const ST *xt, const ST *wt, const ST *bias,          \
                               int64_t Bsz, int64_t D, int64_t K) {                                  \
    for (int64_t b = 0; b < Bsz; b++) {                                                              \
        ST *yr = y + b * D, *st = state + b * (K - 1) * D;                                           \
        const ST *xr = xt + b * D;                                                                   \
        for (int64_t d = 0; d < D; d++) yr[d] = bias ? bias[d] : 0;                                  \
        for (int64_t k = 0; k < K - 1; k++)                                                          \
            for (int64_t d = 0; d < D; d++) yr[d] = yr[d] + wt[k * D + d] * st[k * D + d];            \
        for (int64_t d = 0; d < D; d++) yr[d] = yr[d] + wt[(K - 1) * D + d] * xr[d];                  \
        if (K > 1) {                                                                                 \
            memmove(st, st + D, (size_t)((K - 2) * D) * sizeof(ST));                                 \
            memcpy(st + (K - 2) * D, xr, (size_t)D * sizeof(ST));                                   \
        }                                                                                            \
    }                                                                                                \
}

LC_CONV_DRIVERS(float, f32, LC_CONV_F32)
LC_CONV_DRIVERS(double, f64, LC_CONV_F64)

#endif /* LUTCORE_CONV_H */
