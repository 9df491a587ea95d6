/* csrc/optim/x86/x86.h — AdamW's per-ISA bodies that live in their own translation
 * units (csrc/optim/x86/<isa>.c, compiled alone with that ISA's flags; simde_<isa>.c,
 * built against SIMDe with AVX2+FMA flags, backs the test-only extension
 * lutcore._native._simde_optim).  Included by optim.h after lc_adamw_hp.
 *   adamw  p, m, v (n) IN/OUT, g (n) IN, h: the step's float32 constants — the
 *          contract, and the bits, of lc_adamw_generic on one chunk
 */
#ifndef LUTCORE_OPTIM_X86_H
#define LUTCORE_OPTIM_X86_H

#define LC_OPTIM_X86_DECLARE(P)                                                                   \
    void P##adamw(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h);

LC_OPTIM_X86_DECLARE(lc_avx512_)
LC_OPTIM_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_OPTIM_X86_H */
