/* csrc/mantgemm/x86/avx512.c — the mantissa-product GEMM's AVX-512 F/BW/DQ body, both routes
 * (mantgemm/mantgemm.h: the contract; job.h: the forms and the scalar row).  Compiled alone with its
 * flags (setup.py) and once more against SIMDe for the tests.  Lanes are output columns: each
 * output's products are added in k order, one float32 addition each, as in the generic body.
 *
 * The mul route (the exact table): a tile of up to 6 rows x 4 zmm (64 columns: one panel) keeps 24
 * accumulators; per k the panel's 4 zmm of rounded B values, per row va broadcast, vmulps then
 * vaddps (never fused: the product is rounded once, then the sum).  k in chunks of LC_MT_KCM, the
 * accumulators in the thread's scratch between chunks.
 *
 * The table route: per row m and k, 4 zmm of the panel's columns.  The table's words: bf16 — T's
 * row ma (128 floats, 8 zmm) loaded once per (m, k), each lane's word picked by two vpermt2ps over
 * 32 entries and two blends on bits 5 and 6 of mb; fp16 — vgatherdps at ma << 10 | mb.  Then p =
 * vscalefps(T, ea + eb): the exact T 2^(ea + eb) rounded once (nearest even, float32's subnormals,
 * overflow inf: the instruction's own rounding, MXCSR's default); a zero operand's exponent
 * LC_MT_EZERO makes p = +-0, which adds nothing (y starts at +0 and never becomes -0).  The sign
 * sa ^ sb by vpternlogd, then y + p.  k runs in chunks of LC_MT_KC (the chunk's panel forms stay in
 * L1) with y kept in the thread's scratch between chunks.  A row of A or a panel of B holding an
 * inf or a NaN takes job.h's scalar row instead.
 *
 *   yt   float32 (rows, NB)        the unit's y between chunks (both routes)      scratch
 *
 * The pre-pass, 16 elements a step: job.h's rounding and form lane for lane in integer arithmetic
 * (bf16: the carry trick; fp16: the rebias with its carry, and the subnormal shift, by vpsrlvd),
 * the same bits as the scalar ones (tests: every body against the generic one, the rounding of
 * every fp16 and bf16 midpoint).
 */
#define LC_BODY_ISA avx512
#include "core/simd.h"
#include "mantgemm/x86/x86.h"

#if LC_X86

#define LC_MT_KC 16        /* k per chunk of the table route */
#define LC_MT_KCM 128      /* k per chunk of the mul route */

/* T * 2^floor(e), exact then rounded once (vscalefps).  SIMDe 0.8.2's scalef flushes subnormals and
 * forms 2^e in float32 (inf past 2^127): the twin works lane by lane in float64, exactly, then
 * rounds to float32 once, as the instruction does */
#if defined(LC_SIMDE)
static inline __m512 lc_mt_scalef(__m512 t, __m512 e) {
    float a[16], b[16];
    _mm512_storeu_ps(a, t);
    _mm512_storeu_ps(b, e);
    for (int i = 0; i < 16; i++) a[i] = (float)ldexp((double)a[i], (int)floorf(b[i]));
    return _mm512_loadu_ps(a);
}
#else
#define lc_mt_scalef(t, e) _mm512_scalef_ps((t), (e))
#endif

/* y with every NaN lane the canonical 0x7fc00000 */
LC_AI __m512 lc_mt_canon16(__m512 y) {
    __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(y, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
}

/* Y's row at out, columns [16 v, 16 v + 16) below nc, from y */
LC_AI void lc_mt_store16(float *out, __m512 y, int v, int nc) {
    const int left = nc - 16 * v;
    if (left <= 0) return;
    lc_x_mask_storeu_ps(out + 16 * v, lc_x_mask(left), lc_mt_canon16(y));
}

/* ------------------------------------------------------------------ the pre-pass */
#define LC_MT_I(x) _mm512_set1_epi32((int32_t)(x))

/* float32 bits u -> bf16 bits (job.h lc_mt_bf16), 16 lanes */
LC_AI __m512i lc_mt_bf16x16(__m512i u) {
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, LC_MT_I(0x7fffffff)), LC_MT_I(0x7f800000));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, LC_MT_I(0x7fff)), _mm512_and_si512(_mm512_srli_epi32(u, 16), LC_MT_I(1)));
    __m512i q = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u, 16), LC_MT_I(0x8000)), LC_MT_I(0x7fc0));
    return _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), nan, q);
}

