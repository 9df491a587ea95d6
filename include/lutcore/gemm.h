/* lutcore/gemm.h — LUT GEMM and block-scaled int8 matmul.
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

/* ------------------------------------------------------------ the x86 bodies' table
 * Bodies in their own translation units (gemm/x86.h, src/gemm/): built where
 * setup.py defines LC_HAVE_X86_BODIES; LC_GEMM_SIMDE binds their SIMDe copies
 * instead (the test-only extension).  NULL entries run the AVX2 body. */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#include "gemm/x86.h"
#define LC_GEMM_X86 1
#else
#define LC_GEMM_X86 0
#endif
struct lc_gemm_x_call;   /* gemm/x86.h */
typedef struct {
    const char *name;
    int (*gemm_exact_unit)(int32_t *, int64_t, const int16_t *, int64_t, const int8_t *, int64_t, int64_t);
    int (*qmatmul_exact_unit)(float *, int64_t, const int16_t *, int64_t, const float *, const int8_t *,
                              const float *, int64_t, int64_t, int64_t, int64_t);
    int (*table_unit)(int32_t *, int64_t, const int8_t *, int64_t, const int8_t *, int64_t, const int16_t *,
                      int64_t, int64_t, int, int64_t, int64_t);
    /* exact and block-scaled whole calls (gemm/x86.h; NULL: per unit) */
    int (*x_begin)(struct lc_gemm_x_call *);
    void (*x_conv)(const struct lc_gemm_x_call *, int64_t);
    void (*x_unit)(const struct lc_gemm_x_call *, int64_t);
    void (*x_end)(struct lc_gemm_x_call *);
} lc_gemm_body;
#if LC_GEMM_X86
#if defined(LC_GEMM_SIMDE)
#define LC_GEMM_X(isa, fn) lc_simde_##isa##_##fn
#else
#define LC_GEMM_X(isa, fn) lc_##isa##_##fn
#endif
static const lc_gemm_body lc_gemm_bodies[2] = {
    {"avx512bw", LC_GEMM_X(avx512, gemm_exact_unit), LC_GEMM_X(avx512, qmatmul_exact_unit),
     LC_GEMM_X(avx512, table_unit), NULL, NULL, NULL, NULL},
    {"avx512vnni", LC_GEMM_X(avx512vnni, gemm_exact_unit), LC_GEMM_X(avx512vnni, qmatmul_exact_unit),
     LC_GEMM_X(avx512, table_unit),    /* the table path needs no VNNI: the BW body */
     LC_GEMM_X(avx512vnni, x_begin), LC_GEMM_X(avx512vnni, x_conv), LC_GEMM_X(avx512vnni, x_unit),
     LC_GEMM_X(avx512vnni, x_end)},
};
/* VBMI (+ VNNI): the any-table body over the table's byte planes (lc_table16's planes = 1) */
static const lc_gemm_body lc_gemm_body_vbmi = {"avx512vbmi", NULL, NULL, LC_GEMM_X(avx512vbmi, table_unit),
                                                NULL, NULL, NULL, NULL};
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
 * table as int16 (lc_table16) and writes C for one (row range, <= LC_TABLE_WNB columns). */
static inline const lc_gemm_body *lc_gemm_table_body(int isa) {
#if LC_GEMM_X86
    if (isa >= LC_ISA_AVX512 && (isa & LC_ISA_VBMI) && (isa & LC_ISA_VNNI)) return &lc_gemm_body_vbmi;
#endif
    const lc_gemm_body *b = lc_gemm_exact_body(isa);
    return b && b->table_unit ? b : NULL;
}
#define LC_TABLE_WNB 256    /* columns per table_unit (each loaded table row serves them all) */
/* Names of the bodies `isa` runs, for show_config: which = 0 exact, 1 block-scaled, 2 any table. */
static const char *lc_gemm_body_name(int isa, int which) {
    const lc_gemm_body *b = lc_gemm_exact_body(isa);
    if (which == 0 && b && b->gemm_exact_unit) return (isa & LC_ISA_VNNI) ? "avx512vnni (vpdpbusd)" : "avx512bw (vpmaddwd)";
    if (which == 1 && b && b->qmatmul_exact_unit) return (isa & LC_ISA_VNNI) ? "avx512vnni (vpdpbusd)" : "avx512bw (vpmaddwd)";
    if (which == 2) b = lc_gemm_table_body(isa);
    if (which == 2 && b) return b->gemm_exact_unit ? "avx512bw (vpermi2w)" : "avx512vbmi (vpermi2b)";
    return isa >= LC_ISA_AVX2 && LC_X86 ? "avx2" : "generic";
}

#define LC_MR 6
#define LC_NR 16
#define LC_TABLE_NB 32      /* output columns per row-table block (a multiple of 16: the AVX2 int16 rows) */
#define LC_TABLE_KB 4       /* k values per row-table batch */
#define LC_TABLE_DIRECT_M 48

/* ------------------------------------------------------------------ packing */

/* packed k index -> source k, or -1 for padding */
static inline int64_t lc_src_k(int64_t kp, int64_t bk, int64_t bkp, int64_t K) {
    int64_t blk = kp / bkp, j = kp % bkp;
    if (j >= bk) return -1;
    int64_t k = blk * bk + j;
    return k < K ? k : -1;
}

/* One packed row: dst[kp] = src[src_k(kp)] widened to int16, padding zero. */
static inline void lc_pack_a16_row(int16_t *dst, const int8_t *src, int64_t K, int64_t bk, int64_t bkp,
                                   int64_t Kp) {
    if (bk == bkp && bk * (Kp / bkp) == K) {
        for (int64_t k = 0; k < K; k++) dst[k] = src[k];
    } else {
        for (int64_t kp = 0; kp < Kp; kp++) {
            int64_t k = lc_src_k(kp, bk, bkp, K);
            dst[kp] = k < 0 ? 0 : src[k];
        }
    }
}
/* Ap[m, kp] = A[m, src(kp)] widened to int16; rows >= M are zero. */
static void lc_pack_a16(int16_t *Ap, const int8_t *A, int64_t M, int64_t Mp, int64_t K,
                        int64_t lda, int64_t bk, int64_t bkp, int64_t Kp, int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))
    for (int64_t m = 0; m < Mp; m++) {
        if (m >= M) memset(Ap + m * Kp, 0, (size_t)Kp * sizeof(int16_t));
        else lc_pack_a16_row(Ap + m * Kp, A + m * lda, K, bk, bkp, Kp);
    }
}

/* Bp[panel][p][c][2] = (B[src(2p), n], B[src(2p+1), n]) with n = panel*16 + c. */
static void lc_pack_b(int8_t *Bp, const int8_t *B, int64_t K, int64_t N, int64_t ldb,
                      int64_t bk, int64_t bkp, int64_t Kp, int nthreads) {
    int64_t npan = (N + LC_NR - 1) / LC_NR, P = Kp / 2;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))
    for (int64_t pan = 0; pan < npan; pan++) {
        int8_t *dst = Bp + pan * P * 2 * LC_NR;
        int64_t n0 = pan * LC_NR;
        for (int64_t p = 0; p < P; p++) {
            int64_t k0 = lc_src_k(2 * p, bk, bkp, K), k1 = lc_src_k(2 * p + 1, bk, bkp, K);
            int8_t *d = dst + p * 2 * LC_NR;
            for (int64_t c = 0; c < LC_NR; c++) {
                int64_t n = n0 + c;
                d[2 * c] = (n < N && k0 >= 0) ? B[k0 * ldb + n] : 0;
                d[2 * c + 1] = (n < N && k1 >= 0) ? B[k1 * ldb + n] : 0;
            }
        }
    }
}

/* ------------------------------------------------- exact micro-kernels */

/* Generic: out[r][c] = sum over k-pairs [p0,p1) of rows r < R of the tile. */
static void lc_mk_exact_generic(int32_t *out /* [LC_MR][LC_NR] */, const int16_t *Ap, int64_t Kp,
                                const int8_t *Bpan, int64_t p0, int64_t p1, int R) {
    for (int r = 0; r < R; r++) {
        const int16_t *a = Ap + r * Kp;
        int32_t acc[LC_NR];
        for (int c = 0; c < LC_NR; c++) acc[c] = 0;
        for (int64_t p = p0; p < p1; p++) {
            const int8_t *b = Bpan + p * 2 * LC_NR;
            int32_t a0 = a[2 * p], a1 = a[2 * p + 1];
            for (int c = 0; c < LC_NR; c++) acc[c] += a0 * (int32_t)b[2 * c] + a1 * (int32_t)b[2 * c + 1];
        }
        for (int c = 0; c < LC_NR; c++) out[r * LC_NR + c] = acc[c];
    }
}

#if LC_X86
/* AVX2: R x 16 tile, two ymm accumulators per row (R <= 6 keeps 12
 * accumulators + 2 B vectors + 1 broadcast + 1 product in the 16 registers).
 * Per k-pair: two int8->int16 widening loads of B (16 columns x 2 k each), one
 * int32 broadcast of the row's (a[2p], a[2p+1]) pair per row, pmaddwd + add.
 * Written out per row so the compiler keeps every accumulator in a register. */
