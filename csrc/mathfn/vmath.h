/* csrc/mathfn/vmath.h — the math functions over csrc/core/vec.h, written ONCE and compiled
 * per ISA: included (no include guard: once per width) after core/vec.h with LC_VEC_W set,
 *   8   by mathfn.h: lc_exp_ps, lc_log_ps, ... (AVX2, target attribute: any extension)
 *   16  by csrc/mathfn/x86/zmm.h: z_exp, z_log, ... (the AVX-512 bodies and their SIMDe twins)
 * (the names: LC_VF_NAME).  Each is the scalar function of mathfn.h on every lane: the
 * polynomials in the same order, every fused multiply-add an explicit LC_VF_FMA and every
 * other product rounded before its sum (-ffp-contract=off), the same careful paths for the
 * same lanes — so every lane has the generic body's bits at either width.
 *   exp_slow exp_fast exp   e^x (exp_fast: lanes with |x| <= LC_EXP_FAST_ABS only)
 *   exp2_fast exp2          2^x (exp2_fast: |x| <= LC_EXP2_FAST_ABS)
 *   pow2n outside maxabs    2^n (n integral); |x| > bound or NaN (a mask); max(m, |a|), NaN sticky
 *   log                     x finite, > 0, normal
 *   softplus_e softplus sigmoid silu dsoftplus_e phi1 dphi1
 */
#if !defined(LC_VF_NAME)
#error "csrc/mathfn/vmath.h: include core/vec.h (with LC_VEC_W) first"
#endif

#if LC_X86
#define V_ LC_VF
#define M_ LC_VM
#define S_(c) LC_VF_SET1(c)
#define F_(n) LC_VF_NAME(n)

LC_VF_FN V_ F_(exp_slow)(V_ x) {
    const V_ hi = S_(LC_EXP_HI), lo = S_(LC_EXP_LO);
    M_ isnan = LC_VF_CMP(x, x, _CMP_UNORD_Q);
    M_ over = LC_VF_CMP(x, hi, _CMP_GT_OQ);
    M_ under = LC_VF_CMP(x, lo, _CMP_LT_OQ);
    V_ xc = LC_VF_MIN(LC_VF_MAX(x, lo), hi);
    V_ n = LC_VF_ROUND(LC_VF_MUL(xc, S_(LC_LOG2E)));
    V_ r = LC_VF_SUB(xc, LC_VF_MUL(n, S_(LC_LN2_HI)));
    r = LC_VF_SUB(r, LC_VF_MUL(n, S_(LC_LN2_LO)));
    V_ r2 = LC_VF_MUL(r, r);
    V_ p = S_(LC_P0);
    p = LC_VF_ADD(LC_VF_MUL(p, r), S_(LC_P1));
    p = LC_VF_ADD(LC_VF_MUL(p, r), S_(LC_P2));
    p = LC_VF_ADD(LC_VF_MUL(p, r), S_(LC_P3));
    p = LC_VF_ADD(LC_VF_MUL(p, r), S_(LC_P4));
    p = LC_VF_ADD(LC_VF_MUL(p, r), S_(LC_P5));
    p = LC_VF_ADD(LC_VF_MUL(p, r2), r);
    p = LC_VF_ADD(p, S_(1.0f));
    LC_VI ni = LC_VF_CVT_I(n);
    LC_VI n1 = LC_VF_I_SRAI(ni, 1), n2 = LC_VF_I_SUB(ni, n1);
    V_ s1 = LC_VF_CAST_F(LC_VF_I_SLLI(LC_VF_I_ADD(n1, LC_VF_I_SET1(127)), 23));
    V_ s2 = LC_VF_CAST_F(LC_VF_I_SLLI(LC_VF_I_ADD(n2, LC_VF_I_SET1(127)), 23));
    V_ res = LC_VF_MUL(LC_VF_MUL(p, s1), s2);
    res = LC_VF_BLEND(res, S_(INFINITY), over);
    res = LC_VF_BLEND(res, LC_VF_ZERO(), under);
    return LC_VF_BLEND(res, x, isnan);
}
/* 2^n for integral n in [-126, 127] (float lanes) */
LC_VF_FN V_ F_(pow2n)(V_ n) {
    return LC_VF_CAST_F(LC_VF_I_SLLI(LC_VF_I_ADD(LC_VF_CVT_I(n), LC_VF_I_SET1(127)), 23));
}
/* lanes with |x| > bound, or NaN */
LC_VF_FN M_ F_(outside)(V_ x, float bound) { return LC_VF_CMP(LC_VF_ABS(x), S_(bound), _CMP_NLE_UQ); }
/* exp for lanes known to satisfy |x| <= LC_EXP_FAST_ABS (the caller checked): exp without
 * the check, the same bits on those lanes */
