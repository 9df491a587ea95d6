/* csrc/gradtables/x86/avx512_vbmi.c — the planes pass's AVX-512 VBMI body (gradtables/planes.h):
 * one work unit (a tile of <= 128 lanes l, k's k0..k1-1) on one thread, the bits of the
 * generic body.  Compiled alone with AVX-512 F/BW/VL/DQ + VBMI flags (setup.py), and once
 * more against SIMDe for the tests.
 *
 * Design.  The lanes of a tile share their table row at each step i (planes.h), so the row
 * (512 bytes: the low and high byte planes of its 256 int16 values) is loaded into 8 zmm once
 * per i and every lane's entry is a byte permute: per 64 lanes, vpermi2b on each plane's
 * 128-entry halves, chained by write masks (bit 7 of the code clear, then set: the second
 * permute reads its index from the lanes the first left alone), then the two planes
 * interleaved into int16 words (vpunpck{l,h}bw) and each word moved to the top of a dword
 * (even words: << 16; odd: & 0xffff0000), converted (exact: 16 significant bits) and scaled
 * by 2^(e - 16) (exact) — the table's float value — then multiplied by the weight and added,
 * as the generic body.  When no lane's code of a (tile, k) has bit 7 set (the codes of a
 * ReLU's output: dX's lanes) half the row is read (4 zmm) and one permute a plane does; so
 * does a table whose rows are even in the entry (LC_GTP_SYM: dW's Gb of Mitchell-like units)
 * for signed codes in -126..127, by magnitude.
 *
 * The interleave leaves dword d of the four result vectors at byte positions
 * p = 16 (d / 4) + 8 h + 2 (d % 4) + s (vector 2h + s), so the codes are loaded in lane order
 * and permuted once per (tile, k) with lc_gtp_perm (vpermb): byte p holds lane 16 (2h + s) +
 * d; the results then come out in lane order (the weights and outputs are plain loads and
 * stores).
 *
 * Steps i run in blocks of LC_GTP_IB, or LC_GTP_IB_SKIP where code-0 steps are left out (the block's weights stay in L1 for the unit's k's); a
 * block's sums are stored in outT and continue from there (the same float chain).
 */
#define LC_BODY_ISA avx512vbmi
#include "core/simd.h"
#include "gradtables/x86/x86.h"

#if LC_X86

/* Steps i per block: its weights stay in L1 for the unit's k's, and a short block leaves the
 * k's chains independent enough to overlap (16 measured best for dX's 64..512 steps on Zen 5,
 * 30 G lookups/s a core, with the operands' rows not 4 KiB apart: lutcore.torch pads them); with
 * code-0 steps left out a longer block (its mask of kept steps, one test a block) does better. */
#ifndef LC_GTP_IB
#define LC_GTP_IB 16
#endif
#ifndef LC_GTP_IB_SKIP
#define LC_GTP_IB_SKIP 32     /* <= 64: one mask */
#endif
#define LC_GTP_KB_MAX 32   /* k's whose permuted codes a unit keeps (planes.h's LC_GTP_KB at most) */

/* byte p of a group's permuted codes <- lane lc_gtp_perm[p] (see the design comment) */
static const uint8_t lc_gtp_perm[64] __attribute__((aligned(64))) = {
    0, 16, 1, 17, 2, 18, 3, 19, 32, 48, 33, 49, 34, 50, 35, 51, 4, 20, 5, 21, 6, 22, 7, 23, 36, 52, 37, 53,
    38, 54, 39, 55, 8, 24, 9, 25, 10, 26, 11, 27, 40, 56, 41, 57, 42, 58, 43, 59, 12, 28, 13, 29, 14, 30,
    15, 31, 44, 60, 45, 61, 46, 62, 47, 63};

/* masked loads that never touch a masked-off byte (SIMDe 0.8.2 emulates a masked load as a
 * full one: core/simd.h) */
#if defined(LC_SIMDE)
static inline __m512i lc_gtp_load_codes(__mmask64 k, const uint8_t *p) {
    uint8_t t[64] = {0};
    for (int i = 0; i < 64; i++)
        if ((k >> i) & 1) t[i] = p[i];
    return _mm512_loadu_si512((const void *)t);
}
static inline __m512 lc_gtp_load_w(__mmask16 k, const float *p) {
    float t[16] = {0};
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) t[i] = p[i];
    return _mm512_loadu_ps(t);
}
#else
#define lc_gtp_load_codes(k, p) _mm512_maskz_loadu_epi8((k), (const void *)(p))
#define lc_gtp_load_w(k, p) _mm512_maskz_loadu_ps((k), (p))
#endif

