/* csrc/elementwise/x86/avx512_vbmi.c — the element-wise family's AVX-512 VBMI body: relu8.
 *
 * Design: compiled alone with AVX-512 F/BW + -mavx512vbmi (setup.py), and once
 * more against SIMDe for the tests (simde_avx512_vbmi.c).  The 256-byte table
 * lives in four zmm registers; per 64 inputs two vpermi2b look the low 7 bits up
 * in table halves [0, 128) and [128, 256), and the input's sign bit (bit 7 of
 * x & 0xff) picks between them: out = lut[x & 0xff] exactly.  Tails (< 64) run
 * the generic body.
 *
 *   out  (n) int8     OUT
 *   x    (n) int8     IN
 *   lut  (256) int8   IN
 */
#define LC_BODY_ISA avx512vbmi
#include "elementwise/elementwise.h"
#include "core/simd.h"
#include "elementwise/x86/x86.h"

#if LC_X86

void LC_BODY(ew_relu8)(int8_t *out, const int8_t *x, int64_t n, const int8_t *lut) {
    const __m512i t0 = _mm512_loadu_si512((const void *)lut), t1 = _mm512_loadu_si512((const void *)(lut + 64));
    const __m512i t2 = _mm512_loadu_si512((const void *)(lut + 128)), t3 = _mm512_loadu_si512((const void *)(lut + 192));
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(x + i));
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        _mm512_storeu_si512((void *)(out + i), _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
    }
    lc_relu8_generic(out + i, x + i, n - i, lut);
}

#endif /* LC_X86 */
