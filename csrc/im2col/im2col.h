/* csrc/im2col/im2col.h — the approximate PyTorch layers' int8 operands and their float result.
 *
 * Contract (docs/DESIGN.md, "Approximate PyTorch layers"): one scale s for the whole
 * activation tensor, q = clamp(round_half_even(x / s), -127, 127) with a true
 * float32 division (0 when s = 0: lc_q8_code, shared with the Q8 blocks); a
 * convolution is the LUT GEMM over im2col patches, padding being the code 0; the
 * result is y = float32(acc) * scale[o] + bias[o] with scale[o] = s_x * s_w[o].
 *
 * Four passes, each threaded over independent outputs (so any thread count gives
 * the same bits; the only reduction, the max, is exact in any order):
 *   lc_absmax        x float32 (n,)                      IN   -> max|x|, count of non-finite
 *   lc_same_bytes    a, b (n bytes)                       IN   -> 1 when equal (the weight-change check)
 *   lc_quantize_nhwc x float32 (N, H, W, C) any strides   IN   (an NCHW tensor is the view
 *                    q int8    (N, H, W, C) contiguous    OUT   with strides (CHW, W, 1, HW))
 *   lc_im2col_nhwc   q int8    (N, H, W, C)               IN
 *                    A int8    (G, M, Kg)                 OUT  M = N*OH*OW, Kg = KH*KW*Cg,
 *                                                              k = (i*KW + j)*Cg + c
 *   lc_grouped_direct q int8 (N, H, W, C), Wt int8 (Kg, O) IN  -> acc int32 (M, O): narrow groups
 *                                                              (depthwise) without im2col or a GEMM per group
 *   lc_dequant       acc int32 (N*P, O) rows ldacc apart   IN
 *                    y float32 (N, O, P)                  OUT  P = OH*OW (1 for a linear layer)
 *   lc_im2col_kmajor qc int8   (N, C, H, W) (NCHW codes)  IN   backward="table"'s planes pass
 *                    AT int8   (K, M), rows ld apart      OUT  A transposed (one group), K = KH*KW*C
 *   lc_fold_kmajor   colT float32 (K, M), rows ld apart   IN   patch gradients, k-major as AT
 *                    dx float32 (N, C, H, W)              OUT  their fold: F.fold's order and bits
 *   lc_chw_rows      x float32 (N, C, P)                  IN   a gradient dY (NCHW)
 *                    rows float32 (N*P, C)                OUT  its rows (NHWC) * S (a power of two)
 *   lc_scaled_om     x float32 (N, O, P), sw (O,)         IN   a gradient dY (NCHW), the weight scales
 *                    gT float32 (O, N*P), rows ld apart   OUT  float32(dY * s_w[o]) * S, transposed
 *   lc_dw_layout     sT float32 (T, C, O)                 IN   a conv's dW k-major (taps T = KH*KW)
 *                    dw float32 (O, C, T)                 OUT  float32(sT * s): the weight's layout
 * Patches run tap by tap over contiguous channels (NHWC), so a tap is one copy of
 * Cg bytes; the weight's reduction axis is permuted to the same (i, j, c) order by
 * the caller.  The integer sum over k does not depend on its order, so this is the
 * same product as PyTorch's (c, i, j) order.  A holds each group's rows apart, so
 * every group is one contiguous (M, Kg) GEMM operand for lutcore's LUT GEMM.
 */
#ifndef LUTCORE_IM2COL_H
#define LUTCORE_IM2COL_H

#include "core/common.h"
#include "core/dispatch.h"
#include "q8/q8.h"        /* lc_q8_code: the one scalar quantizer; lc_absmax_generic */
#include <float.h>
#include <math.h>

/* Below this many bytes of output a pass runs on one thread: a team's start and barrier
 * cost more than the work (batch-1 inference), and on a busy machine a descheduled
 * thread stalls the whole team.  Partitions never change the bits. */
#define LC_IM2COL_PAR_MIN 32768

/* Items per team range so that a range holds at least `target` (bytes, elements, ...) when an
 * item holds `per_item`: ranges of a few microseconds' work (a range costs a claim). */
static inline int64_t lc_i2c_grain(int64_t per_item, int64_t target) {
    if (per_item <= 0) per_item = 1;
    return per_item >= target ? 1 : (target + per_item - 1) / per_item;
}
#define LC_I2C_GRAIN 32768     /* bytes or elements of output per team range, at least */

/* ------------------------------------------------------------ same bytes? */

#define LC_SAME_CHUNK (1 << 18)

/* 1 when the n bytes at a and b are equal, else 0: the layers' weight-change check
 * (a weight against the float copy it was quantized from), memcmp over 256 KiB chunks
 * on the team.  Exact, and a byte test, so -0.0 != 0.0 and NaN payloads count. */
typedef struct { const unsigned char *x, *y; int64_t n; int diff; } lc_same_job;

static void lc_same_unit(void *p, int64_t ch, int tid) {
    lc_same_job *j = (lc_same_job *)p;
    (void)tid;
    if (__atomic_load_n(&j->diff, __ATOMIC_RELAXED)) return;     /* already unequal */
    int64_t i0 = ch * LC_SAME_CHUNK, len = j->n - i0 < LC_SAME_CHUNK ? j->n - i0 : LC_SAME_CHUNK;
    if (memcmp(j->x + i0, j->y + i0, (size_t)len) != 0) __atomic_store_n(&j->diff, 1, __ATOMIC_RELAXED);
}

