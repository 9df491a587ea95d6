/* csrc/gemm/x86/avx512_vbmi.c — the gemm family's any-table body on AVX-512 VBMI.
 *
 * Design: compiled alone with AVX-512 F/BW/VL/DQ + VBMI + VNNI flags (setup.py),
 * and once more against SIMDe for the tests (simde_avx512_vbmi.c); dispatched
 * where the CPU reports VBMI and VNNI (avx512.c's vpermi2w body otherwise).
 *
 * The table as two byte planes (a mul8 product is an int16, docs/DESIGN.md): row a
 * = its 256 low bytes + its 256 high bytes XOR 0x80 (hi + 128, unsigned) = 8
 * zmm, held in registers while one output row's 256 columns take the products
 * of one k.  Per 64 columns: four two-source byte permutes (vpermi2b: 128
 * entries, index bits 0-6), chained by their write masks (bit 7 clear, then
 * set: the second permute reads its index from the lanes the first left
 * alone), give the 64 low and the 64 high bytes.  No widening per product:
 * each plane's register is added as 32 uint16 words (w = even byte + 256 *
 * odd byte) and, shifted right by 8, as its odd bytes alone, so per 64
 * products 4 permutes + 2 shifts + 4 16-bit adds (the shifts and adds run
 * beside the permutes on Zen 4; vpdpwssd and byte unpacks compete with them).
 * Over a chunk of kc <= LC_VB_KC k (sums of at most 256 bytes fit uint16):
 *   odd-byte sum  O = sum (w >> 8)                 exact
 *   even-byte sum E = sum w - 256 * O  (mod 2^16)  exact, as E < 2^16
 *   C += E_lo + 256 * E_hi - 32768 * kc           int32, exact
 * The staged index puts column j (< 32) of a 64-column group in byte 2j and
 * column 32 + j in byte 2j + 1, so E holds columns 0-31 and O columns 32-63 in
 * order.
 * Where the table's row 0 is all zeros (0 * b = 0: the exact table, Mitchell, most
 * approximate units) a chunk's k's of code 0 — a ReLU's zeros, a conv's padding, half of
 * a ResNet's patches — add nothing: the row loop leaves them out (a list of the others,
 * kc their count in the flush) when they are at least an eighth of the chunk.  Integer
 * sums: the same C.
 *
 *   TP    uint8 (256, 2, 256)   TP[a][0][b] = low byte, TP[a][1][b] = high ^ 0x80  IN (the driver's Pbuf)
 *   idx   uint8 (kn, ng, 64)    B[k, n0 + 64 g + lc_vb_col(p)], 0 past nc           scratch
 *   msk   uint64 (kn, ng, 2)    their bit 7 clear / set (the permutes' masks)     scratch
 *   acc   int32 (256)           one row's sums over the chunks so far               scratch (stack)
 *   C     int32 (rows, nc <= 256) rows ldc apart                                    OUT
 */
#define LC_BODY_ISA avx512vbmi
#include "gemm/x86/simd.h"

#if LC_X86

#define LC_VB_NB 256   /* columns per unit (gemm.h LC_TABLE_WNB): 4 groups of 64 */
#define LC_VB_KC 128   /* k per 16-bit chunk (<= 256) */
#if defined(LC_SIMDE)
#define LC_VB_SIMDE 1
#else
#define LC_VB_SIMDE 0
#endif

/* byte p of a staged 64-column group -> its column */
static inline int lc_vb_col(int p) { return (p & 1) * 32 + p / 2; }

