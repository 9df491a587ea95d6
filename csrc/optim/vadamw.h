/* csrc/optim/vadamw.h — AdamW's vector body over csrc/core/vec.h, written ONCE: included (no
 * include guard: once per width) with the vocabulary set (core/vec.h) and
 *   LC_VR_NAME(n)  the body's name      LC_VR_FN  its linkage/attributes
 * by optim.h at 8 lanes (lc_adamw_avx2, static, AVX2 target) and by csrc/optim/x86/avx512.c
 * at 16 (LC_BODY(adamw)).  The float32 operations of lc_adamw_generic in its order, no FMA
 * (g' = g s; m, v; s = (m lr/bc1) / (sqrt(v) / sqrt(bc2) + eps), non-finite -> 0, the
 * optional clamp; p = p (1 - lr wd) - s), so the generic body's bits; the tail (< W) runs
 * the generic body.
 *   p, m, v  (n) float32   IN/OUT      g  (n) float32   IN      h: the step's constants
 */
#if !defined(LC_VF_NAME) || !defined(LC_VR_NAME) || !defined(LC_VR_FN)
#error "csrc/optim/vadamw.h: include core/vec.h and define LC_VR_NAME, LC_VR_FN first"
#endif

#if LC_X86
LC_VR_FN void LC_VR_NAME(adamw)(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h) {
    const LC_VF b1 = LC_VF_SET1(h->b1), b2 = LC_VF_SET1(h->b2), c1 = LC_VF_SET1(h->c1),
                c2 = LC_VF_SET1(h->c2), eps = LC_VF_SET1(h->eps), ss = LC_VF_SET1(h->step_size),
                decay = LC_VF_SET1(h->decay), isb = LC_VF_SET1(h->inv_sqrt_bc2),
                gs = LC_VF_SET1(h->gscale), md = LC_VF_SET1(h->max_delta),
                nmd = LC_VF_SET1(-h->max_delta), fmax = LC_VF_SET1(FLT_MAX_);
    const int clampit = h->max_delta > 0.0f;
    int64_t i = 0;
    for (; i + LC_VF_W <= n; i += LC_VF_W) {
        LC_VF gg = LC_VF_MUL(LC_VF_LOADU(g + i), gs);
        LC_VF mi = LC_VF_ADD(LC_VF_MUL(b1, LC_VF_LOADU(m + i)), LC_VF_MUL(c1, gg));
        LC_VF vi = LC_VF_ADD(LC_VF_MUL(b2, LC_VF_LOADU(v + i)), LC_VF_MUL(c2, LC_VF_MUL(gg, gg)));
        LC_VF_STOREU(m + i, mi);
        LC_VF_STOREU(v + i, vi);
        LC_VF s = LC_VF_DIV(LC_VF_MUL(mi, ss), LC_VF_ADD(LC_VF_MUL(LC_VF_SQRT(vi), isb), eps));
        LC_VM ok = LC_VF_CMP(LC_VF_ABS(s), fmax, _CMP_LE_OQ);
        s = LC_VF_MASKZ(ok, s);
        if (clampit) s = LC_VF_MIN(LC_VF_MAX(s, nmd), md);
        LC_VF_STOREU(p + i, LC_VF_SUB(LC_VF_MUL(LC_VF_LOADU(p + i), decay), s));
    }
    lc_adamw_generic(p + i, g + i, m + i, v + i, n - i, h);
}
#endif /* LC_X86 */
