/* csrc/netlist/x86/avx512.c — the netlist family's AVX-512 body (netlist/netlist.h: the contract
 * and the driver): slots of 8 zmm (64 words, 4096 lanes a pass), each gate one vpternlogq per
 * zmm with its truth table as the imm8 (a switch over the 256 tables: the imm8 is an
 * immediate), the operand bits into planes with vptestmw (64 codes: two masks a bit), product
 * planes back into values by masked ORs over 8 int64 lanes.  Popcounts: a nibble table and
 * vpsadbw (AVX-512 F/BW), or vpopcntq where avx512_vpopcnt.c includes this file with
 * LC_NL_VPOPCNT.  Per word the sum sum_p w_p popcount(out_p & mask) runs from the top bit
 * (s = 2 s + c_p) as the generic body's: integers, the same bits.  Compiled alone with its
 * flags (setup.py) and once more against SIMDe for the tests. */
#ifndef LC_BODY_ISA
#define LC_BODY_ISA avx512
#endif
#include "core/simd.h"
#include "netlist/x86/x86.h"

#if LC_X86

#ifndef LC_NL_VPOPCNT
#define LC_NL_VPOPCNT 0
#endif

/* per 64-bit lane: popcount */
LC_AI __m512i lc_nl_popcnt(__m512i v) {
#if LC_NL_VPOPCNT
    return _mm512_popcnt_epi64(v);
#else
    const __m512i lut = _mm512_set_epi8(4, 3, 3, 2, 3, 2, 2, 1, 3, 2, 2, 1, 2, 1, 1, 0, 4, 3, 3, 2, 3, 2, 2, 1,
                                        3, 2, 2, 1, 2, 1, 1, 0, 4, 3, 3, 2, 3, 2, 2, 1, 3, 2, 2, 1, 2, 1, 1, 0,
                                        4, 3, 3, 2, 3, 2, 2, 1, 3, 2, 2, 1, 2, 1, 1, 0);
    const __m512i lo = _mm512_set1_epi8(0x0F);
    const __m512i c = _mm512_add_epi8(_mm512_shuffle_epi8(lut, _mm512_and_si512(v, lo)),
                                      _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo)));
    return _mm512_sad_epu8(c, _mm512_setzero_si512());
#endif
}

#define U LC_NL_X86_U
/* case kind * 256 + tt: kind 0 reads x, y, z; 1 x, y (z = x); 2 x */
#define LC_NL_T(t)                                                                      \
    case t:                                                                             \
        for (int u = 0; u < U; u++) D[u] = _mm512_ternarylogic_epi64(X[u], Y[u], Z[u], t); \
        break;                                                                          \
    case 256 + t:                                                                       \
        for (int u = 0; u < U; u++) D[u] = _mm512_ternarylogic_epi64(X[u], Y[u], X[u], t); \
        break;                                                                          \
    case 512 + t:                                                                       \
        for (int u = 0; u < U; u++) D[u] = _mm512_ternarylogic_epi64(X[u], X[u], X[u], t); \
        break;
#define LC_NL_T8(h) LC_NL_T(h + 0) LC_NL_T(h + 1) LC_NL_T(h + 2) LC_NL_T(h + 3) LC_NL_T(h + 4) LC_NL_T(h + 5) \
    LC_NL_T(h + 6) LC_NL_T(h + 7)
#define LC_NL_T64(h) LC_NL_T8(h + 0) LC_NL_T8(h + 8) LC_NL_T8(h + 16) LC_NL_T8(h + 24) LC_NL_T8(h + 32) \
    LC_NL_T8(h + 40) LC_NL_T8(h + 48) LC_NL_T8(h + 56)