/* acc[64 g ..] (+)= one group's chunk sums (F, O: low plane; G, P: high plane) */
LC_AI void lc_vb_flush(int32_t *acc, __m512i F, __m512i O, __m512i G, __m512i P, int64_t kc, int first) {
    __m512i E = _mm512_sub_epi16(F, _mm512_slli_epi16(O, 8)), H = _mm512_sub_epi16(G, _mm512_slli_epi16(P, 8));
    __m512i bias = _mm512_set1_epi32((int32_t)(-32768 * kc));
    __m256i lo[4] = {_mm512_castsi512_si256(E), _mm512_extracti64x4_epi64(E, 1), _mm512_castsi512_si256(O),
                     _mm512_extracti64x4_epi64(O, 1)};
    __m256i hi[4] = {_mm512_castsi512_si256(H), _mm512_extracti64x4_epi64(H, 1), _mm512_castsi512_si256(P),
                     _mm512_extracti64x4_epi64(P, 1)};
    for (int q = 0; q < 4; q++) {
        __m512i s = _mm512_add_epi32(_mm512_cvtepu16_epi32(lo[q]), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi[q]), 8));
        s = _mm512_add_epi32(s, bias);
        if (!first) s = _mm512_add_epi32(s, _mm512_load_si512((const void *)(acc + 16 * q)));
        _mm512_store_si512((void *)(acc + 16 * q), s);
    }
}

#if !defined(LC_SIMDE)
/* The 4-group k loop (c1 > c0) by hand: the compilers spill 4 of the 16 accumulators and
 * rotate the rest through moves.  zmm0-7 the table row, zmm24-31 the groups' permutes. */
#define LC_VB_ASM_GB(ik, mk, F, O, G, P, t0, t1, ka, kb, IKB, MKB) \
    "vmovdqa64 " ik "(" IKB "), %%" t0 "\n\t" \
    "vmovdqa64 " ik "(" IKB "), %%" t1 "\n\t" \
    "kmovq " mk "(" MKB "), %%" ka "\n\t" \
    "kmovq 8+" mk "(" MKB "), %%" kb "\n\t" \
    "vpermi2b %%zmm1, %%zmm0, %%" t0 "%{%%" ka "%}\n\t" \
    "vpermi2b %%zmm5, %%zmm4, %%" t1 "%{%%" ka "%}\n\t" \
    "vpermi2b %%zmm3, %%zmm2, %%" t0 "%{%%" kb "%}\n\t" \
    "vpermi2b %%zmm7, %%zmm6, %%" t1 "%{%%" kb "%}\n\t" \
    "vpaddw %%" t0 ", %%" F ", %%" F "\n\t" \
    "vpsrlw $8, %%" t0 ", %%" t0 "\n\t" \
    "vpaddw %%" t0 ", %%" O ", %%" O "\n\t" \
    "vpaddw %%" t1 ", %%" G ", %%" G "\n\t" \
    "vpsrlw $8, %%" t1 ", %%" t1 "\n\t" \
    "vpaddw %%" t1 ", %%" P ", %%" P "\n\t"
