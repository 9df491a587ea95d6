/* csrc/mxquant/x86/avx512.c — the MX quantizer's AVX-512 F/BW/VL body (mxquant/mxquant.h: the
 * contract; job.h: the steps).  Compiled alone with its flags (setup.py) and once more against
 * SIMDe for the tests.  job.h's element step lane for lane on 16 float32 bit patterns: integer
 * operations (a subnormal's significand through vcvtdq2ps, exact), except below the element's
 * normal range, where RNE(sig / 2^k) is |v| 2^(M - emin) -- av read as a float32 times a power
 * of two, exact wherever av is a normal float32's bits; every other av lies below 2^-126 and
 * gives 0 -- converted with an explicit nearest-even rounding (neither MXCSR's mode nor its
 * FTZ / DAZ changes a bit); codes narrowed to bytes by vpmovdb.
 *
 * rows: per block, the magnitudes' bits maxed over its vectors (the last one masked); with
 *       blocks of a multiple of 16, sixteen blocks of a row at a time: their 16 maxima reduced
 *       across the lanes together (a butterfly) into one vector, job.h's scale lane for lane; a
 *       block alone: reduced across the lanes, job.h's scale; then each block's vectors encoded
 *       with its scale broadcast.
 * cols: per 16 columns of a strip, the vertical max over the block's rows gives 16 scales at once
 *       (job.h's lc_mxq_scale lane for lane), then each row's 16 codes with them.
 *
 *   x       uint32 (float32 bits)  rows (R, L) / cols (L, N)     IN
 *   codes   uint8                  rows (R, Lp) / cols (Lp, N)   OUT
 *   scales  uint8                  rows (R, nb) / cols (nb, N)   OUT
 */
#define LC_BODY_ISA avx512
#include "core/simd.h"
#include "mxquant/x86/x86.h"

#if LC_X86

/* Masked 32-bit loads and byte stores, and the narrowing of dwords to their low bytes.  SIMDe
 * 0.8.2 moves whole vectors for the masked ones (past a buffer's end) and has no vpmovdb: the
 * twin's build does them lane by lane, and narrows by vpmovsdb of the sign-extended low bytes
 * (the same bytes). */
#if defined(LC_SIMDE)
static inline __m512i lc_mxq_load(const uint32_t *p, int n) {
    uint32_t t[16] = {0};
    memcpy(t, p, (size_t)n * 4);
    return _mm512_loadu_si512((const void *)t);
}
static inline void lc_mxq_store(uint8_t *p, __m128i v, int n) {
    uint8_t t[16];
    _mm_storeu_si128((__m128i *)t, v);
    memcpy(p, t, (size_t)n);
}
static inline __m128i lc_mxq_bytes(__m512i v) {
    return _mm512_cvtsepi32_epi8(_mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24));
}
#else
static inline __m512i lc_mxq_load(const uint32_t *p, int n) {
    return n >= 16 ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi32(lc_x_mask(n), p);
}
static inline void lc_mxq_store(uint8_t *p, __m128i v, int n) {
    if (n >= 16) _mm_storeu_si128((__m128i *)p, v);
    else _mm_mask_storeu_epi8(p, (__mmask16)((1u << n) - 1), v);
}
#define lc_mxq_bytes(v) _mm512_cvtepi32_epi8(v)
#endif
/* float32 to int32, nearest even whatever MXCSR says (SIMDe's conversion reads MXCSR: nearest
 * even unless a caller changed it, as numpy's rint) */
#if defined(LC_SIMDE)
#define lc_mxq_rne_epi32(v) _mm512_cvtps_epi32(v)
#else
#define lc_mxq_rne_epi32(v) _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#endif

LC_AI __m512i lc_mxq_ld(const uint32_t *p) { return _mm512_loadu_si512((const void *)p); }

/* job.h's format constants, broadcast */
typedef struct {
    __m512i absm, small, c149, zeroa, thresh, half1, one, off, maxmag, smag;
    __m512 quantum;
    __m128i shift;
    int twos;
} lc_mxq_v;

