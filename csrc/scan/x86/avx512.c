/* csrc/scan/x86/avx512.c — the selective scan's AVX-512 body, forward and backward.
 *
 * Design: scan_impl.h's algorithm (written once) instantiated with a 16-lane
 * vocabulary — one zmm per 16-channel unit instead of two ymm halves — and the
 * math functions of csrc/mathfn/x86/zmm.h (mathfn.h's AVX2 ones at 16 lanes,
 * operation for operation).  Every lane makes the same operations in the same
 * order as in the generic and AVX2 bodies; the only cross-lane steps keep their
 * order too: the per-step dB/dC products fold lanes i + lanes i + 8 (the AVX2
 * body's half 0 + half 1) and go through the same 8-lane hadd tree, and the
 * per-unit max |dt| is an integer max (order-free).  So the bits are the
 * generic body's, for both discretizations and every option.  Compiled alone
 * with the AVX-512 flags (setup.py) and once more against SIMDe with the AVX2
 * flags (simde_avx512.c) for the test-only extension.
 *
 *   scan_fwd_span, scan_bwd_group: csrc/scan/x86/x86.h (shapes: scan_impl.h)
 */
#define LC_BODY_ISA avx512
#include "scan/scan.h"
#include "core/simd.h"
#include "scan/x86/x86.h"
#include "mathfn/x86/zmm.h"

#if LC_X86

/* lanes 0..7 + lanes 8..15, stored as 8 floats */
LC_AI void z_fold8(float *p, __m512 v) {
    _mm256_storeu_ps(p, _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* the vocabulary: csrc/core/vec.h at 16 lanes through vfloat.h */
#define LC_VEC_W 16
#include "core/vec.h"
#undef LC_VEC_W
#define LC_V_TARGET
#define LC_V_NAME(x) lc_##x##_z
#include "scan/vfloat.h"
#define LC_VFOLD8 z_fold8
#define LC_VHSUM(p) lc_hsum_ps(_mm256_loadu_ps(p))
#define LC_VHSUM8 lc_hsum8_ps
#include "scan/scan_impl.h"   /* undefines the LC_V* vocabulary at its end */

void LC_BODY(scan_fwd_span)(float *y, float *ypre, float *hs, float *hlast, const float *u, const float *delta,
                            const float *A, const float *Bm, const float *Cm, const float *Dv, const float *z,
                            const float *dbias, const float *h0, int64_t b, int64_t k0, int64_t k1, int64_t L,
                            int64_t D, int64_t N, int64_t T, int softplus, int zoh, float *work) {
    lc_scan_fwd_span_z(y, ypre, hs, hlast, u, delta, A, Bm, Cm, Dv, z, dbias, h0, b, k0, k1, L, D, N, T, softplus,
                       zoh, work);
}
void LC_BODY(scan_bwd_group)(float *du, float *ddelta, float *dAp, float *dBp, float *dCp, float *dDp, float *dz,
                             float *ddbp, float *dh0, const float *dout, const float *u, const float *delta,
                             const float *A, const float *Bm, const float *Cm, const float *Dv, const float *z,
                             const float *dbias, const float *hs, const float *ypre, int64_t b, int64_t k0,
                             int64_t k1, int64_t L, int64_t D, int64_t N, int64_t T, int softplus, int zoh,
                             float *work) {
    lc_scan_bwd_group_z(du, ddelta, dAp, dBp, dCp, dDp, dz, ddbp, dh0, dout, u, delta, A, Bm, Cm, Dv, z, dbias, hs,
                        ypre, b, k0, k1, L, D, N, T, softplus, zoh, work);
}

#endif /* LC_X86 */