static inline int32_t lc_ld32(const int16_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
#define LC_MK_ROW(r)                                                                         \
    do {                                                                                     \
        __m256i av = _mm256_set1_epi32(lc_ld32(a##r + 2 * p));      \
        c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(av, b0));                      \
        c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(av, b1));                      \
    } while (0)
#define LC_MK_DECL(r)                                                                        \
    const int16_t *a##r = Ap + (r) * Kp;                                                     \
    __m256i c##r##0 = _mm256_setzero_si256(), c##r##1 = _mm256_setzero_si256();
#define LC_MK_STORE(r)                                                                       \
    _mm256_storeu_si256((__m256i *)(out + (r) * LC_NR), c##r##0);                            \
    _mm256_storeu_si256((__m256i *)(out + (r) * LC_NR + 8), c##r##1);
#define LC_MK_LOADB                                                                          \
    const int8_t *b = Bpan + p * 2 * LC_NR;                                                  \
    __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));                  \
    __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));

/* Pieces of the 6-row assembly tiles (lc_mk_exact_avx2_6, lc_qmk_exact_avx2_6).
 * LC_ASM_ROW: one row's k-pair (broadcast, two pmaddwd, two adds into c0/c1);
 * LC_ASM_ZERO12: clear the accumulators ymm0-11; LC_ASM_PAIRS6: the loop over
 * %[n] k-pairs of six rows (%[a], %[a3] = rows 0 and 3, %[ks] bytes apart; %[b] the
 * panel), leaving the sums in ymm0-11 and the pointers past the pairs. */
#define LC_ASM_ROW(addr, c0, c1)                                   \
        "vpbroadcastd " addr ", %%ymm14\n\t"                      \
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"                   \
        "vpaddd %%ymm15, %%" c0 ", %%" c0 "\n\t"                   \
        "vpmaddwd %%ymm13, %%ymm14, %%ymm14\n\t"                   \
        "vpaddd %%ymm14, %%" c1 ", %%" c1 "\n\t"
#define LC_ASM_ZERO12                                              \
        "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"                         \
        "vpxor %%ymm1, %%ymm1, %%ymm1\n\t"                         \
        "vpxor %%ymm2, %%ymm2, %%ymm2\n\t"                         \
        "vpxor %%ymm3, %%ymm3, %%ymm3\n\t"                         \
        "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"                         \
        "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"                         \
        "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"                         \
        "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"                         \
        "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"                         \
        "vpxor %%ymm9, %%ymm9, %%ymm9\n\t"                         \
        "vpxor %%ymm10, %%ymm10, %%ymm10\n\t"                      \
        "vpxor %%ymm11, %%ymm11, %%ymm11\n\t"
#define LC_ASM_PAIRS6                                              \
        "1:\n\t"                                                  \
        "vpmovsxbw (%[b]), %%ymm12\n\t"                           \
        "vpmovsxbw 16(%[b]), %%ymm13\n\t"                         \
        LC_ASM_ROW("(%[a])", "ymm0", "ymm1")                       \
        LC_ASM_ROW("(%[a],%[ks],1)", "ymm2", "ymm3")               \
        LC_ASM_ROW("(%[a],%[ks],2)", "ymm4", "ymm5")               \
        LC_ASM_ROW("(%[a3])", "ymm6", "ymm7")                      \
        LC_ASM_ROW("(%[a3],%[ks],1)", "ymm8", "ymm9")              \
        LC_ASM_ROW("(%[a3],%[ks],2)", "ymm10", "ymm11")            \
        "add $4, %[a]\n\t"                                        \
        "add $4, %[a3]\n\t"                                       \
        "add $32, %[b]\n\t"                                       \
        "dec %[n]\n\t"                                            \
        "jnz 1b\n\t"

/* The 6-row tile in assembly: 12 accumulators (ymm0-11), two widened B vectors,
 * a broadcast and a product fill the 16 registers exactly, which compilers do not
 * manage from intrinsics (they hoist the six broadcasts and spill accumulators to
 * the stack).  Integer sums: the order of the adds does not show. */
LC_TARGET_AVX2 static inline __attribute__((always_inline)) void lc_mk_exact_avx2_6(int32_t *out, const int16_t *Ap, int64_t Kp,
                                              const int8_t *Bpan, int64_t p0, int64_t p1) {
    int64_t n = p1 - p0;
    if (n <= 0) {
        memset(out, 0, 6 * LC_NR * sizeof(int32_t));
        return;
    }
    const int8_t *b = Bpan + p0 * 2 * LC_NR;
    const int16_t *a = Ap + 2 * p0, *a3 = Ap + 3 * Kp + 2 * p0;
    const int64_t ks = Kp * (int64_t)sizeof(int16_t);
    __asm__ volatile(
        LC_ASM_ZERO12
        LC_ASM_PAIRS6
        "vmovdqu %%ymm0, (%[out])\n\t"
        "vmovdqu %%ymm1, 32(%[out])\n\t"
        "vmovdqu %%ymm2, 64(%[out])\n\t"
        "vmovdqu %%ymm3, 96(%[out])\n\t"
        "vmovdqu %%ymm4, 128(%[out])\n\t"
        "vmovdqu %%ymm5, 160(%[out])\n\t"
        "vmovdqu %%ymm6, 192(%[out])\n\t"
        "vmovdqu %%ymm7, 224(%[out])\n\t"
        "vmovdqu %%ymm8, 256(%[out])\n\t"
        "vmovdqu %%ymm9, 288(%[out])\n\t"
        "vmovdqu %%ymm10, 320(%[out])\n\t"
        "vmovdqu %%ymm11, 352(%[out])\n\t"
        : [a] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [n] "+r"(n)
        : [ks] "r"(ks), [out] "r"(out)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
LC_TARGET_AVX2 static void lc_mk_exact_avx2_4(int32_t *out, const int16_t *Ap, int64_t Kp,
                                              const int8_t *Bpan, int64_t p0, int64_t p1) {
    LC_MK_DECL(0) LC_MK_DECL(1) LC_MK_DECL(2) LC_MK_DECL(3)
    for (int64_t p = p0; p < p1; p++) {
        LC_MK_LOADB
        LC_MK_ROW(0); LC_MK_ROW(1); LC_MK_ROW(2); LC_MK_ROW(3);
    }
    LC_MK_STORE(0) LC_MK_STORE(1) LC_MK_STORE(2) LC_MK_STORE(3)
}
LC_TARGET_AVX2 static void lc_mk_exact_avx2_2(int32_t *out, const int16_t *Ap, int64_t Kp,
                                              const int8_t *Bpan, int64_t p0, int64_t p1) {
    LC_MK_DECL(0) LC_MK_DECL(1)
    for (int64_t p = p0; p < p1; p++) {
        LC_MK_LOADB
        LC_MK_ROW(0); LC_MK_ROW(1);
    }
    LC_MK_STORE(0) LC_MK_STORE(1)
}
/* One row over k-pairs [p0, p1) (decoding's GEMV): two chains per half hide the
 * add latency, and the panel is prefetched 1 KiB ahead (it streams from memory). */
#ifndef LC_GEMV_PF
#define LC_GEMV_PF 1024
#endif
LC_TARGET_AVX2 static inline __attribute__((always_inline)) void
lc_row_pairs_avx2(__m256i *lo, __m256i *hi, const int16_t *a0, const int8_t *Bpan, int64_t p0, int64_t p1) {
    __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();
    __m256i d0 = _mm256_setzero_si256(), d1 = _mm256_setzero_si256();
    int64_t p = p0;
    for (; p + 2 <= p1; p += 2) {
        const int8_t *b = Bpan + p * 2 * LC_NR;
        _mm_prefetch((const char *)(b + LC_GEMV_PF), _MM_HINT_T0);
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
        __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
        __m256i b2 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 32)));
        __m256i b3 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 48)));
        __m256i av = _mm256_set1_epi32(lc_ld32(a0 + 2 * p));
        __m256i aw = _mm256_set1_epi32(lc_ld32(a0 + 2 * p + 2));
        c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0));
        c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
        d0 = _mm256_add_epi32(d0, _mm256_madd_epi16(aw, b2));
        d1 = _mm256_add_epi32(d1, _mm256_madd_epi16(aw, b3));
    }
    for (; p < p1; p++) {
        LC_MK_LOADB
        LC_MK_ROW(0);
    }
    *lo = _mm256_add_epi32(c00, d0);
    *hi = _mm256_add_epi32(c01, d1);
}
LC_TARGET_AVX2 static void lc_mk_exact_avx2_1(int32_t *out, const int16_t *Ap, int64_t Kp,
                                              const int8_t *Bpan, int64_t p0, int64_t p1) {
    (void)Kp;
    __m256i c00, c01;
    lc_row_pairs_avx2(&c00, &c01, Ap, Bpan, p0, p1);
    LC_MK_STORE(0)
}

/* Fused block-scaled tile: for each block, the int32 tile stays in registers
 * and is folded straight into the float tile y (LC_MR x LC_NR, in L1):
 * y[r][c] = y[r][c] + (sa[r]*sb[c]) * (float)I[r][c], the contract's order. */
