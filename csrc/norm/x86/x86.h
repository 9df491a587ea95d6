/* csrc/norm/x86/x86.h — the norms' per-ISA bodies, in their own translation units
 * (csrc/norm/x86/<isa>.c, compiled alone with that ISA's flags, all from the one source
 * csrc/norm/x86/body.h; the simde_avx512.c copy, built against SIMDe with AVX2+FMA flags,
 * backs the test-only extension lutcore._native._simde_decode).
 *
 * Each runs a group of nr <= W rows (W = 8 for avx2, 16 for avx512), rows C apart, with
 * the bits of norm.h's generic rows:
 *   norm_rms      y (nr, C), rstd (nr) or NULL    <- x (nr, C), w (C)
 *   norm_rms_bwd  dx (nr, C); part (C) +=          <- dy, x (nr, C), w (C), rstd (nr)
 *   norm_ln       y, xhat (nr, C), rstd (nr)      <- x (nr, C), w, b (C)
 *   norm_ln_bwd   dx (nr, C); pw, pb (C) +=        <- dy, xhat (nr, C), w (C), rstd (nr)
 */
#ifndef LUTCORE_NORM_X86_H
#define LUTCORE_NORM_X86_H

#include <stdint.h>

#define LC_NORM_X86_DECLARE(P)                                                                          \
    void P##norm_rms(float *y, float *rstd, const float *x, const float *w, int nr, int64_t C, float eps);  \
    void P##norm_rms_bwd(float *dx, float *part, const float *dy, const float *x, const float *w,           \
                         const float *rstd, int nr, int64_t C);                                          \
    void P##norm_ln(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,     \
                    int nr, int64_t C, float eps);                                                       \
    void P##norm_ln_bwd(float *dx, float *pw, float *pb, const float *dy, const float *xhat, const float *w, \
                        const float *rstd, int nr, int64_t C);

LC_NORM_X86_DECLARE(lc_avx2_)          /* 8 rows a group (ymm) */
LC_NORM_X86_DECLARE(lc_avx512_)        /* 16 rows a group (zmm) */
LC_NORM_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_NORM_X86_H */
