/* csrc/conv2d/conv2d.h — the direct small-K convolution of the approximate PyTorch layers
 * (lutcore.torch: a first conv, K = Cin*KH*KW <= LC_C2D_KMAX, e.g. 3x3 over RGB: K = 27).
 *
 * Design: the im2col path (csrc im2col: lc_im2col_nhwc, then lut_gemm, then lc_dequant)
 * writes a patch matrix K bytes per output pixel, an int32 accumulator per output, and
 * reads both again; for a small K the product is the cheap part and those passes dominate.
 * Here one pass reads the NHWC codes of a block of 16 output pixels of one row into a
 * small L1 buffer (the block's patch columns), multiplies them by every output channel's
 * weights and writes the dequantized float32 y (N, O, OH, OW) straight from registers:
 * no patch matrix, no accumulator matrix.  The integer sums are the contract's
 * (docs/DESIGN.md, "Approximate PyTorch layers"): acc[m, o] = sum_k mul8[x[m, k], w[o, k]],
 * a padding pixel the code 0 through the table like any other code, exact tables as
 * products; then y = float32(acc) * scale[o] + bias[o], a rounded product and then the add.
 * Integer sums do not depend on their order, so every body gives today's im2col + GEMM bits.
 *
 *   q     int8  (N, H, W, C)  NHWC codes of the input            IN
 *   Wt    int8  (K, O)        weight, k = (i*KW + j)*C + c        IN
 *   mul   int32 (65536,)      entry a*256 + b (a = activation)    IN   (exact: products computed)
 *   scale float (O,), bias float (O,) or NULL                     IN
 *   y     float (N, O, OH, OW)                                    OUT
 *
 * Bodies: the generic one here (a pixel at a time); csrc/conv2d/x86/avx512.c (16 pixels a
 * vector: exact as int16 pair dot products, madd+add, or VNNI vpdpbusd over byte quads in
 * avx512_vnni.c; any table as 16-lane gathers), each over a range of output rows on one thread; the
 * AVX-512 ones are also built against SIMDe for the tests (lutcore._native._simde_im2col,
 * LC_C2D_SIMDE).  lc_conv2d_direct hands rows out to the threads dynamically (a
 * descheduled thread does not hold up the others; a row is one thread's, so the bits do
 * not depend on the schedule or the thread count).
 */
#ifndef LUTCORE_CONV2D_H
#define LUTCORE_CONV2D_H

#include "core/common.h"
#include "core/dispatch.h"
#include <stdlib.h>
#include <string.h>
#include "conv2d/geo.h"


/* the NHWC pixel of tap (i, j) of output (n, oh, ow), or NULL in the padding */
static inline const int8_t *lc_c2d_pixel(const int8_t *q, const lc_c2d_geo *g, int64_t n, int64_t oh,
                                         int64_t ow, int64_t i, int64_t j) {
    int64_t ih = oh * g->sh - g->ph + i * g->dh, iw = ow * g->sw - g->pw + j * g->dw;
    if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) return NULL;
    return q + ((n * g->H + ih) * g->W + iw) * g->C;
}