#define LC_QMK_FOLD(r)                                                                       \
    do {                                                                                     \
        __m256 s_ = _mm256_set1_ps(sa[(r) * lds + blk]);                                     \
        __m256 t0_ = _mm256_mul_ps(_mm256_mul_ps(s_, sb0), _mm256_cvtepi32_ps(c##r##0));     \
        __m256 t1_ = _mm256_mul_ps(_mm256_mul_ps(s_, sb1), _mm256_cvtepi32_ps(c##r##1));     \
        _mm256_storeu_ps(y + (r) * LC_NR, _mm256_add_ps(_mm256_loadu_ps(y + (r) * LC_NR), t0_)); \
        _mm256_storeu_ps(y + (r) * LC_NR + 8, _mm256_add_ps(_mm256_loadu_ps(y + (r) * LC_NR + 8), t1_)); \
    } while (0)
#define LC_MK_ZERO(r) c##r##0 = _mm256_setzero_si256(); c##r##1 = _mm256_setzero_si256();
#define LC_QMK_DEF(R, DECLS, ZEROS, ROWS, FOLDS)                                             \
    LC_TARGET_AVX2 static void lc_qmk_exact_avx2_##R(float *y, const int16_t *Ap, int64_t Kp,   \
            const int8_t *Bpan, const float *sa, int64_t lds, const float *sbpan,            \
            int64_t nblk, int64_t pb) {                                                      \
        DECLS                                                                                \
        for (int64_t blk = 0; blk < nblk; blk++) {                                           \
            ZEROS                                                                            \
            for (int64_t p = blk * pb; p < (blk + 1) * pb; p++) {                            \
                LC_MK_LOADB                                                                  \
                ROWS                                                                         \
            }                                                                                \
            __m256 sb0 = _mm256_loadu_ps(sbpan + blk * LC_NR);                               \
            __m256 sb1 = _mm256_loadu_ps(sbpan + blk * LC_NR + 8);                           \
            FOLDS                                                                            \
        }                                                                                    \
    }
LC_QMK_DEF(4, LC_MK_DECL(0) LC_MK_DECL(1) LC_MK_DECL(2) LC_MK_DECL(3),
           LC_MK_ZERO(0) LC_MK_ZERO(1) LC_MK_ZERO(2) LC_MK_ZERO(3),
           LC_MK_ROW(0); LC_MK_ROW(1); LC_MK_ROW(2); LC_MK_ROW(3);,
           LC_QMK_FOLD(0); LC_QMK_FOLD(1); LC_QMK_FOLD(2); LC_QMK_FOLD(3);)
LC_QMK_DEF(2, LC_MK_DECL(0) LC_MK_DECL(1), LC_MK_ZERO(0) LC_MK_ZERO(1),
           LC_MK_ROW(0); LC_MK_ROW(1);, LC_QMK_FOLD(0); LC_QMK_FOLD(1);)
/* One row (decoding's GEMV), block by block. */
LC_TARGET_AVX2 static void lc_qmk_exact_avx2_1(float *y, const int16_t *Ap, int64_t Kp, const int8_t *Bpan,
                                               const float *sa, int64_t lds, const float *sbpan,
                                               int64_t nblk, int64_t pb) {
    (void)Kp;
    for (int64_t blk = 0; blk < nblk; blk++) {
        __m256i c00, c01;
        lc_row_pairs_avx2(&c00, &c01, Ap, Bpan, blk * pb, (blk + 1) * pb);
        __m256 sb0 = _mm256_loadu_ps(sbpan + blk * LC_NR);
        __m256 sb1 = _mm256_loadu_ps(sbpan + blk * LC_NR + 8);
        LC_QMK_FOLD(0);
    }
}

/* The 6-row block-scaled tile, every block in one assembly loop: the block's int32
 * sums stay in ymm0-11 and are folded from there, y[r][c] += (sa[r]*sb[c]) * (float)acc
 * (the same two products and add as lc_fold_generic, so the same bits), with no store and
 * reload of the sums and no call per block (worth ~20% at 32-wide blocks).  y: the
 * 6 x 16 tile (from zero), sa: this tile's rows lds apart, sbpan: 16 scales a block. */
LC_TARGET_AVX2 static void lc_qmk_exact_avx2_6(float *y, const int16_t *Ap, int64_t Kp, const int8_t *Bpan,
                                               const float *sa, int64_t lds, const float *sbpan,
                                               int64_t nblk, int64_t pb) {
    if (nblk <= 0 || pb <= 0)
        return;
    const int8_t *b = Bpan;
    const int16_t *a = Ap, *a3 = Ap + 3 * Kp;
    const float *s = sa, *s3 = sa + 3 * lds, *sb = sbpan;
    const int64_t ks = Kp * (int64_t)sizeof(int16_t), ls = lds * (int64_t)sizeof(float);
    int64_t nb = nblk, n;
#define LC_ASM_FOLD(saddr, off0, off1, c0, c1)                     \
        "vbroadcastss " saddr ", %%ymm14\n\t"                     \
        "vmulps %%ymm12, %%ymm14, %%ymm15\n\t"                     \
        "vcvtdq2ps %%" c0 ", %%" c0 "\n\t"                         \
        "vmulps %%ymm15, %%" c0 ", %%" c0 "\n\t"                   \
        "vaddps " off0 "(%[y]), %%" c0 ", %%" c0 "\n\t"            \
        "vmovups %%" c0 ", " off0 "(%[y])\n\t"                     \
        "vmulps %%ymm13, %%ymm14, %%ymm15\n\t"                     \
        "vcvtdq2ps %%" c1 ", %%" c1 "\n\t"                         \
        "vmulps %%ymm15, %%" c1 ", %%" c1 "\n\t"                   \
        "vaddps " off1 "(%[y]), %%" c1 ", %%" c1 "\n\t"            \
        "vmovups %%" c1 ", " off1 "(%[y])\n\t"
    __asm__ volatile(
        "2:\n\t"
        LC_ASM_ZERO12
        "mov %[pb], %[n]\n\t"
        LC_ASM_PAIRS6
        "vmovups (%[sb]), %%ymm12\n\t"
        "vmovups 32(%[sb]), %%ymm13\n\t"
        LC_ASM_FOLD("(%[s])", "0", "32", "ymm0", "ymm1")
        LC_ASM_FOLD("(%[s],%[ls],1)", "64", "96", "ymm2", "ymm3")
        LC_ASM_FOLD("(%[s],%[ls],2)", "128", "160", "ymm4", "ymm5")
        LC_ASM_FOLD("(%[s3])", "192", "224", "ymm6", "ymm7")
        LC_ASM_FOLD("(%[s3],%[ls],1)", "256", "288", "ymm8", "ymm9")
        LC_ASM_FOLD("(%[s3],%[ls],2)", "320", "352", "ymm10", "ymm11")
        "add $64, %[sb]\n\t"
        "add $4, %[s]\n\t"
        "add $4, %[s3]\n\t"
        "dec %[nb]\n\t"
        "jnz 2b\n\t"
        : [a] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [n] "=&r"(n), [nb] "+r"(nb), [s] "+r"(s), [s3] "+r"(s3),
          [sb] "+r"(sb)
        : [ks] "r"(ks), [ls] "r"(ls), [pb] "m"(pb), [y] "r"(y)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
#undef LC_ASM_FOLD
}

LC_TARGET_AVX2 static void lc_qmk_exact_avx2(float *y, const int16_t *Ap, int64_t Kp, const int8_t *Bpan,
                                             const float *sa, int64_t lds, const float *sbpan,
                                             int64_t nblk, int64_t pb, int R) {
    int r = 0;
    while (r < R) {
        int left = R - r;
        float *yr = y + r * LC_NR;
        const int16_t *ar = Ap + r * Kp;
        const float *sr = sa + r * lds;
        if (left >= 6) { lc_qmk_exact_avx2_6(yr, ar, Kp, Bpan, sr, lds, sbpan, nblk, pb); r += 6; }
        else if (left >= 4) { lc_qmk_exact_avx2_4(yr, ar, Kp, Bpan, sr, lds, sbpan, nblk, pb); r += 4; }
        else if (left >= 2) { lc_qmk_exact_avx2_2(yr, ar, Kp, Bpan, sr, lds, sbpan, nblk, pb); r += 2; }
        else { lc_qmk_exact_avx2_1(yr, ar, Kp, Bpan, sr, lds, sbpan, nblk, pb); r += 1; }
    }
}

LC_TARGET_AVX2 static void lc_mk_exact_avx2(int32_t *out, const int16_t *Ap, int64_t Kp,
                                            const int8_t *Bpan, int64_t p0, int64_t p1, int R) {
    int r = 0;
    while (r < R) {
        int left = R - r;
        if (left >= 6) { lc_mk_exact_avx2_6(out + r * LC_NR, Ap + r * Kp, Kp, Bpan, p0, p1); r += 6; }
        else if (left >= 4) { lc_mk_exact_avx2_4(out + r * LC_NR, Ap + r * Kp, Kp, Bpan, p0, p1); r += 4; }
        else if (left >= 2) { lc_mk_exact_avx2_2(out + r * LC_NR, Ap + r * Kp, Kp, Bpan, p0, p1); r += 2; }
        else { lc_mk_exact_avx2_1(out + r * LC_NR, Ap + r * Kp, Kp, Bpan, p0, p1); r += 1; }
    }
}
#endif

static inline void lc_mk_exact(int isa, int32_t *out, const int16_t *Ap, int64_t Kp,
                               const int8_t *Bpan, int64_t p0, int64_t p1, int R) {
#if LC_X86
    if (isa >= LC_ISA_AVX2) { lc_mk_exact_avx2(out, Ap, Kp, Bpan, p0, p1, R); return; }
#endif
    (void)isa;
    lc_mk_exact_generic(out, Ap, Kp, Bpan, p0, p1, R);
}

/* Fold one block's int32 tile into float32 rows: y[r][c] += (sa[r]*sb[c]) * (float)acc[r][c].
 * sa: per-row scale of this block (stride lds), sb: 16 column scales of this block. */
static inline void lc_fold_generic(float *y /* [LC_MR][LC_NR] */, const int32_t *acc, const float *sa,
                                   int64_t lds, const float *sb, int R) {
    for (int r = 0; r < R; r++) {
        float s = sa[r * lds];
        for (int c = 0; c < LC_NR; c++) {
            float t = (s * sb[c]) * (float)acc[r * LC_NR + c];
            y[r * LC_NR + c] = y[r * LC_NR + c] + t;
        }
    }
}

/* ------------------------------------------------------ exact drivers */

#define LC_MC 48   /* rows per work unit (8 register tiles) */
#define LC_NC 128  /* columns per work unit (8 panels) */
/* Work units go to threads dynamically: every output tile is computed whole by
 * one thread, so the bits do not depend on who takes which (and ragged unit
 * counts, e.g. 3 row blocks x 4 column blocks on 2 threads, stay balanced). */

/* A body's whole call (gemm/x86.h): its conversions, then its units, on the team;
 * 0 = done, -1 = not taken (the caller runs the per-unit loop). */
#if LC_GEMM_X86
static int lc_gemm_x_whole(const lc_gemm_body *xb, lc_gemm_x_call *x, int nthreads) {
    x->nthreads = nthreads;
    if (!xb || !xb->x_begin || xb->x_begin(x) != 0) return -1;
    LC_PRAGMA(omp parallel num_threads(nthreads))
    {
        LC_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t i = 0; i < x->nconv; i++) xb->x_conv(x, i);
        LC_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t u = 0; u < x->nunits; u++) xb->x_unit(x, u);
    }
    xb->x_end(x);
    return 0;
}
#endif

/* C (M,N) int32 = packed Ap x packed Bp over all Kp (exact table). */
static void lc_gemm_exact_packed(int32_t *C, int64_t ldc, const int16_t *Ap, const int8_t *Bp,
                                 int64_t M, int64_t N, int64_t Kp, int isa, int nthreads) {
    int64_t P = Kp / 2;
    int64_t nmu = (M + LC_MC - 1) / LC_MC, nnu = (N + LC_NC - 1) / LC_NC;
    int64_t units = nmu * nnu;
    const lc_gemm_body *xb = lc_gemm_exact_body(isa);
#if LC_GEMM_X86
    lc_gemm_x_call x = {.C = C, .ldc = ldc, .Ap = Ap, .Kp = Kp, .Bp = Bp, .nblk = 1, .bkp = Kp, .M = M, .N = N};
    if (lc_gemm_x_whole(xb, &x, nthreads) == 0) return;
#endif
    LC_PRAGMA(omp parallel for schedule(dynamic, 1) num_threads(nthreads))
    for (int64_t u = 0; u < units; u++) {
        int64_t mu = u / nnu, nu = u % nnu;
        int32_t tile[LC_MR * LC_NR];
        int64_t n_end = (nu + 1) * LC_NC < N ? (nu + 1) * LC_NC : N;
        int64_t m_end = (mu + 1) * LC_MC < M ? (mu + 1) * LC_MC : M;
        if (xb && xb->gemm_exact_unit(C + mu * LC_MC * ldc + nu * LC_NC, ldc, Ap + mu * LC_MC * Kp, Kp,
                                      Bp + (nu * LC_NC / LC_NR) * P * 2 * LC_NR, m_end - mu * LC_MC,
                                      n_end - nu * LC_NC) == 0)
            continue;
        for (int64_t n0 = nu * LC_NC; n0 < n_end; n0 += LC_NR) {
            const int8_t *Bpan = Bp + (n0 / LC_NR) * P * 2 * LC_NR;
            int nc = (int)(n_end - n0 < LC_NR ? n_end - n0 : LC_NR);
            for (int64_t m0 = mu * LC_MC; m0 < m_end; m0 += LC_MR) {
                int R = (int)(m_end - m0 < LC_MR ? m_end - m0 : LC_MR);
                lc_mk_exact(isa, tile, Ap + m0 * Kp, Kp, Bpan, 0, P, R);
                for (int r = 0; r < R; r++)
                    memcpy(C + (m0 + r) * ldc + n0, tile + r * LC_NR, (size_t)nc * sizeof(int32_t));
            }
        }
    }
}

/* C (M,N) int32 = A's int8 rows (M, K, lda apart) x packed Bp (Kp = K rounded up to even),
 * when the body takes whole calls from int8 rows (no int16 copy of A): 0 = done, -1 = not
 * taken (the caller packs A and runs lc_gemm_exact_packed: same bits). */
static int lc_gemm_exact_a8(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *Bp,
                            int64_t M, int64_t N, int64_t K, int64_t Kp, int isa, int nthreads) {
#if LC_GEMM_X86
    lc_gemm_x_call x = {.C = C, .ldc = ldc, .Kp = Kp, .A8 = A, .lda8 = lda, .K = K, .Bp = Bp, .nblk = 1, .bkp = Kp,
                        .M = M, .N = N};
    return lc_gemm_x_whole(lc_gemm_exact_body(isa), &x, nthreads);
#else
    (void)C, (void)ldc, (void)A, (void)lda, (void)Bp, (void)M, (void)N, (void)K, (void)Kp, (void)isa, (void)nthreads;
    return -1;
#endif
}

/* One register tile of the block-scaled product: R <= LC_MR packed rows (sa's
 * rows lds apart) against one packed panel, y (R x LC_NR) from zero, blocks in order. */
static inline void lc_qexact_tile(float *y, const int16_t *Ap, int64_t Kp, const int8_t *Bpan, const float *sa,
                                  int64_t nblk, const float *sbpan, int64_t pb, int R, int isa) {
    const lc_gemm_body *xb = lc_gemm_exact_body(isa);
    if (xb && xb->qmatmul_exact_unit(y, LC_NR, Ap, Kp, sa, Bpan, sbpan, nblk, 2 * pb, R, LC_NR) == 0) return;
    memset(y, 0, (size_t)R * LC_NR * sizeof(float));           /* the rows in use */
#if LC_X86
    if (isa >= LC_ISA_AVX2) {
        lc_qmk_exact_avx2(y, Ap, Kp, Bpan, sa, nblk, sbpan, nblk, pb, R);
        return;
    }
#endif
    int32_t tile[LC_MR * LC_NR];
    for (int64_t b = 0; b < nblk; b++) {
        lc_mk_exact(isa, tile, Ap, Kp, Bpan, b * pb, (b + 1) * pb, R);
        lc_fold_generic(y, tile, sa + b, nblk, sbpan + b * LC_NR, R);
    }
}

/* Y (M,N) float32 = block-scaled matmul on packed operands (exact table).
 * sa (M, nblk) row-major; sbp (Np/16, nblk, 16) packed column scales. */
static void lc_qmatmul_exact_packed(float *Y, int64_t ldy, const int16_t *Ap, const float *sa,
                                    const int8_t *Bp, const float *sbp, int64_t M, int64_t N,
                                    int64_t nblk, int64_t bkp, int isa, int nthreads) {
    int64_t Kp = nblk * bkp, P = Kp / 2, pb = bkp / 2;
    int64_t nmu = (M + LC_MC - 1) / LC_MC, nnu = (N + LC_NC - 1) / LC_NC;
    int64_t units = nmu * nnu;
    const lc_gemm_body *xb = lc_gemm_exact_body(isa);
#if LC_GEMM_X86
    lc_gemm_x_call x = {.Y = Y, .ldc = ldy, .Ap = Ap, .Kp = Kp, .Bp = Bp, .sa = sa, .sbp = sbp, .nblk = nblk,
                        .bkp = bkp, .M = M, .N = N};
    if (lc_gemm_x_whole(xb, &x, nthreads) == 0) return;
#endif
    LC_PRAGMA(omp parallel for schedule(dynamic, 1) num_threads(nthreads))
    for (int64_t u = 0; u < units; u++) {
        int64_t mu = u / nnu, nu = u % nnu;
        float ytile[LC_MR * LC_NR];
        int64_t n_end = (nu + 1) * LC_NC < N ? (nu + 1) * LC_NC : N;
        int64_t m_end = (mu + 1) * LC_MC < M ? (mu + 1) * LC_MC : M;
        if (xb && xb->qmatmul_exact_unit(Y + mu * LC_MC * ldy + nu * LC_NC, ldy, Ap + mu * LC_MC * Kp, Kp,
                                         sa + mu * LC_MC * nblk, Bp + (nu * LC_NC / LC_NR) * P * 2 * LC_NR,
                                         sbp + (nu * LC_NC / LC_NR) * nblk * LC_NR, nblk, bkp,
                                         m_end - mu * LC_MC, n_end - nu * LC_NC) == 0)
            continue;
        for (int64_t n0 = nu * LC_NC; n0 < n_end; n0 += LC_NR) {
            const int8_t *Bpan = Bp + (n0 / LC_NR) * P * 2 * LC_NR;
            const float *sbpan = sbp + (n0 / LC_NR) * nblk * LC_NR;
            int nc = (int)(n_end - n0 < LC_NR ? n_end - n0 : LC_NR);
            for (int64_t m0 = mu * LC_MC; m0 < m_end; m0 += LC_MR) {
                int R = (int)(m_end - m0 < LC_MR ? m_end - m0 : LC_MR);
                lc_qexact_tile(ytile, Ap + m0 * Kp, Kp, Bpan, sa + m0 * nblk, nblk, sbpan, pb, R, isa);
                for (int r = 0; r < R; r++)
                    memcpy(Y + (m0 + r) * ldy + n0, ytile + r * LC_NR, (size_t)nc * sizeof(float));
            }
        }
    }
}

/* ------------------------------------------------------ any-table path */

/* The table twice as int32, a and b as unsigned bytes: T[a*256+b] = mul(a,b) and
 * Tt[b*256+a] = mul(a,b) (rows of T by a, of Tt by b); passing them swapped
 * multiplies with the operands swapped.  Work: per thread LC_TABLE_KB*256*LC_TABLE_NB int32
 * for the row tables plus M*LC_TABLE_NB int32 accumulators.
 *
 * Computes acc[m][c] += sum_{k in [k0,k1)} mul(A[m,k], B[k, n0+c]) for c < nc. */
static inline __attribute__((always_inline)) void
lc_table_accum(int32_t *acc /* [M][NB] */, int32_t *Pbuf, const int8_t *A, int64_t lda,
               const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t n0, int nc,
               int64_t k0, int64_t k1) {
    if (M < LC_TABLE_DIRECT_M) {
        for (int64_t m = 0; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            for (int64_t k = k0; k < k1; k++) {
                const int32_t *row = T + (int64_t)(uint8_t)A[m * lda + k] * 256;
                const uint8_t *bk = (const uint8_t *)(B + k * ldb + n0);
                for (int c = 0; c < nc; c++) am[c] += row[bk[c]];
            }
        }
        return;
    }
    for (int64_t kb = k0; kb < k1; kb += LC_TABLE_KB) {
        int kn = (int)(k1 - kb < LC_TABLE_KB ? k1 - kb : LC_TABLE_KB);
        /* P[j][a][c] = mul(a, B[kb+j, n0+c]): columns of the table, transposed */
        for (int j = 0; j < kn; j++) {
            const uint8_t *bk = (const uint8_t *)(B + (kb + j) * ldb + n0);
            int32_t *P = Pbuf + (int64_t)j * 256 * LC_TABLE_NB;
            const int32_t *src[LC_TABLE_NB];
            for (int c = 0; c < LC_TABLE_NB; c++) src[c] = Tt + (int64_t)(c < nc ? bk[c] : 0) * 256;
            for (int a = 0; a < 256; a += 8)
                for (int c = 0; c < LC_TABLE_NB; c++)
                    for (int i = 0; i < 8; i++) P[(a + i) * LC_TABLE_NB + c] = src[c][a + i];
        }
        for (int64_t m = 0; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            const uint8_t *ar = (const uint8_t *)(A + m * lda + kb);
            for (int j = 0; j < kn; j++) {
                const int32_t *prow = Pbuf + (int64_t)j * 256 * LC_TABLE_NB + (int64_t)ar[j] * LC_TABLE_NB;
                for (int c = 0; c < LC_TABLE_NB; c++) am[c] += prow[c];
            }
        }
    }
}

static void lc_table_accum_generic(int32_t *acc, int32_t *Pbuf, const int8_t *A, int64_t lda,
                                   const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M,
                                   int64_t n0, int nc, int64_t k0, int64_t k1) {
    lc_table_accum(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1);
}
#if LC_X86
/* 8x8 int32 transpose: r[i] holds row i; on return r[i] holds column i. */
LC_TARGET_AVX2 static inline void lc_transpose8_epi32(__m256i r[8]) {
    __m256 t0 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[0], r[1]));
    __m256 t1 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[0], r[1]));
    __m256 t2 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[2], r[3]));
    __m256 t3 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[2], r[3]));
    __m256 t4 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[4], r[5]));
    __m256 t5 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[4], r[5]));
    __m256 t6 = _mm256_castsi256_ps(_mm256_unpacklo_epi32(r[6], r[7]));
    __m256 t7 = _mm256_castsi256_ps(_mm256_unpackhi_epi32(r[6], r[7]));
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_castps_si256(_mm256_permute2f128_ps(s0, s4, 0x20));
    r[1] = _mm256_castps_si256(_mm256_permute2f128_ps(s1, s5, 0x20));
    r[2] = _mm256_castps_si256(_mm256_permute2f128_ps(s2, s6, 0x20));
    r[3] = _mm256_castps_si256(_mm256_permute2f128_ps(s3, s7, 0x20));
    r[4] = _mm256_castps_si256(_mm256_permute2f128_ps(s0, s4, 0x31));
    r[5] = _mm256_castps_si256(_mm256_permute2f128_ps(s1, s5, 0x31));
    r[6] = _mm256_castps_si256(_mm256_permute2f128_ps(s2, s6, 0x31));
    r[7] = _mm256_castps_si256(_mm256_permute2f128_ps(s3, s7, 0x31));
}