static int lc_same_bytes(const void *a, const void *b, int64_t n, int nthreads) {
    lc_same_job j = {(const unsigned char *)a, (const unsigned char *)b, n, 0};
    int64_t nch = (n + LC_SAME_CHUNK - 1) / LC_SAME_CHUNK;
    lc_team_for(n > 4 * LC_SAME_CHUNK ? nthreads : 1, nch, lc_same_unit, &j);
    return j.diff == 0;
}

/* ------------------------------------------------------------------ max|x|: the bodies
 * (lc_absmax_generic: q8/q8.h, the Q8 block quantizer uses it too) */

#if LC_X86
LC_TARGET_AVX2 static float lc_absmax_avx2(const float *x, int64_t n, int64_t *bad) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    int64_t nf = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
        __m256 b = _mm256_and_ps(_mm256_loadu_ps(x + i + 8), absmask);
        nf += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ)));
        nf += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(b, fmax, _CMP_NLE_UQ)));
        m0 = _mm256_max_ps(a, m0);
        m1 = _mm256_max_ps(b, m1);
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_max_ps(m0, m1));
    float m = lc_absmax_generic(x + i, n - i, &nf);
    for (int c = 0; c < 8; c++) m = t[c] > m ? t[c] : m;
    *bad += nf;
    return m;
}
#endif

/* ---------------------------------------------------------------- quantize: the bodies */

/* q[i] = lc_q8_code(x[i * sx], s) for i < n; returns the count of NaN/Inf seen. */
static inline int64_t lc_q8_run_generic(int8_t *q, const float *x, int64_t sx, int64_t n, float s) {
    int64_t nf = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i * sx];
        nf += !(fabsf(v) <= FLT_MAX);
        q[i] = lc_q8_code(v, s);
    }
    return nf;
}

#if LC_X86
/* Contiguous x: the same bits as lc_q8_code (IEEE division, round half to even, clamp). */
LC_TARGET_AVX2 static int64_t lc_q8_run_avx2(int8_t *q, const float *x, int64_t n, float s) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
    const __m256 vs = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    int64_t nf = 0, i = 0;
    if (s == 0.0f) {
        for (; i + 8 <= n; i += 8) {
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
            nf += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ)));
            memset(q + i, 0, 8);
        }
        return nf + lc_q8_run_generic(q + i, x + i, 1, n - i, s);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        nf += __builtin_popcount((unsigned)_mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_and_ps(xv, absmask), fmax, _CMP_NLE_UQ)));
        __m256 v = _mm256_round_ps(_mm256_div_ps(xv, vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        __m256i i32 = _mm256_cvtps_epi32(v);
        __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(i16, i16));
    }
    return nf + lc_q8_run_generic(q + i, x + i, 1, n - i, s);
}
#endif


/* ------------------------------------------------------------------ im2col */

/* A (G, M, Kg) from the NHWC codes q: row m = (n*OH + oh)*OW + ow of group g holds,
 * tap by tap (i, j), the Cg channels g*Cg.. of pixel (oh*sh - ph + i*dh, ow*sw - pw + j*dw),
 * or Cg zero codes where that pixel lies in the padding.  Threads over rows. */
typedef struct {
    int8_t *A;
    const int8_t *q;
    int64_t H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, Cg, M, Kg;
} lc_im2col_job;

static void lc_im2col_range(void *ctx, int64_t u0, int64_t u1, int tid) {
    const lc_im2col_job *jb = (const lc_im2col_job *)ctx;
    int8_t *A = jb->A;
    const int8_t *q = jb->q;
    const int64_t H = jb->H, W = jb->W, C = jb->C, KH = jb->KH, KW = jb->KW, OH = jb->OH, OW = jb->OW;
    const int64_t sh = jb->sh, sw = jb->sw, ph = jb->ph, pw = jb->pw, dh = jb->dh, dw = jb->dw;
    const int64_t Cg = jb->Cg, M = jb->M, Kg = jb->Kg;
    (void)tid;
    for (int64_t u = u0; u < u1; u++) {
        int64_t g = u / M, m = u % M;
        int64_t n = m / (OH * OW), p = m % (OH * OW), oh = p / OW, ow = p % OW;
        int8_t *dst = A + u * Kg;
        for (int64_t i = 0; i < KH; i++) {
            int64_t ih = oh * sh - ph + i * dh;
            if (ih < 0 || ih >= H) {
                memset(dst + i * KW * Cg, 0, (size_t)(KW * Cg));
                continue;
            }
            const int8_t *src = q + ((n * H + ih) * W) * C + g * Cg;
            for (int64_t j = 0; j < KW; j++) {
                int64_t iw = ow * sw - pw + j * dw;
                int8_t *d = dst + (i * KW + j) * Cg;
                if (iw < 0 || iw >= W) memset(d, 0, (size_t)Cg);
                else if (Cg == 1) *d = src[iw * C];
                else memcpy(d, src + iw * C, (size_t)Cg);
            }
        }
    }
}

static void lc_im2col_nhwc(int8_t *A, const int8_t *q, int64_t N, int64_t H, int64_t W, int64_t C,
                           int64_t G, int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh,
                           int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int nthreads) {
    int64_t Cg = C / G, M = N * OH * OW, Kg = KH * KW * Cg;
    lc_im2col_job j = {A, q, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, Cg, M, Kg};
    lc_team_range(G * M * Kg > LC_IM2COL_PAR_MIN ? nthreads : 1, G * M, lc_i2c_grain(Kg, LC_I2C_GRAIN),
                  lc_im2col_range, &j);
}

