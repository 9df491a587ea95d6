/* csrc/mathfn/mathfn.h — exp, log, softplus, sigmoid, silu and the ZOH factors.
 *
 * Design: one float32 algorithm, written twice — scalar C (`lc_*f`) and AVX2
 * (`lc_*_ps`) — with the same constants and the same operation order (fused
 * multiply-adds only where both bodies use them), so both give the same bits;
 * without -ffast-math.  float64 (used for
 * gradient checks) goes through libm.
 *
 * exp:  Cody–Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-7 (Cephes)
 *       polynomial.  Fast path (|x| <= 87.3): fused multiply-adds (fmaf /
 *       vfmadd — each rounds once, so the portable and AVX2 bodies agree) and
 *       2^n in one step; elsewhere the careful path with 2^n in two halves.
 *       x > 88.7228 -> inf, x < -87.3365 -> 0 (results below FLT_MIN flush),
 *       NaN -> NaN.  Measured <= 2 ulp (tests/test_mathfns.py).
 * log:  x = 2^e m, m in [sqrt(1/2), sqrt(2)), Cephes' degree-8 polynomial in m - 1.
 * softplus(x) = x for x > 20 (torch's threshold), else log1p(exp(x)) with
 *       log1p(e) = log(1+e) * e / ((1+e) - 1) (exact-ish for tiny e).
 * phi1(x) = expm1(x)/x (the ZOH factor: Bbar = dt * phi1(dt*A) * B) and its
 *       derivative phi1'(x): Taylor series for |x| <= 0.5, closed form beyond.
 */
#ifndef LUTCORE_MATHFN_H
#define LUTCORE_MATHFN_H

#include "core/common.h"
#include "core/dispatch.h"
#include <math.h>

#define LC_EXP_HI 88.72283935546875f
#define LC_EXP_LO -87.33654022216797f
#define LC_LOG2E 1.44269504088896341f
#define LC_LN2_HI 0.693359375f
#define LC_LN2_LO -2.12194440e-4f
#define LC_P0 1.9875691500e-4f
#define LC_P1 1.3981999507e-3f
#define LC_P2 8.3334519073e-3f
#define LC_P3 4.1665795894e-2f
#define LC_P4 1.6666665459e-1f
#define LC_P5 5.0000001201e-1f
#define LC_SQRTH 0.70710678118654752440f
#define LC_SOFTPLUS_T 20.0f
#define LC_PHI_T 0.5f