static inline void lc_mxq_v_init(lc_mxq_v *c, const lc_mxq_fmt *f) {
    c->absm = _mm512_set1_epi32(0x7fffffff);
    c->small = _mm512_set1_epi32(0x800000);
    c->c149 = _mm512_set1_epi32(149 << 23);
    c->zeroa = _mm512_set1_epi32(LC_MXQ_ZERO_A);
    c->thresh = _mm512_set1_epi32(f->thresh);
    c->half1 = _mm512_set1_epi32((int32_t)((1u << (f->shift - 1)) - 1u));
    c->one = _mm512_set1_epi32(1);
    c->off = _mm512_set1_epi32(f->off);
    c->quantum = _mm512_castsi512_ps(_mm512_set1_epi32((277 - f->c0) << 23));   /* 2^(M - emin) = 2^(150 - c0) */
    c->maxmag = _mm512_set1_epi32(f->max_mag);
    c->smag = _mm512_set1_epi32(f->smag);
    c->shift = _mm_cvtsi32_si128(f->shift);
    c->twos = f->twos;
}

/* 16 codes (in the dwords' low bytes) of x's bits u, each lane scaled by its s23 */
LC_AI __m512i lc_mxq_code16(__m512i u, __m512i s23, const lc_mxq_v *c) {
    const __m512i a = _mm512_and_si512(u, c->absm);
    const __mmask16 sub = _mm512_cmp_epu32_mask(a, c->small, _MM_CMPINT_LT);        /* zero / subnormal */
    const __m512i mf = _mm512_castps_si512(_mm512_cvtepi32_ps(a));                    /* exact below 2^23 */
    const __m512i as = _mm512_max_epi32(_mm512_sub_epi32(mf, c->c149), c->zeroa);
    const __m512i av = _mm512_sub_epi32(_mm512_mask_blend_epi32(sub, a, as), s23);
    /* the element's normal range: nearest even on the bits, the exponent rebiased */
    const __m512i odd = _mm512_and_si512(_mm512_srl_epi32(av, c->shift), c->one);
    const __m512i qn = _mm512_sub_epi32(
        _mm512_srl_epi32(_mm512_add_epi32(_mm512_add_epi32(av, c->half1), odd), c->shift), c->off);
    /* below it: |v| / 2^(emin - M) rounded to nearest even (the product is exact where av is a
     * normal float32's bits; every other av -- subnormal bits, negative ones, NaN patterns -- lies
     * below 2^-126 and gives 0, through the max) */
    const __m512i qs = _mm512_max_epi32(lc_mxq_rne_epi32(_mm512_mul_ps(_mm512_castsi512_ps(av), c->quantum)),
                                        _mm512_setzero_si512());
    const __mmask16 nrm = _mm512_cmpge_epi32_mask(av, c->thresh);
    const __m512i mag = _mm512_min_epi32(_mm512_mask_blend_epi32(nrm, qs, qn), c->maxmag);
    const __mmask16 neg = _mm512_movepi32_mask(u);
    return c->twos ? _mm512_mask_sub_epi32(mag, neg, _mm512_setzero_si512(), mag)
                   : _mm512_mask_or_epi32(mag, neg, mag, c->smag);
}

/* lc_mxq_scale lane for lane: 16 blocks' amax -> their scale codes (bytes, OUT), *s23 (shared << 23)
 * and the mask of the blocks holding NaN / inf */
LC_AI __m128i lc_mxq_scales16(__m512i m, const lc_mxq_fmt *f, __m512i *s23, __mmask16 *bad) {
    const __m512i e127 = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i e = _mm512_srli_epi32(m, 23);
    const __m512i fl = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                                               _mm512_sub_epi32(e, e127), lo);
    const __m512i s = _mm512_max_epi32(_mm512_min_epi32(_mm512_sub_epi32(fl, _mm512_set1_epi32(f->emax)), hi), lo);
    *bad = _mm512_cmpge_epu32_mask(m, _mm512_set1_epi32((int32_t)LC_MXQ_SPECIAL));
    *s23 = _mm512_slli_epi32(s, 23);
    const __m512i nan = _mm512_set1_epi32((int32_t)LC_MXQ_NAN);
    return lc_mxq_bytes(_mm512_mask_blend_epi32(*bad, _mm512_add_epi32(s, e127), nan));
}

