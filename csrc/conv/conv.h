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

/* Row blocks (LC_CONV_ROWS rows of one batch) per work unit: at least about this many
 * multiply-adds (a unit costs a claim). */
#define LC_CONV_UNIT_OPS (1 << 17)
static inline int64_t lc_conv_blocks_per_unit(int64_t D, int64_t K) {
    const int64_t ops = LC_CONV_ROWS * (D > 0 ? D : 1) * (K > 0 ? K : 1);
    return ops >= LC_CONV_UNIT_OPS ? 1 : (LC_CONV_UNIT_OPS + ops - 1) / ops;
}

/* Ranges of at least `grain` items, at most two a thread, each thread taking those of its
 * static share first (thread t of T: ranges [R t / T, R (t + 1) / T), ascending), then any
 * left, the others' shares from their ends: a call repeated on the same arrays finds its
 * rows in the caches of the thread that had them last time (dealt in claim order, the
 * forward over 24 MB ran 15-25% slower at 2 threads than OpenMP's static halves; with four
 * ranges a thread, ~10%), and a thread that comes late still leaves half its share to the
 * others.  A unit of the team is a ticket: it claims a range by its flag, so each range
 * runs once (the bits of a range do not depend on the thread). */
#define LC_CONV_AFF_MAX 256
typedef struct {
    lc_range_fn fn;
    void *ctx;
    int64_t n, nr;
    int nt;
    int taken[LC_CONV_AFF_MAX];
} lc_conv_aff_job;

static void lc_conv_aff_unit(void *p, int64_t u, int tid) {
    lc_conv_aff_job *a = (lc_conv_aff_job *)p;
    const int64_t R = a->nr, r0 = R * tid / a->nt, r1 = R * (tid + 1) / a->nt;
    (void)u;
    for (int64_t k = 0; k < R; k++) {
        const int64_t r = k < r1 - r0 ? r0 + k : (r0 + R - 1 - (k - (r1 - r0))) % R;   /* own, then back from r0 - 1 */
        if (__atomic_load_n(&a->taken[r], __ATOMIC_RELAXED) || __atomic_exchange_n(&a->taken[r], 1, __ATOMIC_ACQ_REL))
            continue;
        a->fn(a->ctx, a->n * r / R, a->n * (r + 1) / R, tid);
        return;
    }
}

static void lc_conv_aff_range(int nthreads, int64_t n, int64_t grain, lc_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t R = (n + grain - 1) / grain, most = 2 * (int64_t)(nthreads > 1 ? nthreads : 1);
    if (R > most) R = most;
    if (nthreads <= 1 || R <= 1 || R > LC_CONV_AFF_MAX) {
        lc_team_range(nthreads, n, grain, fn, ctx);
        return;
    }
    lc_conv_aff_job a;
    a.fn = fn, a.ctx = ctx, a.n = n, a.nr = R, a.nt = nthreads < R ? nthreads : (int)R;
    memset(a.taken, 0, (size_t)R * sizeof(int));
    lc_team_for(a.nt, R, lc_conv_aff_unit, &a);
}

#define LC_CONV_DRIVERS(ST, SUF, DISP)                                                               \
/* a call's job on the team: the forward's row blocks; the backward's dw channel chunks     \
 * (units [0, nd)), then dx's row blocks (units [nd, nd + ndx), bpu blocks a unit).  A dw   \
 * chunk sums into its thread's scratch (K + 1 rows of D: dwt's and db's layout, scr_n      \
 * apart), then copies its columns out: two chunks side by side, on two threads, would      \
 * otherwise both add into the cache line their boundary shares, every (b, t) (the same     \
 * sums in the same order either way: the same bits). */                                   \
