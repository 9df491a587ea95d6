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
/* and the tiles this many column tiles ahead (the panels a thread streams next; into L2):
 * one thread's GEMV is bound by its misses in flight (decode at 1 thread: +6% best, +12%
 * median tokens/s in one process, alternating; at 2 threads the bandwidth binds, no change) */
#ifndef LC_DPF_NEXT
#define LC_DPF_NEXT 2
#endif
/* the same from gemm.h's packed panels as they are (pairs from pair p0, np of them), each quad
 * permuted as it is loaded: for a few rows, where converting B first would cost more than it saves */
#define LC_VNNI_ACCUM_DIRECT(REP, p0, np)                                                              \
    for (int64_t q = 0; q < ((np) + 1) / 2; q++) {                                                     \
        __mmask8 m = 2 * q + 1 < (np) ? (__mmask8)0xff : (__mmask8)0x0f;                               \
        const int8_t *bp_ = (const int8_t *)b + ((p0) + 2 * q) * 32;                                   \
        _mm_prefetch((const char *)bp_ + LC_DPF, _MM_HINT_T0);                                         \
        if (NP > 1) _mm_prefetch((const char *)bp_ + bstride + LC_DPF, _MM_HINT_T0);                   \
        _mm_prefetch((const char *)bp_ + LC_DPF_NEXT * NP * bstride, _MM_HINT_T1);                     \
        if (NP > 1) _mm_prefetch((const char *)bp_ + (LC_DPF_NEXT * NP + 1) * bstride, _MM_HINT_T1);   \
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
/* The int8 rows' fast part: rows [0, R4) of a tile of R rows (R4 a multiple of 4), k in
 * [0, nk) (nk a multiple of 64), into the tile's interleaved layout; part[r] = the rows' sums
 * over that range.  Four rows at a time: their 64-byte pieces are 4 x 16 quads, a 4 x 4 dword
 * transpose per 128-bit lane puts quad q of the 4 rows side by side (16 bytes, stored at
 * 4 * (q * R + r0)); the sums are vpdpbusd against bytes of 1 (exact: |sum| <= 128 K). */
static void vnni_pack_a8_fast(int8_t *tile, int32_t *part, const int8_t *a8, int64_t lds, int64_t R, int64_t R4,
                              int64_t nk) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t g = 0; g < R4; g += 4) {
        const int8_t *s0 = a8 + g * lds, *s1 = s0 + lds, *s2 = s1 + lds, *s3 = s2 + lds;
        __m512i u0 = _mm512_setzero_si512(), u1 = u0, u2 = u0, u3 = u0;
        for (int64_t j = 0; j < nk; j += 64) {
            __m512i x0 = _mm512_loadu_si512((const void *)(s0 + j)), x1 = _mm512_loadu_si512((const void *)(s1 + j));
            __m512i x2 = _mm512_loadu_si512((const void *)(s2 + j)), x3 = _mm512_loadu_si512((const void *)(s3 + j));
            u0 = _mm512_dpbusd_epi32(u0, ones, x0);
            u1 = _mm512_dpbusd_epi32(u1, ones, x1);
            u2 = _mm512_dpbusd_epi32(u2, ones, x2);
            u3 = _mm512_dpbusd_epi32(u3, ones, x3);
            __m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
            __m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
            __m512i y0 = _mm512_unpacklo_epi64(t0, t2), y1 = _mm512_unpackhi_epi64(t0, t2);   /* quads 4L, 4L+1 */
            __m512i y2 = _mm512_unpacklo_epi64(t1, t3), y3 = _mm512_unpackhi_epi64(t1, t3);   /* 4L+2, 4L+3 */
            int8_t *d = tile + 4 * ((j / 4) * R + g);     /* quad j/4 of rows g..g+3 */
            const int64_t qs = 4 * R;                     /* bytes from one quad to the next */
#define LC_A8_LANE(L)                                                                                  \
    _mm_storeu_si128((__m128i *)(d + (4 * L + 0) * qs), _mm512_extracti32x4_epi32(y0, L));            \
    _mm_storeu_si128((__m128i *)(d + (4 * L + 1) * qs), _mm512_extracti32x4_epi32(y1, L));            \
    _mm_storeu_si128((__m128i *)(d + (4 * L + 2) * qs), _mm512_extracti32x4_epi32(y2, L));            \
    _mm_storeu_si128((__m128i *)(d + (4 * L + 3) * qs), _mm512_extracti32x4_epi32(y3, L));
            LC_A8_LANE(0) LC_A8_LANE(1) LC_A8_LANE(2) LC_A8_LANE(3)
#undef LC_A8_LANE
        }
        int32_t lanes[4][16];
        _mm512_storeu_si512((void *)lanes[0], u0);
        _mm512_storeu_si512((void *)lanes[1], u1);
        _mm512_storeu_si512((void *)lanes[2], u2);
        _mm512_storeu_si512((void *)lanes[3], u3);
        for (int r = 0; r < 4; r++) {
            int32_t t = 0;
            for (int i = 0; i < 16; i++) t += lanes[r][i];
            part[g + r] = t;
        }
    }
}

