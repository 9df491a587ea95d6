/* csrc/exactsum/exactsum.h — the exact, order-independent float32 summation's element passes
 * (lutcore/train/exactsum.py holds the contract, the accumulator object and the numpy
 * version these replace bit for bit; docs/DESIGN.md "Data-parallel training").
 *
 * The accumulator: n elements, each an integer count of units of 2**-149 held in nl
 * limbs of 32 bits stored in int64, limb-major — limb j of element i at L[j * n + i],
 * weighing 2**(32 (lo + j)) units.  A finite float32 x = +-m 2**s 2**-149 (m < 2**24,
 * 0 <= s <= 253) adds +-(m << (s % 32)) (< 2**56) into limb s / 32.
 *
 *   lc_xsum_range   one pass over x (n): the lowest and highest limb a nonzero finite
 *                   element adds into (or -1, -1), and whether any element is not finite
 *   lc_xsum_add     L[(q - lo) n + i] += c for each finite nonzero x[i]; non-finite
 *                   elements OR their flag into flags[i] (1: +inf, 2: -inf, 4: NaN)
 *   lc_xsum_norm    carry-normalise in place: limbs 0..nl-2 in [0, 2**32), the top signed
 *   lc_xsum_round   the exact value rounded once to float32, nearest, ties to even
 *                   (+0.0 for an exact zero; beyond float32's range: +-inf)
 *
 * Every element is independent: the team (core/team.h) splits elements in ranges, so any
 * thread count gives the same bits (lc_xsum_range's min, max and or: integers, exact in
 * any order).  Plain C (the passes are memory-bound integer work; no SIMD bodies).
 */
#ifndef LUTCORE_EXACTSUM_H
#define LUTCORE_EXACTSUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/common.h"

#define LC_XSUM_MAXL 64            /* limbs an element may span in lc_xsum_round */

/* bits -> (contribution c, limb q); returns 0 for a non-finite value */
static inline int lc_xsum_split(uint32_t bits, int64_t *c, int *q) {
    const uint32_t e = (bits >> 23) & 0xFF, f = bits & 0x7FFFFF;
    if (e == 0xFF) return 0;
    const int64_t m = e == 0 ? (int64_t)f : (int64_t)(f | 0x800000);
    const int s = e == 0 ? 0 : (int)e - 1;
    const int64_t v = m << (s & 31);
    *c = (bits >> 31) ? -v : v;
    *q = s >> 5;
    return 1;
}

/* Elements per team range, at least (a range costs a claim; each pass is a few ns an element). */
#define LC_XSUM_GRAIN 16384

/* The passes' job on the team (each pass uses the fields it needs). */
typedef struct {
    const float *x;
    int64_t *L;
    const int64_t *Lc;
    float *out;
    uint8_t *flags;
    int64_t n, nl, lo;
    int qlo, qhi, bad;          /* lc_xsum_range's: combined by atomic min / max / or (integers: exact) */
} lc_xsum_job;

