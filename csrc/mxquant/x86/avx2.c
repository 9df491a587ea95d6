/* csrc/mxquant/x86/avx2.c — the MX quantizer's AVX2 body (mxquant/mxquant.h: the contract;
 * job.h: the steps), compiled alone with the AVX2 flags (setup.py).  x86/avx512.c at 8 lanes:
 * job.h's element step lane for lane (below the element's normal range by a float product and
 * vroundps, as avx512.c), codes narrowed by a byte shuffle.  AVX2 has no
 * masked loads of bytes worth the trouble: a block's (rows) or a strip's (cols) last elements
 * short of a vector take job.h's scalar steps with the same scale.  rows: with blocks of a
 * multiple of 8, eight blocks of a row at a time share a butterfly of their maxima and one
 * vector of scales; cols: 32 columns side by side a row at a time (independent chains).
 *
 *   x       uint32 (float32 bits)  rows (R, L) / cols (L, N)     IN
 *   codes   uint8                  rows (R, Lp) / cols (Lp, N)   OUT
 *   scales  uint8                  rows (R, nb) / cols (nb, N)   OUT
 */
#define LC_BODY_ISA avx2
#include "core/simd.h"
#include "mxquant/x86/x86.h"

#if LC_X86

typedef struct {
    __m256i absm, small, c149, zeroa, thresh1, half1, one, off, maxmag, smag, pick;
    __m256 quantum;
    __m128i shift;
    int twos;
} lc_mxq_v8;

static inline void lc_mxq_v8_init(lc_mxq_v8 *c, const lc_mxq_fmt *f) {
    c->absm = _mm256_set1_epi32(0x7fffffff);
    c->small = _mm256_set1_epi32(0x800000);
    c->c149 = _mm256_set1_epi32(149 << 23);
    c->zeroa = _mm256_set1_epi32(LC_MXQ_ZERO_A);
    c->thresh1 = _mm256_set1_epi32(f->thresh - 1);              /* av > thresh - 1: av >= thresh */
    c->half1 = _mm256_set1_epi32((int32_t)((1u << (f->shift - 1)) - 1u));
    c->one = _mm256_set1_epi32(1);
    c->off = _mm256_set1_epi32(f->off);
    c->quantum = _mm256_castsi256_ps(_mm256_set1_epi32((277 - f->c0) << 23));   /* 2^(M - emin) = 2^(150 - c0) */
    c->maxmag = _mm256_set1_epi32(f->max_mag);
    c->smag = _mm256_set1_epi32(f->smag);
    /* each 128-bit half: its four dwords' low bytes into its low dword */
    c->pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                               0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    c->shift = _mm_cvtsi32_si128(f->shift);
    c->twos = f->twos;
}