/* Ap (int16, rows Kp apart), or with a8 != NULL a8's int8 rows (lds apart, nblk = 1,
 * codes k >= kv read as 0). */
static void vnni_pack_a_from(int8_t *au, int32_t *rs, const int16_t *Ap, int64_t Kp, const int8_t *a8,
                             int64_t lds, int64_t kv, int64_t rows, int64_t nblk, int64_t bkp, int64_t bq4) {
    int64_t lda = nblk * bq4, nqb = bq4 / 4, kvalid = a8 ? (kv < bkp ? kv : bkp) : bkp;
    for (int64_t r0 = 0; r0 < rows; r0 += LC_XTR) {
        int64_t R = rows - r0 < LC_XTR ? rows - r0 : LC_XTR;
        int8_t *tile = au + r0 * lda;
        /* int8 rows, R >= 4: groups of 4 rows over the whole 64-byte pieces first (vnni_pack_a8_fast),
         * the rest of each row (and rows past the last group) below */
        int64_t R4 = a8 && R > 1 ? R / 4 * 4 : 0, nk = R4 ? kvalid / 64 * 64 : 0;
        int32_t part[LC_XTR] = {0};
        if (nk) vnni_pack_a8_fast(tile, part, a8 + r0 * lds, lds, R, R4, nk);
        for (int64_t r = 0; r < R; r++)
            for (int64_t blk = 0; blk < nblk; blk++) {
                const int16_t *s = a8 ? NULL : Ap + (r0 + r) * Kp + blk * bkp;
                const int8_t *s8 = a8 ? a8 + (r0 + r) * lds : NULL;
                int8_t *d = tile + 4 * (blk * nqb * R + r);   /* quad q of this block at d + 4 * q * R */
                __m512i sum = _mm512_setzero_si512();
                int32_t quads[8];
                int64_t j = r < R4 ? nk : 0;
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
                int32_t lanes[16], t = r < R4 ? part[r] : 0;
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

/* Pair j of B's form (nblk 1) read straight from B's int8 rows (K, N, ldb apart): the bytes
 * vnni_pack_b makes from the packed panels (k >= K and columns >= N read as 0, so the padding
 * is 0 ^ 0x80 as there), without the panels.  Per quad q, the 32 columns of rows 4q..4q+3:
 * byte then word unpacks put each column's 4 bytes side by side, within 128-bit lanes (lane 0:
 * columns 0..15, panel 0; lane 1: 16..31, panel 1); a lane shuffle gathers each panel's 64. */
static void vnni_pack_b_rows(uint8_t *bq, const int8_t *B, int64_t ldb, int64_t K, int64_t N, int64_t j,
                             int64_t nqb) {
    const int64_t n0 = j * 2 * LC_XNR, nv = N - n0 < 2 * LC_XNR ? N - n0 : 2 * LC_XNR;
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    const int two = nv > LC_XNR;
    uint8_t *d0 = bq, *d1 = bq + nqb * 64;
    const int8_t *src = B + n0;
    for (int64_t q = 0; q < nqb; q++) {
        __m256i r[4];
        for (int i = 0; i < 4; i++) {
            int64_t k = 4 * q + i;
            __m256i v = _mm256_setzero_si256();
            if (k < K && nv == 2 * LC_XNR) {
                v = _mm256_loadu_si256((const __m256i *)(src + k * ldb));
            } else if (k < K) {                   /* the last columns: a zeroed copy */
                int8_t tail[32] = {0};
                memcpy(tail, src + k * ldb, (size_t)nv);
                v = _mm256_loadu_si256((const __m256i *)tail);
            }
            r[i] = _mm256_xor_si256(v, x80);
        }
        __m256i t0 = _mm256_unpacklo_epi8(r[0], r[1]), t1 = _mm256_unpackhi_epi8(r[0], r[1]);
        __m256i s0 = _mm256_unpacklo_epi8(r[2], r[3]), s1 = _mm256_unpackhi_epi8(r[2], r[3]);
        __m256i u0 = _mm256_unpacklo_epi16(t0, s0), u1 = _mm256_unpackhi_epi16(t0, s0);   /* columns 0-3, 4-7 */
        __m256i u2 = _mm256_unpacklo_epi16(t1, s1), u3 = _mm256_unpackhi_epi16(t1, s1);   /* 8-11, 12-15 */
        __m512i p0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(u0, u1, 0x20)),
                                        _mm256_permute2x128_si256(u2, u3, 0x20), 1);
        _mm512_store_si512((void *)(d0 + q * 64), p0);
        if (two) {
            __m512i p1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(u0, u1, 0x31)),
                                            _mm256_permute2x128_si256(u2, u3, 0x31), 1);
            _mm512_store_si512((void *)(d1 + q * 64), p1);
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
 * (gemm/x86/x86.h; taken for M > LC_DIRECT_ROWS).  B's panel pairs are converted
 * once per call (one pair a conversion item, before the barrier) into
 *   bq  uint8  (pairs, 2, nblk, nqb, 64) as vnni_pack_b, a pair 32 * lda bytes
 * and A's rows (from the int16 packed rows, or — lc_gemm_exact_a8 — the caller's int8
 * rows) one of two ways:
 *  - strips (M >= LC_XS_MIN * the strip count): a unit is a full-width strip of ~64 rows
 *    (the count a multiple of the threads, >= 4 a thread; rows split evenly, so 1024 rows
 *    are 16 strips of 64); the unit converts its own rows into its thread's strip buffer
 *    (au (rows, lda), rs (rows, nblk), L2-resident), then runs every panel pair over them.
 *    Its tiles are balanced (64 rows: 11, 11, 11, 11, 10, 10; not 5 x 12 + 4).  No
 *    conversion of A before the barrier, no call-sized A scratch going through L3.
 *  - otherwise (few rows): A is converted once per call too (LC_XCA row tiles an item),
 *    into au (M, lda), rs (M, nblk); a unit = (mc rows) x (nc columns): per panel pair,
 *    its 12-row tiles.  The shape is the largest of 192 x 256 halved (columns first)
 *    until the threads have >= 4 units each.
 * Converting per 48 x 128 unit (before whole calls) read A's int16 rows 8 times and B's
 * panels 22 times at 1024^3: ~12% of the time. */
#define LC_XCA 4                     /* row tiles per A conversion item */
#define LC_XS_ROWS 64                /* strip height aimed at */
#define LC_XS_MIN 48                 /* strips need at least this many rows each */
#define LC_X_KEEP ((size_t)64 << 20) /* scratch up to this size is kept by the calling thread */
static _Thread_local char *vnni_call_tls;
static _Thread_local size_t vnni_call_tls_size;

int LC_BODY(x_begin)(lc_gemm_x_call *x) {
    if (x->M <= LC_DIRECT_ROWS) return -1;
    int64_t pb = x->bkp / 2, nqb = (pb + 1) / 2, lda = x->nblk * 4 * nqb;
    int64_t npair = (x->N + 2 * LC_XNR - 1) / (2 * LC_XNR), ntile = (x->M + LC_XTR - 1) / LC_XTR;
    int64_t T = x->nthreads > 0 ? x->nthreads : 1, want = 4 * T;
    int64_t S = (x->M + LC_XS_ROWS - 1) / LC_XS_ROWS;
    S = S > want ? S : want;
    S = (S + T - 1) / T * T;
    x->strips = x->M >= LC_XS_MIN * S ? S : 0;
    size_t abytes, rbytes;
    if (x->strips) {   /* per thread: the tallest strip's rows */
        int64_t h = (x->M + S - 1) / S;
        abytes = lc_round_up((size_t)(h * lda), 64);
        rbytes = lc_round_up((size_t)(h * x->nblk) * 4, 64);
        x->soff = (int64_t)abytes;
        x->sbytes = (int64_t)(abytes + rbytes);
        abytes = (size_t)T * (size_t)x->sbytes;
        rbytes = 0;
    } else {
        abytes = lc_round_up((size_t)(x->M * lda), 64);
        rbytes = lc_round_up((size_t)(x->M * x->nblk) * 4, 64);
    }
    size_t need = abytes + rbytes + (x->bq_in ? 0 : (size_t)(npair * 32 * lda)) + 64;
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
    x->bq = x->bq_in ? (uint8_t *)x->bq_in : (uint8_t *)(x->ws + abytes + rbytes);   /* bq_in: read only */
    x->nqb = nqb;
    x->lda = lda;
    if (x->bq_in) npair = 0;                         /* B converted beforehand: no B items */
    if (x->strips) {
        x->na = 0;
        x->nconv = npair;
        x->mc = 0;
        x->nc = x->N;
        x->nunits = x->strips;
        return 0;
    }
    x->na = (ntile + LC_XCA - 1) / LC_XCA;
    x->nconv = x->na + npair;
    int64_t mc = 16 * LC_XTR, nc = 16 * LC_XNR;
    while (((x->M + mc - 1) / mc) * ((x->N + nc - 1) / nc) < want && (nc > 2 * LC_XNR || mc > 4 * LC_XTR)) {
        if (nc > 2 * LC_XNR) nc /= 2;
        else mc /= 2;
    }
    x->mc = mc;
    x->nc = nc;
    x->nunits = ((x->M + mc - 1) / mc) * ((x->N + nc - 1) / nc);
    return 0;
}

/* rows [r0, r0 + rows) of A (int16 packed rows or int8 rows), as 12-row tiles, into au / rs
 * (au: (rows, lda) tile-interleaved; rs: (rows, nblk)); rows <= 12 is one tile of that height */
static void vnni_x_pack_rows(const lc_gemm_x_call *x, int8_t *au, int32_t *rs, int64_t r0, int64_t rows) {
    if (x->A8)
        vnni_pack_a_from(au, rs, NULL, 0, x->A8 + r0 * x->lda8, x->lda8, x->K, rows, 1, x->bkp, 4 * x->nqb);
    else
        vnni_pack_a(au, rs, x->Ap + r0 * x->Kp, x->Kp, rows, x->nblk, x->bkp, 4 * x->nqb);
}

/* bytes of B (Kp, N) in the exact whole call's form: pairs of panels, 32 * lda bytes each */
size_t LC_BODY(x_bform_bytes)(int64_t Kp, int64_t N) {
    int64_t nqb = (Kp / 2 + 1) / 2, npair = (N + 2 * LC_XNR - 1) / (2 * LC_XNR);
    return (size_t)(npair * 32 * 4 * nqb);
}

/* pair j of B's form (bq: x_bform_bytes(Kp, N) bytes, 64-byte aligned) from the packed panels Bp;
 * the same bytes x_conv writes for an exact call (nblk 1, bkp Kp) */
void LC_BODY(x_bform)(uint8_t *bq, const int8_t *Bp, int64_t Kp, int64_t N, int64_t j) {
    int64_t pb = Kp / 2, lda = 4 * ((pb + 1) / 2), pstride = pb * 32;
    int npan = N - j * 2 * LC_XNR > LC_XNR ? 2 : 1;
    vnni_pack_b(bq + j * 32 * lda, Bp + 2 * j * pstride, pstride, npan, 1, pb);
}

void LC_BODY(x_conv)(const lc_gemm_x_call *x, int64_t i) {
    int64_t pb = x->bkp / 2;
    if (i < x->na) {
        int64_t r0 = i * LC_XCA * LC_XTR, rows = x->M - r0 < LC_XCA * LC_XTR ? x->M - r0 : LC_XCA * LC_XTR;
        vnni_x_pack_rows(x, x->au + r0 * x->lda, x->rs + r0 * x->nblk, r0, rows);
        return;
    }
    int64_t j = i - x->na, pstride = x->Kp / 2 * 32;
    if (x->B8) {
        vnni_pack_b_rows(x->bq + j * 32 * x->lda, x->B8, x->ldb8, x->K, x->N, j, x->nqb);
        return;
    }
    int npan = x->N - j * 2 * LC_XNR > LC_XNR ? 2 : 1;
    vnni_pack_b(x->bq + j * 32 * x->lda, x->Bp + 2 * j * pstride, pstride, npan, x->nblk, pb);
}

/* one tile: rows [r, r + R) of the output (au, rs: the tile's converted rows), columns [n, n + nc) */
static inline void vnni_x_tile(const lc_gemm_x_call *x, const int8_t *au, const int32_t *rs, int64_t r, int R,
                               int64_t n, int nc) {
    int64_t lda = x->lda, nblk = x->nblk;
    const uint8_t *bq = x->bq + (n / (2 * LC_XNR)) * 32 * lda;
    if (x->Y)
        q_tiles[nc > LC_XNR][R](x->Y + r * x->ldc + n, x->ldc, au, rs, x->sa + r * nblk, bq, 16 * lda,
                                x->sbp + (n / LC_XNR) * nblk * LC_XNR, nblk, x->nqb, x->bkp / 2, nc);
    else
        exact_tiles[nc > LC_XNR][R](x->C + r * x->ldc + n, x->ldc, au, rs, bq, 16 * lda, x->nqb, nc);
}

void LC_BODY(x_unit)(const lc_gemm_x_call *x, int64_t u, int t) {
    int64_t lda = x->lda, nblk = x->nblk;
    if (x->strips) {
        /* strip u: rows [m0, m1), ntl balanced tiles; converted into thread t's strip buffer */
        int64_t m0 = u * x->M / x->strips, m1 = (u + 1) * x->M / x->strips, rows = m1 - m0;
        int64_t ntl = (rows + LC_XTR - 1) / LC_XTR;
        int8_t *au = x->au + (size_t)t * (size_t)x->sbytes;
        int32_t *rs = (int32_t *)(au + x->soff);
        for (int64_t i = 0; i < ntl; i++) {
            int64_t a = i * rows / ntl, b = (i + 1) * rows / ntl;
            vnni_x_pack_rows(x, au + a * lda, rs + a * nblk, m0 + a, b - a);
        }
        for (int64_t n = 0; n < x->N; n += 2 * LC_XNR) {
            int nc = (int)(x->N - n < 2 * LC_XNR ? x->N - n : 2 * LC_XNR);
            for (int64_t i = 0; i < ntl; i++) {
                int64_t a = i * rows / ntl, b = (i + 1) * rows / ntl;
                vnni_x_tile(x, au + a * lda, rs + a * nblk, m0 + a, (int)(b - a), n, nc);
            }
        }
        return;
    }
    int64_t nnu = (x->N + x->nc - 1) / x->nc, m0 = (u / nnu) * x->mc, n0 = (u % nnu) * x->nc;
    int64_t m1 = m0 + x->mc < x->M ? m0 + x->mc : x->M, n1 = n0 + x->nc < x->N ? n0 + x->nc : x->N;
    for (int64_t n = n0; n < n1; n += 2 * LC_XNR) {
        int nc = (int)(n1 - n < 2 * LC_XNR ? n1 - n : 2 * LC_XNR);
        for (int64_t r = m0; r < m1; r += LC_XTR) {
            int R = (int)(m1 - r < LC_XTR ? m1 - r : LC_XTR);
            vnni_x_tile(x, x->au + r * lda, x->rs + r * nblk, r, R, n, nc);
        }
    }
}

void LC_BODY(x_end)(lc_gemm_x_call *x) {
    if (x->ws_owned) lc_aligned_free(x->ws);
    x->ws = NULL;
}

#endif /* LC_X86 */