typedef struct {                                                                                     \
    ST *y, *dx, *dwt, *db, *scr;                                                                     \
    const ST *x, *dy, *wt, *bias;                                                                    \
    int64_t Bsz, L, D, K, nr, nd, bpu, scr_n;                                                        \
    int isa;                                                                                         \
} lc_conv_job_##SUF;                                                                                 \
static void lc_conv_fwd_range_##SUF(void *ctx, int64_t w0, int64_t w1, int tid) {                   \
    const lc_conv_job_##SUF *j = (const lc_conv_job_##SUF *)ctx;                                     \
    const int isa = j->isa;                                                                          \
    const int64_t nr = j->nr, L = j->L;                                                              \
    (void)isa, (void)tid;                                                                            \
    for (int64_t w = w0; w < w1; w++) {                                                              \
        int64_t b = w / nr, t0 = (w % nr) * LC_CONV_ROWS, t1 = t0 + LC_CONV_ROWS < L ? t0 + LC_CONV_ROWS : L; \
        DISP(fwd_rows, j->y, j->x, j->wt, j->bias, b, t0, t1, L, j->D, j->K);                        \
    }                                                                                                \
}                                                                                                    \
static void lc_conv_fwd_##SUF(ST *y, const ST *x, const ST *wt, const ST *bias, int64_t Bsz, int64_t L, \
                              int64_t D, int64_t K, int isa, int nthreads) {                         \
    lc_conv_job_##SUF j = {.y = y, .x = x, .wt = wt, .bias = bias, .Bsz = Bsz, .L = L, .D = D, .K = K, \
                           .nr = (L + LC_CONV_ROWS - 1) / LC_CONV_ROWS, .isa = isa};                 \
    lc_conv_aff_range(nthreads, Bsz * j.nr, lc_conv_blocks_per_unit(D, K), lc_conv_fwd_range_##SUF, &j); \
}                                                                                                    \
static void lc_conv_bwd_unit_##SUF(void *ctx, int64_t u, int tid) {                                  \
    const lc_conv_job_##SUF *j = (const lc_conv_job_##SUF *)ctx;                                     \
    const int isa = j->isa;                                                                          \
    const int64_t nr = j->nr, L = j->L, D = j->D, K = j->K;                                          \
    (void)isa, (void)tid;                                                                            \
    if (u < j->nd) {                                                                                 \
        int64_t d0 = u * LC_CONV_DCH, d1 = d0 + LC_CONV_DCH < D ? d0 + LC_CONV_DCH : D;               \
        if (!j->scr) {                                                                               \
            DISP(dw_chunk, j->dwt, j->db, j->dy, j->x, d0, d1, j->Bsz, L, D, K);                     \
            return;                                                                                  \
        }                                                                                            \
        ST *s = j->scr + (size_t)tid * j->scr_n;                                                     \
        DISP(dw_chunk, s, j->db ? s + K * D : NULL, j->dy, j->x, d0, d1, j->Bsz, L, D, K);           \
        for (int64_t k = 0; k < K; k++)                                                              \
            memcpy(j->dwt + k * D + d0, s + k * D + d0, (size_t)(d1 - d0) * sizeof(ST));             \
        if (j->db) memcpy(j->db + d0, s + K * D + d0, (size_t)(d1 - d0) * sizeof(ST));               \
        return;                                                                                      \
    }                                                                                                \
    const int64_t w0 = (u - j->nd) * j->bpu, w1 = w0 + j->bpu < j->Bsz * nr ? w0 + j->bpu : j->Bsz * nr; \
    for (int64_t w = w0; w < w1; w++) {                                                              \
        int64_t b = w / nr, s0 = (w % nr) * LC_CONV_ROWS, s1 = s0 + LC_CONV_ROWS < L ? s0 + LC_CONV_ROWS : L; \
        DISP(dx_rows, j->dx, j->dy, j->wt, b, s0, s1, L, D, K);                                      \
    }                                                                                                \
}                                                                                                    \
static void lc_conv_bwd_##SUF(ST *dx, ST *dwt, ST *db, const ST *dy, const ST *x, const ST *wt,       \
                              int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads) {  \
    lc_conv_job_##SUF j = {.dx = dx, .dwt = dwt, .db = db, .x = x, .dy = dy, .wt = wt, .Bsz = Bsz,   \
                           .L = L, .D = D, .K = K, .nr = (L + LC_CONV_ROWS - 1) / LC_CONV_ROWS,      \
                           .nd = (D + LC_CONV_DCH - 1) / LC_CONV_DCH, .bpu = lc_conv_blocks_per_unit(D, K), \
                           .isa = isa};                                                              \
    /* dx and dw do not depend on each other: one job, dw's (larger) units first */                 \
    const int64_t ndx = dx ? (Bsz * j.nr + j.bpu - 1) / j.bpu : 0;                                   \
    const int nt = nthreads < j.nd + ndx ? nthreads : (int)(j.nd + ndx);                             \
    if (nt > 1) {   /* scratch rows of whole cache lines, a line apart; none: straight into dwt */  \
        j.scr_n = (int64_t)lc_round_up((size_t)((K + 1) * D) * sizeof(ST) + 64, 64) / (int64_t)sizeof(ST); \
        j.scr = (ST *)lc_aligned_alloc((size_t)nt * (size_t)j.scr_n * sizeof(ST));                   \
    }                                                                                                \
    lc_team_for(nt, j.nd + ndx, lc_conv_bwd_unit_##SUF, &j);                                         \
    if (j.scr) lc_aligned_free(j.scr);                                                               \
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
