/* csrc/sgemm/sgemm.h — float32 matrix multiply with a fixed summation order.
 *
 *   C[b] (M, N) = A[b] (M, K) @ B[b] (K, N)        (or C += ... with accumulate)
 *
 * Any strides: element (i, k) of A[b] is A[b*sab + i*sar + k*sac], element
 * (k, j) of B[b] is B[b*sbb + k*sbr + j*sbc] — so transposed operands cost
 * nothing extra.  Why not BLAS: OpenBLAS's blocking (and so its rounding)
 * changes with its thread count; here every C element is one fused
 * multiply-add chain over k = 0..K-1, owned by one thread, so the bits are the
 * same at any thread count and on every SIMD path (the portable body uses
 * fmaf, the AVX2 body vfmadd — both round once per step).
 *
 * Layout: A is packed into row panels of 6 (Ap[panel][k][6]) and B into
 * column panels of 16 (Bp[panel][k][16]), zero-padded; a 6x16 register tile
 * (12 ymm accumulators) streams both.  Work units are (batch, 48-row block,
 * 128-column block).  A constant right operand (weights) can be packed once
 * (lc_sgemm_pack_b over every panel) and passed as Bpre (batch 1).
 * On AVX-512 (sgemm/x86.h, src/sgemm/) the tile is 6 rows x 2 panels of zmm
 * (12 accumulators): the driver hands it two adjacent column panels at a time.
 */
#ifndef LUTCORE_SGEMM_H
#define LUTCORE_SGEMM_H

#include "core/common.h"
#include "core/dispatch.h"
#include <math.h>

#define LC_SMR 6
#define LC_SNR 16
#define LC_SMC 48
#define LC_SNC 128
#define LC_SKC 256   /* k block: a 6x256 A panel and a 256x16 B panel stay in L1 */
#define LC_SKC_WIDE 128   /* the zmm tile's: a 6x128 A panel and two 128x16 B panels (19 KB) */

/* Known zeros (attention's causal structure, square M = K or M = N), `tri`:
 *   LC_TRI_A_LOWER  A[i][k] = 0 for k > i: row tile i0..i0+R-1 adds k < i0 + R only
 *   LC_TRI_A_UPPER  A[i][k] = 0 for k < i: row tile from i0 adds k >= i0 only
 *   LC_TRI_C_LOWER  only C[i][j], j <= i, is wanted: tiles wholly above the
 *                   diagonal are not computed and read as zeros (left as they are
 *                   when accumulating)
 * Skipped terms are exact zeros, so the sums are the full product's (up to the
 * sign of an exact zero); each element is still one in-order fma chain. */
#define LC_TRI_NONE 0
#define LC_TRI_A_LOWER 1
#define LC_TRI_A_UPPER 2
#define LC_TRI_C_LOWER 3
/* the k range [*klo, *khi) of row tile i0 .. i0+R-1 under `tri` */
static inline void lc_stri_krange(int tri, int64_t i0, int64_t R, int64_t K, int64_t *klo, int64_t *khi) {
    *klo = 0;
    *khi = K;
    if (tri == LC_TRI_A_LOWER) *khi = i0 + R < K ? i0 + R : K;
    else if (tri == LC_TRI_A_UPPER) *klo = i0 < K ? i0 : K;
}

/* one panel (M <= 6 rows), its k range [klo, khi) */
static void lc_sgemm_pack_a(float *Ap, const float *A, int64_t M, int64_t K, int64_t sar, int64_t sac,
                            int64_t klo, int64_t khi) {
    (void)K;
    for (int64_t k = klo; k < khi; k++)
        for (int r = 0; r < LC_SMR; r++) Ap[k * LC_SMR + r] = r < M ? A[r * sar + k * sac] : 0.0f;
}
static void lc_sgemm_pack_b(float *Bp, const float *B, int64_t K, int64_t N, int64_t sbr, int64_t sbc) {
    int64_t np = (N + LC_SNR - 1) / LC_SNR;
    for (int64_t p = 0; p < np; p++) {
        float *d = Bp + p * K * LC_SNR;
        int64_t j0 = p * LC_SNR, nc = N - j0 < LC_SNR ? N - j0 : LC_SNR;
        for (int64_t k = 0; k < K; k++) {
            float *dk = d + k * LC_SNR;
            const float *s = B + k * sbr + j0 * sbc;
            if (sbc == 1) {
                for (int64_t c = 0; c < nc; c++) dk[c] = s[c];
            } else {
                for (int64_t c = 0; c < nc; c++) dk[c] = s[c * sbc];
            }
            for (int64_t c = nc; c < LC_SNR; c++) dk[c] = 0.0f;
        }
    }
}

