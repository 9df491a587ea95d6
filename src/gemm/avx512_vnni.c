/* src/gemm/avx512_vnni.c — the gemm family's AVX-512 VNNI bodies (vpdpbusd).
 *
 * Design: compiled alone with AVX-512 F/BW/VL/DQ + VNNI flags (setup.py), and
 * once more against SIMDe for the tests (simde_avx512_vnni.c); dispatched only
 * where the CPU reports avx512_vnni.
 *
 * vpdpbusd multiplies unsigned by signed bytes, four k at a time.  B's codes
 * are made unsigned with +128 (b ^ 0x80), so a lane sums a * (b + 128) over k;
 * the row sum 128 * sum_k a (per row and block, taken when A is converted) is
 * subtracted: a*b exactly (the arithmetic is modular, so the difference is
 * exact whenever the result fits int32, as the contract's sums do).  A, the
 * signed operand, is the one broadcast from memory ({1to16}).
 *
 * Layouts: B is read in gemm.h's packed panels (16 columns x k-pairs); two
 * consecutive pairs are one 64-byte load, and one vpermw moves lane c's four
 * bytes (b[k..k+3] of column c) together.  A's unit rows are converted once
 * per work unit into bytes, each block padded to a multiple of 4 with zeros
 * (a zero code adds nothing whatever B holds there):
 *
 *   au   int8  (rows, nblk, bq4)   bq4 = round_up(bkp, 4)     scratch
 *   rs   int32 (rows, nblk)        128 * sum of the block's a  scratch
 *   C    int32 (rows, ncols)  /  Y float (rows, ncols)          OUT
 * Tiles: 12 rows x 2 panels (24 zmm accumulators, 2 B vectors); the
 * block-scaled tile keeps its float sums in an L1 tile.  The float fold is the
 * generic one: y = y + (sa*sb) * (float)I, block by block.
 */
#define LC_BODY_ISA avx512vnni
#include "x86_simd.h"

#if LC_X86

