/* csrc/scan/x86/x86.h — the selective scan's per-ISA bodies that live in their own
 * translation units (csrc/scan/x86/<isa>.c, compiled alone with that ISA's flags; the
 * simde_<isa>.c copy, built against SIMDe with AVX2+FMA flags, backs the test-only
 * extension lutcore._native._simde_mamba).  Each is scan_impl.h's float32 work
 * item of the same name (same arguments, same per-lane operations, so the bits of
 * the generic and AVX2 bodies):
 *   scan_fwd_span   forward of units [k0, k1) (16 channels each) of batch row b
 *   scan_bwd_group  backward of the group of units [k0, k1) of batch row b
 * (buffers and shapes: scan_impl.h's table; work: lc_scan_fwd_work / lc_scan_bwd_work).
 */
#ifndef LUTCORE_SCAN_X86_H
#define LUTCORE_SCAN_X86_H

#include <stdint.h>

#define LC_SCAN_X86_DECLARE(P)                                                                    \
    void P##scan_fwd_span(float *y, float *ypre, float *hs, float *hlast, const float *u,          \
                          const float *delta, const float *A, const float *Bm, const float *Cm,    \
                          const float *Dv, const float *z, const float *dbias, const float *h0,    \
                          int64_t b, int64_t k0, int64_t k1, int64_t L, int64_t D, int64_t N,      \
                          int64_t T, int softplus, int zoh, float *work);                         \
    void P##scan_bwd_group(float *du, float *ddelta, float *dAp, float *dBp, float *dCp,           \
                           float *dDp, float *dz, float *ddbp, float *dh0, const float *dout,      \
                           const float *u, const float *delta, const float *A, const float *Bm,    \
                           const float *Cm, const float *Dv, const float *z, const float *dbias,   \
                           const float *hs, const float *ypre, int64_t b, int64_t k0, int64_t k1,  \
                           int64_t L, int64_t D, int64_t N, int64_t T, int softplus, int zoh,      \
                           float *work);

LC_SCAN_X86_DECLARE(lc_avx512_)
LC_SCAN_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_SCAN_X86_H */