/* Source rows k0 .. k1-1 of every panel, for an operand whose panels run along its
 * contiguous direction (A^T, whose rows are A's columns, and row-major B): panel by
 * panel, the k1-k0 rows are walked side by side, each in order, and each panel's
 * slots are written whole.  The panel-outer packs above would instead walk one
 * piece per row a row stride apart — a new page per row, which the hardware
 * prefetchers do not follow (~2.5x a copy's time).  Same packed layout. */
#define LC_SPACK_KB 8    /* source rows per pack work item */
static void lc_sgemm_pack_a_rows(float *Ap, const float *A, int64_t M, int64_t K, int64_t sar, int64_t sac,
                                 int64_t k0, int64_t k1, int tri) {
    const int64_t np = (M + LC_SMR - 1) / LC_SMR;
    for (int64_t p = 0; p < np; p++) {
        const int64_t i0 = p * LC_SMR, nr = M - i0 < LC_SMR ? M - i0 : LC_SMR;
        int64_t klo, khi;
        lc_stri_krange(tri, i0, nr, K, &klo, &khi);       /* only what the tiles read */
        const int64_t ka = k0 > klo ? k0 : klo, kb = k1 < khi ? k1 : khi;
        float *d = Ap + p * K * LC_SMR;
        for (int64_t k = ka; k < kb; k++) {
            const float *row = A + k * sac + i0 * sar;
            if (nr == LC_SMR && sar == 1) memcpy(d + k * LC_SMR, row, LC_SMR * sizeof(float));
            else for (int64_t r = 0; r < LC_SMR; r++) d[k * LC_SMR + r] = r < nr ? row[r * sar] : 0.0f;
        }
    }
}
static void lc_sgemm_pack_b_rows(float *Bp, const float *B, int64_t K, int64_t N, int64_t sbr, int64_t sbc,
                                 int64_t k0, int64_t k1) {
    const int64_t np = (N + LC_SNR - 1) / LC_SNR;
    for (int64_t q = 0; q < np; q++) {
        const int64_t j0 = q * LC_SNR, nc = N - j0 < LC_SNR ? N - j0 : LC_SNR;
        float *d = Bp + q * K * LC_SNR;
        for (int64_t k = k0; k < k1; k++) {
            const float *row = B + k * sbr + j0 * sbc;
            if (nc == LC_SNR && sbc == 1) memcpy(d + k * LC_SNR, row, LC_SNR * sizeof(float));
            else for (int64_t c = 0; c < LC_SNR; c++) d[k * LC_SNR + c] = c < nc ? row[c * sbc] : 0.0f;
        }
    }
}

/* R rows (<= 6) of the tile: a direct (unpacked) A has only those rows, so the
 * kernel must not read further (rows past R are left as they are) */
static void lc_smk_generic(float *tile, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t K, int init,
                           int R) {
    float acc[LC_SMR * LC_SNR];
    for (int i = 0; i < LC_SMR * LC_SNR; i++) acc[i] = init ? tile[i] : 0.0f;
    for (int64_t k = 0; k < K; k++)
        for (int r = 0; r < R; r++) {
            float a = ap[k * aks + r * ars];
            for (int c = 0; c < LC_SNR; c++) acc[r * LC_SNR + c] = fmaf(a, bp[k * LC_SNR + c], acc[r * LC_SNR + c]);
        }
    memcpy(tile, acc, sizeof(acc));
}