LC_VF_FN V_ F_(exp_fast)(V_ x) {
    V_ n = LC_VF_ROUND(LC_VF_MUL(x, S_(LC_LOG2E)));
    V_ r = LC_VF_FMA(n, S_(-LC_LN2_HI), x);
    r = LC_VF_FMA(n, S_(-LC_LN2_LO), r);
    V_ r2 = LC_VF_MUL(r, r);
    V_ p01 = LC_VF_FMA(S_(LC_P0), r, S_(LC_P1));
    V_ p23 = LC_VF_FMA(S_(LC_P2), r, S_(LC_P3));
    V_ p45 = LC_VF_FMA(S_(LC_P4), r, S_(LC_P5));
    V_ p = LC_VF_FMA(p01, r2, p23);
    p = LC_VF_FMA(p, r2, p45);
    p = LC_VF_FMA(p, r2, r);
    p = LC_VF_ADD(p, S_(1.0f));
    return LC_VF_MUL(p, F_(pow2n)(n));
}
/* the fast path on |x| <= LC_EXP_FAST_ABS; other lanes (and NaN) are redone by the careful
 * path, so no clamp is needed here */
LC_VF_FN V_ F_(exp)(V_ x) {
    M_ odd = F_(outside)(x, LC_EXP_FAST_ABS);
    V_ res = F_(exp_fast)(x);
    if (LC_VF_ANY(odd)) res = LC_VF_BLEND(res, F_(exp_slow)(x), odd);
    return res;
}
/* lc_exp2f on every lane: the fast body, and the careful one lane by lane where needed
 * (rare: the scan proves the range per unit and takes the fast body directly) */
LC_VF_FN V_ F_(exp2_fast)(V_ x) {
    V_ n = LC_VF_ROUND(x);
    V_ f = LC_VF_SUB(x, n), f2 = LC_VF_MUL(f, f);
    V_ e01 = LC_VF_FMA(S_(LC_E2_C1), f, S_(LC_E2_C0));
    V_ e23 = LC_VF_FMA(S_(LC_E2_C3), f, S_(LC_E2_C2));
    V_ e45 = LC_VF_FMA(S_(LC_E2_C5), f, S_(LC_E2_C4));
    V_ t = LC_VF_FMA(e45, f2, e23);
    V_ p = LC_VF_FMA(LC_VF_FMA(t, f2, e01), f, S_(1.0f));
    return LC_VF_MUL(p, F_(pow2n)(n));
}
LC_VF_FN V_ F_(exp2)(V_ x) {
    M_ odd = F_(outside)(x, LC_EXP2_FAST_ABS);
    V_ res = F_(exp2_fast)(x);
    int mask = LC_VF_BITS(odd);
    if (mask) {
        float xs[LC_VF_W], rs[LC_VF_W];
        LC_VF_STOREU(xs, x);
        LC_VF_STOREU(rs, res);
        for (int i = 0; i < LC_VF_W; i++)
            if ((mask >> i) & 1) rs[i] = lc_exp2f_slow(xs[i]);
        res = LC_VF_LOADU(rs);
    }
    return res;
}
/* lane-wise max(m, |a|) for m >= 0, NaN above everything and sticky: on sign-cleared
 * floats the integer order is the float order, NaN highest */