/* ------------------------------------------------------- narrow groups: the bodies */

/* acc[m, o] = sum over taps (i, j) and c < Cg of mul[q[pixel(m, i, j), g*Cg + c], w]
 * with g = o / Og, w = Wt[(i*KW + j)*Cg + c, o], a padding pixel giving the code 0
 * (through the table like any other input): the product of the patches with the
 * weight, for all G groups in one pass straight from the NHWC codes.  For grouped
 * convolutions with narrow groups (depthwise: Cg = Og = 1), where im2col copies one
 * byte per tap and one GEMM per group costs a call, a packing and a thread team for a
 * few products.  Depthwise runs over contiguous channels (q's pixel, Wt's tap row).
 * Integer sums: the bits of lut_gemm over the patches at any thread count and ISA.
 * Threads over rows m = (n*OH + oh)*OW + ow.
 *   q   int8  (N, H, W, C)      IN     Wt  int8 (Kg, O), Kg = KH*KW*Cg   IN
 *   mul int32 (65536,)          IN     entry a*256 + b (exact: products computed)
 *   acc int32 (M, O)            OUT    rows ldacc apart */
static inline __attribute__((always_inline)) void lc_gd_rows(
        int32_t *acc, int64_t ldacc, const int8_t *q, int64_t H, int64_t W, int64_t C, int64_t G,
        int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
        int64_t dh, int64_t dw, const int8_t *Wt, const int32_t *mul, int exact, int64_t O, int64_t m0,
        int64_t m1) {
    int64_t Cg = C / G, Og = O / G;
    for (int64_t m = m0; m < m1; m++) {
        int64_t n = m / (OH * OW), p = m % (OH * OW), oh = p / OW, ow = p % OW;
        int32_t *c = acc + m * ldacc;
        for (int64_t o = 0; o < O; o++) c[o] = 0;
        for (int64_t i = 0; i < KH; i++) {
            int64_t ih = oh * sh - ph + i * dh;
            for (int64_t j = 0; j < KW; j++) {
                int64_t iw = ow * sw - pw + j * dw;
                const int8_t *px = (ih < 0 || ih >= H || iw < 0 || iw >= W) ? NULL : q + ((n * H + ih) * W + iw) * C;
                for (int64_t cc = 0; cc < Cg; cc++) {
                    const int8_t *wt = Wt + ((i * KW + j) * Cg + cc) * O;
                    if (!px) {                                       /* padding: the code 0 */
                        if (!exact) for (int64_t o = 0; o < O; o++) c[o] += mul[(uint8_t)wt[o]];
                    } else if (Cg == 1 && Og == 1) {                 /* depthwise: channel o = group o */
                        if (exact) for (int64_t o = 0; o < O; o++) c[o] += (int32_t)px[o] * (int32_t)wt[o];
                        else for (int64_t o = 0; o < O; o++)
                            c[o] += mul[((int32_t)(uint8_t)px[o] << 8) | (uint8_t)wt[o]];
                    } else {
                        for (int64_t o = 0; o < O; o++) {
                            int8_t x = px[(o / Og) * Cg + cc];
                            c[o] += exact ? (int32_t)x * (int32_t)wt[o]
                                          : mul[((int32_t)(uint8_t)x << 8) | (uint8_t)wt[o]];
                        }
                    }
                }
            }
        }
    }
}

#define LC_GD_ARGS acc, ldacc, q, H, W, C, G, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, Wt, mul, exact, O
#define LC_GD_PARAMS int32_t *acc, int64_t ldacc, const int8_t *q, int64_t H, int64_t W, int64_t C, \
        int64_t G, int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph, \
        int64_t pw, int64_t dh, int64_t dw, const int8_t *Wt, const int32_t *mul, int exact, int64_t O

static void lc_gd_rows_generic(LC_GD_PARAMS, int64_t m0, int64_t m1) { lc_gd_rows(LC_GD_ARGS, m0, m1); }
#if LC_X86
LC_TARGET_AVX2 static void lc_gd_rows_avx2(LC_GD_PARAMS, int64_t m0, int64_t m1) { lc_gd_rows(LC_GD_ARGS, m0, m1); }
#endif

/* ------------------------------------------------------------ the body table
 * (no bodies of other translation units: generic and AVX2, here) */
static inline int64_t lc_q8_run1_generic(int8_t *q, const float *x, int64_t n, float s) {
    return lc_q8_run_generic(q, x, 1, n, s);
}
typedef struct {
    lc_body_head head;
    float (*absmax)(const float *, int64_t, int64_t *);
    int64_t (*q8_run1)(int8_t *, const float *, int64_t, float);   /* a contiguous run */
    void (*gd_rows)(LC_GD_PARAMS, int64_t, int64_t);
} lc_im2col_body;
static const lc_im2col_body lc_im2col_bodies[] = {
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_absmax_avx2, lc_q8_run_avx2, lc_gd_rows_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_absmax_generic, lc_q8_run1_generic, lc_gd_rows_generic},
};
LC_BODY_TABLE(lc_im2col_body, lc_im2col, lc_im2col_bodies)   /* lc_im2col_pick(isa), lc_im2col_body_name(isa) */

/* ------------------------------------------------------------------ max|x| */

#define LC_ABSMAX_CHUNK 65536

#define LC_ABSMAX_UNITS 64     /* at most this many units (groups of consecutive chunks) */

