/* csrc/elementwise/elementwise.h — requantizer, ReLU table, fp16 rounding.
 *
 * Contracts (docs/DESIGN.md):
 *   requant: t = (acc + (1 << (shift-1))) >> shift  (arithmetic; shift 0: t = acc),
 *            saturated to int16, out = lut[t & 0xffff]
 *   relu8:   out = lut[x & 0xff]
 *   fp16 "nearest": IEEE binary16 round-to-nearest-even, subnormals kept,
 *            overflow to inf, NaN bits as numpy's astype(float16);
 *   fp16 "truncate": round toward zero (finite overflow -> 65504).
 *   scatter-add rows (an embedding's gradient): grad[ids[t]] += dy[t] for t in
 *            order, float32 adds per element in np.add.at's sequence; threads
 *            split the columns, so every element keeps that order.
 * The rounding add is done in 64-bit so acc near INT32_MAX does not wrap.
 *
 * Memory-bound: one pass, the team (core/team.h) over contiguous chunks (no reductions), the
 * SIMD bodies are chosen by `isa`: the generic and AVX2 bodies live here, the
 * AVX-512 ones (16 lanes; relu8 with VBMI byte permutes) in their own
 * translation units (x86/x86.h, csrc/elementwise/x86/); one pick per call
 * from the body table lc_ew_bodies by the isa argument's level and VBMI bit.
 */
#ifndef LUTCORE_ELEMENTWISE_H
#define LUTCORE_ELEMENTWISE_H

#include "core/common.h"
#include "core/dispatch.h"

#define LC_EW_CHUNK 65536

static inline int16_t lc_requant_t(int32_t acc, int shift) {
    int64_t t = shift == 0 ? (int64_t)acc : (((int64_t)acc + ((int64_t)1 << (shift - 1))) >> shift);
    if (t > 32767) t = 32767;
    if (t < -32768) t = -32768;
    return (int16_t)t;
}

static inline void lc_requant_generic(int8_t *out, const int32_t *acc, int64_t n, int shift,
                                      const int8_t *lut) {
    for (int64_t i = 0; i < n; i++) out[i] = lut[(uint16_t)lc_requant_t(acc[i], shift)];
}

/* Saturating fast path, valid only when lut[i] == clamp(int16(i), lo, hi) for all i
 * (the caller checks the table once). */
static inline void lc_requant_clamp_generic(int8_t *out, const int32_t *acc, int64_t n, int shift,
                                            int lo, int hi) {
    for (int64_t i = 0; i < n; i++) {
        int t = lc_requant_t(acc[i], shift);
        out[i] = (int8_t)(t < lo ? lo : (t > hi ? hi : t));
    }
}

#if LC_X86
LC_TARGET_AVX2 static void lc_requant_clamp_avx2(int8_t *out, const int32_t *acc, int64_t n, int shift,
                                                 int lo, int hi) {
    int64_t i = 0;
    /* 64-bit rounding add: split into even/odd lanes is costly; instead note that
     * (acc + r) >> s == (acc >> s) + (((acc & (2^s - 1)) + r) >> s) exactly, with
     * no overflow in 32 bits. */
    __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
    if (shift > 0 && shift < 31) {
        __m256i mask = _mm256_set1_epi32((int32_t)((1u << shift) - 1));
        __m256i rnd = _mm256_set1_epi32((int32_t)(1u << (shift - 1)));
        __m128i sh = _mm_cvtsi32_si128(shift);
        for (; i + 8 <= n; i += 8) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(acc + i));
            __m256i hiq = _mm256_sra_epi32(a, sh);
            __m256i lo_ = _mm256_srl_epi32(_mm256_add_epi32(_mm256_and_si256(a, mask), rnd), sh);
            __m256i t = _mm256_add_epi32(hiq, lo_);
            t = _mm256_min_epi32(_mm256_max_epi32(t, vlo), vhi);
            __m128i t16 = _mm_packs_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            __m128i t8 = _mm_packs_epi16(t16, t16);
            _mm_storel_epi64((__m128i *)(out + i), t8);
        }
    } else if (shift == 0) {
        for (; i + 8 <= n; i += 8) {
            __m256i t = _mm256_loadu_si256((const __m256i *)(acc + i));
            t = _mm256_min_epi32(_mm256_max_epi32(t, vlo), vhi);
            __m128i t16 = _mm_packs_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
            _mm_storel_epi64((__m128i *)(out + i), _mm_packs_epi16(t16, t16));
        }
    }
    lc_requant_clamp_generic(out + i, acc + i, n - i, shift, lo, hi);
}
#endif

