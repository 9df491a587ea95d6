/* csrc/sgemm/x86/x86.h — the sgemm family's per-ISA bodies that live in their own
 * translation units (csrc/sgemm/x86/<isa>.c, compiled with that ISA's flags; the
 * simde_ copy backs the test-only extension lutcore._native._simde_sgemm).
 *
 * Design: as gemm/x86.h.  One function, the register tile of sgemm.h's driver:
 *   t    float (NP, 6, 16) the NP tiles' sums (panel p at t + p*96)  IN (init) / OUT
 *   ap   A rows: element (r, k) at ap[k*aks + r*ars], r < R         IN
 *   bp   NP packed B panels (K, 16), panel p at bp + p*bps           IN
 * Rows r >= R of t are left as they are.  Each element of t is one in-order fma
 * chain over k, continued from t when init (the generic and AVX2 bodies' bits).
 * And the GEMV of sgemm.h's lc_sgemv_panels (y (N) = or += x (K) @ panels [q0, q1)).
 */
#ifndef LUTCORE_SGEMM_X86_H
#define LUTCORE_SGEMM_X86_H

#include <stdint.h>

#define LC_SGEMM_X86_DECLARE(P)                                                                     \
    void P##sgemm_tile(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t bps, \
                       int64_t K, int init, int R, int NP);                                          \
    void P##sgemv_panels(float *y, const float *x, const float *Bp, int64_t K, int64_t N, int64_t q0,       \
                         int64_t q1, int accumulate);

/* AVX-512 F: a 6-row x 2-panel zmm tile (12 accumulators) */
LC_SGEMM_X86_DECLARE(lc_avx512_)
LC_SGEMM_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_SGEMM_X86_H */