/* float32 bits u -> binary16 bits (job.h lc_mt_fp16), 16 lanes */
LC_AI __m512i lc_mt_fp16x16(__m512i u) {
    const __m512i s = _mm512_and_si512(_mm512_srli_epi32(u, 16), LC_MT_I(0x8000)), a = _mm512_and_si512(u, LC_MT_I(0x7fffffff));
    __m512i r = _mm512_sub_epi32(a, LC_MT_I(0x38000000));                                      /* normal: rebias */
    __m512i hn = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(r, LC_MT_I(0xfff)),
                                                    _mm512_and_si512(_mm512_srli_epi32(r, 13), LC_MT_I(1))), 13);
    __m512i sh = _mm512_sub_epi32(LC_MT_I(126), _mm512_srli_epi32(a, 23));                   /* subnormal: shift */
    sh = _mm512_min_epu32(sh, LC_MT_I(31));                                                    /* >= 25: 0 either way */
    __m512i man = _mm512_or_si512(_mm512_and_si512(a, LC_MT_I(0x7fffff)), LC_MT_I(0x800000));
    __m512i half = _mm512_srli_epi32(_mm512_sllv_epi32(LC_MT_I(1), sh), 1);                   /* 2^(sh - 1) */
    __m512i odd = _mm512_and_si512(_mm512_srlv_epi32(man, sh), LC_MT_I(1));
    __m512i hs = _mm512_srlv_epi32(_mm512_add_epi32(_mm512_add_epi32(man, half), _mm512_sub_epi32(odd, LC_MT_I(1))), sh);
    __m512i h = _mm512_mask_mov_epi32(hs, _mm512_cmpge_epu32_mask(a, LC_MT_I(0x38800000)), hn);
    h = _mm512_mask_mov_epi32(h, _mm512_cmpge_epu32_mask(a, LC_MT_I(0x477ff000)), LC_MT_I(0x7c00));
    h = _mm512_mask_mov_epi32(h, _mm512_cmpgt_epi32_mask(a, LC_MT_I(0x7f800000)), LC_MT_I(0x7e00));
    return _mm512_or_si512(h, s);
}

/* 16 floats in their form (job.h lc_mt_form, lane for lane): v, i (mant << shift), e, s; returns
 * the lanes holding inf or NaN */
typedef struct { __m512 v, e; __m512i i, s; } lc_mt_form16;

LC_AI __mmask16 lc_mt_forms16(__m512 x, int fmt, int shift, lc_mt_form16 *o) {
    const int bf = fmt == LC_MT_BF16, m = bf ? 7 : 10, emask = bf ? 0xff : 0x1f, bias = bf ? 127 : 15;
    const __m512i u = _mm512_castps_si512(x), h = bf ? lc_mt_bf16x16(u) : lc_mt_fp16x16(u);
    const __m512i man = _mm512_and_si512(h, LC_MT_I((1 << m) - 1));
    const __m512i ef = _mm512_and_si512(_mm512_srli_epi32(h, m), LC_MT_I(emask));
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(ef, _mm512_setzero_si512());
    const __mmask16 spec = _mm512_cmpeq_epi32_mask(ef, LC_MT_I(emask)), normal = (__mmask16)~(zero | spec);
    o->s = _mm512_slli_epi32(_mm512_srli_epi32(h, 15), 31);
    o->i = _mm512_maskz_mov_epi32(normal, _mm512_sllv_epi32(man, LC_MT_I(shift)));
    o->e = _mm512_maskz_mov_ps(normal, _mm512_cvtepi32_ps(_mm512_sub_epi32(ef, LC_MT_I(bias))));
    o->e = _mm512_mask_mov_ps(o->e, zero, _mm512_set1_ps(LC_MT_EZERO));
    __m512i vn = _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(ef, LC_MT_I(127 - bias)), 23),
                                 _mm512_slli_epi32(man, 23 - m));
    __m512i vs = _mm512_mask_mov_epi32(LC_MT_I(0x7f800000), _mm512_test_epi32_mask(man, man), LC_MT_I(0x7fc00000));
    __m512i v = _mm512_maskz_mov_epi32(normal, vn);
    v = _mm512_mask_mov_epi32(v, spec, vs);
    o->v = _mm512_castsi512_ps(_mm512_or_si512(v, o->s));
    return spec;
}

