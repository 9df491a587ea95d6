/* csrc/conv/x86/x86.h — causal conv1d's per-ISA bodies that live in their own
 * translation units (csrc/conv/x86/<isa>.c, compiled alone with that ISA's flags; the
 * simde_<isa>.c copy backs the test-only extension lutcore._native._simde_mamba).
 * Each is conv.h's float32 row / chunk function of the same name (same arguments,
 * same per-element arithmetic, no FMA), so the generic body's bits:
 *   conv_fwd_rows   y rows [t0, t1) of batch b          (B, L, D)
 *   conv_dx_rows    dx rows [s0, s1) of batch b         (B, L, D)
 *   conv_dw_chunk   dwt (K, D), db (D,) channels [d0, d1)
 */
#ifndef LUTCORE_CONV_X86_H
#define LUTCORE_CONV_X86_H

#include <stdint.h>

#define LC_CONV_X86_DECLARE(P)                                                                    \
    void P##conv_fwd_rows(float *y, const float *x, const float *wt, const float *bias, int64_t b,  \
                          int64_t t0, int64_t t1, int64_t L, int64_t D, int64_t K);               \
    void P##conv_dx_rows(float *dx, const float *dy, const float *wt, int64_t b, int64_t s0,      \
                         int64_t s1, int64_t L, int64_t D, int64_t K);                            \
    void P##conv_dw_chunk(float *dwt, float *db, const float *dy, const float *x, int64_t d0,     \
                          int64_t d1, int64_t Bsz, int64_t L, int64_t D, int64_t K);

LC_CONV_X86_DECLARE(lc_avx512_)
LC_CONV_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_CONV_X86_H */