#define LC_VB_ASM_G(ik, mk, F, O, G, P, t0, t1, ka, kb) LC_VB_ASM_GB(ik, mk, F, O, G, P, t0, t1, ka, kb, "%[ik]", "%[mk]")
LC_AI void lc_vb_loop4(const uint8_t *ar, const uint8_t *ae, const uint8_t *TP, const uint8_t *ik,
                              const uint64_t *mk, __m512i *acc) {
    __asm__ volatile(
        "vmovdqa64 0(%[acc]), %%zmm8\n\t"
        "vmovdqa64 64(%[acc]), %%zmm9\n\t"
        "vmovdqa64 128(%[acc]), %%zmm10\n\t"
        "vmovdqa64 192(%[acc]), %%zmm11\n\t"
        "vmovdqa64 256(%[acc]), %%zmm12\n\t"
        "vmovdqa64 320(%[acc]), %%zmm13\n\t"
        "vmovdqa64 384(%[acc]), %%zmm14\n\t"
        "vmovdqa64 448(%[acc]), %%zmm15\n\t"
        "vmovdqa64 512(%[acc]), %%zmm16\n\t"
        "vmovdqa64 576(%[acc]), %%zmm17\n\t"
        "vmovdqa64 640(%[acc]), %%zmm18\n\t"
        "vmovdqa64 704(%[acc]), %%zmm19\n\t"
        "vmovdqa64 768(%[acc]), %%zmm20\n\t"
        "vmovdqa64 832(%[acc]), %%zmm21\n\t"
        "vmovdqa64 896(%[acc]), %%zmm22\n\t"
        "vmovdqa64 960(%[acc]), %%zmm23\n\t"
        "1:\n\t"
        "movzbl (%[ar]), %%eax\n\t"
        "shl $9, %%rax\n\t"
        "add %[tp], %%rax\n\t"
        "vmovdqu64 (%%rax), %%zmm0\n\t"
        "vmovdqu64 64(%%rax), %%zmm1\n\t"
        "vmovdqu64 128(%%rax), %%zmm2\n\t"
        "vmovdqu64 192(%%rax), %%zmm3\n\t"
        "vmovdqu64 256(%%rax), %%zmm4\n\t"
        "vmovdqu64 320(%%rax), %%zmm5\n\t"
        "vmovdqu64 384(%%rax), %%zmm6\n\t"
        "vmovdqu64 448(%%rax), %%zmm7\n\t"
        LC_VB_ASM_G("0", "0", "zmm8", "zmm9", "zmm10", "zmm11", "zmm24", "zmm25", "k1", "k2")
        LC_VB_ASM_G("64", "16", "zmm12", "zmm13", "zmm14", "zmm15", "zmm26", "zmm27", "k3", "k4")
        LC_VB_ASM_G("128", "32", "zmm16", "zmm17", "zmm18", "zmm19", "zmm28", "zmm29", "k5", "k6")
        LC_VB_ASM_G("192", "48", "zmm20", "zmm21", "zmm22", "zmm23", "zmm30", "zmm31", "k7", "k1")
        "add $256, %[ik]\n\t"
        "add $64, %[mk]\n\t"
        "inc %[ar]\n\t"
        "cmp %[ae], %[ar]\n\t"
        "jne 1b\n\t"
        "vmovdqa64 %%zmm8, 0(%[acc])\n\t"
        "vmovdqa64 %%zmm9, 64(%[acc])\n\t"
        "vmovdqa64 %%zmm10, 128(%[acc])\n\t"
        "vmovdqa64 %%zmm11, 192(%[acc])\n\t"
        "vmovdqa64 %%zmm12, 256(%[acc])\n\t"
        "vmovdqa64 %%zmm13, 320(%[acc])\n\t"
        "vmovdqa64 %%zmm14, 384(%[acc])\n\t"
        "vmovdqa64 %%zmm15, 448(%[acc])\n\t"
        "vmovdqa64 %%zmm16, 512(%[acc])\n\t"
        "vmovdqa64 %%zmm17, 576(%[acc])\n\t"
        "vmovdqa64 %%zmm18, 640(%[acc])\n\t"
        "vmovdqa64 %%zmm19, 704(%[acc])\n\t"
        "vmovdqa64 %%zmm20, 768(%[acc])\n\t"
        "vmovdqa64 %%zmm21, 832(%[acc])\n\t"
        "vmovdqa64 %%zmm22, 896(%[acc])\n\t"
        "vmovdqa64 %%zmm23, 960(%[acc])\n\t"
        : [ar] "+r"(ar), [ik] "+r"(ik), [mk] "+r"(mk)
        : [ae] "r"(ae), [tp] "r"(TP), [acc] "r"(acc)
        : "rax", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
          "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6",
          "k7", "cc", "memory");
}
#endif

#if !defined(LC_SIMDE)
/* lc_vb_loop4 over the k's of a list (offsets from ar, idx and msk already at the chunk's k0):
 * the chunk's k's whose code is not 0 (lc_vb_rows), lp < le. */