LC_TARGET_AVX2 static void lc_table_accum_avx2(int32_t *acc, int32_t *Pbuf, const int8_t *A, int64_t lda,
                                               const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt,
                                               int64_t M, int64_t n0, int nc, int64_t k0, int64_t k1) {
    if (M < LC_TABLE_DIRECT_M) {
        lc_table_accum(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1);
        return;
    }
    /* The row tables as int16 (a mul8 product is an int16, docs/DESIGN.md): half the bytes
     * of int32 rows, so twice as many stay close; each row is widened as it is added. */
    int16_t *P16 = (int16_t *)Pbuf;
    for (int64_t kb = k0; kb < k1; kb += LC_TABLE_KB) {
        int kn = (int)(k1 - kb < LC_TABLE_KB ? k1 - kb : LC_TABLE_KB);
        for (int j = 0; j < kn; j++) {
            const uint8_t *bk = (const uint8_t *)(B + (kb + j) * ldb + n0);
            int16_t *P = P16 + (int64_t)j * 256 * LC_TABLE_NB;
            const int32_t *src[LC_TABLE_NB];
            for (int c = 0; c < LC_TABLE_NB; c++) src[c] = Tt + (int64_t)(c < nc ? bk[c] : 0) * 256;
            for (int a0 = 0; a0 < 256; a0 += 8) {
                for (int cg = 0; cg < LC_TABLE_NB; cg += 16) {     /* two groups of 8 columns */
                    __m256i r[8], q[8];
                    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(src[cg + i] + a0));
                    for (int i = 0; i < 8; i++) q[i] = _mm256_loadu_si256((const __m256i *)(src[cg + 8 + i] + a0));
                    lc_transpose8_epi32(r);
                    lc_transpose8_epi32(q);
                    for (int i = 0; i < 8; i++)   /* columns cg..cg+15 of row a0+i, in order */
                        _mm256_storeu_si256((__m256i *)(P + (a0 + i) * LC_TABLE_NB + cg),
                                            _mm256_permute4x64_epi64(_mm256_packs_epi32(r[i], q[i]), 0xD8));
                }
            }
        }
#define LC_ROW16(p, o) _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)((p) + (o))))
        int64_t m = 0;
        for (; m + 2 <= M; m += 2) {
            int32_t *a0p = acc + m * LC_TABLE_NB, *a1p = a0p + LC_TABLE_NB;
            __m256i x0 = _mm256_loadu_si256((const __m256i *)(a0p + 0));
            __m256i x1 = _mm256_loadu_si256((const __m256i *)(a0p + 8));
            __m256i x2 = _mm256_loadu_si256((const __m256i *)(a0p + 16));
            __m256i x3 = _mm256_loadu_si256((const __m256i *)(a0p + 24));
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(a1p + 0));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(a1p + 8));
            __m256i y2 = _mm256_loadu_si256((const __m256i *)(a1p + 16));
            __m256i y3 = _mm256_loadu_si256((const __m256i *)(a1p + 24));
            const uint8_t *ar0 = (const uint8_t *)(A + m * lda + kb), *ar1 = ar0 + lda;
            for (int j = 0; j < kn; j++) {
                const int16_t *Pj = P16 + (int64_t)j * 256 * LC_TABLE_NB;
                const int16_t *p = Pj + (int64_t)ar0[j] * LC_TABLE_NB, *q = Pj + (int64_t)ar1[j] * LC_TABLE_NB;
                x0 = _mm256_add_epi32(x0, LC_ROW16(p, 0));
                x1 = _mm256_add_epi32(x1, LC_ROW16(p, 8));
                x2 = _mm256_add_epi32(x2, LC_ROW16(p, 16));
                x3 = _mm256_add_epi32(x3, LC_ROW16(p, 24));
                y0 = _mm256_add_epi32(y0, LC_ROW16(q, 0));
                y1 = _mm256_add_epi32(y1, LC_ROW16(q, 8));
                y2 = _mm256_add_epi32(y2, LC_ROW16(q, 16));
                y3 = _mm256_add_epi32(y3, LC_ROW16(q, 24));
            }
            _mm256_storeu_si256((__m256i *)(a0p + 0), x0);
            _mm256_storeu_si256((__m256i *)(a0p + 8), x1);
            _mm256_storeu_si256((__m256i *)(a0p + 16), x2);
            _mm256_storeu_si256((__m256i *)(a0p + 24), x3);
            _mm256_storeu_si256((__m256i *)(a1p + 0), y0);
            _mm256_storeu_si256((__m256i *)(a1p + 8), y1);
            _mm256_storeu_si256((__m256i *)(a1p + 16), y2);
            _mm256_storeu_si256((__m256i *)(a1p + 24), y3);
        }
        for (; m < M; m++) {
            int32_t *am = acc + m * LC_TABLE_NB;
            const uint8_t *ar = (const uint8_t *)(A + m * lda + kb);
            for (int j = 0; j < kn; j++) {
                const int16_t *prow = P16 + (int64_t)j * 256 * LC_TABLE_NB + (int64_t)ar[j] * LC_TABLE_NB;
                for (int c = 0; c < LC_TABLE_NB; c += 8)
                    _mm256_storeu_si256((__m256i *)(am + c),
                                        _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(am + c)), LC_ROW16(prow, c)));
            }
        }