void LC_BODY(nl_run)(const lc_nl_plan *Pl, uint64_t *nets, const uint64_t *a, int64_t as, const uint64_t *b,
                     int64_t bs, const uint64_t *mask, int64_t *acc, uint64_t *outp, int64_t os) {
    __m512i *V = (__m512i *)nets;
    for (int i = 0; i < Pl->a_bits; i++)
        for (int u = 0; u < U; u++)
            V[(2 + i) * U + u] = _mm512_loadu_si512((const void *)(a + i * as + 8 * u));
    for (int j = 0; j < Pl->b_bits; j++)
        for (int u = 0; u < U; u++)
            V[(2 + Pl->a_bits + j) * U + u] = _mm512_loadu_si512((const void *)(b + j * bs + 8 * u));
    const lc_nl_ins *ins = Pl->ins, *end = Pl->ins + Pl->nins;
    for (; ins < end; ins++) {
        __m512i *D = V + (int64_t)ins->d * U;
        const __m512i *X = V + (int64_t)ins->x * U, *Y = V + (int64_t)ins->y * U, *Z = V + (int64_t)ins->z * U;
        switch (ins->kind * 256 + ins->tt) {
            LC_NL_T64(0) LC_NL_T64(64) LC_NL_T64(128) LC_NL_T64(192)
        }
    }
    if (!acc) {
        for (int p = 0; p < Pl->p_bits; p++)
            for (int u = 0; u < U; u++)
                _mm512_storeu_si512((void *)(outp + p * os + 8 * u), V[Pl->out_slot[p] * U + u]);
        return;
    }
    const int top = Pl->p_bits - 1;
    for (int u = 0; u < U; u++) {
        const __m512i mk = _mm512_loadu_si512((const void *)(mask + 8 * u));
        const __m512i ct = lc_nl_popcnt(_mm512_and_si512(V[Pl->out_slot[top] * U + u], mk));
        __m512i s = Pl->psigned ? _mm512_sub_epi64(_mm512_setzero_si512(), ct) : ct;
        for (int p = top - 1; p >= 0; p--)
            s = _mm512_add_epi64(_mm512_slli_epi64(s, 1),
                                 lc_nl_popcnt(_mm512_and_si512(V[Pl->out_slot[p] * U + u], mk)));
        _mm512_storeu_si512((void *)(acc + 8 * u), s);
    }
}
#undef U

void LC_BODY(nl_planes)(uint64_t *out, int64_t os, const uint16_t *x, int64_t n, int bits) {
    for (int64_t w = 0; w * 64 < n; w++) {
        uint16_t t[64];
        const uint16_t *src = x + w * 64;
        if (n - w * 64 < 64) {
            memset(t, 0, sizeof(t));
            memcpy(t, src, sizeof(uint16_t) * (size_t)(n - w * 64));
            src = t;
        }
        const __m512i v0 = _mm512_loadu_si512((const void *)src), v1 = _mm512_loadu_si512((const void *)(src + 32));
        for (int i = 0; i < bits; i++) {      /* two 32-lane masks, stored as the word's halves */
            const __m512i bit = _mm512_set1_epi16((short)(1 << i));
            uint32_t *h = (uint32_t *)(out + i * os + w);
            h[0] = (uint32_t)_mm512_test_epi16_mask(v0, bit);
            h[1] = (uint32_t)_mm512_test_epi16_mask(v1, bit);
        }
    }
}

/* 8 int64 lanes a group: bit p's 8 lanes OR 2^p in (the top bit of a signed product adds
 * -2^(P-1): the bits below it are disjoint, so the sum is the value) */
void LC_BODY(nl_values)(int64_t *out, const uint64_t *pl, int64_t ps, int64_t n, int p_bits, int psigned) {
    const int top = p_bits - 1;
    const __m512i wtop = _mm512_set1_epi64(psigned ? -((int64_t)1 << top) : (int64_t)1 << top);
    for (int64_t w = 0; w * 64 < n; w++) {
        int64_t t[64];
        const int64_t l1 = n - w * 64 < 64 ? n - w * 64 : 64;
        int64_t *dst = l1 == 64 ? out + w * 64 : t;
        for (int q = 0; q < 8; q++) {
            __m512i v = _mm512_setzero_si512();
            for (int p = 0; p < top; p++)
                v = _mm512_mask_or_epi64(v, (__mmask8)(pl[p * ps + w] >> (8 * q)), v,
                                         _mm512_set1_epi64((int64_t)1 << p));
            v = _mm512_mask_add_epi64(v, (__mmask8)(pl[top * ps + w] >> (8 * q)), v, wtop);
            _mm512_storeu_si512((void *)(dst + 8 * q), v);
        }
        if (dst == t) memcpy(out + w * 64, t, sizeof(int64_t) * (size_t)l1);
    }
}

