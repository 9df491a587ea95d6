/* csrc/conv2d/x86.h — the direct small-K convolution's x86 bodies, each in its own
 * translation unit (x86/avx512.c: AVX-512 F/BW; x86/avx512_vnni.c: the same with the exact
 * products as VNNI vpdpwssd), compiled alone with that ISA's flags and once more against
 * SIMDe for the test-only twin lutcore._native._simde_im2col.  Included by conv2d.h.
 *   c2d_rows  y's output rows r0..r1-1 (r = n*OH + oh): the contract, and the bits, of
 *             lc_c2d_rows_generic on those rows (one thread); wp = the weight pairs
 *             (int32 (ceil(K/2), O): w[2p, o] in the low int16, w[2p+1, o] (0 past K) high)
 */
#ifndef LUTCORE_CONV2D_X86_H
#define LUTCORE_CONV2D_X86_H

#include <stdint.h>
#include "conv2d/geo.h"

#define LC_C2D_X86_DECLARE(P)                                                                            \
    void P##c2d_rows(float *y, const int8_t *q, const lc_c2d_geo *g, const int32_t *wp, const int8_t *Wt, \
                     const int32_t *mul, int exact, const float *scale, const float *bias, int64_t r0,  \
                     int64_t r1);

LC_C2D_X86_DECLARE(lc_avx512_)
LC_C2D_X86_DECLARE(lc_avx512vnni_)
LC_C2D_X86_DECLARE(lc_simde_avx512_)
LC_C2D_X86_DECLARE(lc_simde_avx512vnni_)

#endif /* LUTCORE_CONV2D_X86_H */