static inline __mmask64 lc_gtp_lanes64(int64_t n) { return n >= 64 ? ~(__mmask64)0 : n <= 0 ? 0 : (((__mmask64)1 << n) - 1); }
static inline __mmask16 lc_gtp_lanes16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* the table's value from v * 65536: times S, or as it is where the scale is 1 (the caller's weights
 * carry it: x * 1 is x, so the same bits) */
#define LC_GTP_SCALED(f) (UNIT ? (f) : _mm512_mul_ps(S, (f)))

/* one 64-lane group at one step: its 64 table values, times the weights at wi, added to A0..A3.
 * MODE 0: codes of both halves (two chained permutes a plane); 1: codes < 128 (one) */
#define LC_GTP_GROUP(x, n7, b7, A0, A1, A2, A3, wi, wm)                                                        \
    {                                                                                                    \
        __m512i lo = MODE ? _mm512_permutex2var_epi8(l0, x, l1)                                          \
                          : _mm512_mask2_permutex2var_epi8(l2, _mm512_mask2_permutex2var_epi8(l0, x, n7, l1), b7, l3); \
        __m512i hi = MODE ? _mm512_permutex2var_epi8(h0, x, h1)                                          \
                          : _mm512_mask2_permutex2var_epi8(h2, _mm512_mask2_permutex2var_epi8(h0, x, n7, h1), b7, h3); \
        const __m512i W0 = _mm512_unpacklo_epi8(lo, hi), W1 = _mm512_unpackhi_epi8(lo, hi);             \
        const __m512 f0 = LC_GTP_SCALED(_mm512_cvtepi32_ps(_mm512_slli_epi32(W0, 16)));              \
        const __m512 f1 = LC_GTP_SCALED(_mm512_cvtepi32_ps(_mm512_and_si512(W0, top)));              \
        const __m512 f2 = LC_GTP_SCALED(_mm512_cvtepi32_ps(_mm512_slli_epi32(W1, 16)));              \
        const __m512 f3 = LC_GTP_SCALED(_mm512_cvtepi32_ps(_mm512_and_si512(W1, top)));              \
        A0 = _mm512_add_ps(A0, _mm512_mul_ps(PART ? lc_gtp_load_w((wm)[0], (wi)) : _mm512_loadu_ps(wi), f0));        \
        A1 = _mm512_add_ps(A1, _mm512_mul_ps(PART ? lc_gtp_load_w((wm)[1], (wi) + 16) : _mm512_loadu_ps((wi) + 16), f1)); \
        A2 = _mm512_add_ps(A2, _mm512_mul_ps(PART ? lc_gtp_load_w((wm)[2], (wi) + 32) : _mm512_loadu_ps((wi) + 32), f2)); \
        A3 = _mm512_add_ps(A3, _mm512_mul_ps(PART ? lc_gtp_load_w((wm)[3], (wi) + 48) : _mm512_loadu_ps((wi) + 48), f3)); \
    }

/* step i (its row c_i, its weights at wi) of one (tile, k): the lanes' products added in */
#define LC_GTP_STEP(ci, wi)                                                                                  \
    {                                                                                                        \
        const uint8_t *row = planes + (int64_t)(uint8_t)(ci) * 512;                                          \
        const __m512i l0 = _mm512_loadu_si512((const void *)row), l1 = _mm512_loadu_si512((const void *)(row + 64)); \
        const __m512i h0 = _mm512_loadu_si512((const void *)(row + 128));                                    \
        const __m512i h1 = _mm512_loadu_si512((const void *)(row + 192));                                    \
        __m512i l2 = l0, l3 = l0, h2 = l0, h3 = l0;                                                          \
        if (!MODE) {                                                                                         \
            l2 = _mm512_loadu_si512((const void *)(row + 256)), l3 = _mm512_loadu_si512((const void *)(row + 320)); \
            h2 = _mm512_loadu_si512((const void *)(row + 384)), h3 = _mm512_loadu_si512((const void *)(row + 448)); \
        }                                                                                                    \
        LC_GTP_GROUP(x0, n0, b0, a0, a1, a2, a3, (wi), wm)                                                   \
        if (NG > 1) LC_GTP_GROUP(x1, n1, b1, a4, a5, a6, a7, (wi) + 64, wm + 4)                             \
    }

/* The steps i0 .. i0+ni-1 of one (tile, k) (all of them, or with `keep` the set bits j of keep:
 * step i0 + j), added to the sums in o (zero first when i0 == 0), lanes as lc_gtp_run's. */