typedef struct {
    const lc_im2col_body *B;
    const float *x;
    int64_t n, nch, cpu;           /* chunks, chunks per unit */
    float m[LC_ABSMAX_UNITS];      /* each unit's max, combined in unit order */
    int64_t nf;                    /* non-finite count (atomic) */
} lc_absmax_job;

static void lc_absmax_unit(void *p, int64_t u, int tid) {
    lc_absmax_job *j = (lc_absmax_job *)p;
    int64_t nf = 0, c1 = (u + 1) * j->cpu < j->nch ? (u + 1) * j->cpu : j->nch;
    float m = 0.0f;
    (void)tid;
    for (int64_t ch = u * j->cpu; ch < c1; ch++) {
        int64_t i0 = ch * LC_ABSMAX_CHUNK, len = j->n - i0 < LC_ABSMAX_CHUNK ? j->n - i0 : LC_ABSMAX_CHUNK;
        float v = j->B->absmax(j->x + i0, len, &nf);
        m = v > m ? v : m;
    }
    j->m[u] = m;
    if (nf) __atomic_fetch_add(&j->nf, nf, __ATOMIC_RELAXED);
}

/* max|x[i]| over n values; *bad = how many are NaN/Inf (the max is then meaningless).
 * The max of each unit's chunks, then of the units' in unit order: the serial loop's. */
static float lc_absmax(const float *x, int64_t n, int64_t *bad, int isa, int nthreads) {
    lc_absmax_job j;
    j.B = lc_im2col_pick(isa);
    j.x = x;
    j.n = n;
    j.nch = (n + LC_ABSMAX_CHUNK - 1) / LC_ABSMAX_CHUNK;
    j.cpu = (j.nch + LC_ABSMAX_UNITS - 1) / LC_ABSMAX_UNITS;
    j.nf = 0;
    const int64_t nu = j.cpu > 0 ? (j.nch + j.cpu - 1) / j.cpu : 0;
    lc_team_for(n > 4 * LC_IM2COL_PAR_MIN ? nthreads : 1, nu, lc_absmax_unit, &j);
    float m = 0.0f;
    for (int64_t u = 0; u < nu; u++) m = j.m[u] > m ? j.m[u] : m;
    *bad = j.nf;
    return m;
}

/* ---------------------------------------------------------------- quantize */

/* q[i] = lc_q8_code(x[i * sx], s) for i < n on B; returns the count of NaN/Inf seen. */
static inline int64_t lc_q8_run(const lc_im2col_body *B, int8_t *q, const float *x, int64_t sx, int64_t n, float s) {
    return sx == 1 ? B->q8_run1(q, x, n, s) : lc_q8_run_generic(q, x, sx, n, s);
}

#define LC_Q8_WTILE 256     /* w values per NCHW tile: a tile's codes (W x C bytes) stay in L1 */

/* q (N, H, W, C) contiguous = the codes of x at scale s, x given by its element
 * strides (sn, sh, sw, sc).  Threads over (n, h) rows.  Returns the count of NaN/Inf. */
typedef struct {
    const lc_im2col_body *B;
    int8_t *q;
    const float *x;
    int64_t H, W, C, sn, sh, sw, sc;
    float s;
    int64_t bad;                   /* non-finite count (atomic) */
} lc_quantize_job;

static void lc_quantize_range(void *p, int64_t r0, int64_t r1, int tid) {
    lc_quantize_job *j = (lc_quantize_job *)p;
    const lc_im2col_body *B = j->B;
    int8_t *q = j->q;
    const float *x = j->x;
    const int64_t H = j->H, W = j->W, C = j->C, sn = j->sn, sh = j->sh, sw = j->sw, sc = j->sc;
    const float s = j->s;
    int64_t bad = 0;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / H, h = r % H;
        const float *xr = x + n * sn + h * sh;
        int8_t *qr = q + r * W * C;
        if (C > 1 && sc == 1) {                      /* channels contiguous (NHWC, a linear layer) */
            for (int64_t w = 0; w < W; w++) bad += lc_q8_run(B, qr + w * C, xr + w * sw, sc, C, s);
        } else {                                     /* NCHW: quantize each channel's run, then scatter */
            int8_t tmp[LC_Q8_WTILE];
            for (int64_t w0 = 0; w0 < W; w0 += LC_Q8_WTILE) {
                int64_t nw = W - w0 < LC_Q8_WTILE ? W - w0 : LC_Q8_WTILE;
                for (int64_t c = 0; c < C; c++) {
                    bad += lc_q8_run(B, tmp, xr + c * sc + w0 * sw, sw, nw, s);
                    for (int64_t w = 0; w < nw; w++) qr[(w0 + w) * C + c] = tmp[w];
                }
            }
        }
    }
    if (bad) __atomic_fetch_add(&j->bad, bad, __ATOMIC_RELAXED);
}

static int64_t lc_quantize_nhwc(int8_t *q, const float *x, int64_t N, int64_t H, int64_t W, int64_t C,
                                int64_t sn, int64_t sh, int64_t sw, int64_t sc, float s, int isa,
                                int nthreads) {
    lc_quantize_job j = {lc_im2col_pick(isa), q, x, H, W, C, sn, sh, sw, sc, s, 0};
    lc_team_range(N * H * W * C > LC_IM2COL_PAR_MIN ? nthreads : 1, N * H, lc_i2c_grain(W * C, LC_I2C_GRAIN),
                  lc_quantize_range, &j);
    return j.bad;
}