/* one row of the generic kernel: t[c] = chain over k of a[k] b[k][c] */
static void lc_smk_generic_1row(float *t, const float *a, const float *bp, int64_t K) {
    for (int c = 0; c < LC_SNR; c++) t[c] = 0.0f;
    for (int64_t k = 0; k < K; k++)
        for (int c = 0; c < LC_SNR; c++) t[c] = fmaf(a[k], bp[k * LC_SNR + c], t[c]);
}

#if LC_X86
LC_TARGET_AVX2 static void lc_smk_avx2(float *tile, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t K, int init) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    if (init) {   /* continue the chains of an earlier k block */
        c00 = _mm256_loadu_ps(tile + 0); c01 = _mm256_loadu_ps(tile + 8);
        c10 = _mm256_loadu_ps(tile + 16); c11 = _mm256_loadu_ps(tile + 24);
        c20 = _mm256_loadu_ps(tile + 32); c21 = _mm256_loadu_ps(tile + 40);
        c30 = _mm256_loadu_ps(tile + 48); c31 = _mm256_loadu_ps(tile + 56);
        c40 = _mm256_loadu_ps(tile + 64); c41 = _mm256_loadu_ps(tile + 72);
        c50 = _mm256_loadu_ps(tile + 80); c51 = _mm256_loadu_ps(tile + 88);
    }
#pragma GCC unroll 4   /* four k steps per loop trip: ~10% here (the chains are unchanged) */
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(bp + k * LC_SNR), b1 = _mm256_loadu_ps(bp + k * LC_SNR + 8);
        const float *a = ap + k * aks;
        __m256 av;
        av = _mm256_broadcast_ss(a + 0 * ars); c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a + 1 * ars); c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a + 2 * ars); c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a + 3 * ars); c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a + 4 * ars); c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a + 5 * ars); c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
    }
    _mm256_storeu_ps(tile + 0, c00); _mm256_storeu_ps(tile + 8, c01);
    _mm256_storeu_ps(tile + 16, c10); _mm256_storeu_ps(tile + 24, c11);
    _mm256_storeu_ps(tile + 32, c20); _mm256_storeu_ps(tile + 40, c21);
    _mm256_storeu_ps(tile + 48, c30); _mm256_storeu_ps(tile + 56, c31);
    _mm256_storeu_ps(tile + 64, c40); _mm256_storeu_ps(tile + 72, c41);
    _mm256_storeu_ps(tile + 80, c50); _mm256_storeu_ps(tile + 88, c51);
}
#endif

#if LC_X86
/* R < 6 rows (the last row tile, and decode's single row): the same per-element
 * FMA chain as the 6-row kernel, so results do not depend on which one ran. */
