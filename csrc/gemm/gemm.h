/* csrc/gemm/gemm.h — LUT GEMM and block-scaled int8 matmul: the family's one header (it
 * includes every part) and the one exact dispatcher; the jobs live beside it, each part
 * including the parts it uses and never this file: pack.h (packing, the tile shape),
 * kernels.h and table_rows.h (the generic and AVX2 bodies), body.h (the two body tables),
 * drivers.h (exact), table.h, table_auto.h, table_packed.h (any table); the per-ISA bodies
 * in x86/; the Q8 quantizer in csrc/q8/q8.h.
 *
 * Contracts (docs/DESIGN.md): C[m,n] = sum_k mul[A[m,k], B[k,n]] (int8 in, int32
 * out) for any 256x256 table; the block-scaled matmul folds one int32 GEMM per
 * block of the reduction axis: Y[m,n] = sum_b (sa[m,b]*sb[b,n]) * (float)I_b,
 * left to right, increasing b, in float32 without FMA.
 *
 * Two families of bodies:
 *  - exact tables: the product really is a*b, so we widen to int16 and use
 *    pmaddwd (pairs of k summed exactly into int32).  A is packed as int16
 *    rows, B as int8 panels of 16 columns x k-pairs so the micro-kernel streams
 *    both; a 6x16 register tile.  (No saturating pmaddubsw: it is not exact.)
 *  - any table: the "row table" trick.  For a fixed k and a block of 32 output
 *    columns, P[a][c] = mul[a][B[k,c]] holds every value row m can add; each
 *    output row then adds the contiguous row P[A[m,k]] — SIMD adds instead of
 *    one scalar lookup per product.  Building P costs 256 lookups per (k,c),
 *    so for fewer than LC_TABLE_DIRECT_M rows we look up directly instead.
 *
 * Shapes and layouts (all row-major, contiguous):
 *   A   int8  (M, K)            IN   activations
 *   B   int8  (K, N)            IN   weights
 *   Ap  int16 (Mp, Kp)          packed A, Mp = round_up(M, 6), Kp see below
 *   Bp  int8  (Np/16, Kp/2, 16, 2)  packed B, Np = round_up(N, 16)
 *   C   int32 (M, N)            OUT
 * The reduction axis is cut in `nblk` blocks of `bk` values, each padded to an
 * even `bkp` (plain GEMM: one block of K).  Padding is zero, so it adds 0 on
 * the exact path; the table path never sees padding (it reads A, B directly).
 *
 * Threads: work is split over output tiles only; integer sums are exact, and
 * each float output's fold order is fixed by b, so any thread count gives the
 * same bits.
 */
#ifndef LUTCORE_GEMM_H
#define LUTCORE_GEMM_H

#include "core/common.h"
#include <math.h>
#include <float.h>
#include "q8/q8.h"
#include "gemm/drivers.h"        /* -> gemm/body.h (the body tables) -> kernels.h, table_rows.h, pack.h */
#include "gemm/table.h"
#include "gemm/table_auto.h"
#include "gemm/table_packed.h"

/* ------------------------------------------------------ the one exact-GEMM dispatcher
 * C (M,N) int32 = A's int8 rows (M, K, lda apart) x packed Bp (Kp = K rounded up to even).
 * Which exact body runs is decided by the body table (gemm/body.h, lc_gemm_exact_pick) and
 * nowhere else: a body that takes whole calls from int8 rows runs them (VNNI, more than
 * LC_DIRECT_ROWS rows); otherwise A is widened into Ap (int16 (round_up(M, LC_MR), Kp), the
 * caller's scratch, contents undefined) and the packed driver runs the body's units or the
 * AVX2 / generic micro-kernels.  Every route gives the same bits. */
static void lc_gemm_exact(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *Bp,
                          const uint8_t *Bf, int64_t M, int64_t N, int64_t K, int64_t Kp, int16_t *Ap, int isa,
                          int nthreads) {
    if (lc_gemm_exact_a8(C, ldc, A, lda, Bp, Bf, M, N, K, Kp, isa, nthreads) == 0) return;
    lc_pack_a16(Ap, A, M, (int64_t)lc_round_up((size_t)M, LC_MR), K, lda, K, Kp, Kp, nthreads);
    lc_gemm_exact_packed(C, ldc, Ap, Bp, Bf, M, N, Kp, isa, nthreads);
}

/* C (M,N) int32 = A's int8 rows (M, K, lda apart) x B's int8 rows (K, N, ldb apart): a body
 * that takes whole calls builds its own form of B from B's rows (no panels in between);
 * otherwise B is packed into Bp (the caller's scratch, round_up(N, LC_NR) * Kp int8, Kp = K
 * rounded up to even) and lc_gemm_exact runs (Ap: its scratch).  Every route gives the same bits. */
static void lc_gemm_exact_rows(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                               int64_t ldb, int64_t M, int64_t N, int64_t K, int8_t *Bp, int16_t *Ap, int isa,
                               int nthreads) {
    int64_t Kp = K + (K & 1);
    lc_gemm_x_call x = {.C = C, .ldc = ldc, .Kp = Kp, .A8 = A, .lda8 = lda, .K = K, .B8 = B, .ldb8 = ldb,
                        .nblk = 1, .bkp = Kp, .M = M, .N = N};
    if (lc_gemm_x_whole(lc_gemm_exact_pick(isa), &x, nthreads) == 0) return;
    lc_pack_b(Bp, B, K, N, ldb, K, Kp, Kp, nthreads);
    lc_gemm_exact(C, ldc, A, lda, Bp, NULL, M, N, K, Kp, Ap, isa, nthreads);
}

#endif /* LUTCORE_GEMM_H */
