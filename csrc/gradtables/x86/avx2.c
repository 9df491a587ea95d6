/* csrc/gradtables/x86/avx2.c — the gradient-table pass's AVX2 body (gradtables/gradtables.h): 8 k's
 * a vector, two vectors a block, 8-lane gathers; mul then add in the generic body's order
 * (the same bits).  Compiled alone with the AVX2 flags (setup.py).  Roles of which as
 * csrc/gradtables/x86/avx512.c.  One thread; gradtables.h threads over rows. */
#define LC_BODY_ISA avx2
#include "core/simd.h"
#include "gradtables/x86/x86.h"
#include "gradtables/rows.h"

#if LC_X86
/* row r's vector blocks of k (rows.h): two vectors a block, then one */
LC_AI int64_t lc_gt_blocks(int which, float *out, const float *w, const float *t, int64_t K, int64_t O, int64_t NI,
                           const uint8_t *var, int64_t r, const uint8_t *f) {
    int64_t k0 = 0;
    for (; k0 + 16 <= K; k0 += 16) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        const __m256i q0 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0))), 8);
        const __m256i q1 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0 + 8))), 8);
        for (int64_t i = 0; i < NI; i++) {
            const __m256 s = _mm256_set1_ps(which ? w[i * O + r] : w[r * O + i]);
            const uint8_t *v = var + i * K + k0;
            const __m256i i0 = _mm256_or_si256(q0, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)v)));
            const __m256i i1 = _mm256_or_si256(q1, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(v + 8))));
            acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i0, 4)));
            acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i1, 4)));
        }
        _mm256_storeu_ps(out + r * K + k0, acc0);
        _mm256_storeu_ps(out + r * K + k0 + 8, acc1);
    }
    for (; k0 + 8 <= K; k0 += 8) {
        __m256 acc0 = _mm256_setzero_ps();
        const __m256i q0 = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f + k0))), 8);
        for (int64_t i = 0; i < NI; i++) {
            const __m256 s = _mm256_set1_ps(which ? w[i * O + r] : w[r * O + i]);
            const __m256i i0 = _mm256_or_si256(q0, _mm256_cvtepu8_epi32(
                _mm_loadl_epi64((const __m128i *)(var + i * K + k0))));
            acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(s, _mm256_i32gather_ps(t, i0, 4)));
        }
        _mm256_storeu_ps(out + r * K + k0, acc0);
    }
    return k0;
}
LC_GT_ROWS(, LC_BODY(gt_rows), lc_gt_blocks)
#endif