/* ------------------------------------------------------- narrow groups (the driver) */

#define LC_GD_MB 16      /* rows per work unit */

typedef struct {
    const lc_im2col_body *B;
    int32_t *acc;
    const int8_t *q, *Wt;
    const int32_t *mul;
    int64_t ldacc, H, W, C, G, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, O, M;
    int exact;
} lc_gd_job;

/* row blocks [b0, b1) of LC_GD_MB rows (each row's sums its own: any blocking, the same bits) */
static void lc_gd_range(void *p, int64_t b0, int64_t b1, int tid) {
    const lc_gd_job *j = (const lc_gd_job *)p;
    int64_t m0 = b0 * LC_GD_MB, m1 = b1 * LC_GD_MB < j->M ? b1 * LC_GD_MB : j->M;
    (void)tid;
    for (int64_t mb = m0; mb < m1; mb += LC_GD_MB)
        j->B->gd_rows(j->acc, j->ldacc, j->q, j->H, j->W, j->C, j->G, j->KH, j->KW, j->OH, j->OW, j->sh, j->sw,
                      j->ph, j->pw, j->dh, j->dw, j->Wt, j->mul, j->exact, j->O, mb,
                      mb + LC_GD_MB < m1 ? mb + LC_GD_MB : m1);
}

static void lc_grouped_direct(LC_GD_PARAMS, int64_t N, int isa, int nthreads) {
    int64_t M = N * OH * OW, nmb = (M + LC_GD_MB - 1) / LC_GD_MB;
    int64_t work = M * KH * KW * (C / G) * O;
    lc_gd_job j = {lc_im2col_pick(isa), acc, q, Wt, mul, ldacc, H, W, C, G, KH, KW, OH, OW, sh, sw, ph, pw, dh,
                   dw, O, M, exact};
    /* ranges of at least ~64K multiply-accumulates */
    lc_team_range(work > LC_IM2COL_PAR_MIN ? nthreads : 1, nmb,
                  lc_i2c_grain(LC_GD_MB * KH * KW * (C / G) * O, 4 * LC_I2C_GRAIN), lc_gd_range, &j);
}

/* --------------------------------------------------------------- dequantize */

#define LC_DQ_PB 32     /* output positions per work unit: 128-byte runs of y per channel */

/* y[n, o, p] = (float)acc[n*P + p, o] * scale[o] + bias[o] (bias NULL: no addition), in
 * that order, float32.  Threads over (n, block of positions). */
typedef struct {
    float *y;
    const int32_t *acc;
    const float *scale, *bias;
    int64_t ldacc, P, O, npb;
} lc_dequant_job;

static void lc_dequant_range(void *ctx, int64_t u0, int64_t u1, int tid) {
    const lc_dequant_job *j = (const lc_dequant_job *)ctx;
    float *y = j->y;
    const int32_t *acc = j->acc;
    const float *scale = j->scale, *bias = j->bias;
    const int64_t ldacc = j->ldacc, P = j->P, O = j->O, npb = j->npb;
    (void)tid;
    for (int64_t u = u0; u < u1; u++) {
        int64_t n = u / npb, p0 = (u % npb) * LC_DQ_PB, p1 = p0 + LC_DQ_PB < P ? p0 + LC_DQ_PB : P;
        if (P == 1) {                        /* a linear layer: one contiguous row */
            const int32_t *a = acc + n * ldacc;
            float *yr = y + n * O;
            if (bias) for (int64_t o = 0; o < O; o++) yr[o] = (float)a[o] * scale[o] + bias[o];
            else for (int64_t o = 0; o < O; o++) yr[o] = (float)a[o] * scale[o];
            continue;
        }
        for (int64_t o = 0; o < O; o++) {
            float *yr = y + (n * O + o) * P;
            const int32_t *a = acc + (n * P) * ldacc + o;
            float s = scale[o];
            if (bias) {
                float b = bias[o];
                for (int64_t p = p0; p < p1; p++) yr[p] = (float)a[p * ldacc] * s + b;
            } else {
                for (int64_t p = p0; p < p1; p++) yr[p] = (float)a[p * ldacc] * s;
            }
        }
    }
}

static void lc_dequant(float *y, const int32_t *acc, int64_t ldacc, const float *scale, const float *bias,
                       int64_t N, int64_t P, int64_t O, int nthreads) {
    int64_t npb = (P + LC_DQ_PB - 1) / LC_DQ_PB;
    lc_dequant_job j = {y, acc, scale, bias, ldacc, P, O, npb};
    lc_team_range(N * P * O > LC_IM2COL_PAR_MIN / 4 ? nthreads : 1, N * npb,
                  lc_i2c_grain((P < LC_DQ_PB ? P : LC_DQ_PB) * O, LC_I2C_GRAIN), lc_dequant_range, &j);
}

/* --------------------------------------------- k-major patches, and the fold back */

/* AT (K, M), rows ld apart, from NCHW codes qc (N, C, H, W), one group: AT[k, m] = A[m, k] of lc_im2col_nhwc,
 * k = (i*KW + j)*C + c, m = (n*OH + oh)*OW + ow — the code of pixel (oh*sh - ph + i*dh,
 * ow*sw - pw + j*dw) of channel c, image n, or 0 in the padding.  A row k of one image is a
 * shifted copy of the channel's plane (stride 1: one memcpy per output row).  Threads over
 * (k, n). */
