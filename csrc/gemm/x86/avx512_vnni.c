/* csrc/gemm/x86/avx512_vnni.c — the gemm family's AVX-512 VNNI bodies (vpdpbusd).
 *
 * Design: compiled alone with AVX-512 F/BW/VL/DQ + VNNI flags (setup.py), and
 * once more against SIMDe for the tests (simde_avx512_vnni.c); dispatched only
 * where the CPU reports avx512_vnni.
 *
 * vpdpbusd multiplies unsigned by signed bytes, four k at a time.  B's codes
 * are made unsigned with +128 (b ^ 0x80), so a lane sums a * (b + 128) over k;
 * the accumulators start at -128 * sum_k a (per row and block, taken when A is
 * converted): they end at a*b exactly (the arithmetic is modular, so the result
 * is exact whenever it fits int32, as the contract's sums do).  A, the signed
 * operand, is broadcast (a register broadcast: GCC keeps 24 accumulators then).
 *
 * Layouts: B is read from gemm.h's packed panels (16 columns x k-pairs): two
 * consecutive pairs are one 64-byte load, and one vpermw moves lane c's four
 * bytes (b[k..k+3] of column c) together; a pair of panels converted so (bq,
 * with the ^ 0x80) is streamed by many row tiles.  A's rows are converted into
 * bytes, each block padded to a multiple of 4 with zeros (a zero code adds
 * nothing whatever B holds there), 12-row tile by tile with the tile's rows
 * interleaved per k-quad (a tile reads one contiguous 48-byte run per quad, not
 * 12 rows' cache lines: ~20% of the tile's speed at K >= 256):
 *
 *   au   int8  tiles of (nblk * bq4 / 4, R, 4)  bq4 = round_up(bkp, 4)   scratch
 *   rs   int32 (rows, nblk)       -128 * sum of the block's a           scratch
 *   bq   uint8 (2, nblk, bq4/4, 64) two panels' quads                   scratch
 *   C    int32 (rows, ncols)  /  Y float (rows, ncols)                   OUT
 * Whole calls (M > 4, see "whole calls" below) convert both operands once per
 * call; the per-unit entry points (units of <= 4 rows read B's panels directly,
 * and single tiles from gemm.h's fallbacks) convert per unit.
 * Tiles: 12 rows x 2 panels (24 zmm accumulators, 2 B vectors); the
 * block-scaled tile keeps its float sums in an L1 tile.  The float fold is the
 * generic one: y = y + (sa*sb) * (float)I, block by block.
 */
#define LC_BODY_ISA avx512vnni
#include "gemm/x86/simd.h"

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
#define LC_DPB(acc, av, v) acc = _mm512_dpbusd_epi32(acc, v, av)
#else
#define LC_DPB(acc, av, v) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(v), "v"(av))
#endif