#define LC_VB_ASM_GL(ik, mk, F, O, G, P, t0, t1, ka, kb) LC_VB_ASM_GB(ik, mk, F, O, G, P, t0, t1, ka, kb, "%%rcx", "%%rdx")
LC_AI void lc_vb_loop4_list(const uint8_t *ar, const uint8_t *lp, const uint8_t *le, const uint8_t *TP,
                            const uint8_t *ik, const uint64_t *mk, __m512i *acc) {
    __asm__ volatile(
        "vmovdqa64 0(%[acc]), %%zmm8\n\t"
        "vmovdqa64 64(%[acc]), %%zmm9\n\t"
        "vmovdqa64 128(%[acc]), %%zmm10\n\t"
        "vmovdqa64 192(%[acc]), %%zmm11\n\t"
        "vmovdqa64 256(%[acc]), %%zmm12\n\t"
        "vmovdqa64 320(%[acc]), %%zmm13\n\t"
        "vmovdqa64 384(%[acc]), %%zmm14\n\t"
        "vmovdqa64 448(%[acc]), %%zmm15\n\t"
        "vmovdqa64 512(%[acc]), %%zmm16\n\t"
        "vmovdqa64 576(%[acc]), %%zmm17\n\t"
        "vmovdqa64 640(%[acc]), %%zmm18\n\t"
        "vmovdqa64 704(%[acc]), %%zmm19\n\t"
        "vmovdqa64 768(%[acc]), %%zmm20\n\t"
        "vmovdqa64 832(%[acc]), %%zmm21\n\t"
        "vmovdqa64 896(%[acc]), %%zmm22\n\t"
        "vmovdqa64 960(%[acc]), %%zmm23\n\t"
        "1:\n\t"
        "movzbl (%[lp]), %%ecx\n\t"
        "movzbl (%[ar],%%rcx), %%eax\n\t"
        "shl $9, %%rax\n\t"
        "add %[tp], %%rax\n\t"
        "mov %%rcx, %%rdx\n\t"
        "shl $8, %%rcx\n\t"
        "add %[ik], %%rcx\n\t"
        "shl $6, %%rdx\n\t"
        "add %[mk], %%rdx\n\t"
        "vmovdqu64 (%%rax), %%zmm0\n\t"
        "vmovdqu64 64(%%rax), %%zmm1\n\t"
        "vmovdqu64 128(%%rax), %%zmm2\n\t"
        "vmovdqu64 192(%%rax), %%zmm3\n\t"
        "vmovdqu64 256(%%rax), %%zmm4\n\t"
        "vmovdqu64 320(%%rax), %%zmm5\n\t"
        "vmovdqu64 384(%%rax), %%zmm6\n\t"
        "vmovdqu64 448(%%rax), %%zmm7\n\t"
        LC_VB_ASM_GL("0", "0", "zmm8", "zmm9", "zmm10", "zmm11", "zmm24", "zmm25", "k1", "k2")
        LC_VB_ASM_GL("64", "16", "zmm12", "zmm13", "zmm14", "zmm15", "zmm26", "zmm27", "k3", "k4")
        LC_VB_ASM_GL("128", "32", "zmm16", "zmm17", "zmm18", "zmm19", "zmm28", "zmm29", "k5", "k6")
        LC_VB_ASM_GL("192", "48", "zmm20", "zmm21", "zmm22", "zmm23", "zmm30", "zmm31", "k7", "k1")
        "inc %[lp]\n\t"
        "cmp %[le], %[lp]\n\t"
        "jne 1b\n\t"
        "vmovdqa64 %%zmm8, 0(%[acc])\n\t"
        "vmovdqa64 %%zmm9, 64(%[acc])\n\t"
        "vmovdqa64 %%zmm10, 128(%[acc])\n\t"
        "vmovdqa64 %%zmm11, 192(%[acc])\n\t"
        "vmovdqa64 %%zmm12, 256(%[acc])\n\t"
        "vmovdqa64 %%zmm13, 320(%[acc])\n\t"
        "vmovdqa64 %%zmm14, 384(%[acc])\n\t"
        "vmovdqa64 %%zmm15, 448(%[acc])\n\t"
        "vmovdqa64 %%zmm16, 512(%[acc])\n\t"
        "vmovdqa64 %%zmm17, 576(%[acc])\n\t"
        "vmovdqa64 %%zmm18, 640(%[acc])\n\t"
        "vmovdqa64 %%zmm19, 704(%[acc])\n\t"
        "vmovdqa64 %%zmm20, 768(%[acc])\n\t"
        "vmovdqa64 %%zmm21, 832(%[acc])\n\t"
        "vmovdqa64 %%zmm22, 896(%[acc])\n\t"
        "vmovdqa64 %%zmm23, 960(%[acc])\n\t"
        : [lp] "+r"(lp)
        : [le] "r"(le), [ar] "r"(ar), [tp] "r"(TP), [ik] "r"(ik), [mk] "r"(mk), [acc] "r"(acc)
        : "rax", "rcx", "rdx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
          "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1",
          "k2", "k3", "k4", "k5", "k6", "k7", "cc", "memory");
}
#endif