#undef LC_ROW16
    }
}
#endif
static inline void lc_table_accum_isa(int isa, int32_t *acc, int32_t *Pbuf, const int8_t *A, int64_t lda,
                                      const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M,
                                      int64_t n0, int nc, int64_t k0, int64_t k1) {
#if LC_X86
    if (isa >= LC_ISA_AVX2) { lc_table_accum_avx2(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1); return; }
#endif
    (void)isa;
    lc_table_accum_generic(acc, Pbuf, A, lda, B, ldb, T, Tt, M, n0, nc, k0, k1);
}


/* Work units for the table path: (column block, row chunk).  Row chunks only
 * when there are too few column blocks to feed the threads (row tables are then
 * built once per chunk). */
static inline int64_t lc_table_row_chunks(int64_t M, int64_t ncb, int nthreads) {
    if (M < 2 * LC_TABLE_DIRECT_M || ncb >= 2 * nthreads) return 1;
    int64_t want = (2 * nthreads + ncb - 1) / ncb;
    int64_t maxc = M / LC_TABLE_DIRECT_M;
    return want < maxc ? want : (maxc > 0 ? maxc : 1);
}

/* The table kernels' layout for an (M, N) product on nthreads: nrc row chunks of
 * rows_per rows; per thread, LC_TABLE_KB row tables of 256 x LC_TABLE_NB, then
 * rows_per x LC_TABLE_NB int32 accumulators (and as many floats with with_float).
 * Returns the per-thread int32 words. */