static inline void lc_relu8_generic(int8_t *out, const int8_t *x, int64_t n, const int8_t *lut) {
    for (int64_t i = 0; i < n; i++) out[i] = lut[(uint8_t)x[i]];
}

/* ---------------------------------------------------------------- fp16 */

static inline uint32_t lc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float lc_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Inf / NaN of either rounding: numpy's NaN rule (top 10 payload bits, forced non-zero). */
static inline uint16_t lc_f16_special(uint32_t sign, uint32_t sig) {
    if (sig == 0) return (uint16_t)(sign | 0x7c00u);
    uint32_t h = 0x7c00u | (sig >> 13);
    if (h == 0x7c00u) h++;
    return (uint16_t)(sign | h);
}

/* float32 bits -> binary16 bits: round to nearest even (rne = 1), or toward zero with a
 * finite overflow saturating to 65504 (rne = 0). */
static inline __attribute__((always_inline)) uint16_t lc_f32_to_f16(uint32_t f, int rne) {
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t exp = (f >> 23) & 0xffu, sig = f & 0x7fffffu;
    if (exp == 0xffu) return lc_f16_special(sign, sig);
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | (rne ? 0x7c00u : 0x7bffu));
    uint32_t q, rem, half;
    if (e <= 0) {
        /* subnormal (or zero) result */
        if (e < -10) return (uint16_t)sign;
        uint32_t m = sig | 0x800000u;          /* 24-bit significand */
        int shift = 14 - e;                     /* 14..24 */
        q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    } else {
        q = ((uint32_t)e << 10) | (sig >> 13), rem = sig & 0x1fffu, half = 0x1000u;
    }
    if (rne && (rem > half || (rem == half && (q & 1u)))) q++;   /* may carry into inf: correct */
    return (uint16_t)(sign | q);
}

static inline uint16_t lc_f32_to_f16_rne(uint32_t f) { return lc_f32_to_f16(f, 1); }
static inline uint16_t lc_f32_to_f16_rtz(uint32_t f) { return lc_f32_to_f16(f, 0); }

static inline uint32_t lc_f16_to_f32_bits(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return sign;
        /* subnormal: mant/1024 * 2^-14, renormalise */
        int e = -1;
        do { mant <<= 1; e++; } while (!(mant & 0x400u));
        mant &= 0x3ffu;
        return sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13);
    }
    if (exp == 31) return sign | 0x7f800000u | (mant << 13);
    return sign | ((exp - 15 + 127) << 23) | (mant << 13);
}

/* mode 0 = nearest, 1 = truncate */
static inline void lc_fp16_encode_generic(uint16_t *out, const float *x, int64_t n, int mode) {
    if (mode == 0)
        for (int64_t i = 0; i < n; i++) out[i] = lc_f32_to_f16_rne(lc_f32_bits(x[i]));
    else
        for (int64_t i = 0; i < n; i++) out[i] = lc_f32_to_f16_rtz(lc_f32_bits(x[i]));
}
static inline void lc_fp16_decode_generic(float *out, const uint16_t *h, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = lc_bits_f32(lc_f16_to_f32_bits(h[i]));
}
static inline void lc_fp16_round_generic(float *out, const float *x, int64_t n, int mode) {
    if (mode == 0)
        for (int64_t i = 0; i < n; i++) out[i] = lc_bits_f32(lc_f16_to_f32_bits(lc_f32_to_f16_rne(lc_f32_bits(x[i]))));
    else
        for (int64_t i = 0; i < n; i++) out[i] = lc_bits_f32(lc_f16_to_f32_bits(lc_f32_to_f16_rtz(lc_f32_bits(x[i]))));
}