/* the accumulators start at rs = -128 * (the row's sum of a), so they end at the sum of a * b */
#define LC_DECL_I(r) __m512i c##r##_0 = _mm512_setzero_si512(), c##r##_1 = c##r##_0;
#define LC_INIT_I(r, o) if (r < R) c##r##_0 = c##r##_1 = _mm512_set1_epi32(o);   /* a broadcast load, no ALU op */
#define LC_VNNI_ROW(r)                                                                                 \
    if (r < R) {                                                                                       \
        __m512i av = _mm512_set1_epi32(lc_x_ld32(a + 4 * (q * R + r)));                                \
        LC_DPB(c##r##_0, av, v0);                                                                      \
        if (NP > 1) LC_DPB(c##r##_1, av, v1);                                                          \
    }
/* nq quads from quad q0 of the converted panels at b (bstride bytes apart) */
#define LC_VNNI_ACCUM(REP, q0, nq)                                                                     \
    for (int64_t q = 0; q < (nq); q++) {                                                               \
        __m512i v0 = _mm512_load_si512((const void *)(b + ((q0) + q) * 64));                           \
        __m512i v1 = NP > 1 ? _mm512_load_si512((const void *)(b + bstride + ((q0) + q) * 64)) : v0;   \
        REP(LC_VNNI_ROW)                                                                               \
    }
/* bytes ahead of the direct tiles' loads that are prefetched: a GEMV row streams its panels
 * once, from L3 or memory, and is bound by the misses in flight (a prefetch does not change bits) */
#ifndef LC_DPF
#define LC_DPF 1024
#endif
/* the same from gemm.h's packed panels as they are (pairs from pair p0, np of them), each quad
 * permuted as it is loaded: for a few rows, where converting B first would cost more than it saves */
#define LC_VNNI_ACCUM_DIRECT(REP, p0, np)                                                              \
    for (int64_t q = 0; q < ((np) + 1) / 2; q++) {                                                     \
        __mmask8 m = 2 * q + 1 < (np) ? (__mmask8)0xff : (__mmask8)0x0f;                               \
        const int8_t *bp_ = (const int8_t *)b + ((p0) + 2 * q) * 32;                                   \
        _mm_prefetch((const char *)bp_ + LC_DPF, _MM_HINT_T0);                                         \
        if (NP > 1) _mm_prefetch((const char *)bp_ + bstride + LC_DPF, _MM_HINT_T0);                   \
        __m512i v0 = _mm512_xor_si512(_mm512_permutexvar_epi16(idx, lc_x_maskz_loadu_epi64(m, bp_)), x80); \
        __m512i v1 = NP > 1 ? _mm512_xor_si512(_mm512_permutexvar_epi16(                               \
                                  idx, lc_x_maskz_loadu_epi64(m, bp_ + bstride)), x80) : v0;           \
        REP(LC_VNNI_ROW)                                                                               \
    }
#define LC_EXACT_INIT(r) LC_INIT_I(r, rs[r])
#define LC_Q_INIT(r) LC_INIT_I(r, rs[r * nblk + blk])
#define LC_STORE_I(r)                                                                                  \
    if (r < R) {                                                                                       \
        lc_x_mask_storeu_epi32(C + r * ldc, m0, c##r##_0);                                           \
        if (NP > 1) lc_x_mask_storeu_epi32(C + r * ldc + 16, m1, c##r##_1);                          \
    }
/* y = y + (sa[r] * sb) * (float)I, the generic fold, into the L1 tile yt (rows of 32) */
#define LC_FOLD(r)                                                                                     \
    if (r < R) {                                                                                       \
        __m512 s = _mm512_set1_ps(sa[r * nblk + blk]);                                                 \
        __m512 i0 = _mm512_cvtepi32_ps(c##r##_0);                                                      \
        _mm512_store_ps(yt + r * 32, _mm512_add_ps(_mm512_load_ps(yt + r * 32), _mm512_mul_ps(_mm512_mul_ps(s, sb0), i0))); \
        if (NP > 1) {                                                                                  \
            __m512 i1 = _mm512_cvtepi32_ps(c##r##_1);                                                  \
            _mm512_store_ps(yt + r * 32 + 16,                                                          \
                            _mm512_add_ps(_mm512_load_ps(yt + r * 32 + 16), _mm512_mul_ps(_mm512_mul_ps(s, sb1), i1))); \
        }                                                                                              \
    }

/* a: the tile's converted rows (interleaved, see vnni_pack_a); direct: b is the packed
 * panels (bstride = their stride) and nq the pair count P */
LC_AI void vnni_exact_tile(int32_t *C, int64_t ldc, const int8_t *a, const int32_t *rs, const uint8_t *b,
                           int64_t bstride, int64_t nq, int nc, const int R, const int NP, const int direct) {
    const __m512i idx = vnni_quad_index(), x80 = _mm512_set1_epi8((char)0x80);
    LC_X_REP12(LC_DECL_I)
    LC_X_REP12(LC_EXACT_INIT)
    if (direct) {
        LC_VNNI_ACCUM_DIRECT(LC_X_REP4, 0, nq)
    } else {
        LC_VNNI_ACCUM(LC_X_REP12, 0, nq)
    }
    __mmask16 m0 = lc_x_mask(nc), m1 = NP > 1 ? lc_x_mask(nc - 16) : 0;
    LC_X_REP12(LC_STORE_I)
}

/* direct: b is the packed panels (bstride = their stride), pb pairs a block (nqb quads) */
LC_AI void vnni_q_tile(float *Y, int64_t ldy, const int8_t *au, const int32_t *rs, const float *sa,
                       const uint8_t *b, int64_t bstride, const float *sbp, int64_t nblk, int64_t nqb, int64_t pb,
                       int nc, const int R, const int NP, const int direct) {
    const __m512i idx = vnni_quad_index(), x80 = _mm512_set1_epi8((char)0x80);
    float yt[LC_XTR * 32] __attribute__((aligned(64)));
    for (int i = 0; i < R * 32; i++) yt[i] = 0.0f;
    LC_X_REP12(LC_DECL_I)
    for (int64_t blk = 0; blk < nblk; blk++) {
        const int8_t *a = au + blk * nqb * 4 * R;
        LC_X_REP12(LC_Q_INIT)
        if (direct) {
            LC_VNNI_ACCUM_DIRECT(LC_X_REP4, blk * pb, pb)
        } else {
            LC_VNNI_ACCUM(LC_X_REP12, blk * nqb, nqb)
        }
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

typedef void (*vnni_exact_fn)(int32_t *, int64_t, const int8_t *, const int32_t *, const uint8_t *, int64_t,
                              int64_t, int);
typedef void (*vnni_q_fn)(float *, int64_t, const int8_t *, const int32_t *, const float *, const uint8_t *,
                          int64_t, const float *, int64_t, int64_t, int64_t, int);
#define LC_DEF_EXACT(R, NP)                                                                            \
    static void exact_##R##_##NP(int32_t *C, int64_t ldc, const int8_t *a, const int32_t *rs,           \
                                 const uint8_t *b, int64_t bs, int64_t nq, int nc) {                  \
        vnni_exact_tile(C, ldc, a, rs, b, bs, nq, nc, R, NP, 0);                                      \
    }                                                                                                  \
    static void dexact_##R##_##NP(int32_t *C, int64_t ldc, const int8_t *a, const int32_t *rs,          \
                                  const uint8_t *b, int64_t bs, int64_t nq, int nc) {                 \
        vnni_exact_tile(C, ldc, a, rs, b, bs, nq, nc, R < 4 ? R : 4, NP, 1);                          \
    }
#define LC_DEF_Q(R, NP)                                                                                \
    static void q_##R##_##NP(float *Y, int64_t ldy, const int8_t *a, const int32_t *rs, const float *sa,  \
                             const uint8_t *b, int64_t bs, const float *sbp, int64_t nblk, int64_t nqb,  \
                             int64_t pb, int nc) {                                                     \
        vnni_q_tile(Y, ldy, a, rs, sa, b, bs, sbp, nblk, nqb, pb, nc, R, NP, 0);                      \
    }                                                                                                  \
    static void dq_##R##_##NP(float *Y, int64_t ldy, const int8_t *a, const int32_t *rs, const float *sa, \
                              const uint8_t *b, int64_t bs, const float *sbp, int64_t nblk, int64_t nqb, \
                              int64_t pb, int nc) {                                                    \
        vnni_q_tile(Y, ldy, a, rs, sa, b, bs, sbp, nblk, nqb, pb, nc, R < 4 ? R : 4, NP, 1);          \
    }
LC_X_ROWS(LC_DEF_EXACT, 1) LC_X_ROWS(LC_DEF_EXACT, 2)
LC_X_ROWS(LC_DEF_Q, 1) LC_X_ROWS(LC_DEF_Q, 2)
#define LC_NAME_EXACT(R, NP) , exact_##R##_##NP
#define LC_NAME_Q(R, NP) , q_##R##_##NP
static const vnni_exact_fn exact_tiles[2][LC_XTR + 1] = {{0 LC_X_ROWS(LC_NAME_EXACT, 1)},
                                                         {0 LC_X_ROWS(LC_NAME_EXACT, 2)}};
static const vnni_q_fn q_tiles[2][LC_XTR + 1] = {{0 LC_X_ROWS(LC_NAME_Q, 1)}, {0 LC_X_ROWS(LC_NAME_Q, 2)}};
#define LC_NAME_DEXACT(R, NP) , dexact_##R##_##NP
#define LC_NAME_DQ(R, NP) , dq_##R##_##NP
#define LC_X_ROWS4(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP)
#define LC_DIRECT_ROWS 4     /* units of up to this many rows read B's panels directly */
static const vnni_exact_fn dexact_tiles[2][LC_DIRECT_ROWS + 1] = {{0 LC_X_ROWS4(LC_NAME_DEXACT, 1)},
                                                                  {0 LC_X_ROWS4(LC_NAME_DEXACT, 2)}};
static const vnni_q_fn dq_tiles[2][LC_DIRECT_ROWS + 1] = {{0 LC_X_ROWS4(LC_NAME_DQ, 1)}, {0 LC_X_ROWS4(LC_NAME_DQ, 2)}};

/* au = the unit's rows of Ap as bytes, blocks zero-padded to bq4, tile by tile: the tile
 * of rows [r0, r0 + R) (R = 12, or what is left) starts at byte r0 * lda (lda = nblk * bq4)
 * and holds quad g (k = 4g..4g+3 of the padded blocks laid end to end) of its row r at
 * 4 * (g * R + r): the tile's k-quad is one contiguous run of 4R bytes.
 * rs (rows, nblk) = -128 * each block's sum of codes */
/* Ap (int16, rows Kp apart), or with a8 != NULL a8's int8 rows (lds apart, nblk = 1,
 * codes k >= kv read as 0). */
static void vnni_pack_a_from(int8_t *au, int32_t *rs, const int16_t *Ap, int64_t Kp, const int8_t *a8,
                             int64_t lds, int64_t kv, int64_t rows, int64_t nblk, int64_t bkp, int64_t bq4) {
    int64_t lda = nblk * bq4, nqb = bq4 / 4, kvalid = a8 ? (kv < bkp ? kv : bkp) : bkp;
    for (int64_t r0 = 0; r0 < rows; r0 += LC_XTR) {
        int64_t R = rows - r0 < LC_XTR ? rows - r0 : LC_XTR;
        int8_t *tile = au + r0 * lda;
        for (int64_t r = 0; r < R; r++)
            for (int64_t blk = 0; blk < nblk; blk++) {
                const int16_t *s = a8 ? NULL : Ap + (r0 + r) * Kp + blk * bkp;
                const int8_t *s8 = a8 ? a8 + (r0 + r) * lds : NULL;
                int8_t *d = tile + 4 * (blk * nqb * R + r);   /* quad q of this block at d + 4 * q * R */
                __m512i sum = _mm512_setzero_si512();
                int32_t quads[8];
                int64_t j = 0;
                for (; j + 32 <= kvalid; j += 32) {
                    __m512i w = s8 ? _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(s8 + j)))
                                   : _mm512_loadu_si512((const void *)(s + j));
                    sum = _mm512_add_epi32(sum, _mm512_madd_epi16(w, _mm512_set1_epi16(1)));
                    if (R == 1) {   /* one row (GEMV): the plain row */
                        _mm256_storeu_si256((__m256i *)(d + j), _mm512_cvtepi16_epi8(w));
                        continue;
                    }
                    _mm256_storeu_si256((__m256i *)quads, _mm512_cvtepi16_epi8(w));
                    for (int i = 0; i < 8; i++) memcpy(d + 4 * (j / 4 + i) * R, &quads[i], 4);
                }
                int32_t lanes[16], t = 0;
                _mm512_storeu_si512((void *)lanes, sum);
                for (int i = 0; i < 16; i++) t += lanes[i];
                for (; j < bq4; j++) {
                    int8_t v = j < kvalid ? (s8 ? s8[j] : (int8_t)s[j]) : 0;
                    d[4 * (j / 4) * R + (j % 4)] = v;
                    t += v;
                }
                rs[(r0 + r) * nblk + blk] = (int32_t)(0u - (uint32_t)t * 128u);   /* modular, as the sums */
            }
    }
}
static void vnni_pack_a(int8_t *au, int32_t *rs, const int16_t *Ap, int64_t Kp, int64_t rows, int64_t nblk,
                        int64_t bkp, int64_t bq4) {
    vnni_pack_a_from(au, rs, Ap, Kp, NULL, 0, 0, rows, nblk, bkp, bq4);
}

/* bq (npan, nblk, nqb, 16 lanes x 4 bytes) = the panels' quads as vpdpbusd's unsigned
 * operand: lane c holds (b[k..k+3] of column c) ^ 0x80, k = 4q within block blk; a block
 * with an odd pair count ends with a half quad (its upper pair 0 ^ 0x80, against A's zeros). */
static void vnni_pack_b(uint8_t *bq, const int8_t *Bp, int64_t pstride, int npan, int64_t nblk, int64_t pb) {
    const __m512i idx = vnni_quad_index(), x80 = _mm512_set1_epi8((char)0x80);
    int64_t nqb = (pb + 1) / 2;
    for (int j = 0; j < npan; j++)
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int8_t *src = Bp + j * pstride + blk * pb * 32;
            uint8_t *dst = bq + ((j * nblk + blk) * nqb) * 64;
            for (int64_t q = 0; q < nqb; q++) {
                __mmask8 m = 2 * q + 1 < pb ? (__mmask8)0xff : (__mmask8)0x0f;
                __m512i v = _mm512_permutexvar_epi16(idx, lc_x_maskz_loadu_epi64(m, src + q * 64));
                _mm512_store_si512((void *)(dst + q * 64), _mm512_xor_si512(v, x80));
            }
        }
}

/* The unit's scratch: au, rs, and the converted quads of two panels, in a per-thread
 * buffer that is kept and only grows (a fresh allocation per unit would be page
 * faults per unit once it passes malloc's mmap threshold: K = 2048 ran at a third
 * of the speed).  The OpenMP threads live as long as the process; so does this. */
static _Thread_local char *vnni_tls;
static _Thread_local size_t vnni_tls_size;
static void *vnni_scratch(int64_t rows, int64_t lda, int64_t nblk, int64_t nqb, int8_t **au, int32_t **rs,
                          uint8_t **bq) {
    size_t abytes = lc_round_up((size_t)(rows * lda), 64), rbytes = lc_round_up((size_t)(rows * nblk) * 4, 64);
    size_t bbytes = (size_t)(2 * nblk * nqb) * 64, need = abytes + rbytes + bbytes;
    if (need > vnni_tls_size) {
        char *p = (char *)lc_aligned_alloc(need);
        if (!p) return NULL;
        lc_aligned_free(vnni_tls);
        vnni_tls = p;
        vnni_tls_size = need;
    }
    *au = (int8_t *)vnni_tls;
    *rs = (int32_t *)(vnni_tls + abytes);
    *bq = (uint8_t *)(vnni_tls + abytes + rbytes);
    return vnni_tls;
}

int LC_BODY(gemm_exact_unit)(int32_t *C, int64_t ldc, const int16_t *Ap, int64_t Kp, const int8_t *Bp,
                             int64_t rows, int64_t ncols) {
    int64_t P = Kp / 2, pstride = P * 32, nq = (P + 1) / 2, Kq = 4 * nq;
    int8_t *au;
    int32_t *rs;
    uint8_t *bq;
    void *mem = vnni_scratch(rows, Kq, 1, nq, &au, &rs, &bq);
    if (!mem) return -1;
    vnni_pack_a(au, rs, Ap, Kp, rows, 1, Kp, Kq);
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        if (rows <= LC_DIRECT_ROWS) {
            dexact_tiles[nc > LC_XNR][rows](C + n, ldc, au, rs, (const uint8_t *)(Bp + (n / LC_XNR) * pstride),
                                            pstride, P, nc);
            continue;
        }
        vnni_pack_b(bq, Bp + (n / LC_XNR) * pstride, pstride, nc > LC_XNR ? 2 : 1, 1, P);
        for (int64_t r = 0; r < rows; r += LC_XTR) {
            int R = (int)(rows - r < LC_XTR ? rows - r : LC_XTR);
            exact_tiles[nc > LC_XNR][R](C + r * ldc + n, ldc, au + r * Kq, rs + r, bq, nq * 64, nq, nc);
        }
    }
    return 0;
}

