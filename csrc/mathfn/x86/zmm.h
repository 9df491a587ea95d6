/* csrc/mathfn/x86/zmm.h — the math functions at 16 lanes (AVX-512 F/DQ), for the
 * AVX-512 bodies that evaluate them (csrc/mathfn/x86/avx512.c, csrc/scan/x86/avx512.c).
 *
 * Design: each is mathfn.h's AVX2 function (lc_*_ps) at 16 lanes, operation for
 * operation — the polynomials evaluated in the same order, the same fused
 * multiply-adds, the same careful paths for the same lanes (blendv -> mask blend,
 * movemask -> a mask test, round_ps -> roundscale with scale 0) — so every lane
 * has the AVX2 (and the generic) body's bits.  Included after core/simd.h
 * (native intrinsics, or SIMDe's under LC_SIMDE) in a file compiled with the
 * AVX-512 flags.
 */
#ifndef LUTCORE_SRC_MATHFN_ZMM_H
#define LUTCORE_SRC_MATHFN_ZMM_H

#include "mathfn/mathfn.h"

#if LC_X86

typedef __m512 V;
typedef __mmask16 K;
#define VS(c) _mm512_set1_ps(c)
#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define ABSMASK _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff))

LC_AI V z_exp_slow(V x) {
    const V hi = VS(LC_EXP_HI), lo = VS(LC_EXP_LO);
    K isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    K over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    K under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    V xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    V n = _mm512_roundscale_ps(_mm512_mul_ps(xc, VS(LC_LOG2E)), RNE);
    V r = _mm512_sub_ps(xc, _mm512_mul_ps(n, VS(LC_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, VS(LC_LN2_LO)));
    V r2 = _mm512_mul_ps(r, r);
    V p = VS(LC_P0);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), VS(LC_P1));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), VS(LC_P2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), VS(LC_P3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), VS(LC_P4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), VS(LC_P5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r2), r);
    p = _mm512_add_ps(p, VS(1.0f));
    __m512i ni = _mm512_cvtps_epi32(n);
    __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    V s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    V s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
    V res = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    res = _mm512_mask_blend_ps(over, res, VS(INFINITY));
    res = _mm512_mask_blend_ps(under, res, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(isnan, res, x);
}
LC_AI V z_pow2n(V n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
/* lanes with |x| > bound, or NaN */
LC_AI K z_outside(V x, float bound) { return _mm512_cmp_ps_mask(_mm512_and_ps(x, ABSMASK), VS(bound), _CMP_NLE_UQ); }
LC_AI V z_exp_fast(V x) {
    V n = _mm512_roundscale_ps(_mm512_mul_ps(x, VS(LC_LOG2E)), RNE);
    V r = _mm512_fmadd_ps(n, VS(-LC_LN2_HI), x);
    r = _mm512_fmadd_ps(n, VS(-LC_LN2_LO), r);
    V r2 = _mm512_mul_ps(r, r);
    V p01 = _mm512_fmadd_ps(VS(LC_P0), r, VS(LC_P1));
    V p23 = _mm512_fmadd_ps(VS(LC_P2), r, VS(LC_P3));
    V p45 = _mm512_fmadd_ps(VS(LC_P4), r, VS(LC_P5));
    V p = _mm512_fmadd_ps(p01, r2, p23);
    p = _mm512_fmadd_ps(p, r2, p45);
    p = _mm512_fmadd_ps(p, r2, r);
    p = _mm512_add_ps(p, VS(1.0f));
    return _mm512_mul_ps(p, z_pow2n(n));
}
LC_AI V z_exp(V x) {
    K odd = z_outside(x, LC_EXP_FAST_ABS);
    V res = z_exp_fast(x);
    if (odd) res = _mm512_mask_blend_ps(odd, res, z_exp_slow(x));
    return res;
}
LC_AI V z_exp2_fast(V x) {
    V n = _mm512_roundscale_ps(x, RNE);
    V f = _mm512_sub_ps(x, n), f2 = _mm512_mul_ps(f, f);
    V e01 = _mm512_fmadd_ps(VS(LC_E2_C1), f, VS(LC_E2_C0));
    V e23 = _mm512_fmadd_ps(VS(LC_E2_C3), f, VS(LC_E2_C2));
    V e45 = _mm512_fmadd_ps(VS(LC_E2_C5), f, VS(LC_E2_C4));
    V t = _mm512_fmadd_ps(e45, f2, e23);
    V p = _mm512_fmadd_ps(_mm512_fmadd_ps(t, f2, e01), f, VS(1.0f));
    return _mm512_mul_ps(p, z_pow2n(n));
}
LC_AI V z_exp2(V x) {
    K odd = z_outside(x, LC_EXP2_FAST_ABS);
    V res = z_exp2_fast(x);
    if (odd) {
        float xs[16], rs[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(rs, res);
        for (int i = 0; i < 16; i++)
            if ((odd >> i) & 1) rs[i] = lc_exp2f_slow(xs[i]);
        res = _mm512_loadu_ps(rs);
    }
    return res;
}
LC_AI V z_log(V x) {  /* x finite, > 0, normal */
    __m512i u = _mm512_castps_si512(x);
    V e = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(127)));
    V m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32(0x007fffff)),
                                              _mm512_set1_epi32(0x3f800000)));
    K big = _mm512_cmp_ps_mask(m, VS(1.41421356f), _CMP_GT_OQ);
    m = _mm512_mask_blend_ps(big, m, _mm512_mul_ps(m, VS(0.5f)));
    e = _mm512_mask_blend_ps(big, e, _mm512_add_ps(e, VS(1.0f)));
    V xm = _mm512_sub_ps(m, VS(1.0f)), z = _mm512_mul_ps(xm, xm);
    V z2 = _mm512_mul_ps(z, z);
    V q01 = _mm512_fmadd_ps(VS(7.0376836292e-2f), xm, VS(-1.1514610310e-1f));
    V q23 = _mm512_fmadd_ps(VS(1.1676998740e-1f), xm, VS(-1.2420140846e-1f));
    V q45 = _mm512_fmadd_ps(VS(1.4249322787e-1f), xm, VS(-1.6668057665e-1f));
    V q67 = _mm512_fmadd_ps(VS(2.0000714765e-1f), xm, VS(-2.4999993993e-1f));
    V q03 = _mm512_fmadd_ps(q01, z, q23), q47 = _mm512_fmadd_ps(q45, z, q67);
    V q = _mm512_fmadd_ps(_mm512_fmadd_ps(q03, z2, q47), xm, VS(3.3333331174e-1f));
    V y = _mm512_mul_ps(_mm512_mul_ps(xm, z), q);
    y = _mm512_fmadd_ps(e, VS(LC_LN2_LO), y);
    y = _mm512_fmadd_ps(VS(-0.5f), z, y);
    V r = _mm512_add_ps(xm, y);
    return _mm512_add_ps(r, _mm512_mul_ps(e, VS(LC_LN2_HI)));
}
/* softplus and the exp it is built on (lc_softplus_e_ps) */
LC_AI V z_softplus_e(V x, V *eo) {
    V e = z_exp(x);
    *eo = e;
    const V one = VS(1.0f);
    V u = _mm512_add_ps(one, e);
    V u1 = _mm512_sub_ps(u, one);
    K tiny = _mm512_cmp_ps_mask(u, one, _CMP_EQ_OQ);
    V safe_u = _mm512_mask_blend_ps(tiny, u, VS(2.0f));
    V safe_u1 = _mm512_mask_blend_ps(tiny, u1, one);
    V r = _mm512_mul_ps(z_log(safe_u), _mm512_div_ps(e, safe_u1));
    r = _mm512_mask_blend_ps(tiny, r, e);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, VS(LC_SOFTPLUS_T), _CMP_GT_OQ), r, x);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x);
}
LC_AI V z_softplus(V x) {
    V e;
    return z_softplus_e(x, &e);
}
LC_AI V z_sigmoid(V x) {
    const V one = VS(1.0f);
    V r = _mm512_div_ps(one, _mm512_add_ps(one, z_exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    K lo = _mm512_cmp_ps_mask(x, VS(LC_SIG_LO), _CMP_LT_OQ);
    if (lo) r = _mm512_mask_blend_ps(lo, r, z_exp(x));
    return r;
}
LC_AI V z_silu(V x) {
    const V one = VS(1.0f);
    V r = _mm512_div_ps(x, _mm512_add_ps(one, z_exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    K lo = _mm512_cmp_ps_mask(x, VS(LC_SIG_LO), _CMP_LT_OQ);
    if (lo) {
        V xc = _mm512_max_ps(x, VS(-200.0f));
        V nx = _mm512_sub_ps(_mm512_setzero_ps(), xc);
        V safe = _mm512_mask_blend_ps(lo, VS(100.0f), nx);   /* log needs x > 0 */
        V t = _mm512_xor_ps(VS(-0.0f), z_exp(_mm512_add_ps(xc, z_log(safe))));
        r = _mm512_mask_blend_ps(lo, r, t);
    }
    return r;
}

/* d softplus / dx from e = exp(x): 1 above the threshold (lc_dsoftplus_e_ps) */
LC_AI V z_dsoftplus_e(V x, V e) {
    K big = _mm512_cmp_ps_mask(x, VS(LC_SOFTPLUS_T), _CMP_GT_OQ);
    V r = _mm512_div_ps(e, _mm512_add_ps(VS(1.0f), e));
    return _mm512_mask_blend_ps(big, r, VS(1.0f));
}
/* phi1(x) = expm1(x)/x from ex = exp(x) (lc_phi1_ps) */
LC_AI V z_phi1(V x, V ex) {
    const V one = VS(1.0f);
    K far = _mm512_cmp_ps_mask(_mm512_and_ps(x, ABSMASK), VS(LC_PHI_T), _CMP_GT_OQ);
    V p = VS(1.0f / 362880.0f);
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 40320.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 5040.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 720.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 120.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 24.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(1.0f / 6.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), one);
    if (far) {
        V safe_x = _mm512_mask_blend_ps(far, one, x);
        p = _mm512_mask_blend_ps(far, p, _mm512_div_ps(_mm512_sub_ps(ex, one), safe_x));
    }
    return p;
}
/* phi1'(x) from ex = exp(x) and phi = phi1(x) (lc_dphi1_ps) */
LC_AI V z_dphi1(V x, V ex, V phi) {
    const V one = VS(1.0f);
    K far = _mm512_cmp_ps_mask(_mm512_and_ps(x, ABSMASK), VS(LC_PHI_T), _CMP_GT_OQ);
    V p = VS(9.0f / 3628800.0f);
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(8.0f / 362880.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(7.0f / 40320.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(6.0f / 5040.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(5.0f / 720.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(4.0f / 120.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(3.0f / 24.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(2.0f / 6.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, x), VS(0.5f));
    if (far) {
        V safe_x = _mm512_mask_blend_ps(far, one, x);
        p = _mm512_mask_blend_ps(far, p, _mm512_div_ps(_mm512_sub_ps(ex, phi), safe_x));
    }
    return p;
}
/* lane-wise max(m, |a|) for m >= 0, NaN above everything and sticky (lc_maxabs_ps):
 * on sign-cleared floats the integer order is the float order, NaN highest */
LC_AI V z_maxabs(V m, V a) {
    __m512i aa = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff));
    return _mm512_castsi512_ps(_mm512_max_epi32(_mm512_castps_si512(m), aa));
}

#endif /* LC_X86 */
#endif /* LUTCORE_SRC_MATHFN_ZMM_H */