/* n (<= 16) floats at x: the masked load (past n: +0, whose form is the padding's) */
LC_AI __m512 lc_mt_load16(const float *x, int64_t n) {
    return n >= 16 ? _mm512_loadu_ps(x) : lc_x_maskz_loadu_ps(lc_x_mask((int)n), x);
}

void LC_BODY(mt_round)(float *y, const float *x, int64_t n, int fmt) {
    lc_mt_form16 f;
    for (int64_t i = 0; i < n; i += 16) {
        lc_mt_forms16(lc_mt_load16(x + i, n - i), fmt, 0, &f);
        lc_x_mask_storeu_ps(y + i, lc_x_mask((int)(n - i < 16 ? n - i : 16)), f.v);
    }
}

void LC_BODY(mt_prep_a)(const lc_mt_job *j, int64_t m0, int64_t m1) {
    const int64_t K = j->K;
    lc_mt_form16 f;
    for (int64_t m = m0; m < m1; m++) {
        if (j->route == LC_MT_ROUTE_MUL) {
            LC_BODY(mt_round)(j->av + m * K, j->A + m * K, K, j->fmt);
            continue;
        }
        __mmask16 special = 0;
        for (int64_t k = 0; k < K; k += 16) {
            const int64_t at = m * K + k;
            const __mmask16 w = lc_x_mask((int)(K - k < 16 ? K - k : 16));
            special |= lc_mt_forms16(lc_mt_load16(j->A + at, K - k), j->fmt, j->mbits, &f);
            lc_x_mask_storeu_ps(j->av + at, w, f.v);
            lc_x_mask_storeu_epi32(j->ai + at, w, f.i);
            lc_x_mask_storeu_ps(j->ae + at, w, f.e);
            lc_x_mask_storeu_epi32(j->as + at, w, f.s);
        }
        j->fa[m] = special != 0;
    }
}

/* B's rows k0..k1, row by row (reading B in its order), into every panel; fl[p]: inf/NaN in panel p */
void LC_BODY(mt_prep_b)(const lc_mt_job *j, int64_t k0, int64_t k1, uint8_t *fl) {
    const int64_t K = j->K, N = j->N;
    lc_mt_form16 f;
    if (fl) memset(fl, 0, (size_t)j->np);
    for (int64_t k = k0; k < k1; k++) {
        for (int64_t p = 0; p < j->np; p++) {
            const float *x = j->B + k * N + p * LC_MT_NB;
            const int64_t nc = N - p * LC_MT_NB < LC_MT_NB ? N - p * LC_MT_NB : LC_MT_NB;
            __mmask16 special = 0;
            for (int g = 0; g < LC_MT_NB / 16; g++) {
                const __m512 xv = nc > 16 * g ? lc_mt_load16(x + 16 * g, nc - 16 * g) : _mm512_setzero_ps();
                special |= lc_mt_forms16(xv, j->fmt, 0, &f);
                if (j->route == LC_MT_ROUTE_MUL) {
                    _mm512_store_ps(j->bv + (p * K + k) * LC_MT_NB + 16 * g, f.v);
                    continue;
                }
                lc_mt_bk *b = &j->bo[p * K + k];
                _mm512_store_ps(b->v + 16 * g, f.v), _mm512_store_si512(b->i + 16 * g, f.i);
                _mm512_store_ps(b->e + 16 * g, f.e), _mm512_store_si512(b->s + 16 * g, f.s);
            }
            if (fl && special) fl[p] = 1;
        }
    }
}