#if LC_X86
/* F16C converts with IEEE semantics; only NaN payloads differ from numpy (F16C
 * quiets them), so lanes holding NaN are redone by the scalar rule. */
LC_TARGET_AVX2 static void lc_fp16_encode_avx2(uint16_t *out, const float *x, int64_t n, int mode) {
    int64_t i = 0;
    if (mode == 0) {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(out + i), h);
            if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
                lc_fp16_encode_generic(out + i, x + i, 8, 0);
        }
    }
    lc_fp16_encode_generic(out + i, x + i, n - i, mode);
}
LC_TARGET_AVX2 static void lc_fp16_decode_avx2(float *out, const uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(v));
        /* NaN payloads: F16C quiets signalling NaNs, numpy does not */
        __m128i e = _mm_and_si128(v, _mm_set1_epi16(0x7c00));
        __m128i isnan = _mm_and_si128(_mm_cmpeq_epi16(e, _mm_set1_epi16(0x7c00)),
                                      _mm_xor_si128(_mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(0x3ff)), _mm_setzero_si128()),
                                                    _mm_set1_epi16(-1)));
        if (_mm_movemask_epi8(isnan)) lc_fp16_decode_generic(out + i, h + i, 8);
    }
    lc_fp16_decode_generic(out + i, h + i, n - i);
}
LC_TARGET_AVX2 static void lc_fp16_round_avx2(float *out, const float *x, int64_t n, int mode) {
    int64_t i = 0;
    if (mode == 0) {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm256_storeu_ps(out + i, r);
            if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
                lc_fp16_round_generic(out + i, x + i, 8, 0);
        }
    } else {
        /* truncate: toward-zero conversion; F16C's RTZ saturates finite overflow to 65504 */
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
            _mm256_storeu_ps(out + i, r);
            if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
                lc_fp16_round_generic(out + i, x + i, 8, 1);
        }
    }
    lc_fp16_round_generic(out + i, x + i, n - i, mode);
}
#endif

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies live in their own translation units (elementwise/x86/x86.h,
 * csrc/elementwise/x86/); LC_EW_SIMDE (setup.py: 1 in the test twin's build) binds their SIMDe
 * copies.  relu8 has one SIMD body (VBMI byte permutes); every other entry runs the generic
 * one, named apart for show_config. */
#include "elementwise/x86/x86.h"
#ifndef LC_EW_SIMDE
#define LC_EW_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    const char *relu8_name;
    void (*requant_clamp)(int8_t *, const int32_t *, int64_t, int, int, int);
    void (*fp16_encode)(uint16_t *, const float *, int64_t, int);
    void (*fp16_decode)(float *, const uint16_t *, int64_t);
    void (*fp16_round)(float *, const float *, int64_t, int);
    void (*relu8)(int8_t *, const int8_t *, int64_t, const int8_t *);
} lc_ew_body;
#define LC_EW_X(isa, fn) LC_XBODY(LC_EW_SIMDE, isa, fn)
#define LC_EW_AVX512_FNS LC_EW_X(avx512, ew_requant_clamp), LC_EW_X(avx512, ew_fp16_encode), \
    LC_EW_X(avx512, ew_fp16_decode), LC_EW_X(avx512, ew_fp16_round)
#define LC_EW_RELU8_GENERIC "generic (a table per byte)"
static const lc_ew_body lc_ew_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512 | LC_ISA_VBMI}, "avx512vbmi (vpermi2b)", LC_EW_AVX512_FNS,
     LC_EW_X(avx512vbmi, ew_relu8)},
    {{"avx512", LC_ISA_AVX512}, LC_EW_RELU8_GENERIC, LC_EW_AVX512_FNS, lc_relu8_generic},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, LC_EW_RELU8_GENERIC, lc_requant_clamp_avx2, lc_fp16_encode_avx2, lc_fp16_decode_avx2,
     lc_fp16_round_avx2, lc_relu8_generic},