LC_TARGET_AVX2 static inline __attribute__((always_inline)) void lc_smk_avx2_r(float *tile, const float *ap, int64_t aks,
                                                                int64_t ars, const float *bp,
                                                                int64_t K, const int R, int init) {
    __m256 c0[5], c1[5];
    for (int r = 0; r < R; r++) {
        c0[r] = init ? _mm256_loadu_ps(tile + r * LC_SNR) : _mm256_setzero_ps();
        c1[r] = init ? _mm256_loadu_ps(tile + r * LC_SNR + 8) : _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(bp + k * LC_SNR), b1 = _mm256_loadu_ps(bp + k * LC_SNR + 8);
        for (int r = 0; r < R; r++) {
            __m256 av = _mm256_broadcast_ss(ap + k * aks + r * ars);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(tile + r * LC_SNR, c0[r]);
        _mm256_storeu_ps(tile + r * LC_SNR + 8, c1[r]);
    }
}
LC_TARGET_AVX2 static void lc_smk_avx2_1(float *t, const float *a, int64_t ks, int64_t rs, const float *b, int64_t K, int init) { lc_smk_avx2_r(t, a, ks, rs, b, K, 1, init); }
LC_TARGET_AVX2 static void lc_smk_avx2_2(float *t, const float *a, int64_t ks, int64_t rs, const float *b, int64_t K, int init) { lc_smk_avx2_r(t, a, ks, rs, b, K, 2, init); }
LC_TARGET_AVX2 static void lc_smk_avx2_3(float *t, const float *a, int64_t ks, int64_t rs, const float *b, int64_t K, int init) { lc_smk_avx2_r(t, a, ks, rs, b, K, 3, init); }
LC_TARGET_AVX2 static void lc_smk_avx2_4(float *t, const float *a, int64_t ks, int64_t rs, const float *b, int64_t K, int init) { lc_smk_avx2_r(t, a, ks, rs, b, K, 4, init); }
LC_TARGET_AVX2 static void lc_smk_avx2_5(float *t, const float *a, int64_t ks, int64_t rs, const float *b, int64_t K, int init) { lc_smk_avx2_r(t, a, ks, rs, b, K, 5, init); }
#endif

/* columns c0 .. c0+15 (those below N) of a one-row result t into y, or added to y */
static inline void lc_panel_out(float *y, const float *t, int64_t c0, int64_t N, int accumulate) {
    int64_t nc = N - c0 < LC_SNR ? N - c0 : LC_SNR;
    for (int64_t c = 0; c < nc; c++) y[c0 + c] = accumulate ? y[c0 + c] + t[c] : t[c];
}

/* One row against prepacked panels (decoding's GEMV): four panels at a time,
 * eight independent chains, so a thread keeps four weight streams in flight.
 * Each output element is still one fma chain over k in order from zero: the
 * bits of the tiled kernels. */
static void lc_sgemv_panels_generic(float *y, const float *x, const float *Bp, int64_t K, int64_t N,
                                    int64_t q0, int64_t q1, int accumulate) {
    for (int64_t q = q0; q < q1; q++) {
        float t[LC_SNR];
        lc_smk_generic_1row(t, x, Bp + q * K * LC_SNR, K);
        lc_panel_out(y, t, q * LC_SNR, N, accumulate);
    }
}
#if LC_X86
LC_TARGET_AVX2 static void lc_sgemv_panels_avx2(float *y, const float *x, const float *Bp, int64_t K, int64_t N,
                                                int64_t q0, int64_t q1, int accumulate) {
    for (int64_t q = q0; q < q1; q += 4) {
        const int np = (int)(q1 - q < 4 ? q1 - q : 4);
        __m256 a[4][2];
        const float *b[4];
        for (int p = 0; p < 4; p++) {
            a[p][0] = a[p][1] = _mm256_setzero_ps();
            b[p] = Bp + (q + (p < np ? p : 0)) * K * LC_SNR;
        }
        if (np == 4) {              /* a literal trip count keeps the eight chains in registers */
            for (int64_t k = 0; k < K; k++) {
                __m256 xv = _mm256_broadcast_ss(x + k);
                for (int p = 0; p < 4; p++) {
                    a[p][0] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b[p] + k * LC_SNR), a[p][0]);
                    a[p][1] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b[p] + k * LC_SNR + 8), a[p][1]);
                }
            }
        } else {
            for (int64_t k = 0; k < K; k++) {
                __m256 xv = _mm256_broadcast_ss(x + k);
                for (int p = 0; p < np; p++) {
                    a[p][0] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b[p] + k * LC_SNR), a[p][0]);
                    a[p][1] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b[p] + k * LC_SNR + 8), a[p][1]);
                }
            }
        }
        for (int p = 0; p < np; p++) {
            float t[LC_SNR];
            _mm256_storeu_ps(t, a[p][0]);
            _mm256_storeu_ps(t + 8, a[p][1]);
            lc_panel_out(y, t, (q + p) * LC_SNR, N, accumulate);
        }
    }
}
#endif

/* the register tiles with the x86 body's signature (sgemm/x86/x86.h sgemm_tile): one panel a
 * call (NP 1, bps unused) */
