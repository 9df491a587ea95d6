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

/* The AVX-512 body lives in its own translation unit (conv/x86.h, csrc/conv/x86/avx512.c),
 * built where setup.py defines LC_HAVE_X86_BODIES; LC_CONV_SIMDE binds its copy
 * built with the AVX2 flags (the test-only extension). */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#include "conv/x86/x86.h"
#define LC_CONV_X86 1
#if defined(LC_CONV_SIMDE)
#define LC_CONV_X512(fn) lc_simde_avx512_##fn
#else
#define LC_CONV_X512(fn) lc_avx512_##fn
#endif
#else
#define LC_CONV_X86 0
#endif
static const char *lc_conv_body_name(int isa) {
    if (LC_CONV_X86 && isa >= LC_ISA_AVX512) return "avx512";
    return isa >= LC_ISA_AVX2 && LC_X86 ? "avx2" : "generic";
}

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
#if LC_CONV_X86
/* fn is lc_conv_<name>_f32: the AVX-512 body is lc_avx512_conv_<name> */
#define LC_CONV_AVX512_lc_conv_fwd_rows_f32 LC_CONV_X512(conv_fwd_rows)
#define LC_CONV_AVX512_lc_conv_dx_rows_f32 LC_CONV_X512(conv_dx_rows)
#define LC_CONV_AVX512_lc_conv_dw_chunk_f32 LC_CONV_X512(conv_dw_chunk)
#define LC_CONV_ISA(fn, ...)                                                                         \
    do {                                                                                             \
        if (isa >= LC_ISA_AVX512) LC_CONV_AVX512_##fn(__VA_ARGS__);                                  \
        else if (isa >= LC_ISA_AVX2) fn##_avx2(__VA_ARGS__);                                         \
        else fn(__VA_ARGS__);                                                                        \
    } while (0)
#else
#define LC_CONV_ISA(fn, ...) do { if (isa >= LC_ISA_AVX2) fn##_avx2(__VA_ARGS__); else fn(__VA_ARGS__); } while (0)
#endif
#else
#define LC_CONV_ISA(fn, ...) fn(__VA_ARGS__)
#endif
#define LC_CONV_PLAIN(fn, ...) fn(__VA_ARGS__)

#define LC_CONV_DRIVERS(ST, SUF, DISP)                                                               \
static void lc_conv_fwd_##SUF(ST *y, const ST *x, const ST *wt, const ST *bias, int64_t Bsz, int64_t L, \
                              int64_t D, int64_t K, int isa, int nthreads) {                         \
    int64_t nr = (L + LC_CONV_ROWS - 1) / LC_CONV_ROWS;                                              \
    (void)isa;                                                                                       \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))                               \
    for (int64_t w = 0; w < Bsz * nr; w++) {                                                         \
        int64_t b = w / nr, t0 = (w % nr) * LC_CONV_ROWS, t1 = t0 + LC_CONV_ROWS < L ? t0 + LC_CONV_ROWS : L; \
        DISP(lc_conv_fwd_rows_##SUF, y, x, wt, bias, b, t0, t1, L, D, K);                             \
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
                DISP(lc_conv_dx_rows_##SUF, dx, dy, wt, b, s0, s1, L, D, K);                          \
            }                                                                                        \
        }                                                                                            \
        LC_PRAGMA(omp for schedule(static))                                                          \
        for (int64_t c = 0; c < nd; c++) {                                                           \
            int64_t d0 = c * LC_CONV_DCH, d1 = d0 + LC_CONV_DCH < D ? d0 + LC_CONV_DCH : D;           \
            DISP(lc_conv_dw_chunk_##SUF, dwt, db, dy, x, d0, d1, Bsz, L, D, K);                       \
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

LC_CONV_DRIVERS(float, f32, LC_CONV_ISA)
LC_CONV_DRIVERS(double, f64, LC_CONV_PLAIN)

#endif /* LUTCORE_CONV_H */
