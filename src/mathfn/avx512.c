/* src/mathfn/avx512.c — the math functions' AVX-512 bodies (16 floats a vector).
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  The vector functions are
 * mathfn.h's AVX2 ones at 16 lanes, operation for operation (src/mathfn/zmm.h,
 * shared with the selective scan's AVX-512 body), so every lane has the generic
 * body's bits.  Tails (< 16 values) run the scalar functions of mathfn.h.
 *
 *   mathfn_row  out (n) <- fn(x (n)), fn one of LC_FN_*
 *   gelu        y, t (n) <- GELU of u (n);  gelu_bwd dx (n) <- dy, u, t (n)
 *   silu_bwd    dx (n) <- (dy + dy2) silu'(x), dy2 optional (NULL)
 */
#define LC_BODY_ISA avx512
#include "lutcore/mathfn.h"
#include "core/simd.h"
#include "lutcore/mathfn/x86.h"
#include "mathfn/zmm.h"

#if LC_X86

void LC_BODY(mathfn_row)(float *out, const float *x, int64_t n, int fn) {
    int64_t i = 0;
#define LC_Z_LOOP(F)                                                                              \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, F(_mm512_loadu_ps(x + i)));           \
    break;
    switch (fn) {            /* the function outside the loop: one loop per function */
    case LC_FN_EXP: LC_Z_LOOP(z_exp)
    case LC_FN_SOFTPLUS: LC_Z_LOOP(z_softplus)
    case LC_FN_SILU: LC_Z_LOOP(z_silu)
    case LC_FN_EXP2: LC_Z_LOOP(z_exp2)
    default: LC_Z_LOOP(z_sigmoid)
    }
#undef LC_Z_LOOP
    for (; i < n; i++) out[i] = lc_apply_f(fn, x[i]);
}

void LC_BODY(gelu)(float *y, float *t, const float *u, int64_t n) {
    const V c = VS(LC_GELU_C), a = VS(LC_GELU_A), one = VS(1.0f), two = VS(2.0f), half = VS(0.5f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        V uu = _mm512_loadu_ps(u + i);
        V z = _mm512_mul_ps(c, _mm512_add_ps(uu, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(a, uu), uu), uu)));
        V tt = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(z_exp(_mm512_add_ps(z, z)), one)));
        _mm512_storeu_ps(t + i, tt);
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(half, uu), _mm512_add_ps(one, tt)));
    }
    for (; i < n; i++) { t[i] = lc_gelu_tf(u[i]); y[i] = lc_gelu_yf(u[i], t[i]); }
}

void LC_BODY(gelu_bwd)(float *dx, const float *dy, const float *u, const float *t, int64_t n) {
    const V c = VS(LC_GELU_C), a3 = VS(3.0f * LC_GELU_A), one = VS(1.0f), half = VS(0.5f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        V uu = _mm512_loadu_ps(u + i), tt = _mm512_loadu_ps(t + i);
        V w = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(a3, uu), uu), one);
        V v = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, uu),
                                                        _mm512_sub_ps(one, _mm512_mul_ps(tt, tt))), c), w);
        V g = _mm512_add_ps(_mm512_mul_ps(_mm512_add_ps(tt, one), half), v);
        _mm512_storeu_ps(dx + i, _mm512_mul_ps(_mm512_loadu_ps(dy + i), g));
    }
    for (; i < n; i++) dx[i] = lc_gelu_dxf(dy[i], u[i], t[i]);
}

void LC_BODY(silu_bwd)(float *dx, const float *dy, const float *dy2, const float *x, int64_t n) {
    const V one = VS(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        V xx = _mm512_loadu_ps(x + i), s = z_sigmoid(xx), g = _mm512_loadu_ps(dy + i);
        if (dy2) g = _mm512_add_ps(g, _mm512_loadu_ps(dy2 + i));
        V d = _mm512_mul_ps(_mm512_sub_ps(one, s), xx);
        d = _mm512_mul_ps(_mm512_add_ps(d, one), s);
        _mm512_storeu_ps(dx + i, _mm512_mul_ps(d, g));
    }
    for (; i < n; i++) dx[i] = lc_silu_dxf(dy2 ? dy[i] + dy2[i] : dy[i], x[i]);
}

#endif /* LC_X86 */