typedef struct {
    int8_t *AT;
    const int8_t *q;
    int64_t N, C, H, W, KW, OH, OW, sh, sw, ph, pw, dh, dw, ld;
} lc_i2ck_job;

/* Stride 1 with rows as long as the input's (OW = W: "same" padding along w), and planes of at
 * most LC_FLAT_MAX positions: a tap is the plane shifted by one offset, so an output plane is
 * one flat loop — the positions whose column falls in the padding (the lanes between two rows)
 * chosen out by a mask, the rows out of reach left as they are — instead of a loop a row. */
#define LC_FLAT_MAX 64       /* positions of a plane (8 x 8): larger ones, measured, do better a row at a time */
#define LC_FLAT_KW 7         /* taps along w (the fold keeps a column mask each) */
static inline int lc_flat_ok(int64_t sh, int64_t sw, int64_t OW, int64_t W, int64_t OH) {
    return sh == 1 && sw == 1 && OW == W && OH * OW <= LC_FLAT_MAX;
}
/* the flat span [*x0, *x1) of output positions a tap (i, j) reads from the input (each reads
 * position x + shift), its valid columns [*lo, *hi); *x1 <= *x0 when it reads none */
static inline int64_t lc_flat_span(int64_t i, int64_t j, int64_t H, int64_t W, int64_t OH, int64_t ph, int64_t pw,
                                   int64_t dh, int64_t dw, int64_t *x0, int64_t *x1, int64_t *lo, int64_t *hi) {
    const int64_t offh = i * dh - ph, offw = j * dw - pw;
    const int64_t oh0 = offh >= 0 ? 0 : -offh, oh1 = H - offh < OH ? H - offh : OH;
    *lo = offw >= 0 ? 0 : (-offw < W ? -offw : W);
    *hi = W - offw < W ? (W - offw > *lo ? W - offw : *lo) : W;
    *x0 = oh0 * W + *lo;
    *x1 = oh1 > oh0 ? (oh1 - 1) * W + *hi : *x0;
    return offh * W + offw;
}

static void lc_im2col_kmajor_range(void *ctx, int64_t u0, int64_t u1, int tid) {
    const lc_i2ck_job *jb = (const lc_i2ck_job *)ctx;
    const int64_t N = jb->N, C = jb->C, H = jb->H, W = jb->W, KW = jb->KW, OH = jb->OH, OW = jb->OW;
    const int64_t sh = jb->sh, sw = jb->sw, ph = jb->ph, pw = jb->pw, dh = jb->dh, dw = jb->dw;
    (void)tid;
    if (lc_flat_ok(sh, sw, OW, W, OH)) {
        uint8_t col[LC_FLAT_MAX];                       /* 1 where position x's column is in [lo, hi) */
        int64_t jcol = -1;
        for (int64_t u = u0; u < u1; u++) {
            const int64_t k = u / N, n = u % N, c = k % C, j = (k / C) % KW, i = k / C / KW;
            int8_t *LC_RESTRICT d = jb->AT + k * jb->ld + n * OH * OW;
            const int8_t *LC_RESTRICT r = jb->q + (n * C + c) * H * W;
            int64_t x0, x1, lo, hi;
            const int64_t shift = lc_flat_span(i, j, H, W, OH, ph, pw, dh, dw, &x0, &x1, &lo, &hi);
            if (j != jcol) {
                for (int64_t x = 0; x < OH * OW; x++) col[x] = (uint8_t)(x % W >= lo && x % W < hi);
                jcol = j;
            }
            for (int64_t x = 0; x < x0 && x < OH * OW; x++) d[x] = 0;
            for (int64_t x = x0; x < x1; x++) d[x] = col[x] ? r[x + shift] : 0;
            for (int64_t x = x1 > x0 ? x1 : x0; x < OH * OW; x++) d[x] = 0;
        }
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        const int64_t k = u / N, n = u % N, c = k % C, j = (k / C) % KW, i = k / C / KW;
        int8_t *dst = jb->AT + k * jb->ld + n * OH * OW;
        const int8_t *src = jb->q + (n * C + c) * H * W;
        const int64_t off = j * dw - pw;                /* iw = ow * sw + off */
        /* stride 1: ow in [lo, hi) reads the row, the rest is padding */
        const int64_t lo = off >= 0 ? 0 : -off < OW ? -off : OW;
        const int64_t hi0 = W - off < OW ? W - off : OW, hi = hi0 > lo ? hi0 : lo;
        for (int64_t oh = 0; oh < OH; oh++) {
            const int64_t ih = oh * sh - ph + i * dh;
            int8_t *d = dst + oh * OW;
            if (ih < 0 || ih >= H) {
                memset(d, 0, (size_t)OW);
                continue;
            }
            const int8_t *r = src + ih * W;
            if (sw == 1) {                               /* inline loops: rows are a few dozen bytes */
                for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;
                for (int64_t ow = lo; ow < hi; ow++) d[ow] = r[ow + off];
                for (int64_t ow = hi; ow < OW; ow++) d[ow] = 0;
            } else {
                for (int64_t ow = 0; ow < OW; ow++) {
                    const int64_t iw = ow * sw + off;
                    d[ow] = iw >= 0 && iw < W ? r[iw] : 0;
                }
            }
        }
    }
}

