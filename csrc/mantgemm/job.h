/* csrc/mantgemm/job.h — what the mantgemm family's bodies share (mantgemm/mantgemm.h: the contract,
 * the pre-pass, the generic bodies and the drivers; mantgemm/x86/avx512.c: the AVX-512 bodies): the
 * rounding of float32 to bf16 / fp16, an operand's form (sign, exponent, mantissa index), one call's
 * operands and plan (lc_mt_job), and the scalar product and row every body falls back to.
 *
 * Design: lutcore.ops.mantgemm checks everything a caller can get wrong (shapes, dtypes, the table:
 * finite, >= 0, float32 (2^m, 2^m)) and picks the route; C trusts it.  Every float step here is one
 * IEEE operation (the build uses -ffp-contract=off: no multiply-add is fused behind our back).  The
 * pre-pass is one code for every body, so the forms the bodies read are the same bits.
 */
#ifndef LUTCORE_MANTGEMM_JOB_H
#define LUTCORE_MANTGEMM_JOB_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LC_MT_BF16 0             /* 1 sign, 8 exponent (bias 127), 7 mantissa bits */
#define LC_MT_FP16 1             /* IEEE binary16: 1, 5 (bias 15), 10 */

#define LC_MT_ROUTE_MUL 0        /* the exact table: float32 products of the rounded operands, no lookups */
#define LC_MT_ROUTE_TABLE 1      /* any table: lookups, the exponents added, one rounding per product */