/* The k's of a chunk [c0, c1) (c1 - c0 <= 128) of row ar whose code is not 0, as offsets from c0
 * into lst; returns how many (lc_vb_rows leaves the others out where the table's row 0 is all
 * zeros: a product of 0 adds nothing, and the chunk's count of products kc is the kept count). */
LC_AI int64_t lc_vb_nonzero(uint8_t *lst, const uint8_t *ar, int64_t c0, int64_t c1) {
    int64_t n = 0;
    for (int64_t h = c0; h < c1; h += 64) {
        const int64_t cnt = c1 - h < 64 ? c1 - h : 64;
        const __mmask64 lanes = cnt >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << cnt) - 1);
        const __m512i v = lc_x_maskz_loadu_epi8(lanes, ar + h);
        uint64_t nz = (uint64_t)_mm512_test_epi8_mask(v, v);
        while (nz) {
            lst[n++] = (uint8_t)(h - c0 + __builtin_ctzll(nz));
            nz &= nz - 1;
        }
    }
    return n;
}

/* rows of C for NG groups of 64 columns (NG a constant at each call) */
LC_AI void lc_vb_rows(int32_t *C, int64_t ldc, const uint8_t *A, int64_t lda, const uint8_t *TP,
                             const uint8_t *idx, const uint64_t *msk, int64_t rows, int nc, int64_t kn, const int NG,
                             int skip0) {
    int32_t acc[LC_VB_NB] __attribute__((aligned(64)));
    uint8_t lst[LC_VB_KC];
    const __m512i z = _mm512_setzero_si512();
    for (int64_t m = 0; m < rows; m++) {
        const uint8_t *ar = A + m * lda;
        if (kn == 0) memset(acc, 0, sizeof(acc));
        for (int64_t c0 = 0; c0 < kn; c0 += LC_VB_KC) {
            int64_t c1 = c0 + LC_VB_KC < kn ? c0 + LC_VB_KC : kn;
            /* skip0: leave out the k's of code 0 when at least an eighth of the chunk has it */
            int64_t kc = c1 - c0, nl = -1;
            if (skip0) {
                const int64_t nk = lc_vb_nonzero(lst, ar, c0, c1);
                if (8 * nk <= 7 * kc) nl = nk, kc = nk;
            }
            __m512i f0 = z, o0 = z, g0 = z, p0 = z, f1 = z, o1 = z, g1 = z, p1 = z;
            __m512i f2 = z, o2 = z, g2 = z, p2 = z, f3 = z, o3 = z, g3 = z, p3 = z;
#if !defined(LC_SIMDE)
            if (NG == 4 && nl != 0) {
                __m512i a16[16] __attribute__((aligned(64))) = {f0, o0, g0, p0, f1, o1, g1, p1,
                                                                f2, o2, g2, p2, f3, o3, g3, p3};
                if (nl < 0)
                    lc_vb_loop4(ar + c0, ar + c1, TP, idx + c0 * 256, msk + c0 * 8, a16);
                else
                    lc_vb_loop4_list(ar + c0, lst, lst + nl, TP, idx + c0 * 256, msk + c0 * 8, a16);
                f0 = a16[0], o0 = a16[1], g0 = a16[2], p0 = a16[3], f1 = a16[4], o1 = a16[5], g1 = a16[6];
                p1 = a16[7], f2 = a16[8], o2 = a16[9], g2 = a16[10], p2 = a16[11], f3 = a16[12], o3 = a16[13];
                g3 = a16[14], p3 = a16[15];
            }
#endif
            const int64_t jn = NG == 4 && !LC_VB_SIMDE ? 0 : nl < 0 ? c1 - c0 : nl;
            for (int64_t j = 0; j < jn; j++) {
                const int64_t k = nl < 0 ? c0 + j : c0 + lst[j];
                const uint8_t *row = TP + (int64_t)ar[k] * 512;
                __m512i l0 = _mm512_loadu_si512((const void *)(row + 0)), l1 = _mm512_loadu_si512((const void *)(row + 64));
                __m512i l2 = _mm512_loadu_si512((const void *)(row + 128)), l3 = _mm512_loadu_si512((const void *)(row + 192));
                __m512i h0 = _mm512_loadu_si512((const void *)(row + 256)), h1 = _mm512_loadu_si512((const void *)(row + 320));
                __m512i h2 = _mm512_loadu_si512((const void *)(row + 384)), h3 = _mm512_loadu_si512((const void *)(row + 448));
                const uint8_t *ik = idx + k * NG * 64;
                const uint64_t *mk = msk + k * NG * 2;
#define LC_VB_GROUP(g, F, O, G, P)                                                                       \
    {                                                                                                    \
        __m512i i = _mm512_load_si512((const void *)(ik + 64 * (g)));                                    \
        __mmask64 n7 = (__mmask64)mk[2 * (g)], b7 = (__mmask64)mk[2 * (g) + 1];                          \
        __m512i lo = _mm512_mask2_permutex2var_epi8(l2, _mm512_mask2_permutex2var_epi8(l0, i, n7, l1), b7, l3); \
        __m512i hi = _mm512_mask2_permutex2var_epi8(h2, _mm512_mask2_permutex2var_epi8(h0, i, n7, h1), b7, h3); \
        F = _mm512_add_epi16(F, lo);                                                                     \
        O = _mm512_add_epi16(O, _mm512_srli_epi16(lo, 8));                                               \
        G = _mm512_add_epi16(G, hi);                                                                     \
        P = _mm512_add_epi16(P, _mm512_srli_epi16(hi, 8));                                               \
    }
                LC_VB_GROUP(0, f0, o0, g0, p0)
                if (NG > 1) LC_VB_GROUP(1, f1, o1, g1, p1)
                if (NG > 2) LC_VB_GROUP(2, f2, o2, g2, p2)
                if (NG > 3) LC_VB_GROUP(3, f3, o3, g3, p3)
#undef LC_VB_GROUP
            }
            int first = c0 == 0;
            lc_vb_flush(acc, f0, o0, g0, p0, kc, first);
            if (NG > 1) lc_vb_flush(acc + 64, f1, o1, g1, p1, kc, first);
            if (NG > 2) lc_vb_flush(acc + 128, f2, o2, g2, p2, kc, first);
            if (NG > 3) lc_vb_flush(acc + 192, f3, o3, g3, p3, kc, first);
        }
        int32_t *c = C + m * ldc;
        for (int q = 0; q * 16 < nc; q++)
            lc_x_mask_storeu_epi32(c + q * 16, lc_x_mask(nc - q * 16), _mm512_load_si512((const void *)(acc + 16 * q)));
    }
}