size_t LC_BODY(mt_ws)(const lc_mt_job *j) { return (size_t)j->rows_per * LC_MT_NB * sizeof(float); }

/* ------------------------------------------------------------------ the mul route */
#define LC_MT_REP6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define LC_MT_MDECL(r) __m512 c##r##0, c##r##1, c##r##2, c##r##3; const float *a##r = av + (r < R ? r : 0) * K;
#define LC_MT_MINIT(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (first) {                                                                                    \
            c##r##0 = c##r##1 = c##r##2 = c##r##3 = _mm512_setzero_ps();                                \
        } else {                                                                                        \
            c##r##0 = _mm512_load_ps(yt + r * LC_MT_NB); c##r##1 = _mm512_load_ps(yt + r * LC_MT_NB + 16); \
            c##r##2 = _mm512_load_ps(yt + r * LC_MT_NB + 32); c##r##3 = _mm512_load_ps(yt + r * LC_MT_NB + 48); \
        }                                                                                               \
    }
#define LC_MT_MROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        __m512 x = _mm512_set1_ps(a##r[k]);                                                             \
        c##r##0 = _mm512_add_ps(c##r##0, _mm512_mul_ps(x, b0));                                         \
        c##r##1 = _mm512_add_ps(c##r##1, _mm512_mul_ps(x, b1));                                         \
        c##r##2 = _mm512_add_ps(c##r##2, _mm512_mul_ps(x, b2));                                         \
        c##r##3 = _mm512_add_ps(c##r##3, _mm512_mul_ps(x, b3));                                         \
    }
#define LC_MT_MDONE(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (out) {                                                                                      \
            float *o = out + r * N;                                                                     \
            lc_mt_store16(o, c##r##0, 0, nc); lc_mt_store16(o, c##r##1, 1, nc);                         \
            lc_mt_store16(o, c##r##2, 2, nc); lc_mt_store16(o, c##r##3, 3, nc);                         \
        } else {                                                                                        \
            _mm512_store_ps(yt + r * LC_MT_NB, c##r##0); _mm512_store_ps(yt + r * LC_MT_NB + 16, c##r##1); \
            _mm512_store_ps(yt + r * LC_MT_NB + 32, c##r##2); _mm512_store_ps(yt + r * LC_MT_NB + 48, c##r##3); \
        }                                                                                               \
    }

/* R rows (av at their chunk's first k, K apart) x the panel's chunk bp (kc x NB): the sums from yt
 * (unless first), then into out (N apart, nc columns; the last chunk) or back into yt */
LC_AI void lc_mt_mul_tile(const float *av, int64_t K, const float *bp, int64_t kc, float *yt, int first, float *out,
                          int64_t N, int nc, const int R) {
    LC_MT_REP6(LC_MT_MDECL)
    LC_MT_REP6(LC_MT_MINIT)
    for (int64_t k = 0; k < kc; k++) {
        const float *b = bp + k * LC_MT_NB;
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16), b2 = _mm512_load_ps(b + 32),
               b3 = _mm512_load_ps(b + 48);
        LC_MT_REP6(LC_MT_MROW)
    }
    LC_MT_REP6(LC_MT_MDONE)
}

typedef void (*lc_mt_mul_fn)(const float *, int64_t, const float *, int64_t, float *, int, float *, int64_t, int);
#define LC_MT_MDEF(R)                                                                                   \
    static void lc_mt_mul_##R(const float *av, int64_t K, const float *bp, int64_t kc, float *yt, int first, \
                              float *out, int64_t N, int nc) {                                          \
        lc_mt_mul_tile(av, K, bp, kc, yt, first, out, N, nc, R);                                        \
    }