/* x[i] = row[b[i] & bm]: the row's 256 patterns in 8 zmm, 32 codes a step -- four 64-entry
 * vpermi2w lookups, then index bits 6 and 7 choose among them */
void LC_BODY(nl_gather)(uint16_t *x, const uint16_t *row, const uint16_t *b, int64_t n, uint16_t bm) {
    __m512i t[8];
    for (int q = 0; q < 8; q++) t[q] = _mm512_loadu_si512((const void *)(row + 32 * q));
    const __m512i mk = _mm512_set1_epi16((short)bm), b6 = _mm512_set1_epi16(64), b7 = _mm512_set1_epi16(128);
    for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 live = n - i >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << (n - i)) - 1);
        const __m512i idx = _mm512_and_si512(_mm512_maskz_loadu_epi16(live, (const void *)(b + i)), mk);
        const __m512i v0 = _mm512_permutex2var_epi16(t[0], idx, t[1]), v1 = _mm512_permutex2var_epi16(t[2], idx, t[3]);
        const __m512i v2 = _mm512_permutex2var_epi16(t[4], idx, t[5]), v3 = _mm512_permutex2var_epi16(t[6], idx, t[7]);
        const __mmask32 h6 = _mm512_test_epi16_mask(idx, b6), h7 = _mm512_test_epi16_mask(idx, b7);
        const __m512i v = _mm512_mask_blend_epi16(h7, _mm512_mask_blend_epi16(h6, v0, v1),
                                                  _mm512_mask_blend_epi16(h6, v2, v3));
        _mm512_mask_storeu_epi16((void *)(x + i), live, v);
    }
}

/* the generic body's post (netlist.h), 8 words a zmm */
void LC_BODY(nl_acc_post)(const uint64_t *O, uint64_t *R, const uint64_t *D, uint64_t *CP, int64_t TW, int W, int ob,
                          int sgn, int sat, int count) {
    const uint64_t *Ot = O + (int64_t)(ob - 1) * TW;
    for (int64_t w = 0; w < TW; w += 8) {
        const __m512i ot = _mm512_loadu_si512((const void *)(Ot + w));
        __m512i ov, pos;
        if (ob == W + 1) {
            if (sgn) {
                ov = _mm512_xor_si512(ot, _mm512_loadu_si512((const void *)(O + (int64_t)(W - 1) * TW + w)));
                pos = _mm512_andnot_si512(ot, ov);
            } else {
                ov = pos = ot;
            }
        } else {
            const __m512i rs = _mm512_loadu_si512((const void *)(R + (int64_t)(W - 1) * TW + w));
            const __m512i ds = _mm512_loadu_si512((const void *)(D + (int64_t)(W - 1) * TW + w));
            ov = _mm512_ternarylogic_epi64(rs, ds, ot, 0x42);        /* ~(r ^ d) & (s ^ r) */
            pos = _mm512_andnot_si512(rs, ov);
        }
        const __mmask8 any = _mm512_test_epi64_mask(ov, ov);
        if (count && any) {
            __m512i c = ov;
            for (int b = 0; b < LC_ACC_CNT_BITS; b++) {
                uint64_t *cp = CP + (int64_t)b * TW + w;
                const __m512i old = _mm512_loadu_si512((const void *)cp);
                _mm512_storeu_si512((void *)cp, _mm512_xor_si512(old, c));
                c = _mm512_and_si512(old, c);
                if (!_mm512_test_epi64_mask(c, c)) break;
            }
        }
        if (!sat || !any) {
            for (int i = 0; i < W; i++)
                _mm512_storeu_si512((void *)(R + (int64_t)i * TW + w),
                                    _mm512_loadu_si512((const void *)(O + (int64_t)i * TW + w)));
        } else {
            const __m512i neg = _mm512_andnot_si512(pos, ov);
            for (int i = 0; i < W; i++) {
                const __m512i o = _mm512_loadu_si512((const void *)(O + (int64_t)i * TW + w));
                const __m512i set = i == W - 1 && sgn ? neg : pos;
                _mm512_storeu_si512((void *)(R + (int64_t)i * TW + w), _mm512_ternarylogic_epi64(o, ov, set, 0xBA));
            }
        }
    }
}

#endif /* LC_X86 */
