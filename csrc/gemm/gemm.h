/* csrc/gemm/gemm.h — LUT GEMM and block-scaled int8 matmul: the family's declarations, its
 * body table and the one exact dispatcher; the jobs live beside it (pack.h, kernels.h,
 * drivers.h, table.h, table_auto.h; the per-ISA bodies in x86/; the Q8 quantizer in
 * csrc/q8/q8.h).
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

/* ------------------------------------------------------------ the x86 bodies' table
 * Bodies in their own translation units (gemm/x86/x86.h, csrc/gemm/x86/): built where
 * setup.py defines LC_HAVE_X86_BODIES; LC_GEMM_SIMDE binds their SIMDe copies
 * instead (the test-only extension).  NULL entries run the AVX2 body. */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#include "gemm/x86/x86.h"
#define LC_GEMM_X86 1
#else
#define LC_GEMM_X86 0
#endif
struct lc_gemm_x_call;   /* gemm/x86/x86.h */
typedef struct {
    const char *name;
    const char *exact_name;   /* show_config's name of its exact units (NULL: none) */
    const char *table_name;   /* ... and of its any-table unit */
    int (*gemm_exact_unit)(int32_t *, int64_t, const int16_t *, int64_t, const int8_t *, int64_t, int64_t);
    int (*qmatmul_exact_unit)(float *, int64_t, const int16_t *, int64_t, const float *, const int8_t *,
                              const float *, int64_t, int64_t, int64_t, int64_t);
    int (*table_unit)(int32_t *, int64_t, const int8_t *, int64_t, const int8_t *, int64_t, const int16_t *,
                      int64_t, int64_t, int, int64_t, int64_t);
    /* the table unit's staged B (gemm/x86/x86.h; a packed B, table_packed.h, holds it per weight) */
    size_t (*table_stage_bytes)(int64_t, int);
    void (*table_stage)(uint8_t *, const int8_t *, int64_t, int64_t, int, int64_t, int64_t);
    int (*table_unit_staged)(int32_t *, int64_t, const int8_t *, int64_t, const uint8_t *, const int16_t *, int64_t,
                             int, int64_t);
    /* exact and block-scaled whole calls (gemm/x86/x86.h; NULL: per unit) */
    int (*x_begin)(struct lc_gemm_x_call *);
    void (*x_conv)(const struct lc_gemm_x_call *, int64_t);
    void (*x_unit)(const struct lc_gemm_x_call *, int64_t, int);
    void (*x_end)(struct lc_gemm_x_call *);
    /* B's form for the exact whole calls, made once per packed B (NULL: the body has none) */
    size_t (*x_bform_bytes)(int64_t, int64_t);
    void (*x_bform)(uint8_t *, const int8_t *, int64_t, int64_t, int64_t);
} lc_gemm_body;
#if LC_GEMM_X86
#if defined(LC_GEMM_SIMDE)
#define LC_GEMM_X(isa, fn) lc_simde_##isa##_##fn
#else
#define LC_GEMM_X(isa, fn) lc_##isa##_##fn
#endif
#define LC_GEMM_X_STAGED(isa) .table_stage_bytes = LC_GEMM_X(isa, table_stage_bytes), \
    .table_stage = LC_GEMM_X(isa, table_stage), .table_unit_staged = LC_GEMM_X(isa, table_unit_staged)