LC_VF_FN V_ F_(maxabs)(V_ m, V_ a) {
    LC_VI aa = LC_VF_I_AND(LC_VF_CAST_I(a), LC_VF_I_SET1(0x7fffffff));
    return LC_VF_CAST_F(LC_VF_I_MAX(LC_VF_CAST_I(m), aa));
}
LC_VF_FN V_ F_(log)(V_ x) {  /* x finite, > 0, normal */
    LC_VI u = LC_VF_CAST_I(x);
    V_ e = LC_VF_CVT_F(LC_VF_I_SUB(LC_VF_I_SRLI(u, 23), LC_VF_I_SET1(127)));
    V_ m = LC_VF_CAST_F(LC_VF_I_OR(LC_VF_I_AND(u, LC_VF_I_SET1(0x007fffff)), LC_VF_I_SET1(0x3f800000)));
    M_ big = LC_VF_CMP(m, S_(1.41421356f), _CMP_GT_OQ);
    m = LC_VF_BLEND(m, LC_VF_MUL(m, S_(0.5f)), big);
    e = LC_VF_BLEND(e, LC_VF_ADD(e, S_(1.0f)), big);
    V_ xm = LC_VF_SUB(m, S_(1.0f)), z = LC_VF_MUL(xm, xm);
    V_ z2 = LC_VF_MUL(z, z);
    V_ q01 = LC_VF_FMA(S_(7.0376836292e-2f), xm, S_(-1.1514610310e-1f));
    V_ q23 = LC_VF_FMA(S_(1.1676998740e-1f), xm, S_(-1.2420140846e-1f));
    V_ q45 = LC_VF_FMA(S_(1.4249322787e-1f), xm, S_(-1.6668057665e-1f));
    V_ q67 = LC_VF_FMA(S_(2.0000714765e-1f), xm, S_(-2.4999993993e-1f));
    V_ q03 = LC_VF_FMA(q01, z, q23), q47 = LC_VF_FMA(q45, z, q67);
    V_ q = LC_VF_FMA(LC_VF_FMA(q03, z2, q47), xm, S_(3.3333331174e-1f));
    V_ y = LC_VF_MUL(LC_VF_MUL(xm, z), q);
    y = LC_VF_FMA(e, S_(LC_LN2_LO), y);
    y = LC_VF_FMA(S_(-0.5f), z, y);
    V_ r = LC_VF_ADD(xm, y);
    return LC_VF_ADD(r, LC_VF_MUL(e, S_(LC_LN2_HI)));
}
/* softplus, and the exp it is built on */
LC_VF_FN V_ F_(softplus_e)(V_ x, V_ *eo) {
    V_ e = F_(exp)(x);
    *eo = e;
    const V_ one = S_(1.0f);
    V_ u = LC_VF_ADD(one, e);
    V_ u1 = LC_VF_SUB(u, one);
    M_ tiny = LC_VF_CMP(u, one, _CMP_EQ_OQ);
    V_ safe_u = LC_VF_BLEND(u, S_(2.0f), tiny);
    V_ safe_u1 = LC_VF_BLEND(u1, one, tiny);
    V_ r = LC_VF_MUL(F_(log)(safe_u), LC_VF_DIV(e, safe_u1));
    r = LC_VF_BLEND(r, e, tiny);
    r = LC_VF_BLEND(r, x, LC_VF_CMP(x, S_(LC_SOFTPLUS_T), _CMP_GT_OQ));
    /* NaN: exp gave NaN, u NaN -> r NaN; keep x's NaN */
    return LC_VF_BLEND(r, x, LC_VF_CMP(x, x, _CMP_UNORD_Q));
}
LC_VF_FN V_ F_(softplus)(V_ x) {
    V_ e;
    return F_(softplus_e)(x, &e);
}
LC_VF_FN V_ F_(sigmoid)(V_ x) {
    const V_ one = S_(1.0f);
    V_ r = LC_VF_DIV(one, LC_VF_ADD(one, F_(exp)(LC_VF_SUB(LC_VF_ZERO(), x))));
    M_ lo = LC_VF_CMP(x, S_(LC_SIG_LO), _CMP_LT_OQ);
    if (LC_VF_ANY(lo)) r = LC_VF_BLEND(r, F_(exp)(x), lo);
    return r;
}
LC_VF_FN V_ F_(silu)(V_ x) {
    const V_ one = S_(1.0f);
    V_ r = LC_VF_DIV(x, LC_VF_ADD(one, F_(exp)(LC_VF_SUB(LC_VF_ZERO(), x))));
    M_ lo = LC_VF_CMP(x, S_(LC_SIG_LO), _CMP_LT_OQ);
    if (LC_VF_ANY(lo)) {
        V_ xc = LC_VF_MAX(x, S_(-200.0f));
        V_ nx = LC_VF_SUB(LC_VF_ZERO(), xc);
        V_ safe = LC_VF_BLEND(S_(100.0f), nx, lo);   /* log needs x > 0 */
        V_ t = LC_VF_XOR(S_(-0.0f), F_(exp)(LC_VF_ADD(xc, F_(log)(safe))));
        r = LC_VF_BLEND(r, t, lo);
    }
    return r;
}
/* d softplus / dx from e = exp(x): 1 above the threshold */
LC_VF_FN V_ F_(dsoftplus_e)(V_ x, V_ e) {
    M_ big = LC_VF_CMP(x, S_(LC_SOFTPLUS_T), _CMP_GT_OQ);
    V_ r = LC_VF_DIV(e, LC_VF_ADD(S_(1.0f), e));
    return LC_VF_BLEND(r, S_(1.0f), big);
}
/* phi1(x) = expm1(x)/x from ex = exp(x) */
LC_VF_FN V_ F_(phi1)(V_ x, V_ ex) {
    const V_ one = S_(1.0f);
    M_ far = LC_VF_CMP(LC_VF_ABS(x), S_(LC_PHI_T), _CMP_GT_OQ);
    V_ p = S_(1.0f / 362880.0f);
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 40320.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 5040.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 720.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 120.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 24.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(1.0f / 6.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(0.5f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), one);
    if (LC_VF_ANY(far)) {
        V_ safe_x = LC_VF_BLEND(one, x, far);
        p = LC_VF_BLEND(p, LC_VF_DIV(LC_VF_SUB(ex, one), safe_x), far);
    }
    return p;
}
/* phi1'(x) from ex = exp(x) and phi = phi1(x) */
LC_VF_FN V_ F_(dphi1)(V_ x, V_ ex, V_ phi) {
    const V_ one = S_(1.0f);
    M_ far = LC_VF_CMP(LC_VF_ABS(x), S_(LC_PHI_T), _CMP_GT_OQ);
    V_ p = S_(9.0f / 3628800.0f);
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(8.0f / 362880.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(7.0f / 40320.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(6.0f / 5040.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(5.0f / 720.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(4.0f / 120.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(3.0f / 24.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(2.0f / 6.0f));
    p = LC_VF_ADD(LC_VF_MUL(p, x), S_(0.5f));
    if (LC_VF_ANY(far)) {
        V_ safe_x = LC_VF_BLEND(one, x, far);
        p = LC_VF_BLEND(p, LC_VF_DIV(LC_VF_SUB(ex, phi), safe_x), far);
    }
    return p;
}

#undef V_
#undef M_
#undef S_
#undef F_
#endif /* LC_X86 */