#endif
    {{"generic", LC_ISA_GENERIC}, LC_EW_RELU8_GENERIC, lc_requant_clamp_generic, lc_fp16_encode_generic,
     lc_fp16_decode_generic, lc_fp16_round_generic, lc_relu8_generic},
};
static inline const lc_ew_body *lc_ew_pick(int isa) { return LC_BODY_PICK(lc_ew_body, lc_ew_bodies, isa); }
/* For show_config: which = 0 requant/fp16, 1 relu8. */
static const char *lc_ew_body_name(int isa, int which) {
    const lc_ew_body *b = lc_ew_pick(isa);
    return which == 0 ? b->head.name : b->relu8_name;
}

/* One pass over n values in chunks of LC_EW_CHUNK, one body call (isa's body B) a chunk; the
 * team (core/team.h) runs ranges of whole chunks, at least LC_EW_GRAIN chunks each. */
#define LC_EW_GRAIN 2
typedef struct {
    lc_unit_fn chunk;   /* one chunk: chunk(job, u, tid) */
    const lc_ew_body *B;
    void *out;
    const void *x;
    const int8_t *lut;
    int64_t n;
    int shift, clamp_lo, clamp_hi, is_clamp, mode;
} lc_ew_job;

/* chunk u's first element and length */
static inline int64_t lc_ew_chunk(const lc_ew_job *j, int64_t u, int64_t *len) {
    const int64_t i0 = u * LC_EW_CHUNK;
    *len = j->n - i0 < LC_EW_CHUNK ? j->n - i0 : LC_EW_CHUNK;
    return i0;
}
static void lc_ew_range(void *p, int64_t u0, int64_t u1, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    for (int64_t u = u0; u < u1; u++) j->chunk(p, u, tid);
}
static inline void lc_ew_run(lc_ew_job *j, int isa, int nthreads, lc_unit_fn chunk) {
    j->B = lc_ew_pick(isa);
    j->chunk = chunk;
    lc_team_range(nthreads, (j->n + LC_EW_CHUNK - 1) / LC_EW_CHUNK, LC_EW_GRAIN, lc_ew_range, j);
}

static void lc_requant_unit(void *p, int64_t u, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    int64_t len, i0 = lc_ew_chunk(j, u, &len);
    int8_t *out = (int8_t *)j->out + i0;
    const int32_t *acc = (const int32_t *)j->x + i0;
    (void)tid;
    if (j->is_clamp) j->B->requant_clamp(out, acc, len, j->shift, j->clamp_lo, j->clamp_hi);
    else lc_requant_generic(out, acc, len, j->shift, j->lut);
}
/* is_clamp: lut is clamp(int16, clamp_lo, clamp_hi) (the caller checked it): the body's
 * saturating path; else the table, generic. */
