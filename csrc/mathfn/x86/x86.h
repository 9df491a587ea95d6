/* csrc/mathfn/x86/x86.h — the math functions' per-ISA bodies that live in their own
 * translation units (csrc/mathfn/x86/<isa>.c, compiled alone with that ISA's flags; the
 * simde_<isa>.c copy, built against SIMDe with AVX2+FMA flags, backs the test-only
 * extension lutcore._native._simde_mamba).  Each has the contract, and the bits,
 * of mathfn.h's generic function of the same name, on one chunk of n values:
 *   mathfn_row  out (n) <- fn(x (n))                    fn: LC_FN_*
 *   gelu        y, t (n) <- GELU(u (n)), its tanh
 *   gelu_bwd    dx (n) <- dy, u, t (n)
 *   silu_bwd    dx (n) <- dy (n) [+ dy2 (n)], x (n)     dy2 may be NULL
 */
#ifndef LUTCORE_MATHFN_X86_H
#define LUTCORE_MATHFN_X86_H

#include <stdint.h>

#define LC_MATHFN_X86_DECLARE(P)                                                                  \
    void P##mathfn_row(float *out, const float *x, int64_t n, int fn);                            \
    void P##gelu(float *y, float *t, const float *u, int64_t n);                                  \
    void P##gelu_bwd(float *dx, const float *dy, const float *u, const float *t, int64_t n);       \
    void P##silu_bwd(float *dx, const float *dy, const float *dy2, const float *x, int64_t n);

LC_MATHFN_X86_DECLARE(lc_avx512_)
LC_MATHFN_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_MATHFN_X86_H */