static inline size_t lc_table_layout(int64_t M, int64_t N, int nthreads, int with_float, int64_t *nrc,
                                     int64_t *rows_per) {
    *nrc = lc_table_row_chunks(M, (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nthreads);
    *rows_per = (M + *nrc - 1) / *nrc;
    return (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB + (size_t)(with_float ? 2 : 1) * *rows_per * LC_TABLE_NB;
}

/* The thread's Pbuf (65536 int16: exactly the row tables' LC_TABLE_KB * 256 * LC_TABLE_NB
 * int32 words) = T, each entry an int16 product (docs/DESIGN.md's mul8 contract): as int16
 * rows (planes 0), or each row as its 256 low bytes then its 256 high bytes XOR 0x80
 * (the high byte + 128 as unsigned: planes 1, the VBMI body's form). */
_Static_assert(LC_TABLE_KB * 256 * LC_TABLE_NB * 2 >= 65536, "Pbuf holds the int16 table");
static inline void lc_table16(int32_t *Pbuf, const int32_t *T, int planes) {
    int16_t *d = (int16_t *)Pbuf;
    uint8_t *p = (uint8_t *)Pbuf;
    for (int a = 0; a < 256; a++) {
        const int32_t *t = T + a * 256;
        if (planes) {
            uint8_t *lo = p + a * 512, *hi = lo + 256;
            for (int b = 0; b < 256; b++) {
                lo[b] = (uint8_t)t[b];
                hi[b] = (uint8_t)(((uint16_t)(int16_t)t[b] >> 8) ^ 0x80u);
            }
        } else {
            for (int b = 0; b < 256; b++) d[a * 256 + b] = (int16_t)t[b];
        }
    }
}

/* C[m, n0+c] = sum_{k0 <= k < k1} mul(A[m,k], B[k, n0+c]) (m < rows, c < nc <= LC_TABLE_WNB)
 * through xb's table_unit, or by direct lookups (the same sums) when its scratch
 * allocation fails. */
static void lc_table_unit_run(const lc_gemm_body *xb, int32_t *C, int64_t ldc, const int8_t *A, int64_t lda,
                              const int8_t *B, int64_t ldb, const int32_t *T, const int32_t *Pbuf, int64_t rows,
                              int64_t n0, int nc, int64_t k0, int64_t k1) {
    if (xb->table_unit(C, ldc, A, lda, B, ldb, (const int16_t *)Pbuf, rows, n0, nc, k0, k1) == 0) return;
    for (int64_t m = 0; m < rows; m++)
        for (int c = 0; c < nc; c++) {
            int32_t s = 0;
            for (int64_t k = k0; k < k1; k++)
                s += T[(int64_t)(uint8_t)A[m * lda + k] * 256 + (uint8_t)B[k * ldb + n0 + c]];
            C[m * ldc + c] = s;
        }
}

/* The wide drivers' units: (LC_TABLE_WNB columns, row chunk), at least 2 per thread. */
static inline int64_t lc_table_wide_chunks(int64_t M, int64_t N, int nthreads, int64_t *rows_per) {
    int64_t ncb = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB;
    int64_t nrc = ncb >= 2 * nthreads ? 1 : (2 * nthreads + ncb - 1) / ncb;
    if (nrc > M) nrc = M;
    if (nrc < 1) nrc = 1;
    *rows_per = (M + nrc - 1) / nrc;
    return nrc;
}

/* Work unit u of the wide drivers: rows [m0, m1) of column block n0 .. n0 + nc; 0 when the
 * unit's row chunk is empty (M not a multiple of the chunk). */
static inline int lc_table_wide_unit(int64_t u, int64_t nrc, int64_t rows_per, int64_t M, int64_t N,
                                     int64_t *m0, int64_t *m1, int64_t *n0, int *nc) {
    *m0 = (u % nrc) * rows_per;
    *m1 = *m0 + rows_per < M ? *m0 + rows_per : M;
    *n0 = (u / nrc) * LC_TABLE_WNB;
    *nc = (int)(N - *n0 < LC_TABLE_WNB ? N - *n0 : LC_TABLE_WNB);
    return *m1 > *m0;
}

/* C (M,N) int32 through a body's table_unit, each thread's table (lc_table16) in its Pbuf. */
static void lc_gemm_table_wide(const lc_gemm_body *xb, int32_t *C, int64_t ldc, const int8_t *A, int64_t lda,
                               const int8_t *B, int64_t ldb, const int32_t *T, int64_t M, int64_t N,
                               int64_t K, int32_t *work, size_t per, int nthreads) {
    int64_t ncb = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB, rows_per;
    int64_t nrc = lc_table_wide_chunks(M, N, nthreads, &rows_per), units = ncb * nrc;
    LC_PRAGMA(omp parallel num_threads(nthreads))
    {
        int32_t *Pbuf = work + (size_t)omp_get_thread_num() * per;
        lc_table16(Pbuf, T, xb->gemm_exact_unit == NULL);   /* the VBMI body: byte planes */
        LC_PRAGMA(omp for schedule(static))
        for (int64_t u = 0; u < units; u++) {
            int64_t m0, m1, n0;
            int nc;
            if (!lc_table_wide_unit(u, nrc, rows_per, M, N, &m0, &m1, &n0, &nc)) continue;
            lc_table_unit_run(xb, C + m0 * ldc + n0, ldc, A + m0 * lda, lda, B, ldb, T, Pbuf, m1 - m0, n0, nc, 0, K);
        }
    }
}

/* Y (M,N) float32 as lc_qmatmul_table, each block's int32 sums from a body's table_unit
 * into a per-unit scratch, folded in the generic order straight into Y.  Returns -1
 * (nothing written) when a scratch allocation fails: the caller runs the AVX2 body. */
static int lc_qmatmul_table_wide(const lc_gemm_body *xb, float *Y, int64_t ldy, const int8_t *qa, const float *sa,
                                 const int8_t *qb, const float *sb, const int32_t *T, int64_t M, int64_t N,
                                 int64_t nblk, int64_t bk, int32_t *work, size_t per, int nthreads) {
    int64_t Kq = nblk * bk, ncb = (N + LC_TABLE_WNB - 1) / LC_TABLE_WNB, rows_per;
    int64_t nrc = lc_table_wide_chunks(M, N, nthreads, &rows_per), units = ncb * nrc;
    int32_t *accs = (int32_t *)lc_aligned_alloc((size_t)nthreads * rows_per * LC_TABLE_WNB * sizeof(int32_t));
    if (!accs) return -1;
    LC_PRAGMA(omp parallel num_threads(nthreads))
    {
        int32_t *Pbuf = work + (size_t)omp_get_thread_num() * per;
        int32_t *acc = accs + (size_t)omp_get_thread_num() * rows_per * LC_TABLE_WNB;
        lc_table16(Pbuf, T, xb->gemm_exact_unit == NULL);
        LC_PRAGMA(omp for schedule(static))
        for (int64_t u = 0; u < units; u++) {
            int64_t m0, m1, n0;
            int nc;
            if (!lc_table_wide_unit(u, nrc, rows_per, M, N, &m0, &m1, &n0, &nc)) continue;
            for (int64_t m = m0; m < m1; m++)
                for (int c = 0; c < nc; c++) Y[m * ldy + n0 + c] = 0.0f;
            for (int64_t b = 0; b < nblk; b++) {
                lc_table_unit_run(xb, acc, LC_TABLE_WNB, qa + m0 * Kq, Kq, qb, N, T, Pbuf, m1 - m0, n0, nc,
                                  b * bk, (b + 1) * bk);
                for (int64_t m = m0; m < m1; m++) {
                    float s = sa[m * nblk + b];
                    const float *sbr = sb + b * N + n0;
                    float *y = Y + m * ldy + n0;
                    const int32_t *ai = acc + (m - m0) * LC_TABLE_WNB;
                    for (int c = 0; c < nc; c++) y[c] = y[c] + (s * sbr[c]) * (float)ai[c];
                }
            }
        }
    }
    lc_aligned_free(accs);
    return 0;
}

/* C (M,N) int32 = LUT GEMM with any table.  work: nthreads * per-thread int32. */
static void lc_gemm_table(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                          int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t K,
                          int32_t *work, int isa, int nthreads) {
    int64_t ncb = (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nrc, rows_per;
    size_t per = lc_table_layout(M, N, nthreads, 0, &nrc, &rows_per);
    int64_t units = ncb * nrc;
    const lc_gemm_body *xb = lc_gemm_table_body(isa);
    if (xb) {
        lc_gemm_table_wide(xb, C, ldc, A, lda, B, ldb, T, M, N, K, work, per, nthreads);
        return;
    }
    LC_PRAGMA(omp parallel num_threads(nthreads))
    {
        int32_t *mine = work + (size_t)omp_get_thread_num() * per;
        int32_t *Pbuf = mine, *acc = mine + (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB;
        LC_PRAGMA(omp for schedule(static))
        for (int64_t u = 0; u < units; u++) {
            int64_t cb = u / nrc, rc = u % nrc;
            int64_t m0 = rc * rows_per, m1 = m0 + rows_per < M ? m0 + rows_per : M;
            if (m1 <= m0) continue;
            int64_t n0 = cb * LC_TABLE_NB;
            int nc = (int)(N - n0 < LC_TABLE_NB ? N - n0 : LC_TABLE_NB);
            memset(acc, 0, (size_t)(m1 - m0) * LC_TABLE_NB * sizeof(int32_t));
            lc_table_accum_isa(isa, acc, Pbuf, A + m0 * lda, lda, B, ldb, T, Tt, m1 - m0, n0, nc, 0, K);
            for (int64_t m = m0; m < m1; m++)
                memcpy(C + m * ldc + n0, acc + (m - m0) * LC_TABLE_NB, (size_t)nc * sizeof(int32_t));
        }
    }
}

/* Y (M,N) float32 = block-scaled matmul with any table on quantized operands:
 * qa (M, Kq) int8, sa (M, nblk), qb (Kq, N) int8, sb (nblk, N); Kq = nblk*bk. */
static void lc_qmatmul_table(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                             const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t nblk,
                             int64_t bk, int32_t *work, int isa, int nthreads) {
    int64_t Kq = nblk * bk;
    int64_t ncb = (N + LC_TABLE_NB - 1) / LC_TABLE_NB, nrc, rows_per;
    size_t per = lc_table_layout(M, N, nthreads, 1, &nrc, &rows_per);
    int64_t units = ncb * nrc;
    const lc_gemm_body *xb = lc_gemm_table_body(isa);
    if (xb && lc_qmatmul_table_wide(xb, Y, ldy, qa, sa, qb, sb, T, M, N, nblk, bk, work, per, nthreads) == 0) return;
    LC_PRAGMA(omp parallel num_threads(nthreads))
    {
        int32_t *mine = work + (size_t)omp_get_thread_num() * per;
        int32_t *Pbuf = mine, *acc = mine + (size_t)LC_TABLE_KB * 256 * LC_TABLE_NB;
        float *yb = (float *)(acc + (size_t)rows_per * LC_TABLE_NB);
        LC_PRAGMA(omp for schedule(static))
        for (int64_t u = 0; u < units; u++) {
            int64_t cb = u / nrc, rc = u % nrc;
            int64_t m0 = rc * rows_per, m1 = m0 + rows_per < M ? m0 + rows_per : M;
            if (m1 <= m0) continue;
            int64_t n0 = cb * LC_TABLE_NB;
            int nc = (int)(N - n0 < LC_TABLE_NB ? N - n0 : LC_TABLE_NB);
            for (int64_t i = 0; i < (m1 - m0) * LC_TABLE_NB; i++) yb[i] = 0.0f;
            for (int64_t b = 0; b < nblk; b++) {
                memset(acc, 0, (size_t)(m1 - m0) * LC_TABLE_NB * sizeof(int32_t));
                lc_table_accum_isa(isa, acc, Pbuf, qa + m0 * Kq, Kq, qb, N, T, Tt, m1 - m0, n0, nc,
                                   b * bk, (b + 1) * bk);
                for (int64_t m = m0; m < m1; m++) {
                    float s = sa[m * nblk + b];
                    const float *sbr = sb + b * N + n0;
                    float *y = yb + (m - m0) * LC_TABLE_NB;
                    const int32_t *ai = acc + (m - m0) * LC_TABLE_NB;
                    for (int c = 0; c < nc; c++) y[c] = y[c] + (s * sbr[c]) * (float)ai[c];
                }
            }
            for (int64_t m = m0; m < m1; m++)
                memcpy(Y + m * ldy + n0, yb + (m - m0) * LC_TABLE_NB, (size_t)nc * sizeof(float));
        }
    }
}

/* ------------------------------------------------------ any-table drivers: orientation */

/* Whether an (M, N) product runs as its transpose, B^T A^T through the swapped table
 * (the same integer products and sums, and the same scale products, so the same
 * bits): the kernels build a row table per k and column block of the right operand
 * and reuse it for every left row, so the longer side belongs in the rows, unless
 * it is short enough for direct lookups. */
static inline int lc_table_transposed(int64_t M, int64_t N) {
    return N > M && M >= LC_TABLE_DIRECT_M;
}

/* int32 words the kernels (lc_gemm_table / lc_qmatmul_table) need for an (M, N) product. */
static inline size_t lc_table_kernel_work(int64_t M, int64_t N, int nthreads, int with_float) {
    int64_t nrc, rows_per;
    return lc_table_layout(M, N, nthreads, with_float, &nrc, &rows_per) * (size_t)nthreads;
}

/* int32 words lc_gemm_table_auto (nblk 0) / lc_qmatmul_table_auto need: the kernel's,
 * and when transposed the transposed operands (int8), scales and result. */
static inline size_t lc_table_auto_work(int64_t M, int64_t N, int64_t K, int64_t nblk, int nthreads,
                                        int with_float) {
    if (!lc_table_transposed(M, N))
        return lc_table_kernel_work(M, N, nthreads, with_float);
    size_t bytes = (size_t)N * K + (size_t)K * M;
    return lc_table_kernel_work(N, M, nthreads, with_float) + (size_t)N * M + (size_t)nblk * (N + M) +
           (bytes + 3) / 4;
}

/* dst (cols, rows; row stride ldd) = src (rows, cols; row stride lds), for 1- and
 * 4-byte elements, in 32 x 32 tiles shared out over the threads (a copy: no bits to lose). */
#define LC_TRANSPOSE_DEF(NAME, T)                                                            \
    static void NAME(T *dst, int64_t ldd, const T *src, int64_t rows, int64_t cols, int64_t lds,    \
                     int nthreads) {                                                         \
        int64_t rt = (rows + 31) / 32, ct = (cols + 31) / 32;                                \
        LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))                   \
        for (int64_t t = 0; t < rt * ct; t++) {                                              \
            int64_t r0 = (t / ct) * 32, c0 = (t % ct) * 32;                                  \
            int64_t r1 = r0 + 32 < rows ? r0 + 32 : rows, c1 = c0 + 32 < cols ? c0 + 32 : cols; \
            for (int64_t c = c0; c < c1; c++)                                                \
                for (int64_t r = r0; r < r1; r++) dst[c * ldd + r] = src[r * lds + c];       \
        }                                                                                    \
    }
LC_TRANSPOSE_DEF(lc_transpose_i8, int8_t)
LC_TRANSPOSE_DEF(lc_transpose_u32, uint32_t)
#undef LC_TRANSPOSE_DEF

/* C (M,N) int32 = A (M,K) B (K,N) through the table (T[a*256+b] = mul(a,b), Tt its
 * transpose), run as C^T = B^T A^T with the tables swapped where lc_table_transposed
 * says so.  work: lc_table_auto_work(M, N, K, 0, nthreads, 0) words. */
static void lc_gemm_table_auto(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                               int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N,
                               int64_t K, int32_t *work, int isa, int nthreads) {
    if (!lc_table_transposed(M, N)) {
        lc_gemm_table(C, ldc, A, lda, B, ldb, T, Tt, M, N, K, work, isa, nthreads);
        return;
    }
    int32_t *ct = work + lc_table_kernel_work(N, M, nthreads, 0);      /* (N, M) */
    int8_t *bt = (int8_t *)(ct + N * M), *at = bt + N * K;             /* (N, K), (K, M) */
    lc_transpose_i8(bt, K, B, K, N, ldb, nthreads);
    lc_transpose_i8(at, M, A, M, K, lda, nthreads);
    lc_gemm_table(ct, M, bt, K, at, M, Tt, T, N, M, K, work, isa, nthreads);
    lc_transpose_u32((uint32_t *)C, ldc, (const uint32_t *)ct, N, M, M, nthreads);
}

/* Y (M,N) float32 = the block-scaled product through the table (as lc_qmatmul_table),
 * run transposed where lc_table_transposed says so: Y^T from (qb^T, sb^T) and
 * (qa^T, sa^T) with the tables swapped (sa sb = sb sa: the same bits).
 * work: lc_table_auto_work(M, N, nblk*bk, nblk, nthreads, 1) words. */
static void lc_qmatmul_table_auto(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                                  const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N,
                                  int64_t nblk, int64_t bk, int32_t *work, int isa, int nthreads) {
    if (!lc_table_transposed(M, N)) {
        lc_qmatmul_table(Y, ldy, qa, sa, qb, sb, T, Tt, M, N, nblk, bk, work, isa, nthreads);
        return;
    }
    int64_t Kq = nblk * bk;
    float *yt = (float *)(work + lc_table_kernel_work(N, M, nthreads, 1));      /* (N, M) */
    float *sbt = yt + N * M, *sat = sbt + N * nblk;                             /* (N, nblk), (nblk, M) */
    int8_t *bt = (int8_t *)(sat + nblk * M), *at = bt + N * Kq;                /* (N, Kq), (Kq, M) */
    lc_transpose_i8(bt, Kq, qb, Kq, N, N, nthreads);
    lc_transpose_i8(at, M, qa, M, Kq, Kq, nthreads);
    lc_transpose_u32((uint32_t *)sbt, nblk, (const uint32_t *)sb, nblk, N, N, nthreads);
    lc_transpose_u32((uint32_t *)sat, M, (const uint32_t *)sa, M, nblk, nblk, nthreads);
    lc_qmatmul_table(yt, M, bt, sbt, at, sat, Tt, T, N, M, nblk, bk, work, isa, nthreads);
    lc_transpose_u32((uint32_t *)Y, ldy, (const uint32_t *)yt, N, M, M, nthreads);
}

/* ------------------------------------------------------ quantization */

/* The Q8 code of x at scale sc: x / sc rounded half to even, clamped to +-127; 0 for
 * a zero scale (an all-zero block). */
static inline int8_t lc_q8_code(float x, float sc) {
    float v = sc != 0.0f ? nearbyintf(x / sc) : 0.0f;
    return (int8_t)(v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v));
}

/* max |x[i]| over n floats (NaN and inf count into *bad, not into the max). */
static inline float lc_absmax_generic(const float *x, int64_t n, int64_t *bad) {
    float m = 0.0f;
    int64_t nf = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        nf += !(a <= FLT_MAX);
        m = a > m ? a : m;
    }
    *bad += nf;
    return m;
}