static inline float lc_pow2if(int n) {   /* 2^n for n in [-126, 127] */
    uint32_t u = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float lc_expf_slow(float x) {
    if (x != x) return x;
    if (x > LC_EXP_HI) return INFINITY;
    if (x < LC_EXP_LO) return 0.0f;
    float n = nearbyintf(x * LC_LOG2E);
    float r = x - n * LC_LN2_HI;
    r = r - n * LC_LN2_LO;
    float r2 = r * r;
    float p = LC_P0;
    p = p * r + LC_P1;
    p = p * r + LC_P2;
    p = p * r + LC_P3;
    p = p * r + LC_P4;
    p = p * r + LC_P5;
    p = p * r2 + r;
    p = p + 1.0f;
    int ni = (int)n;
    int n1 = ni >> 1, n2 = ni - n1;
    return (p * lc_pow2if(n1)) * lc_pow2if(n2);
}


/* exp, fast path for |x| <= LC_EXP_FAST_ABS: fused multiply-adds for the
 * reduction and the polynomial (fmaf here, vfmadd in AVX2: one rounding each,
 * so the bodies agree), 2^n in one step.  Anything else (NaN, |x| > 87.3)
 * takes lc_expf_slow.  One symmetric bound is one compare in the SIMD body. */
#define LC_EXP_FAST_ABS 87.3f
static inline float lc_expf(float x) {
    if (!(fabsf(x) <= LC_EXP_FAST_ABS)) return lc_expf_slow(x);
    float n = nearbyintf(x * LC_LOG2E);
    float r = fmaf(n, -LC_LN2_HI, x);
    r = fmaf(n, -LC_LN2_LO, r);
    /* the polynomial in Estrin's form (pairs, then r^2): a short dependency chain */
    float r2 = r * r;
    float p01 = fmaf(LC_P0, r, LC_P1), p23 = fmaf(LC_P2, r, LC_P3), p45 = fmaf(LC_P4, r, LC_P5);
    float p = fmaf(p01, r2, p23);
    p = fmaf(p, r2, p45);
    p = fmaf(p, r2, r);
    p = p + 1.0f;
    return p * lc_pow2if((int)n);
}

/* 2^x, for the scan's decay factors exp(dt A) = 2^(dt (A log2 e)) with A log2 e
 * formed once per state: the reduction is f = x - round(x) (exact), so it takes
 * three multiply-adds fewer than exp.  Polynomial: (2^f - 1)/f on [-1/2, 1/2],
 * degree 5 (weighted least squares; within 1.2 ulp of 2^f in float32).  Fast for
 * |x| <= LC_EXP2_FAST_ABS; beyond it (and NaN) the careful path, two scale steps
 * so subnormal results and 2^127.x come out right. */
#define LC_EXP2_FAST_ABS 126.0f
#define LC_E2_C0 0.6931471824645996f
#define LC_E2_C1 0.24022647738456726f
#define LC_E2_C2 0.05550330877304077f
#define LC_E2_C3 0.009618418291211128f
#define LC_E2_C4 0.0013399414019659162f
#define LC_E2_C5 0.0001535961200715974f
static inline float lc_exp2_poly(float f) {
    float f2 = f * f;
    float e01 = fmaf(LC_E2_C1, f, LC_E2_C0), e23 = fmaf(LC_E2_C3, f, LC_E2_C2), e45 = fmaf(LC_E2_C5, f, LC_E2_C4);
    float t = fmaf(e45, f2, e23);
    return fmaf(fmaf(t, f2, e01), f, 1.0f);
}
static inline float lc_exp2f_slow(float x) {
    if (x != x) return x;
    if (x >= 128.0f) return INFINITY;
    if (x < -150.0f) return 0.0f;
    float n = nearbyintf(x);
    float p = lc_exp2_poly(x - n);
    int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;
    return (p * lc_pow2if(n1)) * lc_pow2if(n2);
}
static inline float lc_exp2f(float x) {
    if (!(fabsf(x) <= LC_EXP2_FAST_ABS)) return lc_exp2f_slow(x);
    float n = nearbyintf(x);
    return lc_exp2_poly(x - n) * lc_pow2if((int)n);
}

/* natural log for finite x > 0 (normal numbers; subnormals are scaled first) */
static inline float lc_logf(float x) {
    if (x != x || x < 0.0f) return NAN;
    if (x == 0.0f) return -INFINITY;
    if (x == INFINITY) return INFINITY;
    float scale = 0.0f;
    if (x < 1.17549435e-38f) { x = x * 16777216.0f; scale = -24.0f; }
    uint32_t u;
    memcpy(&u, &x, 4);
    float e = (float)((int)((u >> 23) & 0xffu) - 127) + scale;
    u = (u & 0x007fffffu) | 0x3f800000u;      /* m in [1, 2) */
    float m;
    memcpy(&m, &u, 4);
    if (m > 1.41421356f) { m = m * 0.5f; e = e + 1.0f; }
    float xm = m - 1.0f, z = xm * xm;
    /* degree 8 in Estrin's form, fused multiply-adds (vfmadd in AVX2: the same roundings):
     * pairs, quads (z = xm^2, z2 = z^2), then the top */
    float z2 = z * z;
    float q01 = fmaf(7.0376836292e-2f, xm, -1.1514610310e-1f), q23 = fmaf(1.1676998740e-1f, xm, -1.2420140846e-1f);
    float q45 = fmaf(1.4249322787e-1f, xm, -1.6668057665e-1f), q67 = fmaf(2.0000714765e-1f, xm, -2.4999993993e-1f);
    float q03 = fmaf(q01, z, q23), q47 = fmaf(q45, z, q67);
    float q = fmaf(fmaf(q03, z2, q47), xm, 3.3333331174e-1f);
    float y = (xm * z) * q;
    y = fmaf(e, LC_LN2_LO, y);
    y = fmaf(-0.5f, z, y);
    float r = xm + y;
    return r + e * LC_LN2_HI;
}

static inline float lc_log1p_of_exp(float e) {  /* log1p(e) for e >= 0 */
    float u = 1.0f + e;
    if (u == 1.0f) return e;
    return lc_logf(u) * (e / (u - 1.0f));
}

static inline float lc_softplusf(float x) {
    if (x > LC_SOFTPLUS_T) return x;
    return lc_log1p_of_exp(lc_expf(x));
}
/* softplus (the same bits) and the exp it is built on, for a backward that also
 * needs softplus' = e / (1 + e) */
static inline float lc_softplus_ef(float x, float *e) {
    *e = lc_expf(x);
    return x > LC_SOFTPLUS_T ? x : lc_log1p_of_exp(*e);
}

/* below -80, 1/(1 + e^-x) = e^x to far better than an ulp, and e^-x would overflow */
#define LC_SIG_LO -80.0f
static inline float lc_sigmoidf(float x) { return x < LC_SIG_LO ? lc_expf(x) : 1.0f / (1.0f + lc_expf(-x)); }
/* x e^x below -80, as -exp(x + log(-x)) so the result stays normal where e^x alone is not */
static inline float lc_silu_tail(float x) {
    float xc = x < -200.0f ? -200.0f : x;
    return -lc_expf(xc + lc_logf(-xc));
}
static inline float lc_siluf(float x) { return x < LC_SIG_LO ? lc_silu_tail(x) : x / (1.0f + lc_expf(-x)); }
/* d softplus / dx from e = exp(x), matching the forward's threshold: 1 above it */
static inline float lc_dsoftplus_ef(float x, float e) { return x > LC_SOFTPLUS_T ? 1.0f : e / (1.0f + e); }

/* phi1(x) = expm1(x)/x given ex = exp(x) */
static inline float lc_phi1f(float x, float ex) {
    if (fabsf(x) > LC_PHI_T) return (ex - 1.0f) / x;
    float p = 1.0f / 362880.0f;                  /* 1/9! */
    p = p * x + 1.0f / 40320.0f;
    p = p * x + 1.0f / 5040.0f;
    p = p * x + 1.0f / 720.0f;
    p = p * x + 1.0f / 120.0f;
    p = p * x + 1.0f / 24.0f;
    p = p * x + 1.0f / 6.0f;
    p = p * x + 0.5f;
    p = p * x + 1.0f;
    return p;
}
/* phi1'(x) = (x e^x - e^x + 1)/x^2 = (e^x - phi1(x))/x */
static inline float lc_dphi1f(float x, float ex, float phi) {
    if (fabsf(x) > LC_PHI_T) return (ex - phi) / x;
    /* sum_{k>=1} k x^(k-1)/(k+1)! */
    float p = 9.0f / 3628800.0f;
    p = p * x + 8.0f / 362880.0f;
    p = p * x + 7.0f / 40320.0f;
    p = p * x + 6.0f / 5040.0f;
    p = p * x + 5.0f / 720.0f;
    p = p * x + 4.0f / 120.0f;
    p = p * x + 3.0f / 24.0f;
    p = p * x + 2.0f / 6.0f;
    p = p * x + 0.5f;
    return p;
}

/* float64 (libm) */
static inline double lc_softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }
static inline double lc_silu_d(double x) { return x / (1.0 + exp(-x)); }
static inline double lc_sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline double lc_softplus_e_d(double x, double *e) { *e = exp(x); return x > 20.0 ? x : log1p(*e); }
static inline double lc_dsoftplus_e_d(double x, double e) { return x > 20.0 ? 1.0 : e / (1.0 + e); }
static inline double lc_phi1_d(double x, double ex) { (void)ex; return x == 0.0 ? 1.0 : (fabs(x) < 1e-5 ? 1.0 + x * (0.5 + x / 6.0) : expm1(x) / x); }
static inline double lc_dphi1_d(double x, double ex, double phi) {
    if (fabs(x) < 1e-3) return 0.5 + x * (1.0 / 3.0 + x * (1.0 / 8.0 + x * (1.0 / 30.0)));
    return (ex - phi) / x;
}