static void lc_smk_generic_tile(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t bps,
                                int64_t K, int init, int R, int NP) {
    (void)bps, (void)NP;
    lc_smk_generic(t, ap, aks, ars, bp, K, init, R);
}
#if LC_X86
LC_TARGET_AVX2 static void lc_smk_avx2_tile(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp,
                                            int64_t bps, int64_t K, int init, int R, int NP) {
    (void)bps, (void)NP;
    switch (R) {
    case 1: lc_smk_avx2_1(t, ap, aks, ars, bp, K, init); break;
    case 2: lc_smk_avx2_2(t, ap, aks, ars, bp, K, init); break;
    case 3: lc_smk_avx2_3(t, ap, aks, ars, bp, K, init); break;
    case 4: lc_smk_avx2_4(t, ap, aks, ars, bp, K, init); break;
    case 5: lc_smk_avx2_5(t, ap, aks, ars, bp, K, init); break;
    default: lc_smk_avx2(t, ap, aks, ars, bp, K, init);
    }
}
#endif

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies live in their own translation unit (sgemm/x86/x86.h, csrc/sgemm/x86/);
 * LC_SGEMM_SIMDE (setup.py: 1 in the test twins' builds) binds their SIMDe copies. */
#include "sgemm/x86/x86.h"
#ifndef LC_SGEMM_SIMDE
#define LC_SGEMM_SIMDE 0
#endif
typedef struct {
    lc_body_head head;          /* the tile's name */
    const char *gemv_name;
    void (*tile)(float *, const float *, int64_t, int64_t, const float *, int64_t, int64_t, int, int, int);
    int np;                     /* panels a tile call takes (2: the 6x32 zmm tile) */
    int64_t kc;                 /* the k block (operands L1-resident) */
    void (*gemv)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int);
    int64_t gemv_group;         /* panels a GEMV work item: the body's weight streams */
} lc_sgemm_body;
static const lc_sgemm_body lc_sgemm_bodies[] = {
#if LC_X86_BODIES
    {{"avx512 (6x32 zmm tile)", LC_ISA_AVX512}, "avx512 (a zmm per panel)", LC_XBODY(LC_SGEMM_SIMDE, avx512, sgemm_tile),
     2, LC_SKC_WIDE, LC_XBODY(LC_SGEMM_SIMDE, avx512, sgemv_panels), 8},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, "avx2", lc_smk_avx2_tile, 1, LC_SKC, lc_sgemv_panels_avx2, 4},
#endif
    {{"generic", LC_ISA_GENERIC}, "generic", lc_smk_generic_tile, 1, LC_SKC, lc_sgemv_panels_generic, 4},
};
static inline const lc_sgemm_body *lc_sgemm_pick(int isa) { return LC_BODY_PICK(lc_sgemm_body, lc_sgemm_bodies, isa); }
/* for show_config: the tile body `isa` runs, and its GEMV body (lc_sgemv_panels) */
static const char *lc_sgemm_body_name(int isa) { return lc_sgemm_pick(isa)->head.name; }
static const char *lc_sgemv_body_name(int isa) { return lc_sgemm_pick(isa)->gemv_name; }

/* panels [q0, q1) of the one-row product, by isa */
static inline void lc_sgemv_panels(float *y, const float *x, const float *Bp, int64_t K, int64_t N, int64_t q0,
                                   int64_t q1, int accumulate, int isa) {
    lc_sgemm_pick(isa)->gemv(y, x, Bp, K, N, q0, q1, accumulate);
}

/* a finished tile (R rows, nc columns, rows of LC_SNR in t) into C at (i0, j0), or added */
static inline void lc_stile_out(float *Cb, int64_t ldc, const float *t, int64_t i0, int64_t j0, int R, int nc,
                                int accumulate) {
    for (int r = 0; r < R; r++) {
        float *cr = Cb + (i0 + r) * ldc + j0;
        if (accumulate) for (int c = 0; c < nc; c++) cr[c] = cr[c] + t[r * LC_SNR + c];
        else memcpy(cr, t + r * LC_SNR, (size_t)nc * sizeof(float));
    }
}

/* work: per batch, packed A (ceil(M/6)*6*K) + packed B (ceil(N/16)*16*K) floats, for
 * `nb_work` batches at a time (the caller sizes it with lc_sgemm_work). */
static inline size_t lc_sgemm_work(int64_t M, int64_t N, int64_t K) {
    return (size_t)(((M + LC_SMR - 1) / LC_SMR) * LC_SMR + ((N + LC_SNR - 1) / LC_SNR) * LC_SNR) * (size_t)K;
}