static void lc_requant(int8_t *out, const int32_t *acc, int64_t n, int shift, const int8_t *lut,
                       int clamp_lo, int clamp_hi, int is_clamp, int isa, int nthreads) {
    lc_ew_job j = {.out = out, .x = acc, .lut = lut, .n = n, .shift = shift, .clamp_lo = clamp_lo,
                   .clamp_hi = clamp_hi, .is_clamp = is_clamp};
    lc_ew_run(&j, isa, nthreads, lc_requant_unit);
}
static void lc_relu8_unit(void *p, int64_t u, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    int64_t len, i0 = lc_ew_chunk(j, u, &len);
    (void)tid;
    j->B->relu8((int8_t *)j->out + i0, (const int8_t *)j->x + i0, len, j->lut);
}
static void lc_relu8(int8_t *out, const int8_t *x, int64_t n, const int8_t *lut, int isa, int nthreads) {
    lc_ew_job j = {.out = out, .x = x, .lut = lut, .n = n};
    lc_ew_run(&j, isa, nthreads, lc_relu8_unit);
}
static void lc_fp16_encode_unit(void *p, int64_t u, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    int64_t len, i0 = lc_ew_chunk(j, u, &len);
    (void)tid;
    j->B->fp16_encode((uint16_t *)j->out + i0, (const float *)j->x + i0, len, j->mode);
}
static void lc_fp16_encode(uint16_t *out, const float *x, int64_t n, int mode, int isa, int nthreads) {
    lc_ew_job j = {.out = out, .x = x, .n = n, .mode = mode};
    lc_ew_run(&j, isa, nthreads, lc_fp16_encode_unit);
}
static void lc_fp16_decode_unit(void *p, int64_t u, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    int64_t len, i0 = lc_ew_chunk(j, u, &len);
    (void)tid;
    j->B->fp16_decode((float *)j->out + i0, (const uint16_t *)j->x + i0, len);
}
static void lc_fp16_decode(float *out, const uint16_t *h, int64_t n, int isa, int nthreads) {
    lc_ew_job j = {.out = out, .x = h, .n = n};
    lc_ew_run(&j, isa, nthreads, lc_fp16_decode_unit);
}
static void lc_fp16_round_unit(void *p, int64_t u, int tid) {
    const lc_ew_job *j = (const lc_ew_job *)p;
    int64_t len, i0 = lc_ew_chunk(j, u, &len);
    (void)tid;
    j->B->fp16_round((float *)j->out + i0, (const float *)j->x + i0, len, j->mode);
}
static void lc_fp16_round(float *out, const float *x, int64_t n, int mode, int isa, int nthreads) {
    lc_ew_job j = {.out = out, .x = x, .n = n, .mode = mode};
    lc_ew_run(&j, isa, nthreads, lc_fp16_round_unit);
}

/* grad (V, C) rows ids[t] += dy (n, C) rows t, t in order; ids already checked < V.  Ranges of
 * column blocks of LC_EW_SCATTER_CB (each column's adds in t order, whoever runs them), at
 * least LC_EW_SCATTER_GRAIN adds a range. */
#define LC_EW_SCATTER_CB 64
#define LC_EW_SCATTER_GRAIN 16384
typedef struct { float *grad; const int64_t *ids; const float *dy; int64_t C, n; } lc_scatter_job;
static void lc_scatter_add_range(void *p, int64_t cb0, int64_t cb1, int tid) {
    const lc_scatter_job *j = (const lc_scatter_job *)p;
    const int64_t C = j->C, c1 = cb1 * LC_EW_SCATTER_CB < C ? cb1 * LC_EW_SCATTER_CB : C;
    (void)tid;
    for (int64_t c0 = cb0 * LC_EW_SCATTER_CB; c0 < c1; c0 += LC_EW_SCATTER_CB) {
        const int64_t ce = c0 + LC_EW_SCATTER_CB < c1 ? c0 + LC_EW_SCATTER_CB : c1;
        for (int64_t t = 0; t < j->n; t++) {
            float *g = j->grad + j->ids[t] * C;
            const float *d = j->dy + t * C;
            for (int64_t c = c0; c < ce; c++) g[c] = g[c] + d[c];
        }
    }
}
static void lc_scatter_add_rows(float *grad, int64_t C, const int64_t *ids, int64_t n, const float *dy,
                                int nthreads) {
    const int64_t ncb = (C + LC_EW_SCATTER_CB - 1) / LC_EW_SCATTER_CB;
    const int64_t per = n * LC_EW_SCATTER_CB;   /* adds a block */
    const int64_t grain = per >= LC_EW_SCATTER_GRAIN ? 1 : LC_EW_SCATTER_GRAIN / (per > 0 ? per : 1);
    lc_scatter_job j = {grad, ids, dy, C, n};
    if (n > 0) lc_team_range(nthreads, ncb, grain, lc_scatter_add_range, &j);
}

#endif /* LUTCORE_ELEMENTWISE_H */