/* the vector math functions at 8 lanes (AVX2, target attribute): lc_exp_ps, lc_exp2_ps,
 * lc_log_ps, lc_softplus_ps, lc_sigmoid_ps, lc_silu_ps, ... — written once over
 * csrc/core/vec.h in csrc/mathfn/vmath.h, which csrc/mathfn/x86/zmm.h compiles at 16 */
#if LC_X86
#define LC_VEC_W 8
#include "core/vec.h"
#include "mathfn/vmath.h"
#undef LC_VEC_W
#endif

/* ------------------------------------------------ whole-array entry points */
enum { LC_FN_EXP = 0, LC_FN_SOFTPLUS = 1, LC_FN_SILU = 2, LC_FN_SIGMOID = 3, LC_FN_EXP2 = 4 };

static inline float lc_apply_f(int fn, float x) {
    switch (fn) {
    case LC_FN_EXP: return lc_expf(x);
    case LC_FN_SOFTPLUS: return lc_softplusf(x);
    case LC_FN_SILU: return lc_siluf(x);
    case LC_FN_EXP2: return lc_exp2f(x);
    default: return lc_sigmoidf(x);
    }
}
static inline double lc_apply_d(int fn, double x) {
    switch (fn) {
    case LC_FN_EXP: return exp(x);
    case LC_FN_SOFTPLUS: return lc_softplus_d(x);
    case LC_FN_SILU: return lc_silu_d(x);
    case LC_FN_EXP2: return exp2(x);
    default: return lc_sigmoid_d(x);
    }
}
/* ---------------------------------------------------------------- GELU (tanh form)
 * z = c (u + ((a u) u) u), t = tanh(z) = 1 - 2 / (exp(2 z) + 1) (absolute error
 * ~1 ulp of 1, all GELU needs: it uses 1 + t and 1 - t t), y = (0.5 u)(1 + t);
 * backward: dx = dy (0.5 (1 + t) + (((0.5 u)(1 - t t)) c)(1 + ((3 a) u) u)).
 * Scalar and AVX2 bodies do the same operations in the same order. */