static void lc_im2col_kmajor(int8_t *AT, int64_t ld, const int8_t *q, int64_t N, int64_t C, int64_t H, int64_t W,
                             int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw, int nthreads) {
    const int64_t M = N * OH * OW, K = KH * KW * C;
    lc_i2ck_job j = {AT, q, N, C, H, W, KW, OH, OW, sh, sw, ph, pw, dh, dw, ld};
    lc_team_range(K * M > LC_IM2COL_PAR_MIN ? nthreads : 1, K * N, lc_i2c_grain(OH * OW, LC_I2C_GRAIN),
                  lc_im2col_kmajor_range, &j);
}

/* dx (N, C, H, W) = the fold of patch gradients colT (K, M), rows ld apart (k, m as AT above): each pixel
 * starts at +0 and adds colT[k, m] of every tap (i, j) that reads it, in increasing (i, j) —
 * PyTorch's col2im (F.fold of the (c, i, j)-ordered columns) adds them in that order, so these
 * are its bits.  Threads over (n, c) planes. */
typedef struct {
    float *dx;
    const float *colT;
    int64_t C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, ld;
} lc_fold_job;

static void lc_fold_kmajor_range(void *ctx, int64_t u0, int64_t u1, int tid) {
    const lc_fold_job *jb = (const lc_fold_job *)ctx;
    const int64_t C = jb->C, H = jb->H, W = jb->W, KH = jb->KH, KW = jb->KW, OH = jb->OH, OW = jb->OW;
    const int64_t sh = jb->sh, sw = jb->sw, ph = jb->ph, pw = jb->pw, dh = jb->dh, dw = jb->dw, ld = jb->ld;
    (void)tid;
    if (lc_flat_ok(sh, sw, OW, W, OH) && KW <= LC_FLAT_KW) {
        /* a tap adds its span at one offset; the positions between two rows (a column in the
         * padding) add +0, which changes nothing: a pixel's sum starts at +0, so is never -0 */
        uint8_t col[LC_FLAT_KW][LC_FLAT_MAX];
        for (int64_t j = 0; j < KW; j++) {
            int64_t x0, x1, lo, hi;
            (void)lc_flat_span(0, j, H, W, OH, ph, pw, dh, dw, &x0, &x1, &lo, &hi);
            for (int64_t x = 0; x < OH * OW; x++) col[j][x] = (uint8_t)(x % W >= lo && x % W < hi);
        }
        for (int64_t u = u0; u < u1; u++) {
            const int64_t n = u / C, c = u % C;
            float *LC_RESTRICT dst = jb->dx + u * H * W;
            memset(dst, 0, (size_t)(H * W) * sizeof(float));
            for (int64_t i = 0; i < KH; i++)
                for (int64_t j = 0; j < KW; j++) {                  /* taps in (i, j) order: F.fold's */
                    const float *LC_RESTRICT src = jb->colT + ((i * KW + j) * C + c) * ld + n * OH * OW;
                    int64_t x0, x1, lo, hi;
                    const int64_t shift = lc_flat_span(i, j, H, W, OH, ph, pw, dh, dw, &x0, &x1, &lo, &hi);
                    const uint8_t *cj = col[j];
                    for (int64_t x = x0; x < x1; x++) dst[x + shift] += cj[x] ? src[x] : 0.0f;
                }
        }
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / C, c = u % C;
        float *LC_RESTRICT dst = jb->dx + u * H * W;
        memset(dst, 0, (size_t)(H * W) * sizeof(float));
        for (int64_t i = 0; i < KH; i++)
            for (int64_t j = 0; j < KW; j++) {
                const float *LC_RESTRICT src = jb->colT + ((i * KW + j) * C + c) * ld + n * OH * OW;
                const int64_t off = j * dw - pw;
                const int64_t lo0 = off >= 0 ? 0 : (-off + sw - 1) / sw;     /* first ow with iw >= 0 */
                const int64_t hi0 = W - off > 0 ? (W - off + sw - 1) / sw : 0;   /* ow with iw < W */
                const int64_t lo = lo0 < OW ? lo0 : OW, hi = hi0 < OW ? (hi0 > lo ? hi0 : lo) : OW;
                for (int64_t oh = 0; oh < OH; oh++) {
                    const int64_t ih = oh * sh - ph + i * dh;
                    if (ih < 0 || ih >= H) continue;
                    float *LC_RESTRICT d = dst + ih * W;
                    const float *LC_RESTRICT s = src + oh * OW;
                    if (sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) d[ow + off] += s[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) d[ow * sw + off] += s[ow];
                }
            }
    }
}

static void lc_fold_kmajor(float *dx, const float *colT, int64_t ld, int64_t N, int64_t C, int64_t H, int64_t W,
                           int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph,
                           int64_t pw, int64_t dh, int64_t dw, int nthreads) {
    lc_fold_job j = {dx, colT, C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, ld};
    lc_team_range(N * C * H * W > LC_IM2COL_PAR_MIN / 4 ? nthreads : 1, N * C,
                  lc_i2c_grain(KH * KW * OH * OW, LC_I2C_GRAIN), lc_fold_kmajor_range, &j);
}

/* A weight of the planes pass scaled by S (a power of two, gradtables/planes.h's scale: the pass
 * then takes scale 1): r = v * S, exact unless it lands below the normal floats or beyond them
 * (then the caller keeps v and passes S).  1 when r * (1 / S) gives v back (or v is NaN / inf). */
static inline float lc_scaled(float v, float S, float inv, int *exact) {
    const float r = v * S;
    if (r * inv != v && v == v && v - v == 0.0f) *exact = 0;
    return r;
}

/* rows (N*P, C) = x (N, C, P) * S per image transposed, in 16 x 16 blocks (each a few cache lines
 * read and written).  Threads over (n, 64 channels).  Returns 1 when every product is exact. */
