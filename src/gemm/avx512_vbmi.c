/* src/gemm/avx512_vbmi.c — the gemm family's any-table body on AVX-512 VBMI + VNNI.
 *
 * Design: compiled alone with AVX-512 F/BW/VL/DQ + VBMI + VNNI flags (setup.py),
 * and once more against SIMDe for the tests (simde_avx512_vbmi.c); dispatched
 * where the CPU reports both (avx512.c's vpermi2w body otherwise).
 *
 * The table as two byte planes (a mul8 product is an int16, DESIGN.md): row a
 * = 256 low bytes + 256 high bytes = 8 zmm, held in registers while one output
 * row's 128 columns (8 int32 accumulators) take the products of one k.  Per 64
 * columns: four two-source byte permutes (vpermi2b: 128 entries, index bits
 * 0-6) and two masked blends (bit 7) give the 64 low and the 64 high bytes;
 * two byte unpacks make them 64 int16 products, and four vpdpwssd against
 * (1,0) / (0,1) add the even / odd words into int32 (exact).  The unpacks work
 * within 128-bit lanes, so the unit's B indices are staged pre-arranged (byte p
 * of a group holds column lc_vb_col(p)): accumulator q then holds columns
 * 16q..16q+15 in order.
 *
 *   TP    uint8 (256, 2, 256)   TP[a][0][b] / TP[a][1][b]: low / high byte   IN (the driver's Pbuf)
 *   idx   uint8 (kn, 2, 64)     B[k, n0 + g*64 + lc_vb_col(p)]               scratch
 *   msk   uint64 (kn, 2)        their bit 7 (the blends' masks: loads, not ALU ops) scratch
 *   C     int32 (rows, nc <= 128) rows ldc apart                             OUT
 */
#define LC_BODY_ISA avx512vbmi
#include "x86_simd.h"

#if LC_X86

/* byte p of a 64-column group -> its column: unpacklo/hi (h) of 128-bit lane l, word j */
static inline int lc_vb_col(int p) {
    int l = p / 16, h = (p % 16) / 8, j = p % 8;
    return 32 * h + 16 * (j & 1) + 4 * l + j / 2;
}

int LC_BODY(table_unit)(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                        const int16_t *T16, int64_t rows, int64_t n0, int nc, int64_t k0, int64_t k1) {
    int64_t kn = k1 - k0;
    uint8_t *idx = (uint8_t *)lc_aligned_alloc((size_t)(kn > 0 ? kn : 1) * 128);
    uint64_t *msk = (uint64_t *)malloc((size_t)(kn > 0 ? kn : 1) * 2 * sizeof(uint64_t));
    if (!idx || !msk) {
        lc_aligned_free(idx);
        free(msk);
        return -1;
    }
    int src[64];
    for (int p = 0; p < 64; p++) src[p] = lc_vb_col(p);
    for (int64_t k = 0; k < kn; k++) {
        const uint8_t *bk = (const uint8_t *)(B + (k0 + k) * ldb + n0);
        for (int g = 0; g < 2; g++) {
            uint64_t b7 = 0;
            for (int p = 0; p < 64; p++) {
                int col = g * 64 + src[p];
                uint8_t b = col < nc ? bk[col] : 0;
                idx[k * 128 + g * 64 + p] = b;
                b7 |= (uint64_t)(b >> 7) << p;
            }
            msk[k * 2 + g] = b7;
        }
    }
    const uint8_t *TP = (const uint8_t *)T16;
    const __m512i w_even = _mm512_set1_epi32(1), w_odd = _mm512_set1_epi32(0x10000);
    int ng = nc > 64 ? 2 : 1;
    for (int64_t m = 0; m < rows; m++) {
        const uint8_t *ar = (const uint8_t *)(A + m * lda + k0);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int64_t k = 0; k < kn; k++) {
            const uint8_t *row = TP + (int64_t)ar[k] * 512;
            __m512i l0 = _mm512_loadu_si512((const void *)(row + 0)), l1 = _mm512_loadu_si512((const void *)(row + 64));
            __m512i l2 = _mm512_loadu_si512((const void *)(row + 128)), l3 = _mm512_loadu_si512((const void *)(row + 192));
            __m512i h0 = _mm512_loadu_si512((const void *)(row + 256)), h1 = _mm512_loadu_si512((const void *)(row + 320));
            __m512i h2 = _mm512_loadu_si512((const void *)(row + 384)), h3 = _mm512_loadu_si512((const void *)(row + 448));
            const uint8_t *ik = idx + k * 128;
            const uint64_t *mk = msk + k * 2;
#define LC_VB_GROUP(g, sa, sb, sc, sd)                                                                  \
    {                                                                                                   \
        __m512i i = _mm512_load_si512((const void *)(ik + 64 * (g)));                                   \
        __mmask64 b7 = (__mmask64)mk[g];                                                                \
        __m512i lo = _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(l0, i, l1),                    \
                                            _mm512_permutex2var_epi8(l2, i, l3));                       \
        __m512i hi = _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(h0, i, h1),                    \
                                            _mm512_permutex2var_epi8(h2, i, h3));                       \
        __m512i u0 = _mm512_unpacklo_epi8(lo, hi), u1 = _mm512_unpackhi_epi8(lo, hi);                   \
        sa = _mm512_dpwssd_epi32(sa, u0, w_even);                                                       \
        sb = _mm512_dpwssd_epi32(sb, u0, w_odd);                                                        \
        sc = _mm512_dpwssd_epi32(sc, u1, w_even);                                                       \
        sd = _mm512_dpwssd_epi32(sd, u1, w_odd);                                                        \
    }
            LC_VB_GROUP(0, s0, s1, s2, s3)
            if (ng > 1) LC_VB_GROUP(1, s4, s5, s6, s7)
#undef LC_VB_GROUP
        }
        int32_t *c = C + m * ldc;
        __m512i out[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
        for (int q = 0; q < 8 && q * 16 < nc; q++)
            lc_x_mask_storeu_epi32(c + q * 16, lc_x_mask(nc - q * 16), out[q]);
    }
    lc_aligned_free(idx);
    free(msk);
    return 0;
}

#endif /* LC_X86 */