static void lc_xsum_range_part(void *ctx, int64_t i0, int64_t i1, int tid) {
    lc_xsum_job *j = (lc_xsum_job *)ctx;
    const float *x = j->x;
    int lo = 1 << 20, hi = -1, bad = 0;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        int64_t c;
        int q;
        if (!lc_xsum_split(b, &c, &q)) bad |= 1;
        else if (c != 0) {
            if (q < lo) lo = q;
            if (q > hi) hi = q;
        }
    }
    int cur = __atomic_load_n(&j->qlo, __ATOMIC_RELAXED);
    while (lo < cur && !__atomic_compare_exchange_n(&j->qlo, &cur, lo, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    cur = __atomic_load_n(&j->qhi, __ATOMIC_RELAXED);
    while (hi > cur && !__atomic_compare_exchange_n(&j->qhi, &cur, hi, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    if (bad) __atomic_fetch_or(&j->bad, bad, __ATOMIC_RELAXED);
}

static void lc_xsum_range(const float *x, int64_t n, int *qmin, int *qmax, int *nonfinite, int nthreads) {
    lc_xsum_job j = {.x = x, .n = n, .qlo = 1 << 20, .qhi = -1, .bad = 0};
    lc_team_range(nthreads, n, LC_XSUM_GRAIN, lc_xsum_range_part, &j);
    *qmin = j.qhi < 0 ? -1 : j.qlo;
    *qmax = j.qhi;
    *nonfinite = j.bad;
}

/* the caller's window [lo, lo + nl) covers every limb lc_xsum_range reported */
static void lc_xsum_add_part(void *ctx, int64_t i0, int64_t i1, int tid) {
    const lc_xsum_job *j = (const lc_xsum_job *)ctx;
    int64_t *L = j->L;
    const int64_t nl = j->nl, lo = j->lo, n = j->n;
    const float *x = j->x;
    uint8_t *flags = j->flags;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        int64_t c;
        int q;
        if (lc_xsum_split(b, &c, &q)) {
            if (c != 0 && q - lo >= 0 && q - lo < nl) L[(q - lo) * n + i] += c;
        } else if (flags) {
            flags[i] |= (b & 0x7FFFFF) ? 4 : ((b >> 31) ? 2 : 1);
        }
    }
}

static void lc_xsum_add(int64_t *L, int64_t nl, int64_t lo, const float *x, uint8_t *flags, int64_t n,
                        int nthreads) {
    lc_xsum_job j = {.x = x, .L = L, .flags = flags, .n = n, .nl = nl, .lo = lo};
    lc_team_range(nthreads, n, LC_XSUM_GRAIN, lc_xsum_add_part, &j);
}

/* one element's limbs, n apart: carries up, arithmetic shift (floor) */
static inline void lc_xsum_norm1(int64_t *l, int64_t nl, int64_t stride) {
    for (int64_t j = 0; j + 1 < nl; j++) {
        const int64_t carry = l[j * stride] >> 32;
        l[j * stride] &= (int64_t)0xFFFFFFFF;
        l[(j + 1) * stride] += carry;
    }
}

static void lc_xsum_norm_part(void *ctx, int64_t i0, int64_t i1, int tid) {
    const lc_xsum_job *j = (const lc_xsum_job *)ctx;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) lc_xsum_norm1(j->L + i, j->nl, j->n);
}

static void lc_xsum_norm(int64_t *L, int64_t nl, int64_t n, int nthreads) {
    lc_xsum_job j = {.L = L, .n = n, .nl = nl};
    lc_team_range(nthreads, n, LC_XSUM_GRAIN / (nl > 1 ? nl : 1) + 1, lc_xsum_norm_part, &j);
}

/* out[i] = L's element i rounded to float32 (0 < nl <= LC_XSUM_MAXL - 2); L is not changed */
static void lc_xsum_round_part(void *ctx, int64_t i0, int64_t i1, int tid) {
    const lc_xsum_job *j = (const lc_xsum_job *)ctx;
    float *out = j->out;
    const int64_t *L = j->Lc;
    const int64_t nl = j->nl, lo = j->lo, n = j->n;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) {
        int64_t l[LC_XSUM_MAXL];                  /* a zero limb below, the element's nl, one above */
        const int64_t nt = nl + 2;
        l[0] = 0;
        l[nt - 1] = 0;
        for (int64_t j = 0; j < nl; j++) l[j + 1] = L[j * n + i];
        lc_xsum_norm1(l, nt, 1);
        const int neg = l[nt - 1] < 0;
        if (neg) {                                 /* the magnitude: every limb >= 0 */
            for (int64_t j = 0; j < nt; j++) l[j] = -l[j];
            lc_xsum_norm1(l, nt, 1);
        }
        int64_t h = 1;                             /* the highest nonzero limb (>= 1) */
        for (int64_t j = nt - 1; j >= 1; j--)
            if (l[j] != 0) { h = j; break; }
        const uint64_t top = (uint64_t)l[h], below = (uint64_t)l[h - 1];
        if (top == 0) { out[i] = 0.0f; continue; }
        int sticky = 0;                            /* any nonzero limb under those two */
        for (int64_t j = 0; j + 1 < h; j++) sticky |= l[j] != 0;
        const uint64_t W = (top << 32) | below;
        const int bl = 64 - __builtin_clzll(top);  /* bit length of the top limb */
        const int sh = bl + 8;                     /* bits dropped to keep 24 */
        uint64_t mant = W >> sh;
        const uint64_t rem = W & ((UINT64_C(1) << sh) - 1), half = UINT64_C(1) << (sh - 1);
        if (rem > half || (rem == half && (sticky || (mant & 1)))) mant += 1;
        const int e = sh + (int)(32 * (lo + h - 2)) - 149;     /* value = mant 2**e */
        const float v = (float)ldexp((double)mant, e);          /* exact, or overflow to inf */
        out[i] = neg ? -v : v;
    }
}

static void lc_xsum_round(float *out, const int64_t *L, int64_t nl, int64_t lo, int64_t n, int nthreads) {
    lc_xsum_job j = {.Lc = L, .out = out, .n = n, .nl = nl, .lo = lo};
    lc_team_range(nthreads, n, LC_XSUM_GRAIN / (nl > 1 ? nl : 1) + 1, lc_xsum_round_part, &j);
}

#endif /* LUTCORE_EXACTSUM_H */