/* One call's job on the team (lc_sgemm_tri): the packing items, then the output units. */
typedef struct {
    const lc_sgemm_body *SB;
    float *C, *work, *part;       /* part: a LC_SMC x LC_SNC partial-tile block per thread (NULL: none) */
    const float *A, *B, *Bpre;
    int64_t scb, ldc, sab, sar, sac, sbb, sbr, sbc, M, N, K;
    int64_t npa, npb, nmu, nnu, nia, nib, npack, gp, np;
    size_t per;
    int accumulate, tri, wide, direct_a, a_rows, b_rows;
} lc_sgemm_job;

/* GEMV: group gi of gp panels (the body's weight streams) */
static void lc_sgemm_gemv_unit(void *p, int64_t gi, int tid) {
    const lc_sgemm_job *j = (const lc_sgemm_job *)p;
    (void)tid;
    const int64_t q0 = gi * j->gp, q1 = q0 + j->gp < j->np ? q0 + j->gp : j->np;
    j->SB->gemv(j->C, j->A, j->Bpre, j->K, j->N, q0, q1, j->accumulate);
}

/* packing items [w0, w1) (every batch's operands; independent of the thread count and of
   the ranges): A is read in place when its rows are contiguous; an operand whose panel
   pieces (6 or 16 elements at one k) lie contiguous (A^T, row-major B) is packed in items
   of LC_SPACK_KB source rows across every panel, the others panel by panel, each walking
   k along its contiguous direction */
static void lc_sgemm_pack_range(void *p, int64_t w0, int64_t w1, int tid) {
    const lc_sgemm_job *j = (const lc_sgemm_job *)p;
    const int64_t M = j->M, N = j->N, K = j->K, npa = j->npa, nia = j->nia;
    (void)tid;
    for (int64_t w = w0; w < w1; w++) {
        int64_t b = w / j->npack, pi = w % j->npack;
        float *Ap = j->work + (size_t)b * j->per, *Bp = Ap + (size_t)npa * LC_SMR * K;
        if (pi < nia) {
            if (j->a_rows) {
                int64_t k0 = pi * LC_SPACK_KB, k1 = k0 + LC_SPACK_KB < K ? k0 + LC_SPACK_KB : K;
                lc_sgemm_pack_a_rows(Ap, j->A + b * j->sab, M, K, j->sar, j->sac, k0, k1, j->tri);
            } else {
                int64_t r0 = pi * LC_SMR, nr = M - r0 < LC_SMR ? M - r0 : LC_SMR, klo, khi;
                lc_stri_krange(j->tri, r0, nr, K, &klo, &khi);
                lc_sgemm_pack_a(Ap + pi * K * LC_SMR, j->A + b * j->sab + r0 * j->sar, nr, K, j->sar, j->sac, klo, khi);
            }
        } else {
            int64_t q = pi - nia;
            if (j->b_rows) {
                int64_t k0 = q * LC_SPACK_KB, k1 = k0 + LC_SPACK_KB < K ? k0 + LC_SPACK_KB : K;
                lc_sgemm_pack_b_rows(Bp, j->B + b * j->sbb, K, N, j->sbr, j->sbc, k0, k1);
            } else {
                int64_t c0 = q * LC_SNR;
                lc_sgemm_pack_b(Bp + q * K * LC_SNR, j->B + b * j->sbb + c0 * j->sbc, K,
                                (N - c0 < LC_SNR ? N - c0 : LC_SNR), j->sbr, j->sbc);
            }
        }
    }
}

/* output unit w = (batch, 48-row block, 128-column block): computed whole by one thread,
   so the bits do not depend on who takes it.  The k loop runs in blocks of the body's kc
   (operands L1-resident) through the thread's partial tiles; a tile's chains continue
   exactly across blocks */