LC_AI void lc_gtp_block(float *o, const int8_t *cc, int64_t cs_i, const float *wi, int64_t L, int64_t ni,
                        int first, uint64_t keep, const int use_keep, const uint8_t *planes, __m512i x0, __m512i x1,
                        __m512 S, const __mmask16 *wm, const int NG, const int MODE, const int PART,
                        const int UNIT) {
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    const __mmask64 b0 = _mm512_movepi8_mask(x0), n0 = ~b0, b1 = NG > 1 ? _mm512_movepi8_mask(x1) : 0, n1 = ~b1;
    __m512 a0, a1, a2, a3, a4, a5, a6, a7;
    if (first) {
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _mm512_setzero_ps();
    } else {
        a0 = PART ? lc_gtp_load_w(wm[0], o) : _mm512_loadu_ps(o);
        a1 = PART ? lc_gtp_load_w(wm[1], o + 16) : _mm512_loadu_ps(o + 16);
        a2 = PART ? lc_gtp_load_w(wm[2], o + 32) : _mm512_loadu_ps(o + 32);
        a3 = PART ? lc_gtp_load_w(wm[3], o + 48) : _mm512_loadu_ps(o + 48);
        a4 = a5 = a6 = a7 = a0;
        if (NG > 1) {
            a4 = PART ? lc_gtp_load_w(wm[4], o + 64) : _mm512_loadu_ps(o + 64);
            a5 = PART ? lc_gtp_load_w(wm[5], o + 80) : _mm512_loadu_ps(o + 80);
            a6 = PART ? lc_gtp_load_w(wm[6], o + 96) : _mm512_loadu_ps(o + 96);
            a7 = PART ? lc_gtp_load_w(wm[7], o + 112) : _mm512_loadu_ps(o + 112);
        }
    }
    if (use_keep) {
        while (keep) {
            const int64_t j = __builtin_ctzll(keep);
            keep &= keep - 1;
            LC_GTP_STEP(cc[j * cs_i], wi + j * L)
        }
    } else {
        for (int64_t j = 0; j < ni; j++, cc += cs_i, wi += L) LC_GTP_STEP(*cc, wi)
    }
    __m512 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int q = 0; q < 4 * NG; q++) {
        if (PART)
            lc_x_mask_storeu_ps(o + 16 * q, wm[q], acc[q]);
        else
            _mm512_storeu_ps(o + 16 * q, acc[q]);
    }
}
#undef LC_GTP_STEP
#undef LC_GTP_GROUP

/* bit j (j < ni <= 64) set where c_{i0+j} (at cc + j cs_i) is not 0 */
LC_AI uint64_t lc_gtp_nonzero(const int8_t *cc, int64_t cs_i, int64_t ni) {
    if (cs_i == 1) {
        const __m512i v = lc_gtp_load_codes(lc_gtp_lanes64(ni), (const uint8_t *)cc);
        return (uint64_t)_mm512_test_epi8_mask(v, v);
    }
    uint64_t m = 0;
    for (int64_t j = 0; j < ni; j++) m |= (uint64_t)(cc[j * cs_i] != 0) << j;
    return m;
}

/* The unit: n = l1 - l0 lanes (<= 64 NG), full groups unless PART.  Steps run in blocks of
 * LC_GTP_IB, every k of the unit through a block before the next (the block's weights stay
 * in L1); the sums live in outT between blocks (the same float chain).  flags (the driver's,
 * checked there): LC_GTP_SKIP — the table's row 0 is all zeros and every weight finite, so a
 * step of code 0 adds +0 or -0 to a sum that is never -0: the steps of code 0 are left out;
 * LC_GTP_SYM — every row is even in its entry (G[r][-x] = G[r][x], 0 < x < 127: a unit that is
 * odd in its second operand, as Mitchell and most sign-magnitude units, gives an even Gb): a
 * (tile, k) of two groups whose codes are all in -126..127 looks them up by magnitude in the
 * row's lower half (one permute a plane; codes -127 and -128, whose entries differ, keep both
 * halves; with one group, measured, the two halves did as well). */