#define LC_GELU_C 0.7978845608028654f   /* sqrt(2 / pi) */
#define LC_GELU_A 0.044715f
static inline float lc_gelu_tf(float u) {
    float z = LC_GELU_C * (u + ((LC_GELU_A * u) * u) * u);
    return 1.0f - 2.0f / (lc_expf(z + z) + 1.0f);
}
static inline float lc_gelu_yf(float u, float t) { return (0.5f * u) * (1.0f + t); }
static inline float lc_gelu_dxf(float dy, float u, float t) {
    float w = ((3.0f * LC_GELU_A) * u) * u + 1.0f;
    float v = (((0.5f * u) * (1.0f - t * t)) * LC_GELU_C) * w;
    return dy * ((t + 1.0f) * 0.5f + v);
}
/* SiLU's backward: dx = (dy + dy2) * s (1 + x (1 - s)), s = sigmoid(x), dy2 optional
 * (NULL); each step rounded as the numpy sequence 1 - s, * x, + 1, * s, * dy. */
static inline float lc_silu_dxf(float dy, float x) {
    float s = lc_sigmoidf(x), d = 1.0f - s;
    d = d * x;
    d = d + 1.0f;
    d = d * s;
    return d * dy;
}
/* the AVX2 row loops (lc_mathfn_row_avx2, lc_gelu_avx2, lc_gelu_bwd_avx2, lc_silu_bwd_avx2):
 * csrc/mathfn/vrows.h at 8 lanes; csrc/mathfn/x86/avx512.c compiles it at 16 */