static void lc_sgemm_tile_unit(void *p, int64_t w, int tid) {
    const lc_sgemm_job *j = (const lc_sgemm_job *)p;
    const lc_sgemm_body *SB = j->SB;
    const int64_t M = j->M, N = j->N, K = j->K, nmu = j->nmu, nnu = j->nnu, npa = j->npa, ldc = j->ldc;
    const int tri = j->tri, accumulate = j->accumulate, wide = j->wide, direct_a = j->direct_a;
    float *part = j->part ? j->part + (size_t)tid * LC_SMC * LC_SNC : NULL;
    int64_t b = w / (nmu * nnu), u = w % (nmu * nnu), mu = u / nnu, nu = u % nnu;
    const float *Ap = j->work + (size_t)b * j->per, *Bp = j->Bpre ? j->Bpre : Ap + (size_t)npa * LC_SMR * K;
    float tile[2 * LC_SMR * LC_SNR];    /* no buffer: the tile(s) of one column step */
    int np2 = 1;
    float *Cb = j->C + b * j->scb;
    int64_t m0 = mu * LC_SMC, n0 = nu * LC_SNC;
    int64_t m_end = m0 + LC_SMC < M ? m0 + LC_SMC : M;
    int64_t n_end = n0 + LC_SNC < N ? n0 + LC_SNC : N;
    int64_t ntile_n = (n_end - n0 + LC_SNR - 1) / LC_SNR;
    const int64_t kstep = part ? SB->kc : (K > 0 ? K : 1);  /* no buffer: one pass over all of K */
    for (int64_t k0 = 0; k0 < (K > 0 ? K : 1); k0 += kstep) {
        for (int64_t j0 = n0; j0 < n_end; j0 += (int64_t)np2 * LC_SNR) {
            /* panels this column step: two side by side for the zmm tile */
            np2 = wide && j0 + LC_SNR < n_end ? 2 : 1;
            int ncp[2];
            for (int pp = 0; pp < np2; pp++) {
                const int64_t jp = j0 + pp * LC_SNR;
                ncp[pp] = (int)(n_end - jp < LC_SNR ? n_end - jp : LC_SNR);
            }
            for (int64_t i0 = m0; i0 < m_end; i0 += LC_SMR) {
                const int R = (int)(m_end - i0 < LC_SMR ? m_end - i0 : LC_SMR);
                /* the tile's k range: zero terms of a triangular A are not added (a chain
                   then differs from the full one only in the sign of an exact zero) */
                int64_t klo, khi;
                lc_stri_krange(tri, i0, R, K, &klo, &khi);
                /* panels from npc on lie wholly above the diagonal (or have no k): zeros */
                int npc = 0;
                while (npc < np2 && !((tri == LC_TRI_C_LOWER && j0 + npc * LC_SNR > i0 + R - 1) || klo >= khi))
                    npc++;
                if (k0 == 0 && !accumulate)     /* nothing to add: those tiles are zero */
                    for (int pp = npc; pp < np2; pp++)
                        for (int r = 0; r < R; r++)
                            memset(Cb + (i0 + r) * ldc + j0 + pp * LC_SNR, 0, (size_t)ncp[pp] * sizeof(float));
                if (npc == 0) continue;
                const int64_t lo = k0 > klo ? k0 : klo, hi = k0 + kstep < khi ? k0 + kstep : khi;
                if (lo >= hi) continue;         /* this k block is outside the tile's range */
                float *t = part ? part + (((i0 - m0) / LC_SMR) * ntile_n + (j0 - n0) / LC_SNR) * (LC_SMR * LC_SNR)
                                : tile;
                const float *ap = direct_a ? j->A + b * j->sab + i0 * j->sar + lo
                                           : Ap + (i0 / LC_SMR) * K * LC_SMR + lo * LC_SMR;
                const float *bp = Bp + (j0 / LC_SNR) * K * LC_SNR + lo * LC_SNR;
                const int64_t aks = direct_a ? 1 : LC_SMR, ars = direct_a ? j->sar : 1, kn = hi - lo;
                const int init = lo > klo;
                SB->tile(t, ap, aks, ars, bp, K * LC_SNR, kn, init, R, npc);
                if (hi == khi)                  /* the tiles' chains are complete */
                    for (int pp = 0; pp < npc; pp++)
                        lc_stile_out(Cb, ldc, t + pp * (LC_SMR * LC_SNR), i0, j0 + pp * LC_SNR, R, ncp[pp],
                                     accumulate);
            }
        }
    }
}

/* Packing items per team range: about this many floats copied (a few µs) */
#define LC_SPACK_GRAIN_FLOATS 32768

