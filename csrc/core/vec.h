/* csrc/core/vec.h — ONE width-generic float vector vocabulary, for the float families'
 * code written once and compiled per ISA (the math functions: csrc/mathfn/vmath.h).
 *
 * Set LC_VEC_W before including:
 *   8   AVX2 + FMA, __m256: usable from any translation unit (the helpers carry the AVX2
 *       target attribute: the generic headers compile them into every extension)
 *   16  AVX-512 F/DQ, __m512: a body compiled with the AVX-512 flags, or against SIMDe
 *       (include core/simd.h first: the native intrinsics, or SIMDe's under LC_SIMDE)
 * The file has no include guard on purpose: including it again with another width
 * redefines the vocabulary (mathfn.h instantiates width 8, an AVX-512 body then 16).
 *
 * Every name is one instruction (or a fixed sequence of them) with the same lane
 * semantics at either width, so code written over it makes the same operations in the
 * same order at 8 and 16 lanes: the same bits.  There is no implicit contraction: the
 * build uses -ffp-contract=off, LC_VF_FMA is the explicit fused multiply-add and
 * LC_VF_ADD(LC_VF_MUL(..)) stays a rounded product and a rounded sum.
 *
 *   LC_VF, LC_VI, LC_VM     float vector, int32 vector, lane mask (AVX2: a vector of all-ones
 *                           lanes; AVX-512: __mmask16)
 *   LC_VF_FN                the function attribute of helpers written over the vocabulary
 *   LC_VF_NAME(n)           a helper's name at this width: lc_<n>_ps (8), z_<n> (16)
 *   LOADU STOREU SET1 ZERO  memory and constants; LOADN / STOREN: the first n < W lanes only
 *                           (the others read as 0, memory past them untouched)
 *   ADD SUB MUL DIV FMA     arithmetic (FMA(a, b, c) = a b + c, one rounding); SQRT
 *   MAX MIN AND XOR ABS     lane-wise (MAX/MIN: the instruction's NaN rule, second operand)
 *   ROUND                   to nearest even, no exception
 *   CMP(a, b, pred)         a mask (pred: _CMP_*);  BLEND(a, b, m): b where m, else a;
 *                           MASKZ(m, a): a where m, else +0
 *   ANY(m), BITS(m)         m has a lane set; its lanes as the bits of an int
 *   CVT_I(v), CVT_F(i)      float -> int32 (current rounding: nearest even), int32 -> float
 *   CAST_I(v), CAST_F(i)    bit casts
 *   I_SET1 I_ADD I_SUB I_AND I_OR I_MAX I_SLLI I_SRLI I_SRAI   int32 lanes
 *   HSUM(v)                 the lanes' sum in a fixed order: pairwise, lane i + lane i + W/2
 *                           first (16 -> 8 -> 4 -> 2 -> 1), an order fixed per width
 */
#if !defined(LC_VEC_W)
#error "csrc/core/vec.h: define LC_VEC_W (8 or 16) before including it"
#endif

#include "core/common.h"

#undef LC_VF
#undef LC_VI
#undef LC_VM
#undef LC_VF_W
#undef LC_VF_FN
#undef LC_VF_NAME
#undef LC_VF_LOADU
#undef LC_VF_STOREU
#undef LC_VF_LOADN
#undef LC_VF_STOREN
#undef LC_VF_SET1
#undef LC_VF_ZERO
#undef LC_VF_ADD
#undef LC_VF_SUB
#undef LC_VF_MUL
#undef LC_VF_DIV
#undef LC_VF_FMA
#undef LC_VF_MAX
#undef LC_VF_MIN
#undef LC_VF_AND
#undef LC_VF_XOR
#undef LC_VF_ABS
#undef LC_VF_SQRT
#undef LC_VF_MASKZ
#undef LC_VF_ROUND
#undef LC_VF_CMP
#undef LC_VF_BLEND
#undef LC_VF_ANY
#undef LC_VF_BITS
#undef LC_VF_CVT_I
#undef LC_VF_CVT_F
#undef LC_VF_CAST_I
#undef LC_VF_CAST_F
#undef LC_VF_I_SET1
#undef LC_VF_I_ADD
#undef LC_VF_I_SUB
#undef LC_VF_I_AND
#undef LC_VF_I_OR
#undef LC_VF_I_MAX
#undef LC_VF_I_SLLI
#undef LC_VF_I_SRLI
#undef LC_VF_I_SRAI
#undef LC_VF_HSUM