#if LC_X86
#define LC_VR_NAME(n) lc_##n##_avx2
#define LC_VR_FN LC_TARGET_AVX2 static
#include "mathfn/vrows.h"
#undef LC_VR_NAME
#undef LC_VR_FN
#endif
/* the generic bodies: the scalar functions over n values */
static void lc_mathfn_row_generic(float *out, const float *x, int64_t n, int fn) {
    for (int64_t i = 0; i < n; i++) out[i] = lc_apply_f(fn, x[i]);
}
static void lc_gelu_generic(float *y, float *t, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) { t[i] = lc_gelu_tf(u[i]); y[i] = lc_gelu_yf(u[i], t[i]); }
}
static void lc_gelu_bwd_generic(float *dx, const float *dy, const float *u, const float *t, int64_t n) {
    for (int64_t i = 0; i < n; i++) dx[i] = lc_gelu_dxf(dy[i], u[i], t[i]);
}
static void lc_silu_bwd_generic(float *dx, const float *dy, const float *dy2, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dx[i] = lc_silu_dxf(dy2 ? dy[i] + dy2[i] : dy[i], x[i]);
}

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies live in their own translation unit (mathfn/x86/x86.h,
 * csrc/mathfn/x86/avx512.c); LC_MATHFN_SIMDE (setup.py: 1 in the test twin's build) binds
 * their SIMDe copies.  Each runs n values on the calling thread (a chunk, or a row of a
 * caller's own loop: lc_mathfn_row). */
#include "mathfn/x86/x86.h"
#ifndef LC_MATHFN_SIMDE
#define LC_MATHFN_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*row)(float *, const float *, int64_t, int);
    void (*gelu)(float *, float *, const float *, int64_t);
    void (*gelu_bwd)(float *, const float *, const float *, const float *, int64_t);
    void (*silu_bwd)(float *, const float *, const float *, const float *, int64_t);
} lc_mathfn_body;
#define LC_MATHFN_X(fn) LC_XBODY(LC_MATHFN_SIMDE, avx512, fn)
static const lc_mathfn_body lc_mathfn_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_MATHFN_X(mathfn_row), LC_MATHFN_X(gelu), LC_MATHFN_X(gelu_bwd),
     LC_MATHFN_X(silu_bwd)},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_mathfn_row_avx2, lc_gelu_avx2, lc_gelu_bwd_avx2, lc_silu_bwd_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_mathfn_row_generic, lc_gelu_generic, lc_gelu_bwd_generic, lc_silu_bwd_generic},
};
LC_BODY_TABLE(lc_mathfn_body, lc_mathfn, lc_mathfn_bodies)   /* lc_mathfn_pick(isa), lc_mathfn_body_name(isa) */

/* fn over n values on the calling thread (a row of a caller's own loop) */
static inline void lc_mathfn_row(float *out, const float *x, int64_t n, int fn, int isa) {
    lc_mathfn_pick(isa)->row(out, x, n, fn);
}
/* The whole-array passes run in chunks of LC_MATHFN_CHUNK values (a multiple of 8 and 16, so
 * every chunk's SIMD body and tail split as one pass over all n would), one body call a chunk;
 * the team (core/team.h) runs ranges of whole chunks, at least LC_MATHFN_GRAIN chunks each (a
 * chunk of exp is ~2 µs: a range is worth its claim). */
#define LC_MATHFN_CHUNK 16384
#define LC_MATHFN_GRAIN 4

typedef struct {
    lc_unit_fn chunk;               /* one chunk: chunk(job, u, tid) */
    const lc_mathfn_body *B;
    float *o, *o2;                  /* out, y, dx;  t (GELU's forward) */
    const float *a, *b, *c;         /* the inputs, in the body's order */
    int64_t n;
    int fn;
} lc_mathfn_job;

/* chunk u's first element and length */
static inline int64_t lc_mathfn_chunk(const lc_mathfn_job *j, int64_t u, int64_t *len) {
    const int64_t i0 = u * LC_MATHFN_CHUNK;
    *len = j->n - i0 < LC_MATHFN_CHUNK ? j->n - i0 : LC_MATHFN_CHUNK;
    return i0;
}
static void lc_mathfn_range(void *p, int64_t u0, int64_t u1, int tid) {
    const lc_mathfn_job *j = (const lc_mathfn_job *)p;
    for (int64_t u = u0; u < u1; u++) j->chunk(p, u, tid);
}
/* the pass: chunk over every chunk of j->n values, in ranges of chunks on nthreads threads */
static inline void lc_mathfn_run(lc_mathfn_job *j, lc_unit_fn chunk, int nthreads) {
    j->chunk = chunk;
    lc_team_range(nthreads, (j->n + LC_MATHFN_CHUNK - 1) / LC_MATHFN_CHUNK, LC_MATHFN_GRAIN, lc_mathfn_range, j);
}