static const lc_gemm_body lc_gemm_bodies[2] = {
    {.name = "avx512bw", .exact_name = "avx512bw (vpmaddwd)", .table_name = "avx512bw (vpermi2w)",
     .gemm_exact_unit = LC_GEMM_X(avx512, gemm_exact_unit), .qmatmul_exact_unit = LC_GEMM_X(avx512, qmatmul_exact_unit),
     .table_unit = LC_GEMM_X(avx512, table_unit), LC_GEMM_X_STAGED(avx512)},
    {.name = "avx512vnni", .exact_name = "avx512vnni (vpdpbusd)", .table_name = "avx512bw (vpermi2w)",
     .gemm_exact_unit = LC_GEMM_X(avx512vnni, gemm_exact_unit), .qmatmul_exact_unit = LC_GEMM_X(avx512vnni, qmatmul_exact_unit),
     .table_unit = LC_GEMM_X(avx512, table_unit), LC_GEMM_X_STAGED(avx512),   /* the table path needs no VNNI: the BW body */
     .x_begin = LC_GEMM_X(avx512vnni, x_begin), .x_conv = LC_GEMM_X(avx512vnni, x_conv),
     .x_unit = LC_GEMM_X(avx512vnni, x_unit), .x_end = LC_GEMM_X(avx512vnni, x_end),
     .x_bform_bytes = LC_GEMM_X(avx512vnni, x_bform_bytes), .x_bform = LC_GEMM_X(avx512vnni, x_bform)},
};
/* VBMI (+ VNNI): the any-table body over the table's byte planes (lc_table16_rows' planes = 1) */
static const lc_gemm_body lc_gemm_body_vbmi = {.name = "avx512vbmi", .table_name = "avx512vbmi (vpermi2b)",
                                                .table_unit = LC_GEMM_X(avx512vbmi, table_unit),
                                                LC_GEMM_X_STAGED(avx512vbmi)};
#endif
/* The exact path's body for `isa` (NULL: the AVX2 or generic body in this header). */
static inline const lc_gemm_body *lc_gemm_exact_body(int isa) {
#if LC_GEMM_X86
    if (isa >= LC_ISA_AVX512) return &lc_gemm_bodies[(isa & LC_ISA_VNNI) ? 1 : 0];
#endif
    (void)isa;
    return NULL;
}
/* The any-table path's body (NULL: the AVX2 or generic one).  Its table_unit reads the
 * table as int16 (lc_table16_rows) and writes C for one (row range, <= LC_TABLE_WNB columns). */
static inline const lc_gemm_body *lc_gemm_table_body(int isa) {
#if LC_GEMM_X86
    if (isa >= LC_ISA_AVX512 && (isa & LC_ISA_VBMI) && (isa & LC_ISA_VNNI)) return &lc_gemm_body_vbmi;
#endif
    const lc_gemm_body *b = lc_gemm_exact_body(isa);
    return b && b->table_unit ? b : NULL;
}
#define LC_TABLE_WNB 256    /* columns per table_unit (each loaded table row serves them all) */
/* Names of the bodies `isa` runs, for show_config (read from the table above):
 * which = 0 exact, 1 block-scaled, 2 any table. */
static const char *lc_gemm_body_name(int isa, int which) {
    const lc_gemm_body *b = which == 2 ? lc_gemm_table_body(isa) : lc_gemm_exact_body(isa);
    const char *n = NULL;
    if (b && which == 0 && b->gemm_exact_unit) n = b->exact_name;
    if (b && which == 1 && b->qmatmul_exact_unit) n = b->exact_name;
    if (b && which == 2) n = b->table_name;
    return n ? n : (isa >= LC_ISA_AVX2 && LC_X86 ? "avx2" : "generic");
}

#define LC_MR 6
#define LC_NR 16
#define LC_TABLE_NB 32      /* output columns per row-table block (a multiple of 16: the AVX2 int16 rows) */
#define LC_TABLE_KB 4       /* k values per row-table batch */
#define LC_TABLE_DIRECT_M 48

#include "gemm/pack.h"
#include "gemm/kernels.h"
#include "gemm/drivers.h"
#include "gemm/table.h"
#include "gemm/table_auto.h"
#include "gemm/table_packed.h"

/* ------------------------------------------------------ the one exact-GEMM dispatcher
 * C (M,N) int32 = A's int8 rows (M, K, lda apart) x packed Bp (Kp = K rounded up to even).
 * Which exact body runs is decided here, from the body table (lc_gemm_exact_body) and
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

#endif /* LUTCORE_GEMM_H */
