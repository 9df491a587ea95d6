/* csrc/attn/attn.h — one query row's attention products against a KV cache.
 *
 * Decoding computes, per KV head, the scores of its g query heads against the
 * S cached keys and the weighted sum of the S cached values.  The stage's
 * full-sequence path does both with lutcore's sgemm, whose contract is one
 * fused multiply-add chain per output element, in k order, from zero.  These
 * kernels run exactly those chains — so the bits equal the sgemm's — without
 * its per-call packing of the (growing) cache:
 *
 *   lc_attn_scores   sc[r][j] = chain over i < hd of q[r][i] * K[j][i]
 *                    (8 keys at a time: an 8 x 8 transpose puts key j in lane j)
 *   lc_attn_values   out[r][d] = chain over j < S of p[r][j] * V[j][d]
 *                    (8 dims per vector, value rows read in place)
 *
 * Layouts: q (R, ldq), sc/p (R, lds), K/V rows hd apart (S, hd), out (R, ldo).
 * The generic body is the scalar chain (fmaf), the reference, for both.  The vector
 * bodies are written once over csrc/core/vec.h (csrc/attn/vattn.h) and compiled at 8 lanes
 * here (AVX2) and at 16 by csrc/attn/x86/avx512.c (W keys a transposed block; W dims a
 * vector).  kt, the scores' scratch: LC_ATTN_KT(hd)
 * floats (enough for either body's transposed block).
 */
#ifndef LUTCORE_ATTN_H
#define LUTCORE_ATTN_H

#include <math.h>
#include "core/common.h"
#include "core/dispatch.h"
#include "core/transpose.h"   /* lc_tr8x8 */

#define LC_ATTN_KT(hd) ((hd) * 16 + 16)

/* out[r][c] = the fma chain over k < nk of a[r][k] * b[k * sbk + c * sbc], from zero */
static void lc_attn_chain_generic(float *out, int64_t ldo, const float *a, int64_t lda, int64_t R,
                                  const float *b, int64_t sbk, int64_t sbc, int64_t nk, int64_t nc) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < nc; c++) {
            float s = 0.0f;
            for (int64_t k = 0; k < nk; k++) s = fmaf(a[r * lda + k], b[k * sbk + c * sbc], s);
            out[r * ldo + c] = s;
        }
}

/* the AVX2 bodies lc_attn_scores_avx2 / lc_attn_values_avx2: csrc/attn/vattn.h at 8 lanes
 * (x86/avx512.c compiles it at 16) */
#if LC_X86
#define LC_VEC_W 8
#include "core/vec.h"
#undef LC_VEC_W
#define LC_VR_NAME(n) lc_##n##_avx2
#define LC_VR_FN LC_TARGET_AVX2 static
#define LC_VA_TR(v) lc_tr8x8(v)
#include "attn/vattn.h"
#undef LC_VR_NAME
#undef LC_VR_FN
#undef LC_VA_TR
#endif

/* the generic bodies: the scalar chains (kt unused) */
static void lc_attn_scores_generic(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                                   int64_t S, int64_t hd, float *kt) {
    (void)kt;
    lc_attn_chain_generic(sc, lds, q, ldq, R, K, 1, hd, hd, S);         /* K[j][i]: k = i, c = j */
}
static void lc_attn_values_generic(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                                   int64_t S, int64_t hd) {
    lc_attn_chain_generic(out, ldo, p, ldp, R, V, hd, 1, S, hd);        /* V[j][d]: k = j, c = d */
}

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies live in their own translation unit (attn/x86/x86.h, csrc/attn/x86/avx512.c);
 * LC_ATTN_SIMDE (setup.py: 1 in the test twins' builds) binds their SIMDe copies. */
#include "attn/x86/x86.h"
#ifndef LC_ATTN_SIMDE
#define LC_ATTN_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*scores)(float *, int64_t, const float *, int64_t, int64_t, const float *, int64_t, int64_t, float *);
    void (*values)(float *, int64_t, const float *, int64_t, int64_t, const float *, int64_t, int64_t);
} lc_attn_body;
static const lc_attn_body lc_attn_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_ATTN_SIMDE, avx512, attn_scores),
     LC_XBODY(LC_ATTN_SIMDE, avx512, attn_values)},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_attn_scores_avx2, lc_attn_values_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_attn_scores_generic, lc_attn_values_generic},
};
LC_BODY_TABLE(lc_attn_body, lc_attn, lc_attn_bodies)   /* lc_attn_pick(isa), lc_attn_body_name(isa) */

/* kt: LC_ATTN_KT(hd) floats of scratch */
static void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                           int64_t S, int64_t hd, float *kt, int isa) {
    lc_attn_pick(isa)->scores(sc, lds, q, ldq, R, K, S, hd, kt);
}
static void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                           int64_t S, int64_t hd, int isa) {
    lc_attn_pick(isa)->values(out, ldo, p, ldp, R, V, S, hd);
}

#endif /* LUTCORE_ATTN_H */
