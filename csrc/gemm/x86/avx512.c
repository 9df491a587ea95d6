/* csrc/gemm/x86/avx512.c — the gemm family's AVX-512 F/BW/VL/DQ bodies (no VNNI).
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  Same contracts as gemm.h's
 * generic bodies; integer sums are exact, so only the float fold's order
 * matters, and it is the generic one: y = y + (sa*sb) * (float)I, per block.
 *
 * Exact path: the packed operands of gemm.h as they are — int16 rows of A,
 * int8 panels of 16 columns x k-pairs.  Per k-pair a panel widens to one zmm
 * of 16 (b[2p], b[2p+1]) int16 pairs; vpmaddwd against the row's broadcast
 * (a[2p], a[2p+1]) gives 16 exact int32 pair sums.  An 8-row x 2-panel tile
 * keeps 16 zmm accumulators (GCC spills a 12-row one); the block-scaled tile
 * keeps its float sums in an L1 tile.
 *
 *   C   int32 (rows, ncols) rows ldc apart                 OUT
 *   Ap  int16 (rows, Kp)                                    IN
 *   Bp  int8  (ceil(ncols/16), Kp/2, 16, 2) panels          IN
 *
 * Any table (table_unit): the table as int16 (a mul8 product is an int16,
 * docs/DESIGN.md), row a = T16[a][0..255] = 8 zmm held in registers while one output
 * row's 128 columns (16 int32 accumulators in registers) take the products of
 * one k: per 32 columns four two-source word permutes (vpermi2w: 64 entries,
 * index bits 0-5) and two levels of masked blends (bits 6 and 7); vpmaddwd
 * against (1,0) / (0,1) sign-extends the even / odd words into int32.  The B
 * indices of the unit are staged once, pre-arranged so that word 2i of a group
 * is column i and word 2i+1 column 16+i: the two accumulators of a group are
 * then columns 0-15 and 16-31 in order.  Each loaded table row serves a pass
 * of 128 columns (not 32, as the drivers' row-table blocks would: L2 traffic);
 * the drivers' 256-column unit (LC_TABLE_WNB, the VBMI body's width) is two passes.
 *
 *   idx   uint16 (kn, 4, 32)   B[k, n0 + col(g, w)] as unsigned bytes   scratch
 *   msk   uint32 (kn, 4, 2)    their bit 6 / bit 7 lane masks           scratch
 *   C     int32 (rows, nc <= 128) rows ldc apart (one pass)             OUT
 */
#define LC_BODY_ISA avx512
#include "gemm/x86/simd.h"

#if LC_X86

#define LC_BW_TR 8           /* rows per tile */

#define LC_DECL_I(r) __m512i c##r##_0 = _mm512_setzero_si512(), c##r##_1 = c##r##_0;
#define LC_ZERO_I(r) c##r##_0 = c##r##_1 = _mm512_setzero_si512();
/* one k-pair of row r: vpmaddwd against the broadcast (a[2p], a[2p+1]) */
#define LC_BW_ROW(r)                                                                                    \
    if (r < R) {                                                                                        \
        __m512i av = _mm512_set1_epi32(lc_x_ld32(a + r * lda + 2 * p));                                \
        c##r##_0 = _mm512_add_epi32(c##r##_0, _mm512_madd_epi16(av, b0));                               \
        if (NP > 1) c##r##_1 = _mm512_add_epi32(c##r##_1, _mm512_madd_epi16(av, b1));                   \
    }
/* rows R x panels NP over pairs [p0, p1) of the panels at b (pstride bytes apart) */
#define LC_BW_ACCUM(p0, p1)                                                                             \
    for (int64_t p = (p0); p < (p1); p++) {                                                             \
        __m512i b0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + p * 32)));           \
        __m512i b1 = NP > 1 ? _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + pstride + p * 32))) \
                            : b0;                                                                       \
        LC_X_REP8(LC_BW_ROW)                                                                            \
    }