/* The staged form of B's columns n0 .. n0 + nc (<= 256) for k0 <= k < k1: idx (kn, ng, 64)
 * then msk (kn, ng, 2), ng = ceil(nc / 64), as the row loop reads them (lc_table_stage_bytes
 * bytes at S, 64-byte aligned).  table_unit stages per call; a packed B (gemm.h
 * lc_table_pack_b) holds it once per weight. */
size_t LC_BODY(table_stage_bytes)(int64_t kn, int nc) {
    int ng = (nc + 63) / 64;
    return (size_t)(kn > 0 ? kn : 0) * (size_t)ng * (64 + 2 * sizeof(uint64_t));
}

void LC_BODY(table_stage)(uint8_t *S, const int8_t *B, int64_t ldb, int64_t n0, int nc, int64_t k0, int64_t k1) {
    int64_t kn = k1 - k0;
    int ng = (nc + 63) / 64;
    uint8_t *idx = S;
    uint64_t *msk = (uint64_t *)(S + (size_t)(kn > 0 ? kn : 0) * (size_t)ng * 64);
    uint8_t src[64];
    for (int p = 0; p < 64; p++) src[p] = (uint8_t)lc_vb_col(p);
    const __m512i perm = _mm512_loadu_si512((const void *)src);
    for (int64_t k = 0; k < kn; k++) {
        const uint8_t *bk = (const uint8_t *)(B + (k0 + k) * ldb + n0);
        for (int g = 0; g < ng; g++) {
            int cols = nc - 64 * g;
            __m512i v;
            if (cols >= 64) {
                v = _mm512_loadu_si512((const void *)(bk + 64 * g));
            } else {
                uint8_t t[64] = {0};
                memcpy(t, bk + 64 * g, (size_t)cols);
                v = _mm512_loadu_si512((const void *)t);
            }
            v = _mm512_permutexvar_epi8(perm, v);
            _mm512_store_si512((void *)(idx + (k * ng + g) * 64), v);
            uint64_t b7 = (uint64_t)_mm512_movepi8_mask(v);
            msk[(k * ng + g) * 2] = ~b7;
            msk[(k * ng + g) * 2 + 1] = b7;
        }
    }
}

