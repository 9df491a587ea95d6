/* csrc/gradtables/x86/avx512.c — the gradient-table pass's AVX-512 body (gradtables/gradtables.h):
 * 16 k's a vector, two vectors a block, the lookups as 16-lane gathers; mul then add in
 * the generic body's order (the same bits).  Compiled alone with the AVX-512 flags
 * (setup.py) and once more against SIMDe for the tests (simde_avx512.c).
 * which 0: rows r = m (fixed codes a = qx[m, .]), inner i = o (codes b), weights g (M, O);
 * which 1: rows r = o (fixed codes b = qw[o, .]), inner i = m (codes a), weights dy (M, O),
 * the table transposed (GbT).  One thread; gradtables.h threads over rows. */
#define LC_BODY_ISA avx512
#include "core/simd.h"
#include "gradtables/x86/x86.h"
#include "gradtables/rows.h"

#if LC_X86
/* 16 bytes at p zero-extended to 16 int32 lanes (SIMDe 0.8.2 has no _mm512_cvtepu8_epi32:
 * through 16-bit lanes, the same values) */
LC_AI __m512i lc_gt_u8x16(const uint8_t *p) {
    return _mm512_cvtepu16_epi32(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)));
}

/* row r's vector blocks of k (rows.h): two vectors a block, then one */
LC_AI int64_t lc_gt_blocks(int which, float *out, const float *w, const float *t, int64_t K, int64_t O, int64_t NI,
                           const uint8_t *var, int64_t r, const uint8_t *f) {
    int64_t k0 = 0;
    for (; k0 + 32 <= K; k0 += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        const __m512i q0 = _mm512_slli_epi32(lc_gt_u8x16(f + k0), 8);
        const __m512i q1 = _mm512_slli_epi32(lc_gt_u8x16(f + k0 + 16), 8);
        for (int64_t i = 0; i < NI; i++) {
            const __m512 s = _mm512_set1_ps(which ? w[i * O + r] : w[r * O + i]);
            const uint8_t *v = var + i * K + k0;
            const __m512i i0 = _mm512_or_si512(q0, lc_gt_u8x16(v));
            const __m512i i1 = _mm512_or_si512(q1, lc_gt_u8x16(v + 16));
            acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(s, _mm512_i32gather_ps(i0, t, 4)));
            acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(s, _mm512_i32gather_ps(i1, t, 4)));
        }
        _mm512_storeu_ps(out + r * K + k0, acc0);
        _mm512_storeu_ps(out + r * K + k0 + 16, acc1);
    }
    for (; k0 + 16 <= K; k0 += 16) {
        __m512 acc0 = _mm512_setzero_ps();
        const __m512i q0 = _mm512_slli_epi32(lc_gt_u8x16(f + k0), 8);
        for (int64_t i = 0; i < NI; i++) {
            const __m512 s = _mm512_set1_ps(which ? w[i * O + r] : w[r * O + i]);
            const __m512i i0 = _mm512_or_si512(q0, lc_gt_u8x16(var + i * K + k0));
            acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(s, _mm512_i32gather_ps(i0, t, 4)));
        }
        _mm512_storeu_ps(out + r * K + k0, acc0);
    }
    return k0;
}
LC_GT_ROWS(, LC_BODY(gt_rows), lc_gt_blocks)
#endif