LC_MT_MDEF(1) LC_MT_MDEF(2) LC_MT_MDEF(3) LC_MT_MDEF(4) LC_MT_MDEF(5) LC_MT_MDEF(6)
static const lc_mt_mul_fn lc_mt_mul_tiles[7] = {0, lc_mt_mul_1, lc_mt_mul_2, lc_mt_mul_3, lc_mt_mul_4, lc_mt_mul_5,
                                                lc_mt_mul_6};

/* k in chunks of LC_MT_KCM (the panel's chunk stays in L1/L2 for every tile of the unit), y in yt
 * between chunks */
void LC_BODY(mt_mul_unit)(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws) {
    const int64_t K = j->K, N = j->N;
    const float *bp = j->bv + p * K * LC_MT_NB;
    float *yt = (float *)ws;
    for (int64_t k0 = 0; k0 < K; k0 += LC_MT_KCM) {
        const int64_t kc = K - k0 < LC_MT_KCM ? K - k0 : LC_MT_KCM;
        for (int64_t m = m0; m < m1; m += 6) {
            const int R = (int)(m1 - m < 6 ? m1 - m : 6);
            float *out = k0 + kc == K ? j->Y + m * N + p * LC_MT_NB : NULL;
            lc_mt_mul_tiles[R](j->av + m * K + k0, K, bp + k0 * LC_MT_NB, kc, yt + (m - m0) * LC_MT_NB, k0 == 0, out,
                               N, nc);
        }
    }
}

/* ------------------------------------------------------------------ the table route */

/* y + the signed, scaled product of T's words t with column group v of b (a's exponent ea, sign sa
 * broadcast) */
LC_AI __m512 lc_mt_step(__m512 y, __m512 t, __m512 ea, __m512i sa, const lc_mt_bk *b, int v) {
    __m512 p = lc_mt_scalef(t, _mm512_add_ps(ea, _mm512_load_ps(b->e + 16 * v)));
    __m512i q = _mm512_ternarylogic_epi32(_mm512_castps_si512(p), sa, _mm512_load_si512(b->s + 16 * v), 0x96);
    return _mm512_add_ps(y, _mm512_castsi512_ps(q));
}

/* T's row r0..r7 (128 words) at each lane's index i (bits 0-6) */
LC_AI __m512 lc_mt_perm128(__m512 r0, __m512 r1, __m512 r2, __m512 r3, __m512 r4, __m512 r5, __m512 r6, __m512 r7,
                           __m512i i) {
    __mmask16 b5 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32)), b6 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(64));
    __m512 lo = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(r0, i, r1), _mm512_permutex2var_ps(r2, i, r3));
    __m512 hi = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(r4, i, r5), _mm512_permutex2var_ps(r6, i, r7));
    return _mm512_mask_blend_ps(b6, lo, hi);
}

