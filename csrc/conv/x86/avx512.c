/* csrc/conv/x86/avx512.c — causal conv1d's AVX-512 body.
 *
 * Design: conv.h writes the per-element arithmetic once (bias first, then taps
 * k = 0..K-1, no FMA); its inner loops run over contiguous channels, and this
 * file compiles them alone with the AVX-512 flags and 512-bit vectors preferred
 * (setup.py), so the compiler runs them 16 channels a vector — the same
 * per-element operations as the generic and AVX2 builds, so the same bits.
 * The SIMDe copy (simde_avx512.c) is the same C built with the AVX2 flags for
 * the test-only extension.
 *
 *   y, dx, dy, x  (B, L, D) float32; wt, dwt (K, D); bias, db (D,)
 */
#define LC_BODY_ISA avx512
#include "conv/conv.h"
#include "core/simd.h"
#include "conv/x86/x86.h"

#if LC_X86

void LC_BODY(conv_fwd_rows)(float *y, const float *x, const float *wt, const float *bias, int64_t b,
                            int64_t t0, int64_t t1, int64_t L, int64_t D, int64_t K) {
    lc_conv_fwd_rows_f32(y, x, wt, bias, b, t0, t1, L, D, K);
}
void LC_BODY(conv_dx_rows)(float *dx, const float *dy, const float *wt, int64_t b, int64_t s0, int64_t s1,
                           int64_t L, int64_t D, int64_t K) {
    lc_conv_dx_rows_f32(dx, dy, wt, b, s0, s1, L, D, K);
}
void LC_BODY(conv_dw_chunk)(float *dwt, float *db, const float *dy, const float *x, int64_t d0, int64_t d1,
                            int64_t Bsz, int64_t L, int64_t D, int64_t K) {
    lc_conv_dw_chunk_f32(dwt, db, dy, x, d0, d1, Bsz, L, D, K);
}

#endif /* LC_X86 */
