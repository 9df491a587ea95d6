/* csrc/softmax/softmax.h — causal softmax rows, forward and backward (float32).
 *
 * Forward, one query row at position qpos over keys 0..S-1, in place: keys after
 * qpos (or `window` or more before it) -> -inf, minus the row max, exp (lutcore's,
 * the same bits on every SIMD path), divided by the in-order row sum; the keys
 * after qpos come out as zeros without being computed.  Used by the
 * pipeline's prefill and decode and by the GPT model's attention.
 *
 * Backward, in place on ds = dL/d(att) of that row, given att:
 *   dot = in-order sum over j <= qpos of ds[j] * att[j] (each product rounded)
 *   ds[j] = ((ds[j] - dot) * att[j]) * scale for j <= qpos, 0 beyond
 * (the scores' gradient, with the 1/sqrt(hd) scale the forward applied).
 */
#ifndef LUTCORE_SOFTMAX_H
#define LUTCORE_SOFTMAX_H

#include <math.h>
#include "core/common.h"
#include "mathfn/mathfn.h"

static void lc_softmax_row(float *s, int64_t S, int64_t qpos, int64_t window, int isa) {
    /* keys after qpos are exact zeros: the row's work stops at qpos (the in-order sum
       over the zeros would add +0, so the bits are those of the whole row) */
    const int64_t n = qpos >= 0 && qpos + 1 < S ? qpos + 1 : S;
    for (int64_t j = 0; j < n; j++)
        if (j > qpos || (window > 0 && qpos - j >= window)) s[j] = -INFINITY;
    float m = s[0];
    for (int64_t j = 1; j < n; j++)
        if (s[j] > m) m = s[j];
    for (int64_t j = 0; j < n; j++) s[j] = s[j] - m;
    lc_mathfn_row(s, s, n, LC_FN_EXP, isa);
    float tot = lc_rowsum_f(s, n);
    for (int64_t j = 0; j < n; j++) s[j] = s[j] / tot;
    for (int64_t j = n; j < S; j++) s[j] = 0.0f;
}
static void lc_softmax_bwd_row(float *ds, const float *att, int64_t S, int64_t qpos, float scale) {
    const int64_t n = qpos + 1 < S ? qpos + 1 : S;
    float dot = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float t = ds[j] * att[j];
        dot = dot + t;
    }
    for (int64_t j = 0; j < n; j++) ds[j] = ((ds[j] - dot) * att[j]) * scale;
    for (int64_t j = n; j < S; j++) ds[j] = 0.0f;
}

#endif /* LUTCORE_SOFTMAX_H */
