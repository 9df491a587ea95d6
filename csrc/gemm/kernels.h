/* csrc/gemm/kernels.h — the exact micro-kernels (generic and AVX2, with inline assembly) and the block fold.
 * Part of the gemm family: the body table (gemm/body.h) names them. */
#ifndef LUTCORE_GEMM_KERNELS_H
#define LUTCORE_GEMM_KERNELS_H

#include "gemm/pack.h"    /* LC_MR, LC_NR */

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

#endif /* LUTCORE_GEMM_KERNELS_H */
