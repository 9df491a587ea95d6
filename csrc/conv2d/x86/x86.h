/* csrc/conv2d/x86/x86.h — the direct small-K convolution's x86 bodies, each in its own
 * translation unit (avx512.c: AVX-512 F/BW; avx512_vnni.c: the same with the exact products
 * as VNNI vpdpbusd), compiled alone with that ISA's flags and once more against SIMDe for the
 * test-only twin lutcore._native._simde_im2col.  Included by conv2d.h.
 *   c2d_rows  y's output rows r0..r1-1 (r = n*OH + oh): the contract, and the bits, of
 *             lc_c2d_rows_generic on those rows (one thread).  K runs as KQ = ceil(K/4) quads
 *             k = 4p..4p+3 (past K: weight 0); wp, the exact table's weight (NULL otherwise),
 *             is laid out by lc_c2d_pack_weight for the body:
 *               avx512      int32 (2*KQ, O) int16 pairs: row 2p (w[4p], w[4p+2]), row 2p+1
 *                           (w[4p+1], w[4p+3]) (low half first)
 *               avx512vnni  int32 (KQ, O) byte quads (w[4p] .. w[4p+3], low byte first), then
 *                           int32 (O,) -128 * sum_k w[k, o] (the +128 of the unsigned codes)
 */
#ifndef LUTCORE_CONV2D_X86_H
#define LUTCORE_CONV2D_X86_H

#include <stdint.h>
#include "conv2d/geo.h"

#define LC_C2D_X86_DECLARE(P)                                                                            \
    void P##c2d_rows(float *y, const int8_t *q, const lc_c2d_geo *g, const int32_t *wp, const int8_t *Wt, \
                     const int32_t *mul, int exact, const float *scale, const float *bias, int64_t r0,  \
                     int64_t r1);

LC_C2D_X86_DECLARE(lc_avx512_)
LC_C2D_X86_DECLARE(lc_avx512vnni_)
LC_C2D_X86_DECLARE(lc_simde_avx512_)
LC_C2D_X86_DECLARE(lc_simde_avx512vnni_)

/* the exact table's weight for a body (above); vnni: the quads + the -128 sums, else the
 * pairs.  wp holds lc_c2d_wp_len(g, vnni) int32. */
static inline int64_t lc_c2d_wp_len(const lc_c2d_geo *g, int vnni) {
    const int64_t KQ = (g->K + 3) / 4;
    return vnni ? (KQ + 1) * g->O : 2 * KQ * g->O;
}

static inline void lc_c2d_pack_weight(int32_t *wp, const lc_c2d_geo *g, const int8_t *Wt, int vnni) {
    const int64_t K = g->K, O = g->O, KQ = (K + 3) / 4;
#define LC_C2D_W(k, o) ((k) < K ? (int32_t)Wt[(k) * O + (o)] : 0)
    for (int64_t p = 0; p < KQ; p++)
        for (int64_t o = 0; o < O; o++) {
            const int64_t k = 4 * p;
            if (vnni) {
                uint32_t v = 0;
                for (int r = 0; r < 4; r++) v |= (uint32_t)(uint8_t)(int8_t)LC_C2D_W(k + r, o) << (8 * r);
                wp[p * O + o] = (int32_t)v;
            } else {
                wp[2 * p * O + o] = (int32_t)((uint32_t)(uint16_t)LC_C2D_W(k, o) |
                                              ((uint32_t)(uint16_t)LC_C2D_W(k + 2, o) << 16));
                wp[(2 * p + 1) * O + o] = (int32_t)((uint32_t)(uint16_t)LC_C2D_W(k + 1, o) |
                                                    ((uint32_t)(uint16_t)LC_C2D_W(k + 3, o) << 16));
            }
        }
    if (vnni)
        for (int64_t o = 0; o < O; o++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++) s += LC_C2D_W(k, o);
            wp[KQ * O + o] = -128 * s;
        }
#undef LC_C2D_W
}

#endif /* LUTCORE_CONV2D_X86_H */
