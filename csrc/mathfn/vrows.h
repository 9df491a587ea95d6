/* csrc/mathfn/vrows.h — the math functions' row loops over csrc/core/vec.h, written ONCE:
 * included (no include guard: once per width) with the vocabulary set (core/vec.h) and
 *   LC_VR_NAME(n)  the loops' names      LC_VR_FN  their linkage/attributes
 * by mathfn.h at 8 lanes (lc_<n>_avx2, static, AVX2 target) and by csrc/mathfn/x86/avx512.c
 * at 16 (LC_BODY(n): the AVX-512 body and its SIMDe twin).  Full vectors run the vector
 * functions (csrc/mathfn/vmath.h), the tail (< W values) the scalar ones: each step the
 * scalar's, so every element has the generic body's bits.
 *   mathfn_row  out (n) <- fn(x (n)), fn one of LC_FN_*
 *   gelu        y, t (n) <- GELU of u (n);  gelu_bwd dx (n) <- dy, u, t (n)
 *   silu_bwd    dx (n) <- (dy + dy2) silu'(x), dy2 optional (NULL)
 */
#if !defined(LC_VF_NAME) || !defined(LC_VR_NAME) || !defined(LC_VR_FN)
#error "csrc/mathfn/vrows.h: include core/vec.h and define LC_VR_NAME, LC_VR_FN first"
#endif

#if LC_X86
LC_VR_FN void LC_VR_NAME(mathfn_row)(float *out, const float *x, int64_t n, int fn) {
    int64_t i = 0;
#define LC_VR_LOOP(F)                                                                              \
    for (; i + LC_VF_W <= n; i += LC_VF_W) LC_VF_STOREU(out + i, LC_VF_NAME(F)(LC_VF_LOADU(x + i))); \
    break;
    switch (fn) {            /* the function outside the loop: one loop per function */
    case LC_FN_EXP: LC_VR_LOOP(exp)
    case LC_FN_SOFTPLUS: LC_VR_LOOP(softplus)
    case LC_FN_SILU: LC_VR_LOOP(silu)
    case LC_FN_EXP2: LC_VR_LOOP(exp2)
    default: LC_VR_LOOP(sigmoid)
    }
#undef LC_VR_LOOP
    for (; i < n; i++) out[i] = lc_apply_f(fn, x[i]);
}

LC_VR_FN void LC_VR_NAME(gelu)(float *y, float *t, const float *u, int64_t n) {
    const LC_VF c = LC_VF_SET1(LC_GELU_C), a = LC_VF_SET1(LC_GELU_A);
    const LC_VF one = LC_VF_SET1(1.0f), two = LC_VF_SET1(2.0f), half = LC_VF_SET1(0.5f);
    int64_t i = 0;
    for (; i + LC_VF_W <= n; i += LC_VF_W) {
        LC_VF uu = LC_VF_LOADU(u + i);
        LC_VF z = LC_VF_MUL(c, LC_VF_ADD(uu, LC_VF_MUL(LC_VF_MUL(LC_VF_MUL(a, uu), uu), uu)));
        LC_VF tt = LC_VF_SUB(one, LC_VF_DIV(two, LC_VF_ADD(LC_VF_NAME(exp)(LC_VF_ADD(z, z)), one)));
        LC_VF_STOREU(t + i, tt);
        LC_VF_STOREU(y + i, LC_VF_MUL(LC_VF_MUL(half, uu), LC_VF_ADD(one, tt)));
    }
    for (; i < n; i++) { t[i] = lc_gelu_tf(u[i]); y[i] = lc_gelu_yf(u[i], t[i]); }
}

LC_VR_FN void LC_VR_NAME(gelu_bwd)(float *dx, const float *dy, const float *u, const float *t, int64_t n) {
    const LC_VF c = LC_VF_SET1(LC_GELU_C), a3 = LC_VF_SET1(3.0f * LC_GELU_A);
    const LC_VF one = LC_VF_SET1(1.0f), half = LC_VF_SET1(0.5f);
    int64_t i = 0;
    for (; i + LC_VF_W <= n; i += LC_VF_W) {
        LC_VF uu = LC_VF_LOADU(u + i), tt = LC_VF_LOADU(t + i);
        LC_VF w = LC_VF_ADD(LC_VF_MUL(LC_VF_MUL(a3, uu), uu), one);
        LC_VF v = LC_VF_MUL(LC_VF_MUL(LC_VF_MUL(LC_VF_MUL(half, uu), LC_VF_SUB(one, LC_VF_MUL(tt, tt))), c), w);
        LC_VF g = LC_VF_ADD(LC_VF_MUL(LC_VF_ADD(tt, one), half), v);
        LC_VF_STOREU(dx + i, LC_VF_MUL(LC_VF_LOADU(dy + i), g));
    }
    for (; i < n; i++) dx[i] = lc_gelu_dxf(dy[i], u[i], t[i]);
}

LC_VR_FN void LC_VR_NAME(silu_bwd)(float *dx, const float *dy, const float *dy2, const float *x, int64_t n) {
    const LC_VF one = LC_VF_SET1(1.0f);
    int64_t i = 0;
    for (; i + LC_VF_W <= n; i += LC_VF_W) {
        LC_VF xx = LC_VF_LOADU(x + i), s = LC_VF_NAME(sigmoid)(xx), g = LC_VF_LOADU(dy + i);
        if (dy2) g = LC_VF_ADD(g, LC_VF_LOADU(dy2 + i));
        LC_VF d = LC_VF_MUL(LC_VF_SUB(one, s), xx);
        d = LC_VF_MUL(LC_VF_ADD(d, one), s);
        LC_VF_STOREU(dx + i, LC_VF_MUL(d, g));
    }
    for (; i < n; i++) dx[i] = lc_silu_dxf(dy2 ? dy[i] + dy2[i] : dy[i], x[i]);
}
#endif /* LC_X86 */