#define LC_MT_NB 64              /* B's columns per panel: every body's unit is rows x one panel */
#define LC_MT_EZERO (-1000.0f)   /* a zero operand's exponent: T * 2^(EZERO + e) rounds to 0 for any
                                    T < 2^128 and e <= 127 (the vector bodies' zero, no test) */

static inline float lc_mt_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t lc_mt_u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* float32 bits -> bf16 bits, round to nearest even (a carry into the exponent rounds up to the next
 * binade or to inf); a NaN -> the quiet NaN of its sign */
static inline uint32_t lc_mt_bf16(uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) & 0x8000u) | 0x7fc0u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* float32 bits -> IEEE binary16 bits, round to nearest even: subnormals kept, |x| >= 65520 -> inf,
 * a NaN -> the quiet NaN of its sign (numpy's astype(np.float16) on every non-NaN) */
static inline uint32_t lc_mt_fp16(uint32_t u) {
    const uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return s | 0x7e00u;
    if (a >= 0x477ff000u) return s | 0x7c00u;                  /* 65520 = 65504 + half its ulp: ties up */
    if (a >= 0x38800000u) {                                    /* a normal half: rebias 127 -> 15 */
        uint32_t r = a - 0x38000000u;
        return s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    }
    const uint32_t e = a >> 23, sh = 126 - e;                  /* a subnormal half: q = |x| / 2^-24 */
    if (sh > 24) return s;                                     /* |x| < 2^-25: 0 */
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    return s | ((mant + (1u << (sh - 1)) - 1u + ((mant >> sh) & 1u)) >> sh);
}

/* An operand in its format's form (the pre-pass, once per element):
 *   v  float32   the value rounded to the format, a subnormal flushed to zero of its sign (inf, NaN kept)
 *   i  int32     the mantissa's index: mant << shift (A: shift m, the table's row; B: shift 0, its column)
 *   e  float32   the unbiased exponent (an integer); LC_MT_EZERO for a zero; 0 for inf/NaN
 *   s  uint32    the sign as bit 31
 * returns 1 for inf/NaN (the vector bodies' flag: such rows and panels take the scalar row) */
typedef struct { float v; int32_t i; float e; uint32_t s; } lc_mt_op;

static inline int lc_mt_form(float x, int fmt, int shift, lc_mt_op *o) {
    const int m = fmt == LC_MT_BF16 ? 7 : 10, emask = fmt == LC_MT_BF16 ? 0xff : 0x1f;
    const int bias = fmt == LC_MT_BF16 ? 127 : 15;
    const uint32_t h = fmt == LC_MT_BF16 ? lc_mt_bf16(lc_mt_u(x)) : lc_mt_fp16(lc_mt_u(x));
    const uint32_t sign = (h >> 15) & 1u, man = h & ((1u << m) - 1u);
    const int ef = (int)(h >> m) & emask;
    o->s = sign << 31;
    o->i = 0;
    if (ef == 0) {                                             /* zero, or a subnormal: flushed */
        o->v = lc_mt_f(o->s);
        o->e = LC_MT_EZERO;
        return 0;
    }
    if (ef == emask) {                                         /* inf or NaN */
        o->v = lc_mt_f(o->s | (man ? 0x7fc00000u : 0x7f800000u));
        o->e = 0.0f;
        return 1;
    }
    o->e = (float)(ef - bias);
    o->i = (int32_t)(man << shift);
    o->v = lc_mt_f(o->s | ((uint32_t)(ef - bias + 127) << 23) | (man << (23 - m)));
    return 0;
}

/* One call (mantgemm.h lc_mt_run).  The caller's operands (trusted: the room checked them):
 *   Y   float32 (M, N)          OUT
 *   A   float32 (M, K), B float32 (K, N)         IN  (read by the pre-pass only)
 *   T   float32 (2^m, 2^m)      IN  T[ma][mb], finite, >= 0 (the table route)
 * The forms the pre-pass writes (scratch, 64-byte aligned), per route:
 *   mul    av float32 (M, K);  bv float32 (np, K, NB)   the rounded values, panels padded with 0
 *   table  av, ai, ae, as (M, K) each: A's forms field by field; bo lc_mt_bk (np, K): B's (its
 *          padding is the form of +0: v 0, i 0, e EZERO, s 0); fa uint8 (M,), fb uint8 (np,): 1
 *          where A's row / B's panel holds an inf or a NaN (fb the OR of fbk (nkb, np): each pre-pass
 *          unit's rows of B, LC_MT_PREP_ROWS a unit)
 * The plan: units of rows_per rows x one panel (nrc row chunks per panel), ws_per bytes of scratch
 * per thread at ws. */
typedef struct {
    float v[LC_MT_NB];
    int32_t i[LC_MT_NB];
    float e[LC_MT_NB];
    uint32_t s[LC_MT_NB];
} lc_mt_bk;                                /* one k of a panel of B, the table route */

struct lc_mt_body;
typedef struct lc_mt_job {
    float *Y;
    const float *A, *B, *T;
    int64_t M, N, K, np;
    int fmt, mbits, route;
    float *av, *ae, *bv;
    int32_t *ai;
    uint32_t *as;
    lc_mt_bk *bo;
    uint8_t *fa, *fb, *fbk;
    int64_t rows_per, nrc, units;
    char *ws;
    size_t ws_per;
    const struct lc_mt_body *body;
} lc_mt_job;

/* A's element (m, k) in its form: the scalar pre-pass's store */
static inline int lc_mt_form_a(const lc_mt_job *j, int64_t at, float x) {
    lc_mt_op o;
    const int special = lc_mt_form(x, j->fmt, j->mbits, &o);
    j->av[at] = o.v, j->ai[at] = o.i, j->ae[at] = o.e, j->as[at] = o.s;
    return special;
}

/* 2^e as a double, -1022 <= e <= 1023 */
static inline double lc_mt_pow2(int e) {
    uint64_t u = (uint64_t)(1023 + e) << 52;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* the canonical NaN (0x7fc00000) for any NaN: every body's outputs have the same bits */
static inline float lc_mt_canon(float y) { return y != y ? lc_mt_f(0x7fc00000u) : y; }

/* The product of A's element at (its form: av, ai, ae, as) and column c of b (a panel's k) through
 * T, the contract's: inf/NaN operands the IEEE product of the values (inf x 0 = NaN); a zero (or
 * flushed subnormal) operand 0; else T[ma][mb] * 2^(ea + eb), exact in float64, rounded once to
 * float32, with the sign sa ^ sb. */
static inline float lc_mt_product(const lc_mt_job *j, int64_t at, const lc_mt_bk *b, int c) {
    const float va = j->av[at], vb = b->v[c];
    if (!(isfinite(va) && isfinite(vb))) return va * vb;
    if (va == 0.0f || vb == 0.0f) return 0.0f;
    const double t = (double)j->T[j->ai[at] | b->i[c]] * lc_mt_pow2((int)j->ae[at] + (int)b->e[c]);   /* exact */
    const float f = (float)t;                                  /* nearest even; subnormal; inf */
    return (j->as[at] ^ b->s[c]) ? -f : f;
}

/* Row m of panel p through the table, every k in order (the generic body's row; the vector bodies'
 * row where A's row or B's panel holds an inf or a NaN): Y[m, p NB + c] for c < nc. */
static inline void lc_mt_table_row(const lc_mt_job *j, int64_t m, int64_t p, int nc) {
    const int64_t K = j->K;
    const lc_mt_bk *b = j->bo + p * K;
    float y[LC_MT_NB];
    for (int c = 0; c < nc; c++) y[c] = 0.0f;
    for (int64_t k = 0; k < K; k++)
        for (int c = 0; c < nc; c++) y[c] = y[c] + lc_mt_product(j, m * K + k, &b[k], c);
    float *out = j->Y + m * j->N + p * LC_MT_NB;
    for (int c = 0; c < nc; c++) out[c] = lc_mt_canon(y[c]);
}

/* +-2^e as a double (sign bit s at bit 31, e an integer in [EZERO, 127]): a zero's 2^-1000 makes any
 * product with it round to +-0 in float32 */
static inline double lc_mt_scale(float e, uint32_t s) {
    uint64_t u = ((uint64_t)(1023 + (int)e) << 52) | ((uint64_t)s << 32);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* lc_mt_table_row where neither A's row nor B's panel holds an inf or a NaN (the generic body's fast
 * row, the same bits): T[ma][mb] * (+-2^ea * +-2^eb), exact in float64 (a zero's product below 2^-745,
 * rounding to +-0), rounded once to float32. */
static inline void lc_mt_table_row_finite(const lc_mt_job *j, int64_t m, int64_t p, int nc) {
    const int64_t K = j->K;
    const lc_mt_bk *b = j->bo + p * K;
    float y[LC_MT_NB];
    for (int c = 0; c < nc; c++) y[c] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const int64_t at = m * K + k;
        const double sa = lc_mt_scale(j->ae[at], j->as[at]);
        const float *t = j->T + j->ai[at];
        for (int c = 0; c < nc; c++)
            y[c] = y[c] + (float)((double)t[b[k].i[c]] * (sa * lc_mt_scale(b[k].e[c], b[k].s[c])));
    }
    float *out = j->Y + m * j->N + p * LC_MT_NB;
    for (int c = 0; c < nc; c++) out[c] = lc_mt_canon(y[c]);
}

#endif /* LUTCORE_MANTGEMM_JOB_H */