int LC_BODY(qmatmul_exact_unit)(float *Y, int64_t ldy, const int16_t *Ap, int64_t Kp, const float *sa,
                                const int8_t *Bp, const float *sbp, int64_t nblk, int64_t bkp, int64_t rows,
                                int64_t ncols) {
    int64_t pstride = Kp / 2 * 32, pb = bkp / 2, nqb = (pb + 1) / 2, lda = nblk * 4 * nqb;
    int8_t *au;
    int32_t *rs;
    uint8_t *bq;
    void *mem = vnni_scratch(rows, lda, nblk, nqb, &au, &rs, &bq);
    if (!mem) return -1;
    vnni_pack_a(au, rs, Ap, Kp, rows, nblk, bkp, 4 * nqb);
    for (int64_t n = 0; n < ncols; n += 2 * LC_XNR) {
        int nc = (int)(ncols - n < 2 * LC_XNR ? ncols - n : 2 * LC_XNR);
        const float *sb = sbp + (n / LC_XNR) * nblk * LC_XNR;
        if (rows <= LC_DIRECT_ROWS) {
            dq_tiles[nc > LC_XNR][rows](Y + n, ldy, au, rs, sa, (const uint8_t *)(Bp + (n / LC_XNR) * pstride),
                                        pstride, sb, nblk, nqb, pb, nc);
            continue;
        }
        vnni_pack_b(bq, Bp + (n / LC_XNR) * pstride, pstride, nc > LC_XNR ? 2 : 1, nblk, pb);
        for (int64_t r = 0; r < rows; r += LC_XTR) {
            int R = (int)(rows - r < LC_XTR ? rows - r : LC_XTR);
            q_tiles[nc > LC_XNR][R](Y + r * ldy + n, ldy, au + r * lda, rs + r * nblk, sa + r * nblk, bq,
                                    nblk * nqb * 64, sb, nblk, nqb, pb, nc);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ whole calls
 * (gemm/x86/x86.h; taken for M > LC_DIRECT_ROWS).  A is converted once per call
 * (LC_XCA row tiles a conversion item), B's panel pairs once per call (one pair
 * an item), into one scratch:
 *   au  int8   (M, lda) tile-interleaved as vnni_pack_a, lda = nblk * 4 * nqb
 *   rs  int32  (M, nblk)
 *   bq  uint8  (pairs, 2, nblk, nqb, 64) as vnni_pack_b, a pair 32 * lda bytes
 * (from the int16 packed rows, or — lc_gemm_exact_a8 — the caller's int8 rows),
 * then a unit = (mc rows) x (nc columns): per panel pair, its row tiles
 * (the unit's au rows stay in L2; the pair streams).  The shape is the largest
 * of 192 x 256 halved (columns first) until the threads have >= 4 units each.
 * Converting per unit (48 x 128, before) read A's int16 rows 8 times and B's
 * panels 22 times at 1024^3: ~12% of the time. */
#define LC_XCA 4                     /* row tiles per A conversion item */
#define LC_X_KEEP ((size_t)64 << 20) /* scratch up to this size is kept by the calling thread */
static _Thread_local char *vnni_call_tls;
static _Thread_local size_t vnni_call_tls_size;

int LC_BODY(x_begin)(lc_gemm_x_call *x) {
    if (x->M <= LC_DIRECT_ROWS) return -1;
    int64_t pb = x->bkp / 2, nqb = (pb + 1) / 2, lda = x->nblk * 4 * nqb;
    int64_t npair = (x->N + 2 * LC_XNR - 1) / (2 * LC_XNR), ntile = (x->M + LC_XTR - 1) / LC_XTR;
    size_t abytes = lc_round_up((size_t)(x->M * lda), 64), rbytes = lc_round_up((size_t)(x->M * x->nblk) * 4, 64);
    size_t need = abytes + rbytes + (size_t)(npair * 32 * lda) + 64;
    if (need <= vnni_call_tls_size) {
        x->ws = vnni_call_tls;
        x->ws_owned = 0;
    } else {
        char *p = (char *)lc_aligned_alloc(need);
        if (!p) return -1;
        if (need <= LC_X_KEEP) {
            lc_aligned_free(vnni_call_tls);
            vnni_call_tls = p;
            vnni_call_tls_size = need;
        }
        x->ws = p;
        x->ws_owned = need > LC_X_KEEP;
    }
    x->au = (int8_t *)x->ws;
    x->rs = (int32_t *)(x->ws + abytes);
    x->bq = (uint8_t *)(x->ws + abytes + rbytes);
    x->nqb = nqb;
    x->lda = lda;
    x->na = (ntile + LC_XCA - 1) / LC_XCA;
    x->nconv = x->na + npair;
    int64_t mc = 16 * LC_XTR, nc = 16 * LC_XNR, want = 4 * (int64_t)(x->nthreads > 0 ? x->nthreads : 1);
    while (((x->M + mc - 1) / mc) * ((x->N + nc - 1) / nc) < want && (nc > 2 * LC_XNR || mc > 4 * LC_XTR)) {
        if (nc > 2 * LC_XNR) nc /= 2;
        else mc /= 2;
    }
    x->mc = mc;
    x->nc = nc;
    x->nunits = ((x->M + mc - 1) / mc) * ((x->N + nc - 1) / nc);
    return 0;
}

void LC_BODY(x_conv)(const lc_gemm_x_call *x, int64_t i) {
    int64_t pb = x->bkp / 2;
    if (i < x->na) {
        int64_t r0 = i * LC_XCA * LC_XTR, rows = x->M - r0 < LC_XCA * LC_XTR ? x->M - r0 : LC_XCA * LC_XTR;
        if (x->A8)
            vnni_pack_a_from(x->au + r0 * x->lda, x->rs + r0, NULL, 0, x->A8 + r0 * x->lda8, x->lda8, x->K, rows, 1,
                             x->bkp, 4 * x->nqb);
        else
            vnni_pack_a(x->au + r0 * x->lda, x->rs + r0 * x->nblk, x->Ap + r0 * x->Kp, x->Kp, rows, x->nblk,
                        x->bkp, 4 * x->nqb);
        return;
    }
    int64_t j = i - x->na, pstride = x->Kp / 2 * 32;
    int npan = x->N - j * 2 * LC_XNR > LC_XNR ? 2 : 1;
    vnni_pack_b(x->bq + j * 32 * x->lda, x->Bp + 2 * j * pstride, pstride, npan, x->nblk, pb);
}

void LC_BODY(x_unit)(const lc_gemm_x_call *x, int64_t u) {
    int64_t nnu = (x->N + x->nc - 1) / x->nc, m0 = (u / nnu) * x->mc, n0 = (u % nnu) * x->nc;
    int64_t m1 = m0 + x->mc < x->M ? m0 + x->mc : x->M, n1 = n0 + x->nc < x->N ? n0 + x->nc : x->N;
    int64_t lda = x->lda, nblk = x->nblk, nqb = x->nqb, pb = x->bkp / 2;
    for (int64_t n = n0; n < n1; n += 2 * LC_XNR) {
        int nc = (int)(n1 - n < 2 * LC_XNR ? n1 - n : 2 * LC_XNR);
        const uint8_t *bq = x->bq + (n / (2 * LC_XNR)) * 32 * lda;
        for (int64_t r = m0; r < m1; r += LC_XTR) {
            int R = (int)(m1 - r < LC_XTR ? m1 - r : LC_XTR);
            if (x->Y)
                q_tiles[nc > LC_XNR][R](x->Y + r * x->ldc + n, x->ldc, x->au + r * lda, x->rs + r * nblk,
                                        x->sa + r * nblk, bq, 16 * lda, x->sbp + (n / LC_XNR) * nblk * LC_XNR, nblk,
                                        nqb, pb, nc);
            else
                exact_tiles[nc > LC_XNR][R](x->C + r * x->ldc + n, x->ldc, x->au + r * lda, x->rs + r, bq, 16 * lda,
                                            nqb, nc);
        }
    }
}

void LC_BODY(x_end)(lc_gemm_x_call *x) {
    if (x->ws_owned) lc_aligned_free(x->ws);
    x->ws = NULL;
}

#endif /* LC_X86 */
