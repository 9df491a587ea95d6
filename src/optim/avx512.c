/* src/optim/avx512.c — AdamW's AVX-512 body (16 floats a vector).
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  optim.h's AVX2 body at 16
 * lanes: the same float32 operations in the same order, no FMA (g' = g s;
 * m, v; s = (m lr/bc1) / (sqrt(v) / sqrt(bc2) + eps), non-finite -> 0, the
 * optional clamp; p = p (1 - lr wd) - s), so the generic body's bits.  The
 * tail (< 16) runs the generic body.
 *
 *   p, m, v  (n) float32   IN/OUT
 *   g        (n) float32   IN
 */
#define LC_BODY_ISA avx512
#include "lutcore/optim.h"
#include "core/simd.h"

#if LC_X86

void LC_BODY(adamw)(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h) {
    const __m512 b1 = _mm512_set1_ps(h->b1), b2 = _mm512_set1_ps(h->b2), c1 = _mm512_set1_ps(h->c1),
                 c2 = _mm512_set1_ps(h->c2), eps = _mm512_set1_ps(h->eps), ss = _mm512_set1_ps(h->step_size),
                 decay = _mm512_set1_ps(h->decay), isb = _mm512_set1_ps(h->inv_sqrt_bc2),
                 gs = _mm512_set1_ps(h->gscale), md = _mm512_set1_ps(h->max_delta),
                 nmd = _mm512_set1_ps(-h->max_delta), fmax = _mm512_set1_ps(FLT_MAX_),
                 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const int clampit = h->max_delta > 0.0f;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gg = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(c1, gg));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(c2, _mm512_mul_ps(gg, gg)));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 s = _mm512_div_ps(_mm512_mul_ps(mi, ss), _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), isb), eps));
        __mmask16 ok = _mm512_cmp_ps_mask(_mm512_and_ps(s, absmask), fmax, _CMP_LE_OQ);
        s = _mm512_maskz_mov_ps(ok, s);
        if (clampit) s = _mm512_min_ps(_mm512_max_ps(s, nmd), md);
        _mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p + i), decay), s));
    }
    lc_adamw_generic(p + i, g + i, m + i, v + i, n - i, h);
}

#endif /* LC_X86 */