typedef struct { float *rows; const float *x; float S, inv; int64_t C, P, ncb; int inexact; } lc_chw_job;
#define LC_CHW_CB 64
#define LC_CHW_T 16
static void lc_chw_unit(void *ctx, int64_t u, int tid) {
    lc_chw_job *j = (lc_chw_job *)ctx;
    const int64_t C = j->C, P = j->P, n = u / j->ncb, c0 = (u % j->ncb) * LC_CHW_CB;
    const int64_t c1 = c0 + LC_CHW_CB < C ? c0 + LC_CHW_CB : C;
    const float S = j->S, inv = j->inv;
    int exact = 1;
    (void)tid;
    const float *LC_RESTRICT x = j->x + n * C * P;
    float *LC_RESTRICT r = j->rows + n * P * C;
    for (int64_t cb = c0; cb < c1; cb += LC_CHW_T)
        for (int64_t pb = 0; pb < P; pb += LC_CHW_T) {
            const int64_t ce = cb + LC_CHW_T < c1 ? cb + LC_CHW_T : c1, pe = pb + LC_CHW_T < P ? pb + LC_CHW_T : P;
            for (int64_t p = pb; p < pe; p++)
                for (int64_t c = cb; c < ce; c++) r[p * C + c] = lc_scaled(x[c * P + p], S, inv, &exact);
        }
    if (!exact) __atomic_store_n(&j->inexact, 1, __ATOMIC_RELAXED);
}
static int lc_chw_rows(float *rows, const float *x, int64_t N, int64_t C, int64_t P, float S, int nthreads) {
    const int64_t ncb = (C + LC_CHW_CB - 1) / LC_CHW_CB;
    lc_chw_job j = {rows, x, S, 1.0f / S, C, P, ncb, 0};
    lc_team_for(N * C * P > LC_IM2COL_PAR_MIN ? nthreads : 1, N * ncb, lc_chw_unit, &j);
    return !j.inexact;
}

/* gT (O, N*P), rows ld apart = float32(x (N, O, P) * sw[o]) * S (sw NULL: x * S): dX's weights of
 * the planes pass, g = dY * s_w transposed and scaled.  Threads over (o, n).  Returns 1 when every
 * scaling by S is exact. */
typedef struct { float *gT; const float *x, *sw; float S, inv; int64_t ld, N, O, P; int inexact; } lc_om_job;
static void lc_om_range(void *ctx, int64_t u0, int64_t u1, int tid) {
    lc_om_job *j = (lc_om_job *)ctx;
    const int64_t N = j->N, O = j->O, P = j->P;
    const float S = j->S, inv = j->inv;
    int exact = 1;
    (void)tid;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t o = u / N, n = u % N;
        const float *LC_RESTRICT x = j->x + (n * O + o) * P;
        float *LC_RESTRICT g = j->gT + o * j->ld + n * P;
        if (j->sw) {
            const float s = j->sw[o];
            for (int64_t p = 0; p < P; p++) {
                const float v = x[p] * s;                   /* g, rounded to float32 first */
                g[p] = lc_scaled(v, S, inv, &exact);
            }
        } else {
            for (int64_t p = 0; p < P; p++) g[p] = lc_scaled(x[p], S, inv, &exact);
        }
    }
    if (!exact) __atomic_store_n(&j->inexact, 1, __ATOMIC_RELAXED);
}
static int lc_scaled_om(float *gT, int64_t ld, const float *x, const float *sw, float S, int64_t N, int64_t O,
                        int64_t P, int nthreads) {
    lc_om_job j = {gT, x, sw, S, 1.0f / S, ld, N, O, P, 0};
    lc_team_range(N * O * P > LC_IM2COL_PAR_MIN ? nthreads : 1, O * N, lc_i2c_grain(P, 4096), lc_om_range, &j);
    return !j.inexact;
}

/* dw (O, C, T) = float32(sT (T, C, O) * s): a conv's weight gradient from the planes pass's
 * k-major sums (k = t*C + c) to the weight's layout, scaled by s_x.  Per 16 x 16 block of (o, c):
 * the T taps of each (o, c) are one run of dw.  Threads over blocks of 16 output channels. */
typedef struct { float *dw; const float *sT; float s; int64_t T, C, O; } lc_dwl_job;
static void lc_dwl_unit(void *ctx, int64_t u, int tid) {
    const lc_dwl_job *j = (const lc_dwl_job *)ctx;
    const int64_t T = j->T, C = j->C, O = j->O, o0 = u * 16, o1 = o0 + 16 < O ? o0 + 16 : O;
    const float s = j->s;
    (void)tid;
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
        const int64_t c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int64_t o = o0; o < o1; o++)
            for (int64_t c = c0; c < c1; c++) {
                float *LC_RESTRICT d = j->dw + (o * C + c) * T;
                const float *LC_RESTRICT src = j->sT + c * O + o;
                for (int64_t t = 0; t < T; t++) d[t] = src[t * C * O] * s;
            }
    }
}
static void lc_dw_layout(float *dw, const float *sT, float s, int64_t T, int64_t C, int64_t O, int nthreads) {
    lc_dwl_job j = {dw, sT, s, T, C, O};
    lc_team_for(T * C * O > LC_IM2COL_PAR_MIN ? nthreads : 1, (O + 15) / 16, lc_dwl_unit, &j);
}

#endif /* LUTCORE_IM2COL_H */