static void lc_sgemm_tri(float *C, int64_t scb, int64_t ldc, const float *A, int64_t sab, int64_t sar, int64_t sac,
                         const float *B, int64_t sbb, int64_t sbr, int64_t sbc, int64_t nbatch, int64_t M, int64_t N,
                         int64_t K, int accumulate, int tri, float *work, const float *Bpre, int isa, int nthreads) {
    if (M <= 0 || N <= 0 || nbatch <= 0) return;
    const lc_sgemm_body *SB = lc_sgemm_pick(isa);
    lc_sgemm_job j = {.SB = SB, .C = C, .work = work, .part = NULL, .A = A, .B = B, .Bpre = Bpre, .scb = scb,
                      .ldc = ldc, .sab = sab, .sar = sar, .sac = sac, .sbb = sbb, .sbr = sbr, .sbc = sbc, .M = M,
                      .N = N, .K = K, .accumulate = accumulate, .tri = tri};
    if (M == 1 && nbatch == 1 && Bpre && sac == 1) {      /* a row against packed panels: the GEMV */
        /* groups of panels: as many as the body streams at a time */
        j.gp = SB->gemv_group;
        j.np = (N + LC_SNR - 1) / LC_SNR;
        lc_team_for(nthreads, (j.np + j.gp - 1) / j.gp, lc_sgemm_gemv_unit, &j);
        return;
    }
    j.npa = (M + LC_SMR - 1) / LC_SMR;
    j.npb = (N + LC_SNR - 1) / LC_SNR;
    j.per = lc_sgemm_work(M, N, K);
    j.nmu = (M + LC_SMC - 1) / LC_SMC;
    j.nnu = (N + LC_SNC - 1) / LC_SNC;
    j.wide = SB->np == 2;      /* the 6x32 zmm tile (two panels a call) */
    j.direct_a = (sac == 1);
    j.a_rows = !j.direct_a && sar == 1;
    j.b_rows = !Bpre && sbc == 1;
    const int64_t nka = (K + LC_SPACK_KB - 1) / LC_SPACK_KB;
    j.nia = j.direct_a ? 0 : (j.a_rows ? nka : j.npa);
    j.nib = Bpre ? 0 : (j.b_rows ? nka : j.npb);
    j.npack = j.nia + j.nib;
    const int64_t nunits = nbatch * j.nmu * j.nnu;
    const int nt = nthreads > 1 ? (nunits < nthreads ? (int)nunits : nthreads) : 1;
    /* the packing, then (the job's end being the barrier) the output units */
    if (j.npack > 0) {
        /* floats an item copies, on average (items of one operand are alike) */
        const int64_t fl = ((j.nia ? j.npa * LC_SMR : 0) + (j.nib ? j.npb * LC_SNR : 0)) * K / j.npack;
        const int64_t grain = fl >= LC_SPACK_GRAIN_FLOATS ? 1 : (LC_SPACK_GRAIN_FLOATS + fl - 1) / (fl > 0 ? fl : 1);
        lc_team_range(nthreads, nbatch * j.npack, grain, lc_sgemm_pack_range, &j);
    }
    /* per-thread partial tiles (a thread's units reuse its block; blocks of whole cache
       lines); NULL: one pass over K */
    j.part = (float *)lc_aligned_alloc((size_t)nt * LC_SMC * LC_SNC * sizeof(float));
    lc_team_for(nt, nunits, lc_sgemm_tile_unit, &j);
    if (j.part) lc_aligned_free(j.part);
}
static void lc_sgemm(float *C, int64_t scb, int64_t ldc, const float *A, int64_t sab, int64_t sar, int64_t sac,
                     const float *B, int64_t sbb, int64_t sbr, int64_t sbc, int64_t nbatch, int64_t M, int64_t N,
                     int64_t K, int accumulate, float *work, const float *Bpre, int isa, int nthreads) {
    lc_sgemm_tri(C, scb, ldc, A, sab, sar, sac, B, sbb, sbr, sbc, nbatch, M, N, K, accumulate, LC_TRI_NONE, work,
                 Bpre, isa, nthreads);
}

#endif /* LUTCORE_SGEMM_H */