#if LC_X86

#define LC_VF_RNE_ (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

#if LC_VEC_W == 8
#define LC_VF __m256
#define LC_VI __m256i
#define LC_VM __m256
#define LC_VF_W 8
#define LC_VF_FN LC_TARGET_AVX2 static inline
#define LC_VF_NAME(n) lc_##n##_ps
#define LC_VF_LOADU(p) _mm256_loadu_ps(p)
#define LC_VF_STOREU(p, v) _mm256_storeu_ps(p, v)
#define LC_VF_LOADN(p, n) lc_vf8_loadn_(p, n)
#define LC_VF_STOREN(p, v, n) lc_vf8_storen_(p, v, n)
#define LC_VF_SET1(f) _mm256_set1_ps(f)
#define LC_VF_ZERO() _mm256_setzero_ps()
#define LC_VF_ADD(a, b) _mm256_add_ps(a, b)
#define LC_VF_SUB(a, b) _mm256_sub_ps(a, b)
#define LC_VF_MUL(a, b) _mm256_mul_ps(a, b)
#define LC_VF_DIV(a, b) _mm256_div_ps(a, b)
#define LC_VF_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define LC_VF_MAX(a, b) _mm256_max_ps(a, b)
#define LC_VF_MIN(a, b) _mm256_min_ps(a, b)
#define LC_VF_AND(a, b) _mm256_and_ps(a, b)
#define LC_VF_XOR(a, b) _mm256_xor_ps(a, b)
#define LC_VF_ABS(a) _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define LC_VF_SQRT(a) _mm256_sqrt_ps(a)
#define LC_VF_MASKZ(m, a) _mm256_and_ps(a, m)
#define LC_VF_ROUND(a) _mm256_round_ps(a, LC_VF_RNE_)
#define LC_VF_CMP(a, b, pred) _mm256_cmp_ps(a, b, pred)
#define LC_VF_BLEND(a, b, m) _mm256_blendv_ps(a, b, m)
#define LC_VF_ANY(m) (_mm256_movemask_ps(m) != 0)
#define LC_VF_BITS(m) _mm256_movemask_ps(m)
#define LC_VF_CVT_I(a) _mm256_cvtps_epi32(a)
#define LC_VF_CVT_F(i) _mm256_cvtepi32_ps(i)
#define LC_VF_CAST_I(a) _mm256_castps_si256(a)
#define LC_VF_CAST_F(i) _mm256_castsi256_ps(i)
#define LC_VF_I_SET1(k) _mm256_set1_epi32(k)
#define LC_VF_I_ADD(a, b) _mm256_add_epi32(a, b)
#define LC_VF_I_SUB(a, b) _mm256_sub_epi32(a, b)
#define LC_VF_I_AND(a, b) _mm256_and_si256(a, b)
#define LC_VF_I_OR(a, b) _mm256_or_si256(a, b)
#define LC_VF_I_MAX(a, b) _mm256_max_epi32(a, b)
#define LC_VF_I_SLLI(a, k) _mm256_slli_epi32(a, k)
#define LC_VF_I_SRLI(a, k) _mm256_srli_epi32(a, k)
#define LC_VF_I_SRAI(a, k) _mm256_srai_epi32(a, k)
#define LC_VF_HSUM(v) lc_vf8_hsum_(v)
#ifndef LUTCORE_CORE_VEC8_HELPERS
#define LUTCORE_CORE_VEC8_HELPERS
/* lanes >= n (n < 8) masked off: not read (vmaskmov), read as 0 */
LC_TARGET_AVX2 static inline __m256i lc_vf8_lanes_(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
LC_TARGET_AVX2 static inline __m256 lc_vf8_loadn_(const float *p, int n) { return _mm256_maskload_ps(p, lc_vf8_lanes_(n)); }
LC_TARGET_AVX2 static inline void lc_vf8_storen_(float *p, __m256 v, int n) { _mm256_maskstore_ps(p, lc_vf8_lanes_(n), v); }
/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
LC_TARGET_AVX2 static inline float lc_vf8_hsum_(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#endif

#elif LC_VEC_W == 16
#define LC_VF __m512
#define LC_VI __m512i
#define LC_VM __mmask16
#define LC_VF_W 16
#define LC_VF_FN LC_AI
#define LC_VF_NAME(n) z_##n
#define LC_VF_LOADU(p) _mm512_loadu_ps(p)
#define LC_VF_STOREU(p, v) _mm512_storeu_ps(p, v)
#define LC_VF_LOADN(p, n) lc_vf16_loadn_(p, n)
#define LC_VF_STOREN(p, v, n) lc_x_mask_storeu_ps(p, lc_x_mask(n), v)
#define LC_VF_SET1(f) _mm512_set1_ps(f)
#define LC_VF_ZERO() _mm512_setzero_ps()
#define LC_VF_ADD(a, b) _mm512_add_ps(a, b)
#define LC_VF_SUB(a, b) _mm512_sub_ps(a, b)
#define LC_VF_MUL(a, b) _mm512_mul_ps(a, b)
#define LC_VF_DIV(a, b) _mm512_div_ps(a, b)
#define LC_VF_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define LC_VF_MAX(a, b) _mm512_max_ps(a, b)
#define LC_VF_MIN(a, b) _mm512_min_ps(a, b)
#define LC_VF_AND(a, b) _mm512_and_ps(a, b)
#define LC_VF_XOR(a, b) _mm512_xor_ps(a, b)
#define LC_VF_ABS(a) _mm512_and_ps(a, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)))
#define LC_VF_SQRT(a) _mm512_sqrt_ps(a)
#define LC_VF_MASKZ(m, a) _mm512_maskz_mov_ps(m, a)
#define LC_VF_ROUND(a) _mm512_roundscale_ps(a, LC_VF_RNE_)
#define LC_VF_CMP(a, b, pred) _mm512_cmp_ps_mask(a, b, pred)
#define LC_VF_BLEND(a, b, m) _mm512_mask_blend_ps(m, a, b)
#define LC_VF_ANY(m) ((m) != 0)
#define LC_VF_BITS(m) ((int)(m))
#define LC_VF_CVT_I(a) _mm512_cvtps_epi32(a)
#define LC_VF_CVT_F(i) _mm512_cvtepi32_ps(i)
#define LC_VF_CAST_I(a) _mm512_castps_si512(a)
#define LC_VF_CAST_F(i) _mm512_castsi512_ps(i)
#define LC_VF_I_SET1(k) _mm512_set1_epi32(k)
#define LC_VF_I_ADD(a, b) _mm512_add_epi32(a, b)
#define LC_VF_I_SUB(a, b) _mm512_sub_epi32(a, b)
#define LC_VF_I_AND(a, b) _mm512_and_si512(a, b)
#define LC_VF_I_OR(a, b) _mm512_or_si512(a, b)
#define LC_VF_I_MAX(a, b) _mm512_max_epi32(a, b)
#define LC_VF_I_SLLI(a, k) _mm512_slli_epi32(a, k)
#define LC_VF_I_SRLI(a, k) _mm512_srli_epi32(a, k)
#define LC_VF_I_SRAI(a, k) _mm512_srai_epi32(a, k)
#define LC_VF_HSUM(v) lc_vf16_hsum_(v)
#ifndef LUTCORE_CORE_VEC16_HELPERS
#define LUTCORE_CORE_VEC16_HELPERS
#if !defined(LUTCORE_CORE_SIMD_H)
#error "csrc/core/vec.h: LC_VEC_W 16 needs core/simd.h included first"
#endif
/* the first n (< 16) lanes, the others 0; under SIMDe lane by lane (its masked load
 * reads all 64 bytes) */
LC_AI __m512 lc_vf16_loadn_(const float *p, int n) {
#if defined(LC_SIMDE)
    float t[16] = {0};
    for (int i = 0; i < n; i++) t[i] = p[i];
    return _mm512_loadu_ps(t);
#else
    return _mm512_maskz_loadu_ps(lc_x_mask(n), p);
#endif
}
/* lanes i + i + 8, then the 8-lane order of lc_vf8_hsum_ */
LC_AI float lc_vf16_hsum_(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#endif

#else
#error "csrc/core/vec.h: LC_VEC_W must be 8 or 16"
#endif

#endif /* LC_X86 */