/* C (rows, nc) from a staged B of kn k (table_stage's S); A's rows start at their k0 */
int LC_BODY(table_unit_staged)(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *S,
                               const int16_t *T16, int64_t rows, int nc, int64_t kn) {
    int ng = (nc + 63) / 64;
    if (nc > LC_VB_NB || nc < 1) return -1;
    const uint8_t *idx = S, *TP = (const uint8_t *)T16, *Au = (const uint8_t *)A;
    const uint64_t *msk = (const uint64_t *)(S + (size_t)(kn > 0 ? kn : 0) * (size_t)ng * 64);
    /* a table whose row 0 is all zeros (a * 0 for the exact table, Mitchell, most approximate
     * multipliers): the k's of code 0 (a ReLU's zeros, the padding) add nothing and are left out */
    int skip0 = 1;                                   /* products 0: low byte 0, high byte ^ 0x80 = 0x80 */
    for (int x = 0; x < 256; x++) skip0 &= TP[x] == 0 && TP[256 + x] == 0x80;
    switch (ng) {
    case 1: lc_vb_rows(C, ldc, Au, lda, TP, idx, msk, rows, nc, kn, 1, skip0); break;
    case 2: lc_vb_rows(C, ldc, Au, lda, TP, idx, msk, rows, nc, kn, 2, skip0); break;
    case 3: lc_vb_rows(C, ldc, Au, lda, TP, idx, msk, rows, nc, kn, 3, skip0); break;
    default: lc_vb_rows(C, ldc, Au, lda, TP, idx, msk, rows, nc, kn, 4, skip0); break;
    }
    return 0;
}

int LC_BODY(table_unit)(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                        const int16_t *T16, int64_t rows, int64_t n0, int nc, int64_t k0, int64_t k1) {
    int64_t kn = k1 - k0;
    if (nc > LC_VB_NB) return -1;
    size_t bytes = LC_BODY(table_stage_bytes)(kn > 0 ? kn : 1, nc);
    uint8_t *S = (uint8_t *)lc_aligned_alloc(bytes);
    if (!S) return -1;
    LC_BODY(table_stage)(S, B, ldb, n0, nc, k0, k1);
    int r = LC_BODY(table_unit_staged)(C, ldc, A + k0, lda, S, T16, rows, nc, kn);
    lc_aligned_free(S);
    return r;
}

#endif /* LC_X86 */