LC_AI void lc_gtp_run(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k, const uint8_t *idxT,
                      const float *w, int64_t ldi, const uint8_t *planes, float scale, int64_t NI, int64_t l0,
                      int64_t n, int64_t k0, int64_t k1, int flags, const int NG, const int PART, const int UNIT) {
    const int skip = flags & LC_GTP_SKIP, sym = flags & LC_GTP_SYM;
    const __m512i perm = _mm512_load_si512((const void *)lc_gtp_perm);
    const __m512 S = _mm512_set1_ps(scale);
    const __mmask64 m0 = lc_gtp_lanes64(n), m1 = lc_gtp_lanes64(n - 64);
    __mmask16 wm[8];
    for (int q = 0; q < 8; q++) wm[q] = lc_gtp_lanes16(n - 16 * q);
    /* the unit's codes, permuted once (lc_gtp_perm), and how each k looks them up (MODE) */
    __m512i xs[LC_GTP_KB_MAX][2];
    int mode[LC_GTP_KB_MAX];
    const __m512i c127 = _mm512_set1_epi8((char)-127);
    for (int64_t k = k0; k < k1; k++) {
        const uint8_t *xk = idxT + k * ldi + l0;
        __m512i x0 = _mm512_permutexvar_epi8(perm, PART ? lc_gtp_load_codes(m0, xk)
                                                        : _mm512_loadu_si512((const void *)xk)), x1 = x0;
        if (NG > 1)
            x1 = _mm512_permutexvar_epi8(perm, PART ? lc_gtp_load_codes(m1, xk + 64)
                                                    : _mm512_loadu_si512((const void *)(xk + 64)));
        const int j = (int)(k - k0);
        const int any7 = (_mm512_movepi8_mask(x0) | (NG > 1 ? _mm512_movepi8_mask(x1) : 0)) != 0;
        mode[j] = !any7;
        if (any7 && sym && NG > 1 && !(_mm512_cmple_epi8_mask(x0, c127) | _mm512_cmple_epi8_mask(x1, c127))) {
            x0 = _mm512_abs_epi8(x0), x1 = _mm512_abs_epi8(x1);         /* every code in -126..127 */
            mode[j] = 1;
        }
        xs[j][0] = x0, xs[j][1] = x1;
    }
    const int64_t IB = skip ? LC_GTP_IB_SKIP : LC_GTP_IB;
    int64_t i0 = 0;
    do {                                                 /* at least once: NI = 0 writes zeros */
        const int64_t ni = NI - i0 < IB ? NI - i0 : IB;
        for (int64_t k = k0; k < k1; k++) {
            const int j = (int)(k - k0);
            float *o = outT + k * ldo + l0;
            const int8_t *cc = c + i0 * cs_i + k * cs_k;
            const float *wi = w + i0 * ldi + l0;
            const __m512i x0 = xs[j][0], x1 = xs[j][1];
            uint64_t keep = 0;
            if (skip && ni > 0) {
                keep = lc_gtp_nonzero(cc, cs_i, ni);
                if (keep == 0 && i0 > 0) continue;      /* every step adds nothing */
            }
#define LC_GTP_BLOCK(MODE)                                                                                   \
            if (skip) lc_gtp_block(o, cc, cs_i, wi, ldi, ni, i0 == 0, keep, 1, planes, x0, x1, S, wm, NG, MODE, PART, UNIT); \
            else lc_gtp_block(o, cc, cs_i, wi, ldi, ni, i0 == 0, 0, 0, planes, x0, x1, S, wm, NG, MODE, PART, UNIT);
            if (mode[j] == 0) {
                LC_GTP_BLOCK(0)
            } else {
                LC_GTP_BLOCK(1)
            }
#undef LC_GTP_BLOCK
        }
        i0 += IB;
    } while (i0 < NI);
}

void LC_BODY(gtp_tile)(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k, const uint8_t *idxT,
                       const float *w, int64_t ldi, const uint8_t *planes, float scale, int64_t NI, int64_t l0,
                       int64_t l1, int64_t k0, int64_t k1, int flags) {
    const int64_t n = l1 - l0;
    const int unit = scale == 1.0f;
    for (; k0 < k1; k0 += LC_GTP_KB_MAX) {               /* the unit's k's, at most LC_GTP_KB_MAX at a time */
        const int64_t ke = k1 - k0 < LC_GTP_KB_MAX ? k1 : k0 + LC_GTP_KB_MAX;
#define LC_GTP_RUN(NG, PART)                                                                                 \
        {                                                                                                    \
            if (unit) lc_gtp_run(outT, ldo, c, cs_i, cs_k, idxT, w, ldi, planes, scale, NI, l0, n, k0, ke, flags, NG, PART, 1); \
            else lc_gtp_run(outT, ldo, c, cs_i, cs_k, idxT, w, ldi, planes, scale, NI, l0, n, k0, ke, flags, NG, PART, 0); \
        }
        if (n == 128)
            LC_GTP_RUN(2, 0)
        else if (n == 64)
            LC_GTP_RUN(1, 0)
        else if (n > 64)
            LC_GTP_RUN(2, 1)
        else if (n > 0)
            LC_GTP_RUN(1, 1)
#undef LC_GTP_RUN
    }
}
#endif
