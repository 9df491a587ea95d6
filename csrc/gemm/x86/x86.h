/* csrc/gemm/x86/x86.h — the gemm family's per-ISA bodies that live in their own
 * translation units (csrc/gemm/x86/<isa>.c, each compiled with that ISA's flags).
 *
 * Design: gemm.h keeps the packing, the drivers, the generic and AVX2 bodies; a
 * body that needs instructions the baseline build must not assume (AVX-512 and
 * its extensions) lives in csrc/gemm/x86/ and is compiled alone with its flags, as
 * ggml's arch/x86 files are.  Each such file defines the functions below under
 * its own prefix (LC_GEMM_BODY(name) -> lc_<isa>_<name>); the same file built a
 * second time against SIMDe (a .c setup.py generates from its table, AVX2+FMA flags) defines
 * them under lc_simde_<isa>_ — that copy backs the test-only extension
 * lutcore._native._simde, so every body is checked on any x86-64 CPU.
 * gemm/body.h's body tables bind one of the two sets (LC_GEMM_SIMDE).
 *
 * Unit functions: one driver work unit (rows <= LC_MC, ncols <= LC_NC; the decode layer's
 * GEMV passes rows = 1 and a thread's whole share of a linear's columns: any ncols):
 *   C/Y    (rows, ncols) at the unit's corner, rows ldc/ldy apart    OUT
 *   Ap     int16 (rows, Kp) packed rows of the unit (Kp apart)       IN
 *   Bp     the unit's first packed panel; panels P*32 bytes apart     IN
 *   sa     float (rows, nblk) the rows' block scales                  IN
 *   sbp    float (panels, nblk, 16) the panels' column scales         IN
 * They return 0, or -1 when a scratch allocation failed (the caller then runs
 * the AVX2 body: same bits).  Table unit (any table, avx512 prefix only):
 *   C[m, n0+c] = sum_{k0 <= k < k1} T[A[m,k]][B[k, n0+c]]   m < rows, c < nc <= 256 (LC_TABLE_WNB)
 *   T16 the table by (a, b) as unsigned bytes, in gemm/table.h lc_table16_rows' form      IN
 *       (int16 rows for the avx512 bodies, byte planes for avx512vbmi)
 *
 * Whole calls (VNNI): a body that converts the operands into its own layouts
 * does so once per call, not once per work unit.  The driver fills an
 * lc_gemm_x_call, calls x_begin on its own thread (-1: not taken, run the
 * units), then x_conv(i) for i < nconv and, after a barrier, x_unit(u, t) for
 * u < nunits on its threads (any order, any thread; t = the calling thread's
 * number, < nthreads: a unit may use thread t's part of the scratch), then x_end.  Y == NULL:
 * C = the exact product over all of Kp (nblk = 1, bkp = Kp); else Y = the
 * block-scaled product.  A8 != NULL (exact only): the conversions read A's
 * int8 rows directly (k >= K reads as 0) and Ap is unused.  B8 != NULL (exact only, with
 * A8): B's conversion reads B's int8 rows directly (the same bytes as from its panels) and
 * Bp is unused.  bq_in != NULL (exact only):
 * B's conversion was done once beforehand (x_bform over its x_bform_bytes(Kp, N) bytes,
 * pair j at a time: a PackedB keeps it per weight), and the call converts only A.  The body's plan (unit shape, scratch) lives in the
 * struct's second half.
 */
#ifndef LUTCORE_GEMM_X86_H
#define LUTCORE_GEMM_X86_H

#include <stddef.h>
#include <stdint.h>

typedef struct lc_gemm_x_call {
    int32_t *C;                 /* exact: C (M, N) rows ldc apart        OUT */
    float *Y;                   /* block-scaled: Y (M, N) rows ldc apart OUT */
    int64_t ldc;
    const int16_t *Ap;          /* (M, Kp) packed rows                   IN */
    int64_t Kp;
    const int8_t *A8;           /* exact, instead of Ap: A's int8 rows (M, K), lda8 apart IN */
    int64_t lda8, K;
    const int8_t *Bp;           /* packed panels, P * 32 bytes apart     IN */
    const int8_t *B8;           /* exact, instead of Bp: B's int8 rows (K, N), ldb8 apart IN */
    int64_t ldb8;
    const uint8_t *bq_in;       /* exact: B already in the body's form (x_bform), or NULL IN */
    const float *sa, *sbp;      /* block-scaled: (M, nblk), (panels, nblk, 16) */
    int64_t nblk, bkp, M, N;
    int nthreads;
    int64_t nconv, nunits;      /* set by x_begin */
    /* the body's plan */
    char *ws;
    int ws_owned;
    int64_t mc, nc, nqb, lda, na;
    int64_t strips, sbytes, soff;  /* strips: their count (0: none), a thread's strip scratch, its rs */
    int8_t *au;
    int32_t *rs;
    uint8_t *bq;
} lc_gemm_x_call;