LC_AI __m256i lc_mxq_ld8(const uint32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 8 codes (in the dwords' low bytes) of x's bits u, each lane scaled by its s23 */
LC_AI __m256i lc_mxq_code8(__m256i u, __m256i s23, const lc_mxq_v8 *c) {
    const __m256i a = _mm256_and_si256(u, c->absm);
    const __m256i sub = _mm256_cmpgt_epi32(c->small, a);                            /* zero / subnormal */
    const __m256i mf = _mm256_castps_si256(_mm256_cvtepi32_ps(a));                   /* exact below 2^23 */
    const __m256i as = _mm256_max_epi32(_mm256_sub_epi32(mf, c->c149), c->zeroa);
    const __m256i av = _mm256_sub_epi32(_mm256_blendv_epi8(a, as, sub), s23);
    const __m256i odd = _mm256_and_si256(_mm256_srl_epi32(av, c->shift), c->one);
    const __m256i qn = _mm256_sub_epi32(
        _mm256_srl_epi32(_mm256_add_epi32(_mm256_add_epi32(av, c->half1), odd), c->shift), c->off);
    /* below it: |v| / 2^(emin - M), rounded to nearest even by vroundps' immediate (MXCSR not read)
     * and then exact in vcvttps2dq (as avx512.c: other av lie below 2^-126 and give 0) */
    const __m256 t = _mm256_round_ps(_mm256_mul_ps(_mm256_castsi256_ps(av), c->quantum),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i qs = _mm256_max_epi32(_mm256_cvttps_epi32(t), _mm256_setzero_si256());
    const __m256i nrm = _mm256_cmpgt_epi32(av, c->thresh1);
    const __m256i mag = _mm256_min_epi32(_mm256_blendv_epi8(qs, qn, nrm), c->maxmag);
    const __m256i neg = _mm256_srai_epi32(u, 31);
    return c->twos ? _mm256_sub_epi32(_mm256_xor_si256(mag, neg), neg)           /* -mag where negative */
                   : _mm256_or_si256(mag, _mm256_and_si256(neg, c->smag));
}

/* the low bytes of 8 dwords, stored */
LC_AI void lc_mxq_store8(uint8_t *p, __m256i v, const lc_mxq_v8 *c) {
    const __m256i t = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, c->pick),
                                                  _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    _mm_storel_epi64((__m128i *)p, _mm256_castsi256_si128(t));
}

LC_AI uint32_t lc_mxq_hmax8(__m256i m) {
    __m128i t = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    t = _mm_max_epu32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm_max_epu32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    return (uint32_t)_mm_cvtsi128_si32(t);
}

/* lc_mxq_scale lane for lane (m <= 0x7fffffff: signed compares): 8 blocks' amax -> their scale
 * codes (in the dwords' low bytes), *s23 and the lanes holding NaN / inf (*bad all ones) */
LC_AI __m256i lc_mxq_scales8(__m256i m, const lc_mxq_fmt *f, __m256i *s23, __m256i *bad) {
    const __m256i e127 = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i e = _mm256_srli_epi32(m, 23);
    const __m256i fl = _mm256_blendv_epi8(_mm256_sub_epi32(e, e127), lo, _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    const __m256i s = _mm256_max_epi32(_mm256_min_epi32(_mm256_sub_epi32(fl, _mm256_set1_epi32(f->emax)), hi), lo);
    *bad = _mm256_cmpgt_epi32(m, _mm256_set1_epi32((int32_t)LC_MXQ_SPECIAL - 1));
    *s23 = _mm256_slli_epi32(s, 23);
    return _mm256_blendv_epi8(_mm256_add_epi32(s, e127), _mm256_set1_epi32((int32_t)LC_MXQ_NAN), *bad);
}

/* the lane maxima of 8 vectors: lane g of the result = max over the lanes of m[g] (a butterfly) */
LC_AI __m256i lc_mxq_hmax8x8(const __m256i *m) {
    __m256i t[4], u[2];
    for (int g = 0; g < 4; g++)
        t[g] = _mm256_max_epu32(_mm256_unpacklo_epi32(m[2 * g], m[2 * g + 1]),
                                _mm256_unpackhi_epi32(m[2 * g], m[2 * g + 1]));
    for (int g = 0; g < 2; g++)          /* 128-bit lane l: the lane's maximum of m[4g + q] in dword q */
        u[g] = _mm256_max_epu32(_mm256_unpacklo_epi64(t[2 * g], t[2 * g + 1]),
                                _mm256_unpackhi_epi64(t[2 * g], t[2 * g + 1]));
    return _mm256_max_epu32(_mm256_permute2x128_si256(u[0], u[1], 0x20), _mm256_permute2x128_si256(u[0], u[1], 0x31));
}

/* one block of n <= bk elements (rows) at x: its scale (returned), codes and padding */
LC_AI uint8_t lc_mxq_block8(const uint32_t *x, uint8_t *o, int64_t n, int64_t bk, const lc_mxq_fmt *f,
                            const lc_mxq_v8 *c) {
    __m256i m = _mm256_setzero_si256();
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) m = _mm256_max_epu32(m, _mm256_and_si256(lc_mxq_ld8(x + e), c->absm));
    uint32_t amax = lc_mxq_hmax8(m);
    for (; e < n; e++) {
        const uint32_t a = x[e] & 0x7fffffffu;
        amax = a > amax ? a : amax;
    }
    int32_t s23;
    const uint8_t sc = lc_mxq_scale(amax, f, &s23);
    e = 0;
    if (sc != LC_MXQ_NAN) {
        const __m256i s = _mm256_set1_epi32(s23);
        for (; e + 8 <= n; e += 8) lc_mxq_store8(o + e, lc_mxq_code8(lc_mxq_ld8(x + e), s, c), c);
        for (; e < n; e++) o[e] = lc_mxq_code(x[e], s23, f);
    }
    memset(o + e, 0, (size_t)(bk - e));
    return sc;
}

/* rows: where the block is a multiple of 8, runs of 8 whole blocks of a row share one butterfly of
 * their maxima and one vector of scales; every other block goes alone (as avx512.c) */
void LC_BODY(mxq_rows)(const lc_mxq_job *j, int64_t i0, int64_t i1) {
    const int64_t L = j->L, bk = j->bk, nb = j->nb, Lp = j->Lp, nbf = L / bk, nv = bk / 8;
    lc_mxq_v8 c;
    lc_mxq_v8_init(&c, &j->f);
    for (int64_t i = i0; i < i1;) {
        const int64_t r = i / nb, b = i % nb, k0 = b * bk;
        const uint32_t *x = j->x + r * L + k0;
        uint8_t *o = j->codes + r * Lp + k0;
        if (bk % 8 == 0 && b + 8 <= nbf && i + 8 <= i1) {
            __m256i m[8];
            for (int g = 0; g < 8; g++) {
                const uint32_t *xg = x + g * bk;
                __m256i a = _mm256_setzero_si256();
                for (int64_t v = 0; v < nv; v++)
                    a = _mm256_max_epu32(a, _mm256_and_si256(lc_mxq_ld8(xg + 8 * v), c.absm));
                m[g] = a;
            }
            __m256i s23v, badv;
            lc_mxq_store8(j->scales + r * nb + b, lc_mxq_scales8(lc_mxq_hmax8x8(m), &j->f, &s23v, &badv), &c);
            int32_t s23[8], bad[8];
            _mm256_storeu_si256((__m256i *)s23, s23v);
            _mm256_storeu_si256((__m256i *)bad, badv);
            for (int g = 0; g < 8; g++) {
                const uint32_t *xg = x + g * bk;
                uint8_t *og = o + g * bk;
                if (bad[g]) {
                    memset(og, 0, (size_t)bk);
                    continue;
                }
                const __m256i s = _mm256_set1_epi32(s23[g]);
                for (int64_t v = 0; v < nv; v++)
                    lc_mxq_store8(og + 8 * v, lc_mxq_code8(lc_mxq_ld8(xg + 8 * v), s, &c), &c);
            }
            i += 8;
        } else {
            j->scales[r * nb + b] = lc_mxq_block8(x, o, L - k0 < bk ? L - k0 : bk, bk, &j->f, &c);
            i += 1;
        }
    }
}

/* cols: 32 columns (4 vectors) side by side a row at a time, then 8, then one by one */
void LC_BODY(mxq_cols)(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1) {
    const int64_t N = j->N, k0 = b * j->bk, k1 = k0 + j->bk < j->L ? k0 + j->bk : j->L;
    lc_mxq_v8 c;
    lc_mxq_v8_init(&c, &j->f);
    int64_t c0 = n0;
    for (; c0 + 32 <= n1; c0 += 32) {
        __m256i m[4], s23[4], bad[4];
        for (int v = 0; v < 4; v++) m[v] = _mm256_setzero_si256();
        for (int64_t k = k0; k < k1; k++)
            for (int v = 0; v < 4; v++)
                m[v] = _mm256_max_epu32(m[v], _mm256_and_si256(lc_mxq_ld8(j->x + k * N + c0 + 8 * v), c.absm));
        for (int v = 0; v < 4; v++)
            lc_mxq_store8(j->scales + b * N + c0 + 8 * v, lc_mxq_scales8(m[v], &j->f, &s23[v], &bad[v]), &c);
        for (int64_t k = k0; k < k1; k++)
            for (int v = 0; v < 4; v++) {
                const __m256i code = lc_mxq_code8(lc_mxq_ld8(j->x + k * N + c0 + 8 * v), s23[v], &c);
                lc_mxq_store8(j->codes + k * N + c0 + 8 * v, _mm256_andnot_si256(bad[v], code), &c);
            }
    }
    for (; c0 + 8 <= n1; c0 += 8) {
        __m256i m = _mm256_setzero_si256(), s23, bad;
        for (int64_t k = k0; k < k1; k++)
            m = _mm256_max_epu32(m, _mm256_and_si256(lc_mxq_ld8(j->x + k * N + c0), c.absm));
        lc_mxq_store8(j->scales + b * N + c0, lc_mxq_scales8(m, &j->f, &s23, &bad), &c);
        for (int64_t k = k0; k < k1; k++) {
            const __m256i code = lc_mxq_code8(lc_mxq_ld8(j->x + k * N + c0), s23, &c);
            lc_mxq_store8(j->codes + k * N + c0, _mm256_andnot_si256(bad, code), &c);
        }
    }
    /* the last columns short of a vector: job.h's steps, a column at a time */
    for (; c0 < n1; c0++) {
        uint32_t amax = 0;
        for (int64_t k = k0; k < k1; k++) {
            const uint32_t a = j->x[k * N + c0] & 0x7fffffffu;
            amax = a > amax ? a : amax;
        }
        int32_t s23;
        const uint8_t sc = lc_mxq_scale(amax, &j->f, &s23);
        j->scales[b * N + c0] = sc;
        for (int64_t k = k0; k < k1; k++)
            j->codes[k * N + c0] = sc == LC_MXQ_NAN ? 0 : lc_mxq_code(j->x[k * N + c0], s23, &j->f);
    }
    for (int64_t k = j->L; k < (b + 1) * j->bk; k++) memset(j->codes + k * N + n0, 0, (size_t)(n1 - n0));
}

#endif /* LC_X86 */