/* One Q8 block of a row: returns the count of non-finite values. */
static inline int64_t lc_q8_block_generic(int8_t *q, float *s, const float *x, int64_t len, int64_t bk) {
    int64_t nf = 0;
    float amax = lc_absmax_generic(x, len, &nf);
    float sc = amax / 127.0f;
    *s = sc;
    for (int64_t k = 0; k < len; k++) q[k] = lc_q8_code(x[k], sc);
    for (int64_t k = len; k < bk; k++) q[k] = 0;
    return nf;
}

#if LC_X86
/* Same bits as the generic block: IEEE division, round-half-even, clamp. */
LC_TARGET_AVX2 static int64_t lc_q8_block_avx2(int8_t *q, float *s, const float *x, int64_t len, int64_t bk) {
    if (len != bk || (bk & 7)) return lc_q8_block_generic(q, s, x, len, bk);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    __m256 m = _mm256_setzero_ps();
    int bad = 0;
    for (int64_t k = 0; k < bk; k += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k), absmask);
        bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));
        m = _mm256_max_ps(m, a);
    }
    if (bad) return lc_q8_block_generic(q, s, x, len, bk);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float sc = _mm_cvtss_f32(h) / 127.0f;
    *s = sc;
    if (sc == 0.0f) { memset(q, 0, (size_t)bk); return 0; }
    const __m256 vs = _mm256_set1_ps(sc), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (int64_t k = 0; k < bk; k += 8) {
        __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), vs),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        __m256i i32 = _mm256_cvtps_epi32(v);
        __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(i16, i16));
    }
    return 0;
}
#endif

