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

/* The (KV, R, S) drivers: rows i = (kv, r) of R = g*T, the query of row r at position
 * pos + r % T; rows independent, so the team (core/team.h) runs ranges of them, each at least
 * LC_SOFTMAX_GRAIN elements. */
#define LC_SOFTMAX_GRAIN 8192
typedef struct {
    float *s;
    const float *att;
    int64_t R, S, T, pos, window;
    float scale;
    int isa;
} lc_softmax_job;

static inline int64_t lc_softmax_grain(int64_t S) {
    return S >= LC_SOFTMAX_GRAIN ? 1 : LC_SOFTMAX_GRAIN / (S > 0 ? S : 1);
}

static void lc_softmax_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_softmax_job *j = (const lc_softmax_job *)p;
    (void)tid;
    for (int64_t i = i0; i < i1; i++)
        lc_softmax_row(j->s + i * j->S, j->S, j->pos + (i % j->R) % j->T, j->window, j->isa);
}
/* in place on s (KV, R, S); T divides R */
static void lc_softmax_causal(float *s, int64_t KV, int64_t R, int64_t S, int64_t T, int64_t pos, int64_t window,
                              int isa, int nthreads) {
    lc_softmax_job j = {.s = s, .R = R, .S = S, .T = T, .pos = pos, .window = window, .isa = isa};
    if (S > 0) lc_team_range(nthreads, KV * R, lc_softmax_grain(S), lc_softmax_range, &j);
}

static void lc_softmax_bwd_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_softmax_job *j = (const lc_softmax_job *)p;
    (void)tid;
    for (int64_t i = i0; i < i1; i++)
        lc_softmax_bwd_row(j->s + i * j->S, j->att + i * j->S, j->S, j->pos + (i % j->R) % j->T, j->scale);
}
/* in place on ds (KV, R, S) given att (KV, R, S); T divides R */
static void lc_softmax_causal_bwd(float *ds, const float *att, int64_t KV, int64_t R, int64_t S, int64_t T,
                                  int64_t pos, float scale, int nthreads) {
    lc_softmax_job j = {.s = ds, .att = att, .R = R, .S = S, .T = T, .pos = pos, .scale = scale};
    if (S > 0) lc_team_range(nthreads, KV * R, lc_softmax_grain(S), lc_softmax_bwd_range, &j);
}

#endif /* LUTCORE_SOFTMAX_H */