#define LC_STORE_I(r)                                                                                   \
    if (r < R) {                                                                                        \
        lc_x_mask_storeu_epi32(C + r * ldc, m0, c##r##_0);                                            \
        if (NP > 1) lc_x_mask_storeu_epi32(C + r * ldc + 16, m1, c##r##_1);                           \
    }
/* y = y + (sa[r] * sb) * (float)I, the generic fold, into the L1 tile yt (rows of 32) */
#define LC_FOLD(r)                                                                                      \
    if (r < R) {                                                                                        \
        __m512 s = _mm512_set1_ps(sa[r * nblk + blk]);                                                  \
        _mm512_store_ps(yt + r * 32, _mm512_add_ps(_mm512_load_ps(yt + r * 32),                         \
                        _mm512_mul_ps(_mm512_mul_ps(s, sb0), _mm512_cvtepi32_ps(c##r##_0))));           \
        if (NP > 1)                                                                                     \
            _mm512_store_ps(yt + r * 32 + 16, _mm512_add_ps(_mm512_load_ps(yt + r * 32 + 16),           \
                            _mm512_mul_ps(_mm512_mul_ps(s, sb1), _mm512_cvtepi32_ps(c##r##_1))));       \
    }

LC_AI void bw_exact_tile(int32_t *C, int64_t ldc, const int16_t *a, int64_t lda, const int8_t *b,
                         int64_t pstride, int nc, const int R, const int NP) {
    LC_X_REP8(LC_DECL_I)
    LC_BW_ACCUM(0, lda / 2)
    __mmask16 m0 = lc_x_mask(nc), m1 = NP > 1 ? lc_x_mask(nc - 16) : 0;
    LC_X_REP8(LC_STORE_I)
}

/* The block-scaled tile: per block the int32 sums, folded as the generic fold does. */
LC_AI void bw_q_tile(float *Y, int64_t ldy, const int16_t *a, int64_t lda, const float *sa, const int8_t *b,
                     int64_t pstride, const float *sbp, int64_t nblk, int64_t pb, int nc, const int R,
                     const int NP) {
    float yt[LC_BW_TR * 32] __attribute__((aligned(64)));
    for (int i = 0; i < R * 32; i++) yt[i] = 0.0f;
    LC_X_REP8(LC_DECL_I)
    for (int64_t blk = 0; blk < nblk; blk++) {
        LC_X_REP8(LC_ZERO_I)
        LC_BW_ACCUM(blk * pb, (blk + 1) * pb)
        __m512 sb0 = _mm512_loadu_ps(sbp + blk * LC_XNR);
        __m512 sb1 = NP > 1 ? _mm512_loadu_ps(sbp + nblk * LC_XNR + blk * LC_XNR) : sb0;
        LC_X_REP8(LC_FOLD)
    }
    __mmask16 m0 = lc_x_mask(nc), m1 = NP > 1 ? lc_x_mask(nc - 16) : 0;
    for (int r = 0; r < R; r++) {
        lc_x_mask_storeu_ps(Y + r * ldy, m0, _mm512_load_ps(yt + r * 32));
        if (NP > 1) lc_x_mask_storeu_ps(Y + r * ldy + 16, m1, _mm512_load_ps(yt + r * 32 + 16));
    }
}

typedef void (*bw_exact_fn)(int32_t *, int64_t, const int16_t *, int64_t, const int8_t *, int64_t, int);
typedef void (*bw_q_fn)(float *, int64_t, const int16_t *, int64_t, const float *, const int8_t *, int64_t,
                        const float *, int64_t, int64_t, int);
#define LC_DEF_EXACT(R, NP)                                                                             \
    static void exact_##R##_##NP(int32_t *C, int64_t ldc, const int16_t *a, int64_t Kp, const int8_t *b,   \
                                 int64_t ps, int nc) { bw_exact_tile(C, ldc, a, Kp, b, ps, nc, R, NP); }
#define LC_DEF_Q(R, NP)                                                                                 \
    static void q_##R##_##NP(float *Y, int64_t ldy, const int16_t *a, int64_t Kp, const float *sa,        \
                             const int8_t *b, int64_t ps, const float *sbp, int64_t nblk, int64_t pb, int nc) { \
        bw_q_tile(Y, ldy, a, Kp, sa, b, ps, sbp, nblk, pb, nc, R, NP);                                 \
    }
LC_X_ROWS8(LC_DEF_EXACT, 1) LC_X_ROWS8(LC_DEF_EXACT, 2)
LC_X_ROWS8(LC_DEF_Q, 1) LC_X_ROWS8(LC_DEF_Q, 2)
#define LC_NAME_EXACT(R, NP) , exact_##R##_##NP
#define LC_NAME_Q(R, NP) , q_##R##_##NP
static const bw_exact_fn exact_tiles[2][LC_BW_TR + 1] = {{0 LC_X_ROWS8(LC_NAME_EXACT, 1)},
                                                         {0 LC_X_ROWS8(LC_NAME_EXACT, 2)}};
static const bw_q_fn q_tiles[2][LC_BW_TR + 1] = {{0 LC_X_ROWS8(LC_NAME_Q, 1)}, {0 LC_X_ROWS8(LC_NAME_Q, 2)}};

int LC_BODY(gemm_exact_unit)(int32_t *C, int64_t ldc, const int16_t *Ap, int64_t Kp, const int8_t *Bp,
                             int64_t rows, int64_t ncols) {
    int64_t pstride = Kp / 2 * 32;
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        const int8_t *b = Bp + (n / LC_XNR) * pstride;
        for (int64_t r = 0; r < rows; r += LC_BW_TR) {
            int R = (int)(rows - r < LC_BW_TR ? rows - r : LC_BW_TR);
            exact_tiles[nc > LC_XNR][R](C + r * ldc + n, ldc, Ap + r * Kp, Kp, b, pstride, nc);
        }
    }
    return 0;
}

int LC_BODY(qmatmul_exact_unit)(float *Y, int64_t ldy, const int16_t *Ap, int64_t Kp, const float *sa,
                                const int8_t *Bp, const float *sbp, int64_t nblk, int64_t bkp, int64_t rows,
                                int64_t ncols) {
    int64_t pstride = Kp / 2 * 32;
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        const int8_t *b = Bp + (n / LC_XNR) * pstride;
        const float *sb = sbp + (n / LC_XNR) * nblk * LC_XNR;
        for (int64_t r = 0; r < rows; r += LC_BW_TR) {
            int R = (int)(rows - r < LC_BW_TR ? rows - r : LC_BW_TR);
            q_tiles[nc > LC_XNR][R](Y + r * ldy + n, ldy, Ap + r * Kp, Kp, sa + r * nblk, b, pstride, sb, nblk,
                                    bkp / 2, nc);
        }
    }
    return 0;
}


/* ------------------------------------------------------------------ any table */
#define LC_TW 128            /* columns per pass: 4 groups of 32 */
/* bytes of one pass's staged B (idx then msk), a multiple of 64 */
static inline size_t lc_table_pass_bytes(int64_t kn) {
    return ((size_t)(kn > 0 ? kn : 0) * (LC_TW * sizeof(uint16_t) + 8 * sizeof(uint32_t)) + 63) & ~(size_t)63;
}

/* one pass's staged B: idx (kn, 4, 32) uint16, then msk (kn, 8) uint32, of columns n0 .. n0 + nc (<= 128) */
static void lc_table_pass_stage(uint8_t *S, const int8_t *B, int64_t ldb, int64_t n0, int nc, int64_t k0,
                                int64_t k1) {
    int64_t kn = k1 - k0;
    uint16_t *idx = (uint16_t *)S;
    uint32_t *msk = (uint32_t *)(S + (size_t)(kn > 0 ? kn : 0) * LC_TW * sizeof(uint16_t));
    for (int64_t k = 0; k < kn; k++) {
        const uint8_t *bk = (const uint8_t *)(B + (k0 + k) * ldb + n0);
        for (int g = 0; g < 4; g++) {
            uint32_t m6 = 0, m7 = 0;
            for (int w = 0; w < 32; w++) {
                int col = g * 32 + ((w & 1) ? 16 : 0) + (w >> 1);
                unsigned b = col < nc ? bk[col] : 0u;
                idx[k * LC_TW + g * 32 + w] = (uint16_t)b;
                m6 |= ((b >> 6) & 1u) << w;
                m7 |= ((b >> 7) & 1u) << w;
            }
            msk[k * 8 + 2 * g] = m6;
            msk[k * 8 + 2 * g + 1] = m7;
        }
    }
}

/* C (rows, nc <= 128) from one pass's staged B of kn k; A's rows start at their k0 */
static void lc_table_pass_rows(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *S,
                               const int16_t *T16, int64_t rows, int nc, int64_t kn) {
    const uint16_t *idx = (const uint16_t *)S;
    const uint32_t *msk = (const uint32_t *)(S + (size_t)(kn > 0 ? kn : 0) * LC_TW * sizeof(uint16_t));
    const __m512i w_even = _mm512_set1_epi32(1), w_odd = _mm512_set1_epi32(0x10000);
    int ng = (nc + 31) / 32;
    for (int64_t m = 0; m < rows; m++) {
        const uint8_t *ar = (const uint8_t *)(A + m * lda);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int64_t k = 0; k < kn; k++) {
            const int16_t *row = T16 + (int64_t)ar[k] * 256;
            __m512i r0 = _mm512_loadu_si512((const void *)(row + 0)), r1 = _mm512_loadu_si512((const void *)(row + 32));
            __m512i r2 = _mm512_loadu_si512((const void *)(row + 64)), r3 = _mm512_loadu_si512((const void *)(row + 96));
            __m512i r4 = _mm512_loadu_si512((const void *)(row + 128)), r5 = _mm512_loadu_si512((const void *)(row + 160));
            __m512i r6 = _mm512_loadu_si512((const void *)(row + 192)), r7 = _mm512_loadu_si512((const void *)(row + 224));
            const uint16_t *ik = idx + k * LC_TW;
            const uint32_t *mk = msk + k * 8;
#define LC_TB_GROUP(g, sa, sb)                                                                          \
    {                                                                                                   \
        __m512i i = _mm512_load_si512((const void *)(ik + 32 * (g)));                                   \
        __mmask32 b6 = (__mmask32)mk[2 * (g)], b7 = (__mmask32)mk[2 * (g) + 1];                         \
        __m512i lo = _mm512_mask_blend_epi16(b6, _mm512_permutex2var_epi16(r0, i, r1),                  \
                                             _mm512_permutex2var_epi16(r2, i, r3));                     \
        __m512i hi = _mm512_mask_blend_epi16(b6, _mm512_permutex2var_epi16(r4, i, r5),                  \
                                             _mm512_permutex2var_epi16(r6, i, r7));                     \
        __m512i v = _mm512_mask_blend_epi16(b7, lo, hi);                                                \
        sa = _mm512_add_epi32(sa, _mm512_madd_epi16(v, w_even));                                        \
        sb = _mm512_add_epi32(sb, _mm512_madd_epi16(v, w_odd));                                         \
    }
            LC_TB_GROUP(0, s0, s1)
            if (ng > 1) LC_TB_GROUP(1, s2, s3)
            if (ng > 2) LC_TB_GROUP(2, s4, s5)
            if (ng > 3) LC_TB_GROUP(3, s6, s7)
#undef LC_TB_GROUP
        }
        int32_t *c = C + m * ldc;
        __m512i out[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
        for (int q = 0; q < 8 && q * 16 < nc; q++)
            lc_x_mask_storeu_epi32(c + q * 16, lc_x_mask(nc - q * 16), out[q]);
    }
}

/* The staged form of a unit's columns n0 .. n0 + nc (<= LC_TABLE_WNB = 256) for k0 <= k < k1:
 * its passes of LC_TW columns one after the other (lc_table_pass_bytes(kn) apart), as the row
 * loop reads them.  table_unit stages per call; a packed B (gemm/table_packed.h lc_table_pack_b) holds it
 * once per weight. */
size_t LC_BODY(table_stage_bytes)(int64_t kn, int nc) {
    return (size_t)((nc + LC_TW - 1) / LC_TW) * lc_table_pass_bytes(kn);
}

void LC_BODY(table_stage)(uint8_t *S, const int8_t *B, int64_t ldb, int64_t n0, int nc, int64_t k0, int64_t k1) {
    for (int c = 0; c < nc; c += LC_TW)
        lc_table_pass_stage(S + (size_t)(c / LC_TW) * lc_table_pass_bytes(k1 - k0), B, ldb, n0 + c,
                            nc - c < LC_TW ? nc - c : LC_TW, k0, k1);
}

int LC_BODY(table_unit_staged)(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *S,
                               const int16_t *T16, int64_t rows, int nc, int64_t kn) {
    if (nc > 2 * LC_TW) return -1;
    for (int c = 0; c < nc; c += LC_TW)
        lc_table_pass_rows(C + c, ldc, A, lda, S + (size_t)(c / LC_TW) * lc_table_pass_bytes(kn), T16, rows,
                           nc - c < LC_TW ? nc - c : LC_TW, kn);
    return 0;
}

/* the drivers' unit (nc <= LC_TABLE_WNB = 256) as passes of LC_TW columns, each staged here */
int LC_BODY(table_unit)(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                        const int16_t *T16, int64_t rows, int64_t n0, int nc, int64_t k0, int64_t k1) {
    int64_t kn = k1 - k0;
    size_t bytes = lc_table_pass_bytes(kn > 0 ? kn : 1);
    uint8_t *S = (uint8_t *)lc_aligned_alloc(bytes);
    if (!S) return -1;
    for (int c = 0; c < nc; c += LC_TW) {
        int w = nc - c < LC_TW ? nc - c : LC_TW;
        lc_table_pass_stage(S, B, ldb, n0 + c, w, k0, k1);
        lc_table_pass_rows(C + c, ldc, A + k0, lda, S, T16, rows, w, kn);
    }
    lc_aligned_free(S);
    return 0;
}

#endif /* LC_X86 */