/* Q8 along contiguous rows: x (R, K) -> q (R, nblk*bk), s (R, nblk).
 * Returns the number of non-finite inputs seen (0 = ok). */
static int64_t lc_quantize_row(int8_t *qr, float *sr, const float *xr, int64_t K, int64_t bk, int64_t nblk,
                               int isa) {
    int64_t bad = 0;
    for (int64_t b = 0; b < nblk; b++) {
        int64_t k0 = b * bk, len = K - k0 < bk ? (K - k0 > 0 ? K - k0 : 0) : bk;
#if LC_X86
        if (isa >= LC_ISA_AVX2) { bad += lc_q8_block_avx2(qr + k0, sr + b, xr + k0, len, bk); continue; }
#endif
        bad += lc_q8_block_generic(qr + k0, sr + b, xr + k0, len, bk);
    }
    (void)isa;
    return bad;
}
static int64_t lc_quantize_rows(int8_t *q, float *s, const float *x, int64_t R, int64_t K, int64_t ldx,
                                int64_t bk, int64_t nblk, int isa, int nthreads) {
    int64_t bad = 0;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) reduction(+:bad))
    for (int64_t r = 0; r < R; r++)
        bad += lc_quantize_row(q + r * nblk * bk, s + r * nblk, x + r * ldx, K, bk, nblk, isa);
    return bad;
}

/* Columns [c0, c1) of block rows [k0, k0 + bk) (rows past k1 = K's end are zero):
 * the scales, then the codes.  Returns the count of non-finite values. */
static int64_t lc_q8_cols_generic(int8_t *q, float *s, const float *x, int64_t ldx, int64_t N, int64_t k0,
                                  int64_t k1, int64_t bk, int64_t c0, int64_t c1) {
    float amax[256];
    int64_t nf = 0;
    for (int64_t c = c0; c < c1; c++) amax[c - c0] = 0.0f;
    for (int64_t k = k0; k < k1; k++)
        for (int64_t c = c0; c < c1; c++) {
            float a = fabsf(x[k * ldx + c]);
            nf += !(a <= FLT_MAX);
            amax[c - c0] = a > amax[c - c0] ? a : amax[c - c0];
        }
    for (int64_t c = c0; c < c1; c++) {
        amax[c - c0] = amax[c - c0] / 127.0f;
        s[c] = amax[c - c0];
    }
    for (int64_t k = k0; k < k0 + bk; k++)
        for (int64_t c = c0; c < c1; c++) q[k * N + c] = k < k1 ? lc_q8_code(x[k * ldx + c], amax[c - c0]) : 0;
    return nf;
}
#if LC_X86
/* The same, eight columns at a time (c1 - c0 a multiple of 8): max as the scalar's
 * "a > m ? a : m" (vmaxps returns its second operand on NaN), one division and one
 * round-to-nearest-even per value; non-finite input only counts (the caller raises). */
LC_TARGET_AVX2 static int64_t lc_q8_cols_avx2(int8_t *q, float *s, const float *x, int64_t ldx, int64_t N,
                                             int64_t k0, int64_t k1, int64_t bk, int64_t c0, int64_t c1) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f), zero = _mm256_setzero_ps();
    const __m256i lanes = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t nf = 0;
    for (int64_t c = c0; c < c1; c += 8) {
        __m256 m = zero;
        for (int64_t k = k0; k < k1; k++) {
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k * ldx + c), absmask);
            nf += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ)));
            m = _mm256_max_ps(a, m);
        }
        __m256 sc = _mm256_div_ps(m, hi), live = _mm256_cmp_ps(sc, zero, _CMP_NEQ_OQ);
        _mm256_storeu_ps(s + c, sc);
        for (int64_t k = k0; k < k0 + bk; k++) {
            __m256 v = zero;
            if (k < k1) {
                v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k * ldx + c), sc),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v = _mm256_and_ps(v, live);
            }
            v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
            __m256i i16 = _mm256_packs_epi32(_mm256_cvtps_epi32(v), _mm256_setzero_si256());
            __m256i i8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16, _mm256_setzero_si256()), lanes);
            _mm_storel_epi64((__m128i *)(q + k * N + c), _mm256_castsi256_si128(i8));
        }
    }
    return nf;
}
#endif

/* Q8 along the leading axis: x (K, N) (row stride ldx) -> q (nblk*bk, N), s (nblk, N). */
static int64_t lc_quantize_cols(int8_t *q, float *s, const float *x, int64_t K, int64_t N, int64_t ldx,
                                int64_t bk, int64_t nblk, int isa, int nthreads) {
    int64_t bad = 0;
    const int64_t CB = 256;
    int64_t ncb = (N + CB - 1) / CB;
    (void)isa;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) reduction(+:bad))
    for (int64_t u = 0; u < nblk * ncb; u++) {
        int64_t b = u / ncb, c0 = (u % ncb) * CB, c1 = c0 + CB < N ? c0 + CB : N;
        int64_t k0 = b * bk, k1 = k0 + bk < K ? k0 + bk : K;
        int64_t cv = c0;
#if LC_X86
        if (isa >= LC_ISA_AVX2) {
            cv = c0 + (c1 - c0) / 8 * 8;
            bad += lc_q8_cols_avx2(q, s + b * N, x, ldx, N, k0, k1, bk, c0, cv);
        }
#endif
        bad += lc_q8_cols_generic(q, s + b * N, x, ldx, N, k0, k1, bk, cv, c1);
    }
    return bad;
}

#endif /* LUTCORE_GEMM_H */