/* lane c of the result = bytes (b[k], b[k+1]) of word c and (b[k+2], b[k+3]) of word 16 + c */
static inline __m512i vnni_quad_index(void) {
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                            23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

/* acc += (unsigned bytes of v) . (the 4 signed bytes at p, broadcast).  Native: one
 * instruction with the broadcast from memory, written out because GCC 12 keeps the
 * intrinsic's operands in zmm0-15 and spills a 24-accumulator tile. */
#if defined(LC_SIMDE)
#define LC_DPB(acc, p, v) acc = _mm512_dpbusd_epi32(acc, v, _mm512_set1_epi32(lc_x_ld32(p)))
#else
#define LC_DPB(acc, p, v) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*(const int32_t *)(p)))
#endif

#define LC_DECL_I(r) __m512i c##r##_0 = _mm512_setzero_si512(), c##r##_1 = c##r##_0;
#define LC_ZERO_I(r) c##r##_0 = c##r##_1 = _mm512_setzero_si512();
#define LC_VNNI_ROW(r)                                                                                 \
    if (r < R) {                                                                                       \
        LC_DPB(c##r##_0, a + r * lda + 4 * q, v0);                                                     \
        if (NP > 1) LC_DPB(c##r##_1, a + r * lda + 4 * q, v1);                                         \
    }
/* np pairs from pair p0 of the panels at b; a points at the block's bytes in au.
 * A last single pair (np odd) is loaded as its 32 bytes, zeros above. */
#define LC_VNNI_ACCUM(REP, p0, np)                                                                     \
    do {                                                                                               \
        int64_t nq = ((np) + 1) / 2;                                                                   \
        for (int64_t q = 0; q < nq; q++) {                                                             \
            __mmask8 m = 2 * q + 1 < (np) ? (__mmask8)0xff : (__mmask8)0x0f;                           \
            const int8_t *bq = b + ((p0) + 2 * q) * 32;                                                \
            __m512i v0 = _mm512_xor_si512(_mm512_permutexvar_epi16(idx, lc_x_maskz_loadu_epi64(m, bq)), x80); \
            __m512i v1 = NP > 1 ? _mm512_xor_si512(_mm512_permutexvar_epi16(                           \
                                      idx, lc_x_maskz_loadu_epi64(m, bq + pstride)), x80) : v0;      \
            REP(LC_VNNI_ROW)                                                                           \
        }                                                                                              \
    } while (0)
#define LC_STORE_I(r)                                                                                  \
    if (r < R) {                                                                                       \
        __m512i s = _mm512_set1_epi32(rs[r]);                                                          \
        lc_x_mask_storeu_epi32(C + r * ldc, m0, _mm512_sub_epi32(c##r##_0, s));                      \
        if (NP > 1) lc_x_mask_storeu_epi32(C + r * ldc + 16, m1, _mm512_sub_epi32(c##r##_1, s));     \
    }
/* y = y + (sa[r] * sb) * (float)I, the generic fold, into the L1 tile yt (rows of 32) */
#define LC_FOLD(r)                                                                                     \
    if (r < R) {                                                                                       \
        __m512 s = _mm512_set1_ps(sa[r * nblk + blk]);                                                 \
        __m512i o = _mm512_set1_epi32(rs[r * nblk + blk]);                                             \
        __m512 i0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(c##r##_0, o));                                 \
        _mm512_store_ps(yt + r * 32, _mm512_add_ps(_mm512_load_ps(yt + r * 32), _mm512_mul_ps(_mm512_mul_ps(s, sb0), i0))); \
        if (NP > 1) {                                                                                  \
            __m512 i1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(c##r##_1, o));                             \
            _mm512_store_ps(yt + r * 32 + 16,                                                          \
                            _mm512_add_ps(_mm512_load_ps(yt + r * 32 + 16), _mm512_mul_ps(_mm512_mul_ps(s, sb1), i1))); \
        }                                                                                              \
    }

LC_AI void vnni_exact_tile(int32_t *C, int64_t ldc, const int8_t *a, int64_t lda, const int32_t *rs,
                           const int8_t *b, int64_t pstride, int64_t P, int nc, const int R, const int NP) {
    const __m512i idx = vnni_quad_index(), x80 = _mm512_set1_epi8((char)0x80);
    LC_X_REP12(LC_DECL_I)
    LC_VNNI_ACCUM(LC_X_REP12, 0, P);
    __mmask16 m0 = lc_x_mask(nc), m1 = NP > 1 ? lc_x_mask(nc - 16) : 0;
    LC_X_REP12(LC_STORE_I)
}

LC_AI void vnni_q_tile(float *Y, int64_t ldy, const int8_t *au, int64_t lda, const int32_t *rs, const float *sa,
                       const int8_t *b, int64_t pstride, const float *sbp, int64_t nblk, int64_t pb, int64_t bq4,
                       int nc, const int R, const int NP) {
    const __m512i idx = vnni_quad_index(), x80 = _mm512_set1_epi8((char)0x80);
    float yt[LC_XTR * 32] __attribute__((aligned(64)));
    for (int i = 0; i < R * 32; i++) yt[i] = 0.0f;
    LC_X_REP12(LC_DECL_I)
    for (int64_t blk = 0; blk < nblk; blk++) {
        const int8_t *a = au + blk * bq4;
        LC_X_REP12(LC_ZERO_I)
        LC_VNNI_ACCUM(LC_X_REP12, blk * pb, pb);
        __m512 sb0 = _mm512_loadu_ps(sbp + blk * LC_XNR);
        __m512 sb1 = NP > 1 ? _mm512_loadu_ps(sbp + nblk * LC_XNR + blk * LC_XNR) : sb0;
        LC_X_REP12(LC_FOLD)
    }
    __mmask16 m0 = lc_x_mask(nc), m1 = NP > 1 ? lc_x_mask(nc - 16) : 0;
    for (int r = 0; r < R; r++) {
        lc_x_mask_storeu_ps(Y + r * ldy, m0, _mm512_load_ps(yt + r * 32));
        if (NP > 1) lc_x_mask_storeu_ps(Y + r * ldy + 16, m1, _mm512_load_ps(yt + r * 32 + 16));
    }
}

typedef void (*vnni_exact_fn)(int32_t *, int64_t, const int8_t *, int64_t, const int32_t *, const int8_t *,
                              int64_t, int64_t, int);
typedef void (*vnni_q_fn)(float *, int64_t, const int8_t *, int64_t, const int32_t *, const float *, const int8_t *,
                          int64_t, const float *, int64_t, int64_t, int64_t, int);
#define LC_DEF_EXACT(R, NP)                                                                            \
    static void exact_##R##_##NP(int32_t *C, int64_t ldc, const int8_t *a, int64_t lda, const int32_t *rs, \
                                 const int8_t *b, int64_t ps, int64_t P, int nc) {                    \
        vnni_exact_tile(C, ldc, a, lda, rs, b, ps, P, nc, R, NP);                                     \
    }
#define LC_DEF_Q(R, NP)                                                                                \
    static void q_##R##_##NP(float *Y, int64_t ldy, const int8_t *a, int64_t lda, const int32_t *rs,     \
                             const float *sa, const int8_t *b, int64_t ps, const float *sbp, int64_t nblk, \
                             int64_t pb, int64_t bq4, int nc) {                                       \
        vnni_q_tile(Y, ldy, a, lda, rs, sa, b, ps, sbp, nblk, pb, bq4, nc, R, NP);                    \
    }
LC_X_ROWS(LC_DEF_EXACT, 1) LC_X_ROWS(LC_DEF_EXACT, 2)
LC_X_ROWS(LC_DEF_Q, 1) LC_X_ROWS(LC_DEF_Q, 2)
#define LC_NAME_EXACT(R, NP) , exact_##R##_##NP
#define LC_NAME_Q(R, NP) , q_##R##_##NP
static const vnni_exact_fn exact_tiles[2][LC_XTR + 1] = {{0 LC_X_ROWS(LC_NAME_EXACT, 1)},
                                                         {0 LC_X_ROWS(LC_NAME_EXACT, 2)}};
static const vnni_q_fn q_tiles[2][LC_XTR + 1] = {{0 LC_X_ROWS(LC_NAME_Q, 1)}, {0 LC_X_ROWS(LC_NAME_Q, 2)}};

/* au (rows, nblk * bq4) = the unit's rows of Ap as bytes, blocks zero-padded to bq4;
 * rs (rows, nblk) = 128 * each block's sum of codes */
static void vnni_pack_a(int8_t *au, int32_t *rs, const int16_t *Ap, int64_t Kp, int64_t rows, int64_t nblk,
                        int64_t bkp, int64_t bq4) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int16_t *s = Ap + r * Kp + blk * bkp;
            int8_t *d = au + (r * nblk + blk) * bq4;
            __m512i sum = _mm512_setzero_si512();
            int64_t j = 0;
            for (; j + 32 <= bkp; j += 32) {
                __m512i w = _mm512_loadu_si512((const void *)(s + j));
                _mm256_storeu_si256((__m256i *)(d + j), _mm512_cvtepi16_epi8(w));
                sum = _mm512_add_epi32(sum, _mm512_madd_epi16(w, _mm512_set1_epi16(1)));
            }
            int32_t lanes[16], t = 0;
            _mm512_storeu_si512((void *)lanes, sum);
            for (int i = 0; i < 16; i++) t += lanes[i];
            for (; j < bkp; j++) {
                d[j] = (int8_t)s[j];
                t += s[j];
            }
            for (j = bkp; j < bq4; j++) d[j] = 0;
            rs[r * nblk + blk] = t * 128;
        }
}

int LC_BODY(gemm_exact_unit)(int32_t *C, int64_t ldc, const int16_t *Ap, int64_t Kp, const int8_t *Bp,
                             int64_t rows, int64_t ncols) {
    int64_t P = Kp / 2, pstride = P * 32, Kq = (int64_t)lc_round_up((size_t)Kp, 4);
    int8_t *au = (int8_t *)lc_aligned_alloc((size_t)(rows * Kq) + (size_t)rows * 4 + 64);
    if (!au) return -1;
    int32_t *rs = (int32_t *)(au + lc_round_up((size_t)(rows * Kq), 64));
    vnni_pack_a(au, rs, Ap, Kp, rows, 1, Kp, Kq);
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        const int8_t *b = Bp + (n / LC_XNR) * pstride;
        for (int64_t r = 0; r < rows; r += LC_XTR) {
            int R = (int)(rows - r < LC_XTR ? rows - r : LC_XTR);
            exact_tiles[nc > LC_XNR][R](C + r * ldc + n, ldc, au + r * Kq, Kq, rs + r, b, pstride, P, nc);
        }
    }
    lc_aligned_free(au);
    return 0;
}

int LC_BODY(qmatmul_exact_unit)(float *Y, int64_t ldy, const int16_t *Ap, int64_t Kp, const float *sa,
                                const int8_t *Bp, const float *sbp, int64_t nblk, int64_t bkp, int64_t rows,
                                int64_t ncols) {
    int64_t pstride = Kp / 2 * 32, bq4 = (int64_t)lc_round_up((size_t)bkp, 4), lda = nblk * bq4;
    size_t abytes = lc_round_up((size_t)(rows * lda), 64);
    int8_t *au = (int8_t *)lc_aligned_alloc(abytes + (size_t)(rows * nblk) * 4 + 64);
    if (!au) return -1;
    int32_t *rs = (int32_t *)(au + abytes);
    vnni_pack_a(au, rs, Ap, Kp, rows, nblk, bkp, bq4);
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        const int8_t *b = Bp + (n / LC_XNR) * pstride;
        const float *sb = sbp + (n / LC_XNR) * nblk * LC_XNR;
        for (int64_t r = 0; r < rows; r += LC_XTR) {
            int R = (int)(rows - r < LC_XTR ? rows - r : LC_XTR);
            q_tiles[nc > LC_XNR][R](Y + r * ldy + n, ldy, au + r * lda, lda, rs + r * nblk, sa + r * nblk, b,
                                    pstride, sb, nblk, bkp / 2, bq4, nc);
        }
    }
    lc_aligned_free(au);
    return 0;
}

#endif /* LC_X86 */
