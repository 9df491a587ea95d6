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
 * Every element is independent: OpenMP splits elements, so any thread count gives the
 * same bits.  Plain C (the passes are memory-bound integer work; no SIMD bodies).
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

static void lc_xsum_range(const float *x, int64_t n, int *qmin, int *qmax, int *nonfinite, int nthreads) {
    int lo = 1 << 20, hi = -1, bad = 0;
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) reduction(min:lo) reduction(max:hi) reduction(|:bad))
    for (int64_t i = 0; i < n; i++) {
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
    *qmin = hi < 0 ? -1 : lo;
    *qmax = hi;
    *nonfinite = bad;
}

/* the caller's window [lo, lo + nl) covers every limb lc_xsum_range reported */
static void lc_xsum_add(int64_t *L, int64_t nl, int64_t lo, const float *x, uint8_t *flags, int64_t n,
                        int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))
    for (int64_t i = 0; i < n; i++) {
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

/* one element's limbs, n apart: carries up, arithmetic shift (floor) */
static inline void lc_xsum_norm1(int64_t *l, int64_t nl, int64_t stride) {
    for (int64_t j = 0; j + 1 < nl; j++) {
        const int64_t carry = l[j * stride] >> 32;
        l[j * stride] &= (int64_t)0xFFFFFFFF;
        l[(j + 1) * stride] += carry;
    }
}

static void lc_xsum_norm(int64_t *L, int64_t nl, int64_t n, int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))
    for (int64_t i = 0; i < n; i++) lc_xsum_norm1(L + i, nl, n);
}

/* out[i] = L's element i rounded to float32 (0 < nl <= LC_XSUM_MAXL - 2); L is not changed */
static void lc_xsum_round(float *out, const int64_t *L, int64_t nl, int64_t lo, int64_t n, int nthreads) {
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads))
    for (int64_t i = 0; i < n; i++) {
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

#endif /* LUTCORE_EXACTSUM_H */