static void lc_mathfn_f32_unit(void *p, int64_t u, int tid) {
    const lc_mathfn_job *j = (const lc_mathfn_job *)p;
    int64_t len, i0 = lc_mathfn_chunk(j, u, &len);
    (void)tid;
    j->B->row(j->o + i0, j->a + i0, len, j->fn);
}

/* in chunks (the same bits as one lc_mathfn_row over all n) */
static void lc_mathfn_f32(float *out, const float *x, int64_t n, int fn, int isa, int nthreads) {
    lc_mathfn_job j = {.B = lc_mathfn_pick(isa), .o = out, .a = x, .n = n, .fn = fn};
    lc_mathfn_run(&j, lc_mathfn_f32_unit, nthreads);
}

/* One in-order chain from 0 (the stage's rowsum, the norms' and softmax's sums). */
static inline float lc_rowsum_f(const float *x, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s = s + x[i];
    return s;
}

/* float64: element by element (scalar), in ranges of at least LC_MATHFN_F64_GRAIN */
#define LC_MATHFN_F64_GRAIN 2048
typedef struct { double *out; const double *x; int fn; } lc_mathfn_f64_job;
static void lc_mathfn_f64_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_mathfn_f64_job *j = (const lc_mathfn_f64_job *)p;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) j->out[i] = lc_apply_d(j->fn, j->x[i]);
}
static void lc_mathfn_f64(double *out, const double *x, int64_t n, int fn, int nthreads) {
    lc_mathfn_f64_job j = {out, x, fn};
    lc_team_range(nthreads, n, LC_MATHFN_F64_GRAIN, lc_mathfn_f64_range, &j);
}

/* y, t (n) <- GELU of u;  dx (n) <- its backward;  dx (n) <- SiLU's backward (dy2 NULL: none). */
static void lc_gelu_unit(void *p, int64_t u, int tid) {
    const lc_mathfn_job *j = (const lc_mathfn_job *)p;
    int64_t len, i0 = lc_mathfn_chunk(j, u, &len);
    (void)tid;
    j->B->gelu(j->o + i0, j->o2 + i0, j->a + i0, len);
}
static void lc_gelu_f32(float *y, float *t, const float *u, int64_t n, int isa, int nthreads) {
    lc_mathfn_job j = {.B = lc_mathfn_pick(isa), .o = y, .o2 = t, .a = u, .n = n};
    lc_mathfn_run(&j, lc_gelu_unit, nthreads);
}
static void lc_gelu_bwd_unit(void *p, int64_t u, int tid) {
    const lc_mathfn_job *j = (const lc_mathfn_job *)p;
    int64_t len, i0 = lc_mathfn_chunk(j, u, &len);
    (void)tid;
    j->B->gelu_bwd(j->o + i0, j->a + i0, j->b + i0, j->c + i0, len);
}
static void lc_gelu_bwd_f32(float *dx, const float *dy, const float *u, const float *t, int64_t n, int isa,
                            int nthreads) {
    lc_mathfn_job j = {.B = lc_mathfn_pick(isa), .o = dx, .a = dy, .b = u, .c = t, .n = n};
    lc_mathfn_run(&j, lc_gelu_bwd_unit, nthreads);
}
static void lc_silu_bwd_unit(void *p, int64_t u, int tid) {
    const lc_mathfn_job *j = (const lc_mathfn_job *)p;
    int64_t len, i0 = lc_mathfn_chunk(j, u, &len);
    (void)tid;
    j->B->silu_bwd(j->o + i0, j->a + i0, j->b ? j->b + i0 : NULL, j->c + i0, len);
}
static void lc_silu_bwd_f32(float *dx, const float *dy, const float *dy2, const float *x, int64_t n, int isa,
                            int nthreads) {
    lc_mathfn_job j = {.B = lc_mathfn_pick(isa), .o = dx, .a = dy, .b = dy2, .c = x, .n = n};
    lc_mathfn_run(&j, lc_silu_bwd_unit, nthreads);
}

#endif /* LUTCORE_MATHFN_H */