/* the lane maxima of 16 vectors: lane g of the result = max over the lanes of m[g] (unsigned;
 * a butterfly of unpacks and 128-bit shuffles, 45 operations for 16 reductions) */
LC_AI __m512i lc_mxq_hmax16(const __m512i *m) {
    __m512i t[8], u[4], w[2];
    for (int g = 0; g < 8; g++)          /* 128-bit lane l, dwords: m[2g] 0|2, m[2g+1] 0|2, m[2g] 1|3, m[2g+1] 1|3 */
        t[g] = _mm512_max_epu32(_mm512_unpacklo_epi32(m[2 * g], m[2 * g + 1]),
                                _mm512_unpackhi_epi32(m[2 * g], m[2 * g + 1]));
    for (int g = 0; g < 4; g++)          /* lane l: the lane's maximum of m[4g + q] in dword q */
        u[g] = _mm512_max_epu32(_mm512_unpacklo_epi64(t[2 * g], t[2 * g + 1]),
                                _mm512_unpackhi_epi64(t[2 * g], t[2 * g + 1]));
    for (int g = 0; g < 2; g++)          /* lanes (u[2g] l0|l1, u[2g] l2|l3, u[2g+1] l0|l1, u[2g+1] l2|l3) */
        w[g] = _mm512_max_epu32(_mm512_shuffle_i32x4(u[2 * g], u[2 * g + 1], 0x88),
                                _mm512_shuffle_i32x4(u[2 * g], u[2 * g + 1], 0xDD));
    return _mm512_max_epu32(_mm512_shuffle_i32x4(w[0], w[1], 0x88), _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
}

/* one block of n <= bk elements (rows) at x: its scale (returned), codes and padding */
LC_AI uint8_t lc_mxq_block(const uint32_t *x, uint8_t *o, int64_t n, int64_t bk, const lc_mxq_fmt *f,
                           const lc_mxq_v *c) {
    __m512i m = _mm512_setzero_si512();
    int64_t e = 0;
    for (; e + 16 <= n; e += 16) m = _mm512_max_epu32(m, _mm512_and_si512(lc_mxq_ld(x + e), c->absm));
    if (e < n) m = _mm512_max_epu32(m, _mm512_and_si512(lc_mxq_load(x + e, (int)(n - e)), c->absm));
    int32_t s23;
    const uint8_t sc = lc_mxq_scale((uint32_t)_mm512_reduce_max_epu32(m), f, &s23);
    e = 0;
    if (sc != LC_MXQ_NAN) {
        const __m512i s = _mm512_set1_epi32(s23);
        for (; e + 16 <= n; e += 16)
            _mm_storeu_si128((__m128i *)(o + e), lc_mxq_bytes(lc_mxq_code16(lc_mxq_ld(x + e), s, c)));
        if (e < n) {
            lc_mxq_store(o + e, lc_mxq_bytes(lc_mxq_code16(lc_mxq_load(x + e, (int)(n - e)), s, c)), (int)(n - e));
            e = n;
        }
    }
    memset(o + e, 0, (size_t)(bk - e));
    return sc;
}

/* rows: where the block is a multiple of 16, runs of 16 whole blocks of a row share one butterfly
 * of their maxima and one vector of scales (lc_mxq_hmax16, lc_mxq_scales16); every other block
 * (a row's last, short one; the ends of a range; other block sizes) goes alone */
void LC_BODY(mxq_rows)(const lc_mxq_job *j, int64_t i0, int64_t i1) {
    const int64_t L = j->L, bk = j->bk, nb = j->nb, Lp = j->Lp, nbf = L / bk, nv = bk / 16;
    lc_mxq_v c;
    lc_mxq_v_init(&c, &j->f);
    for (int64_t i = i0; i < i1;) {
        const int64_t r = i / nb, b = i % nb, k0 = b * bk;
        const uint32_t *x = j->x + r * L + k0;
        uint8_t *o = j->codes + r * Lp + k0;
        if (bk % 16 == 0 && b + 16 <= nbf && i + 16 <= i1) {
            __m512i m[16];
            for (int g = 0; g < 16; g++) {
                const uint32_t *xg = x + g * bk;
                __m512i a = _mm512_setzero_si512();
                for (int64_t v = 0; v < nv; v++)
                    a = _mm512_max_epu32(a, _mm512_and_si512(lc_mxq_ld(xg + 16 * v), c.absm));
                m[g] = a;
            }
            __m512i s23v;
            __mmask16 bad;
            const __m128i sc = lc_mxq_scales16(lc_mxq_hmax16(m), &j->f, &s23v, &bad);
            _mm_storeu_si128((__m128i *)(j->scales + r * nb + b), sc);
            int32_t s23[16];
            _mm512_storeu_si512((void *)s23, s23v);
            for (int g = 0; g < 16; g++) {
                const uint32_t *xg = x + g * bk;
                uint8_t *og = o + g * bk;
                if ((bad >> g) & 1) {
                    memset(og, 0, (size_t)bk);
                    continue;
                }
                const __m512i s = _mm512_set1_epi32(s23[g]);
                for (int64_t v = 0; v < nv; v++)
                    _mm_storeu_si128((__m128i *)(og + 16 * v),
                                     lc_mxq_bytes(lc_mxq_code16(lc_mxq_ld(xg + 16 * v), s, &c)));
            }
            i += 16;
        } else {
            j->scales[r * nb + b] = lc_mxq_block(x, o, L - k0 < bk ? L - k0 : bk, bk, &j->f, &c);
            i += 1;
        }
    }
}

void LC_BODY(mxq_cols)(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1) {
    const int64_t N = j->N, k0 = b * j->bk, k1 = k0 + j->bk < j->L ? k0 + j->bk : j->L;
    lc_mxq_v c;
    lc_mxq_v_init(&c, &j->f);
    int64_t c0 = n0;
    if (n1 - n0 == 64) {                 /* a whole strip: its 4 vectors side by side, a row at a time */
        __m512i m[4], s23[4];
        __mmask16 bad[4];
        for (int v = 0; v < 4; v++) m[v] = _mm512_setzero_si512();
        for (int64_t k = k0; k < k1; k++)
            for (int v = 0; v < 4; v++)
                m[v] = _mm512_max_epu32(m[v], _mm512_and_si512(lc_mxq_ld(j->x + k * N + n0 + 16 * v), c.absm));
        for (int v = 0; v < 4; v++)
            _mm_storeu_si128((__m128i *)(j->scales + b * N + n0 + 16 * v),
                             lc_mxq_scales16(m[v], &j->f, &s23[v], &bad[v]));
        for (int64_t k = k0; k < k1; k++)
            for (int v = 0; v < 4; v++) {
                const __m512i code = lc_mxq_code16(lc_mxq_ld(j->x + k * N + n0 + 16 * v), s23[v], &c);
                _mm_storeu_si128((__m128i *)(j->codes + k * N + n0 + 16 * v),
                                 lc_mxq_bytes(_mm512_maskz_mov_epi32((__mmask16)~bad[v], code)));
            }
        c0 = n1;
    }
    for (; c0 < n1; c0 += 16) {
        const int nc = n1 - c0 < 16 ? (int)(n1 - c0) : 16;
        __m512i m = _mm512_setzero_si512();
        for (int64_t k = k0; k < k1; k++)
            m = _mm512_max_epu32(m, _mm512_and_si512(lc_mxq_load(j->x + k * N + c0, nc), c.absm));
        __m512i s23;
        __mmask16 bad;
        lc_mxq_store(j->scales + b * N + c0, lc_mxq_scales16(m, &j->f, &s23, &bad), nc);
        for (int64_t k = k0; k < k1; k++) {
            const __m512i code = lc_mxq_code16(lc_mxq_load(j->x + k * N + c0, nc), s23, &c);
            lc_mxq_store(j->codes + k * N + c0, lc_mxq_bytes(_mm512_maskz_mov_epi32((__mmask16)~bad, code)), nc);
        }
    }
    for (int64_t k = j->L; k < (b + 1) * j->bk; k++) memset(j->codes + k * N + n0, 0, (size_t)(n1 - n0));
}

#endif /* LC_X86 */
