/* csrc/mxgemm/job.h — what the mxgemm family's bodies share (mxgemm/mxgemm.h: the contract, the
 * generic bodies and the drivers; mxgemm/x86/avx512.c: the AVX-512 bodies): the prepared product
 * table (lc_mx_products), one call's operands and plan (lc_mx_job), and the scalar steps every
 * body takes in the same order — a product's float64 value, the exact two-part split, the
 * correctly rounded float32 of an exact sum, the block fold, the narrow accumulator's rounding.
 *
 * Design: lutcore.ops.mxgemm analyses the table once (MXProducts) and hands C its forms; C trusts
 * them.  Every float step here is one IEEE operation in float64 or float32 (the build uses
 * -ffp-contract=off, so no multiply-add is fused behind our back) and every exact step is exact
 * by the table's analysis: the sums of a block are exact float64 sums, so any order, any
 * grouping, any body gives the same bits.
 */
#ifndef LUTCORE_MXGEMM_JOB_H
#define LUTCORE_MXGEMM_JOB_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* a table word's form (lc_mx_products.expand) */
#define LC_MX_F32 0          /* the float32 bits of the product */
#define LC_MX_HI32 1         /* the high 32 bits of the product's float64 (its low 32 bits are 0) */

/* The product table as the kernels read it (made by lutcore.ops.mxgemm.MXProducts; IN, read-only):
 *   tab    uint32 (NA, NB)    word of T[a][b], NA = 2^ba, NB = 2^bb (a, b the codes)
 *   tt     uint32 (NB, R16)   the row bodies' transposed reduced table: T[a][b] = afac[a] *
 *                             T'[rep[a]][b], tt[b][r] = word of T'[r][b] (0 past the R reduced
 *                             rows: R16 = R rounded up to 16, <= 256)
 *   rep    uint8 (NA,), afac double (NA,): the reduction (afac a signed power of two; rows equal
 *          up to sign and exponent share one reduced row).  rep_mask >= 0: its arithmetic form,
 *          rep[a] = a & rep_mask (the sign of sign-magnitude codes, or none); -1: a table of few rows
 *   va, vb double (NA,), (NB,) the operands' decoded values (the FMA route only; else NULL)
 *   scale  double (256,)      E8M0: 2^(s - 127), NaN at 0xFF
 *   route  LC_MX_ROUTE_*; nparts 1 or 2; split = 1.5 * 2^(52 + c) (two parts: hi = the product
 *          rounded to a multiple of 2^c, lo = the rest) */
#define LC_MX_ROUTE_FMA 0    /* the exact table of the decoded values: float64 FMA, no lookups */
#define LC_MX_ROUTE_TABLE 1  /* any table: lookups, nparts float64 parts */
typedef struct {
    const uint32_t *tab, *tt;
    const uint8_t *rep;
    const double *afac, *va, *vb, *scale;
    int ba, bb, expand, route, nparts, rep_mask, R16;
    double split;
} lc_mx_products;

/* One call (mxgemm.h lc_mx_run, exact or narrow).  Operands (trusted: the room checked them):
 *   Y   float32 (M, N)        OUT
 *   A   uint8 (M, Kp) codes, SA uint8 (M, nblk) E8M0     IN
 *   B   uint8 (Kp, N) codes, SB uint8 (nblk, N) E8M0     IN
 * K <= Kp = nblk * bk: k >= K (the padding) is never read.  Narrow mode: mbits, tz (0 nearest
 * even, 1 toward zero), promote (products per promotion; 0: only at the end).  The plan: units of
 * rows_per rows x nb columns (nrc row chunks per column block), ws_per bytes of scratch per
 * thread at ws (64-byte aligned). */
struct lc_mx_body;
typedef struct lc_mx_job {
    float *Y;
    const uint8_t *A, *SA, *B, *SB;
    int64_t M, N, K, Kp, bk, nblk;
    const lc_mx_products *P;
    int mbits, tz;
    int64_t promote;
    int64_t nb, rows_per, nrc, units;
    char *ws;
    size_t ws_per;
    const struct lc_mx_body *body;
} lc_mx_job;

static inline double lc_mx_d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline uint64_t lc_mx_u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

/* a table word's value, exact in float64 */
static inline double lc_mx_value(uint32_t w, int expand) {
    if (expand == LC_MX_HI32) return lc_mx_d((uint64_t)w << 32);
    float f;
    memcpy(&f, &w, 4);
    return (double)f;
}

/* 2^e as a double, -1022 <= e <= 1023 */
static inline double lc_mx_pow2(int e) { return lc_mx_d((uint64_t)(1023 + e) << 52); }

/* a + b rounded to odd (the float64 neighbour whose last bit is 1 when a + b is not a float64):
 * rounding that to any narrower precision (24 bits, float32; mbits + 1 <= 24, the narrow register)
 * gives the correctly rounded a + b, to nearest or toward zero (Boldo & Melquiond).  TwoSum's
 * error e is exact; s and e finite here (a and b are finite and far from overflow). */
static inline double lc_mx_add_odd(double a, double b) {
    double s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);
    if (e != 0.0 && e == e) {
        uint64_t u = lc_mx_u(s);
        if (!(u & 1)) u += ((e > 0.0) == (s > 0.0)) ? 1 : (uint64_t)-1;
        s = lc_mx_d(u);
    }
    return s;
}

/* fl32 of a block's exact sum hi + lo (one part: lo = 0).  A non-finite hi (a NaN or infinite
 * product in the block) is the block's IEEE sum; lo is then NaN or junk and ignored. */
static inline float lc_mx_sum32(double hi, double lo, int nparts) {
    if (nparts == 1 || !isfinite(hi)) return (float)hi;
    return (float)lc_mx_add_odd(hi, lo);
}

/* y + fl32(f * s): s = 2^(xa + xb) (or NaN) as a float64, f * s exact in float64, one rounding */
static inline float lc_mx_fold(float y, float f, double s) { return y + (float)((double)f * s); }

/* the canonical NaN (0x7fc00000) for any NaN: every body's outputs have the same bits */
static inline float lc_mx_canon(float y) {
    if (y != y) {
        uint32_t u = 0x7fc00000u;
        memcpy(&y, &u, 4);
    }
    return y;
}

/* The narrow register's rounding: x (a float64 rounded to odd from the exact sum) to mbits + 1
 * significant bits in float32's exponent range (quantum 2^(max(e, -126) - mbits), e = floor(log2
 * |x|)), to nearest even (tz 0) or toward zero (tz 1); beyond (2 - 2^-mbits) 2^127 it overflows
 * to +-inf (nearest) or stays at +-that maximum (toward zero).  Zero is +0; inf, NaN pass. */
static inline double lc_mx_narrow(double x, int mbits, int tz) {
    if (!isfinite(x)) return x;
    if (x == 0.0) return 0.0;
    int e = (int)((lc_mx_u(x) >> 52) & 0x7ff) - 1023;   /* x is a normal float64 here */
    int q = (e < -126 ? -126 : e) - mbits;
    double r = x * lc_mx_pow2(-q);                        /* exact: |r| < 2^(mbits + 1) */
    r = tz ? trunc(r) : nearbyint(r);
    r = r * lc_mx_pow2(q);                                /* exact */
    double mx = (2.0 - lc_mx_pow2(-mbits)) * lc_mx_pow2(127);
    if (fabs(r) > mx) r = tz ? copysign(mx, x) : copysign(INFINITY, x);
    return r + 0.0;                                       /* -0 -> +0 */
}

#endif /* LUTCORE_MXGEMM_JOB_H */