#define LC_GEMM_X86_DECLARE_WHOLE(P)                                                              \
    int P##x_begin(lc_gemm_x_call *x);                                                            \
    void P##x_conv(const lc_gemm_x_call *x, int64_t i);                                           \
    void P##x_unit(const lc_gemm_x_call *x, int64_t u, int t);                                     \
    void P##x_end(lc_gemm_x_call *x);                                                             \
    size_t P##x_bform_bytes(int64_t Kp, int64_t N);                                               \
    void P##x_bform(uint8_t *bq, const int8_t *Bp, int64_t Kp, int64_t N, int64_t j);
LC_GEMM_X86_DECLARE_WHOLE(lc_avx512vnni_)
LC_GEMM_X86_DECLARE_WHOLE(lc_simde_avx512vnni_)

#define LC_GEMM_X86_DECLARE(P)                                                                    \
    int P##gemm_exact_unit(int32_t *C, int64_t ldc, const int16_t *Ap, int64_t Kp, const int8_t *Bp,  \
                           int64_t rows, int64_t ncols);                                          \
    int P##qmatmul_exact_unit(float *Y, int64_t ldy, const int16_t *Ap, int64_t Kp, const float *sa, \
                              const int8_t *Bp, const float *sbp, int64_t nblk, int64_t bkp,      \
                              int64_t rows, int64_t ncols);                                       \
    int P##table_unit(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb, \
                      const int16_t *T16, int64_t rows, int64_t n0, int nc, int64_t k0, int64_t k1);      \
    LC_GEMM_X86_DECLARE_STAGED(P)

/* The any-table bodies' staged B (a packed B holds it once per weight, gemm/table_packed.h lc_table_pack_b):
 *   table_stage_bytes(kn, nc)   bytes of one unit's staged columns (nc <= 256) over kn k, a multiple of 64
 *   table_stage(S, B, ldb, n0, nc, k0, k1)   S (64-byte aligned) <- B's columns n0 .. n0+nc, k0 <= k < k1  OUT
 *   table_unit_staged(C, ldc, A, lda, S, T16, rows, nc, kn)   as table_unit, B read from S (A at its k0)
 * table_unit = table_stage into scratch + table_unit_staged: the same code, the same bits. */
#define LC_GEMM_X86_DECLARE_STAGED(P)                                                              \
    size_t P##table_stage_bytes(int64_t kn, int nc);                                              \
    void P##table_stage(uint8_t *S, const int8_t *B, int64_t ldb, int64_t n0, int nc, int64_t k0, int64_t k1); \
    int P##table_unit_staged(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *S, \
                             const int16_t *T16, int64_t rows, int nc, int64_t kn);

/* AVX-512 F/BW/VL/DQ (vpmaddwd; vpermi2w over the table) and + VNNI (vpdpbusd) */
LC_GEMM_X86_DECLARE(lc_avx512_)
LC_GEMM_X86_DECLARE(lc_avx512vnni_)
LC_GEMM_X86_DECLARE(lc_simde_avx512_)
LC_GEMM_X86_DECLARE(lc_simde_avx512vnni_)
/* AVX-512 VBMI + VNNI: the any-table body only (vpermi2b over the table's byte planes) */
#define LC_GEMM_X86_DECLARE_VBMI(P)                                                               \
    int P##table_unit(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb, \
                      const int16_t *T16, int64_t rows, int64_t n0, int nc, int64_t k0, int64_t k1);      \
    LC_GEMM_X86_DECLARE_STAGED(P)
LC_GEMM_X86_DECLARE_VBMI(lc_avx512vbmi_)
LC_GEMM_X86_DECLARE_VBMI(lc_simde_avx512vbmi_)

#endif /* LUTCORE_GEMM_X86_H */