/* output rows r = n*OH + oh in [r0, r1), a pixel at a time (wp unused) */
static void lc_c2d_rows_generic(float *y, const int8_t *q, const lc_c2d_geo *g, const int32_t *wp,
                                const int8_t *Wt, const int32_t *mul, int exact, const float *scale,
                                const float *bias, int64_t r0, int64_t r1) {
    const int64_t O = g->O, K = g->K, C = g->C, P = g->OH * g->OW;
    int8_t x[LC_C2D_KMAX];
    (void)wp;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->OH, oh = r % g->OH;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            for (int64_t i = 0; i < g->KH; i++)
                for (int64_t j = 0; j < g->KW; j++) {
                    const int8_t *px = lc_c2d_pixel(q, g, n, oh, ow, i, j);
                    for (int64_t c = 0; c < C; c++) x[(i * g->KW + j) * C + c] = px ? px[c] : 0;
                }
            float *yp = y + n * O * P + oh * g->OW + ow;
            for (int64_t o = 0; o < O; o++) {
                int32_t s = 0;
                if (exact) for (int64_t k = 0; k < K; k++) s += (int32_t)x[k] * (int32_t)Wt[k * O + o];
                else for (int64_t k = 0; k < K; k++)
                    s += mul[((int32_t)(uint8_t)x[k] << 8) | (uint8_t)Wt[k * O + o]];
                float v = (float)s * scale[o];
                if (bias) v = v + bias[o];
                yp[o * P] = v;
            }
        }
    }
}

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies live in their own translation units (conv2d/x86/x86.h); LC_C2D_SIMDE
 * (setup.py: 1 in the test twin's build) binds their SIMDe copies.  The VNNI body differs
 * only in the exact products: any other table runs the AVX-512 one (lc_c2d_pick). */
#include "conv2d/x86/x86.h"
#ifndef LC_C2D_SIMDE
#define LC_C2D_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*rows)(float *, const int8_t *, const lc_c2d_geo *, const int32_t *, const int8_t *, const int32_t *, int,
                 const float *, const float *, int64_t, int64_t);
    int wp_vnni;   /* the exact weight's layout for the body (x86.h lc_c2d_pack_weight); -1: none (reads Wt) */
    /* Whether the direct pass beats im2col + the LUT GEMM with the exact table: only the AVX-512
     * bodies do (K = 27, 64 channels, batch 8 on Zen 4: 0.24 against 0.53 ms; any table: 3.0
     * against 0.79 ms through the packed table GEMM; the generic body at any table: 4.7 against
     * 1.5 ms; BENCHMARKS.md, Run AD; same bits on both routes). */
    int fast;
} lc_c2d_body;
static const lc_c2d_body lc_c2d_bodies[] = {
#if LC_X86_BODIES
    {{"avx512vnni", LC_ISA_AVX512 | LC_ISA_VNNI}, LC_XBODY(LC_C2D_SIMDE, avx512vnni, c2d_rows), 1, 1},
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_C2D_SIMDE, avx512, c2d_rows), 0, 1},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_c2d_rows_generic, -1, 0},
};
/* the body lc_conv2d_direct runs at isa (exact: the exact table's) */
static inline const lc_c2d_body *lc_c2d_pick(int isa, int exact) {
    return LC_BODY_PICK(lc_c2d_body, lc_c2d_bodies, exact ? isa : isa & ~LC_ISA_VNNI);
}
static const char *lc_c2d_body_name(int isa, int exact) { return lc_c2d_pick(isa, exact)->head.name; }

/* Whether the direct pass beats im2col + the LUT GEMM at isa (the body's `fast`). */
static inline int lc_c2d_fast(int isa, int exact) { return exact && lc_c2d_pick(isa, exact)->fast; }

/* Below this many multiply-accumulates the pass runs on one thread (a team's start and
 * barrier cost more than the work); bits never depend on it. */
#define LC_C2D_PAR_MIN (1 << 20)

/* Rows of output (n, oh) per work unit: at least about this many multiply-accumulates
 * (a unit costs a claim; rows at the padding edges cost less, so units stay small). */
#define LC_C2D_UNIT_MACS (1 << 19)

typedef struct {
    const lc_c2d_body *B;
    float *y;
    const int8_t *q, *Wt;
    const lc_c2d_geo *g;
    const int32_t *wp, *mul;
    const float *scale, *bias;
    int64_t R, rpu;              /* output rows, rows per unit */
    int exact;
} lc_c2d_job;

static void lc_c2d_unit(void *p, int64_t u, int tid) {
    const lc_c2d_job *j = (const lc_c2d_job *)p;
    const int64_t r0 = u * j->rpu, r1 = r0 + j->rpu < j->R ? r0 + j->rpu : j->R;
    (void)tid;
    for (int64_t r = r0; r < r1; r++)    /* a row a call */
        j->B->rows(j->y, j->q, j->g, j->wp, j->Wt, j->mul, j->exact, j->scale, j->bias, r, r + 1);
}

/* y = the direct convolution (the header comment); returns 0, or -1 when out of memory. */
static int lc_conv2d_direct(float *y, const int8_t *q, const lc_c2d_geo *g, const int8_t *Wt, const int32_t *mul,
                            int exact, const float *scale, const float *bias, int isa, int nthreads) {
    const int64_t R = g->N * g->OH, O = g->O, K = g->K;
    const lc_c2d_body *B = lc_c2d_pick(isa, exact);
    int32_t *wp = NULL;
    if (exact && B->wp_vnni >= 0) {   /* the weight as the body reads it (conv2d/x86/x86.h) */
        wp = (int32_t *)malloc((size_t)lc_c2d_wp_len(g, B->wp_vnni) * sizeof(int32_t));
        if (!wp) return -1;
        lc_c2d_pack_weight(wp, g, Wt, B->wp_vnni);
    }
    const int64_t work = R * g->OW * K * O, row = g->OW * K * O > 0 ? g->OW * K * O : 1;
    lc_c2d_job j = {B, y, q, Wt, g, wp, mul, scale, bias, R, row >= LC_C2D_UNIT_MACS ? 1 : LC_C2D_UNIT_MACS / row, exact};
    lc_team_for(work > LC_C2D_PAR_MIN ? nthreads : 1, (R + j.rpu - 1) / j.rpu, lc_c2d_unit, &j);
    free(wp);
    return 0;
}

#endif /* LUTCORE_CONV2D_H */
