/* csrc/elementwise/x86/avx512.c — the element-wise family's AVX-512 F/BW/VL/DQ bodies.
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  Each is elementwise.h's AVX2
 * body at 16 lanes, same bits as the generic body:
 *   requant_clamp: (acc + r) >> s as (acc >> s) + (((acc & (2^s-1)) + r) >> s)
 *                  (exact in 32 bits, s in 1..31; the arithmetic shift as a
 *                  logical one of acc ^ sign, ^ sign, which SIMDe 0.8.2 has),
 *                  clamped, vpmovsdb to int8;
 *   fp16 encode / round: vcvtps2ph with the mode's rounding (toward zero
 *                  saturates finite overflow to 65504, as the contract), decode
 *                  vcvtph2ps; lanes holding NaN are redone by the scalar rule
 *                  (the instructions quiet NaN payloads, numpy keeps them).
 * Tails (< 16 elements) run the generic body.
 *
 *   out   (n) int8 / uint16 / float32                        OUT
 *   acc   (n) int32; x (n) float32; h (n) uint16             IN
 */
#define LC_BODY_ISA avx512
#include "elementwise/elementwise.h"
#include "core/simd.h"
#include "elementwise/x86/x86.h"

#if LC_X86

/* 16 floats -> 16 binary16 bits, rounding imm.  SIMDe 0.8.2 has no
 * _mm512_cvtps_ph: its build converts the two halves with F16C (it is compiled
 * with -mf16c), the same per-lane conversion. */
#if defined(LC_SIMDE)
#define LC_EW_CVTPS_PH(v, imm)                                                                    \
    _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(_mm512_castps512_ps256(v), imm)), \
                            _mm256_cvtps_ph(_mm512_extractf32x8_ps(v, 1), imm), 1)
#else
#define LC_EW_CVTPS_PH(v, imm) _mm512_cvtps_ph(v, imm)
#endif
#define LC_EW_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define LC_EW_RTZ (_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)

void LC_BODY(ew_requant_clamp)(int8_t *out, const int32_t *acc, int64_t n, int shift, int lo, int hi) {
    int64_t i = 0;
    const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
    if (shift > 0) {
        const __m512i mask = _mm512_set1_epi32((int32_t)((1u << shift) - 1));
        const __m512i rnd = _mm512_set1_epi32((int32_t)(1u << (shift - 1)));
        const __m128i sh = _mm_cvtsi32_si128(shift);
        for (; i + 16 <= n; i += 16) {
            __m512i a = _mm512_loadu_si512((const void *)(acc + i));
            __m512i sg = _mm512_srai_epi32(a, 31);         /* acc >> s as ~(~acc >>> s) where acc < 0 */
            __m512i q = _mm512_xor_si512(_mm512_srl_epi32(_mm512_xor_si512(a, sg), sh), sg);
            __m512i r = _mm512_srl_epi32(_mm512_add_epi32(_mm512_and_si512(a, mask), rnd), sh);
            __m512i t = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(q, r), vlo), vhi);
            _mm_storeu_si128((__m128i *)(out + i), _mm512_cvtsepi32_epi8(t));
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            __m512i t = _mm512_loadu_si512((const void *)(acc + i));
            t = _mm512_min_epi32(_mm512_max_epi32(t, vlo), vhi);
            _mm_storeu_si128((__m128i *)(out + i), _mm512_cvtsepi32_epi8(t));
        }
    }
    lc_requant_clamp_generic(out + i, acc + i, n - i, shift, lo, hi);
}

#define LC_EW_ENCODE_LOOP(IMM, MODE)                                                              \
    for (; i + 16 <= n; i += 16) {                                                                \
        __m512 v = _mm512_loadu_ps(x + i);                                                        \
        _mm256_storeu_si256((__m256i *)(out + i), LC_EW_CVTPS_PH(v, IMM));                        \
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) lc_fp16_encode_generic(out + i, x + i, 16, MODE); \
    }
void LC_BODY(ew_fp16_encode)(uint16_t *out, const float *x, int64_t n, int mode) {
    int64_t i = 0;
    if (mode == 0) LC_EW_ENCODE_LOOP(LC_EW_RNE, 0)
    else LC_EW_ENCODE_LOOP(LC_EW_RTZ, 1)
    lc_fp16_encode_generic(out + i, x + i, n - i, mode);
}

void LC_BODY(ew_fp16_decode)(float *out, const uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 r = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
        _mm512_storeu_ps(out + i, r);
        if (_mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q)) lc_fp16_decode_generic(out + i, h + i, 16);
    }
    lc_fp16_decode_generic(out + i, h + i, n - i);
}

#define LC_EW_ROUND_LOOP(IMM, MODE)                                                               \
    for (; i + 16 <= n; i += 16) {                                                                \
        __m512 v = _mm512_loadu_ps(x + i);                                                        \
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(LC_EW_CVTPS_PH(v, IMM)));                       \
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) lc_fp16_round_generic(out + i, x + i, 16, MODE); \
    }
void LC_BODY(ew_fp16_round)(float *out, const float *x, int64_t n, int mode) {
    int64_t i = 0;
    if (mode == 0) LC_EW_ROUND_LOOP(LC_EW_RNE, 0)
    else LC_EW_ROUND_LOOP(LC_EW_RTZ, 1)
    lc_fp16_round_generic(out + i, x + i, n - i, mode);
}

#endif /* LC_X86 */