/* bf16: y (NB) += the products of A's kc forms (ai, ae, as at the row's k0) with the panel's, k in order */
static void lc_mt_row_bf16(const float *T, const int32_t *ai, const float *ae, const uint32_t *as, const lc_mt_bk *b,
                           int64_t kc, float *y) {
    __m512 y0 = _mm512_load_ps(y), y1 = _mm512_load_ps(y + 16), y2 = _mm512_load_ps(y + 32),
           y3 = _mm512_load_ps(y + 48);
    for (int64_t k = 0; k < kc; k++) {
        const float *t = T + ai[k];
        __m512 r0 = _mm512_loadu_ps(t), r1 = _mm512_loadu_ps(t + 16), r2 = _mm512_loadu_ps(t + 32),
               r3 = _mm512_loadu_ps(t + 48), r4 = _mm512_loadu_ps(t + 64), r5 = _mm512_loadu_ps(t + 80),
               r6 = _mm512_loadu_ps(t + 96), r7 = _mm512_loadu_ps(t + 112);
        __m512 ea = _mm512_set1_ps(ae[k]);
        __m512i sa = _mm512_set1_epi32((int32_t)as[k]);
        const lc_mt_bk *bk = &b[k];
#define LC_MT_B16(v, yv) \
        yv = lc_mt_step(yv, lc_mt_perm128(r0, r1, r2, r3, r4, r5, r6, r7, _mm512_load_si512(bk->i + 16 * v)), ea, sa, bk, v);
        LC_MT_B16(0, y0) LC_MT_B16(1, y1) LC_MT_B16(2, y2) LC_MT_B16(3, y3)
#undef LC_MT_B16
    }
    _mm512_store_ps(y, y0), _mm512_store_ps(y + 16, y1), _mm512_store_ps(y + 32, y2), _mm512_store_ps(y + 48, y3);
}

/* fp16: the same through gathers at ma << 10 | mb */
static void lc_mt_row_fp16(const float *T, const int32_t *ai, const float *ae, const uint32_t *as, const lc_mt_bk *b,
                           int64_t kc, float *y) {
    __m512 y0 = _mm512_load_ps(y), y1 = _mm512_load_ps(y + 16), y2 = _mm512_load_ps(y + 32),
           y3 = _mm512_load_ps(y + 48);
    for (int64_t k = 0; k < kc; k++) {
        __m512i ia = _mm512_set1_epi32(ai[k]);
        __m512 ea = _mm512_set1_ps(ae[k]);
        __m512i sa = _mm512_set1_epi32((int32_t)as[k]);
        const lc_mt_bk *bk = &b[k];
#define LC_MT_F16(v, yv) \
        yv = lc_mt_step(yv, _mm512_i32gather_ps(_mm512_or_si512(ia, _mm512_load_si512(bk->i + 16 * v)), T, 4), ea, sa, bk, v);
        LC_MT_F16(0, y0) LC_MT_F16(1, y1) LC_MT_F16(2, y2) LC_MT_F16(3, y3)
#undef LC_MT_F16
    }
    _mm512_store_ps(y, y0), _mm512_store_ps(y + 16, y1), _mm512_store_ps(y + 32, y2), _mm512_store_ps(y + 48, y3);
}

typedef void (*lc_mt_row_fn)(const float *, const int32_t *, const float *, const uint32_t *, const lc_mt_bk *, int64_t,
                             float *);

void LC_BODY(mt_table_unit)(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws) {
    const int64_t K = j->K, N = j->N;
    const int scalar_p = j->fb[p];
    float *yt = (float *)ws;
    const lc_mt_row_fn row = j->fmt == LC_MT_BF16 ? lc_mt_row_bf16 : lc_mt_row_fp16;
    memset(yt, 0, (size_t)(m1 - m0) * LC_MT_NB * sizeof(float));
    for (int64_t k0 = 0; k0 < K && !scalar_p; k0 += LC_MT_KC) {
        const int64_t kc = K - k0 < LC_MT_KC ? K - k0 : LC_MT_KC;
        for (int64_t m = m0; m < m1; m++) {
            const int64_t at = m * K + k0;
            if (!j->fa[m]) row(j->T, j->ai + at, j->ae + at, j->as + at, j->bo + p * K + k0, kc, yt + (m - m0) * LC_MT_NB);
        }
    }
    for (int64_t m = m0; m < m1; m++) {
        if (scalar_p || j->fa[m]) {
            lc_mt_table_row(j, m, p, nc);
            continue;
        }
        const float *y = yt + (m - m0) * LC_MT_NB;
        float *out = j->Y + m * N + p * LC_MT_NB;
        for (int v = 0; v < 4; v++) lc_mt_store16(out, _mm512_load_ps(y + 16 * v), v, nc);
    }
}

#endif /* LC_X86 */
