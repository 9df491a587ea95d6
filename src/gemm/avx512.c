/* src/gemm/avx512.c — the gemm family's AVX-512 F/BW/VL/DQ bodies (no VNNI).
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
 */
#define LC_BODY_ISA avx512
#include "x86_simd.h"

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

#endif /* LC_X86 */
