/* csrc/mxquant/job.h — the MX quantizer's shared pieces: the element format as the bodies read
 * it, the job, and the two scalar steps every body shares (a block's scale; one element's code).
 * Included by mxquant.h and by every x86 body (their tails are these steps: the same bits).
 *
 * The steps are integer arithmetic on the float32 bits (the vector bodies take one exact float
 * product and an explicitly rounded conversion where it is cheaper: x86/avx512.c), so no body
 * depends on MXCSR's rounding mode or on flush-to-zero / denormals-are-zero
 * (torch.set_flush_denormal sets both).
 *
 * The scale (one block, lutcore.mx: shared = floor(log2 max|x|) - emax, clamped to [-127, 127]):
 *   amax = max of (bits & 0x7fffffff) over the block — the integer order of the magnitudes'
 *   bits is their order as numbers, and every NaN's bits lie above +inf's, so amax >= 0x7f800000
 *   exactly when the block holds a NaN or an infinity (scale 0xFF, codes 0).  Else with e =
 *   amax >> 23: floor(log2 max|x|) = e - 127, or -127 for a zero / subnormal maximum (every
 *   value there clamps to the scale 2^-127 anyway); scale code s + 127.
 *
 * One element (the value v = x / 2^s of lutcore.units.fp's encode, saturating), from x's bits
 * and s without forming v as a float:
 *   A     x's bits as a float with an unbounded exponent field: x's magnitude bits when x is
 *         normal; a subnormal x = m 2^-149 gives bits(float(m)) - (149 << 23) (m converted
 *         exactly: its exponent field then lies at or below 0); a zero gives -(149 << 23),
 *         raised to LC_MXQ_ZERO_A so that nothing below overflows int32 (it stays far below
 *         any value that rounds to a nonzero code)
 *   a_v   A - (s << 23): v's bits, with the same unbounded exponent (v = x 2^-s is exact; in
 *         a block that is not NaN, |v| < 2^(emax + 1): a_v < (128 + emax) << 23)
 *   normal range of the element (a_v >= thresh = (127 + emin) << 23): round to nearest even on
 *         the bits, dropping shift = 23 - M mantissa bits, the carry moving into the exponent:
 *         q = (a_v + 2^(shift-1) - 1 + ((a_v >> shift) & 1)) >> shift; mag = q - off, off =
 *         (127 - bias) << M (lutcore.units.fp's _encode_float, on the same bits)
 *   below it (and every int8): mag = RNE(sig / 2^k), sig = (a_v & 0x7fffff) | 0x800000 and k =
 *         c0 - (a_v >> 23), c0 = 150 + emin - M: |v| in units of the element's quantum below
 *         its normal range, 2^(emin - M) (int8: 2^-6, c0 = 144; there thresh is never met).
 *         k > 23 - M here (k >= 25 gives 0); the float route rint(|v| 2^(M - emin)) gives the
 *         same integer (|v| 2^(M - emin) is exact whenever |v| >= 2^-126, and rounds to 0 below)
 *   mag = min(mag, max_mag) (saturation: ±max normal; int8 ±127)
 *   code  float formats: mag | sign << (bits - 1) (sign-magnitude, -0 kept); int8: two's
 *         complement of ±mag (its -0 is 0)
 *
 *   job.x       uint32 (float32 bits)  rows (R, L) / cols (L, N)      IN
 *   job.codes   uint8                  rows (R, Lp) / cols (Lp, N)    OUT  0 past L (padding)
 *   job.scales  uint8 E8M0             rows (R, nb) / cols (nb, N)    OUT
 *   nb = ceil(L / bk), Lp = nb * bk
 */
#ifndef LUTCORE_MXQUANT_JOB_H
#define LUTCORE_MXQUANT_JOB_H

#include <stdint.h>
#include <string.h>

#define LC_MXQ_NAN 0xFFu                          /* the scale of a block holding NaN or inf */
#define LC_MXQ_SPECIAL 0x7f800000u                /* amax at or above: NaN or inf in the block */
#define LC_MXQ_ZERO_A (-(64 << 23))               /* A of a zero (and the floor of A) */

/* The element format as the bodies read it (lc_mxq_format makes it). */
typedef struct {
    int32_t thresh;     /* a_v >= thresh: the element's normal range; INT32_MAX for int8 */
    int32_t shift;      /* 23 - M: float32 mantissa bits dropped in the normal range */
    int32_t off;        /* (127 - bias) << M: the exponent field rebiased, in code units */
    int32_t c0;         /* 150 + emin - M: k = c0 - (a_v >> 23) below the normal range */
    int32_t max_mag;    /* the magnitude code of max normal (int8: 127) */
    int32_t emax;       /* the MX spec's emax_elem */
    int32_t smag;       /* the sign bit of a code (0 for int8) */
    int32_t twos;       /* 1: int8 (two's complement codes) */
} lc_mxq_fmt;

/* One call: rows (x's blocks along its last axis) or cols (along axis 0). */
typedef struct {
    const uint32_t *x;
    uint8_t *codes, *scales;
    int64_t R, L, N, bk, nb, Lp;    /* R rows (rows) / N columns (cols); L the quantized axis */
    lc_mxq_fmt f;
} lc_mxq_job;

/* The format of kind 0 (sign, exponent, mantissa: e4m3, e5m2, e3m2, e2m3, e2m1) or 1 (int8,
 * MXINT8: 6 fraction bits) from lutcore.units.fp's fields; 0, or -1 for fields outside what
 * the bodies handle (an 8-bit code at most, 1..7 mantissa bits, emax 0..15). */
static inline int lc_mxq_format(lc_mxq_fmt *f, int kind, int bits, int mbits, int bias, int emax, int max_code) {
    if (kind == 1) {
        if (bits != 8 || mbits != 6 || emax != 0 || max_code != 127) return -1;
        f->thresh = INT32_MAX, f->shift = 17, f->off = 0, f->c0 = 144, f->max_mag = 127, f->emax = 0;
        f->smag = 0, f->twos = 1;
        return 0;
    }
    if (kind != 0 || bits < 3 || bits > 8 || mbits < 1 || mbits > 7 || bias < 0 || bias > 31 || emax < 0 ||
        emax > 15 || max_code < 1 || max_code >= (1 << (bits - 1)))
        return -1;
    const int emin = 1 - bias;
    f->thresh = (127 + emin) << 23, f->shift = 23 - mbits, f->off = (127 - bias) << mbits;
    f->c0 = 150 + emin - mbits, f->max_mag = max_code, f->emax = emax, f->smag = 1 << (bits - 1), f->twos = 0;
    return 0;
}

/* A block's scale code from amax (its largest magnitude bits); *s23 = shared << 23 (0 for a
 * NaN block, whose codes are 0 and never computed). */
static inline uint8_t lc_mxq_scale(uint32_t amax, const lc_mxq_fmt *f, int32_t *s23) {
    if (amax >= LC_MXQ_SPECIAL) {
        *s23 = 0;
        return (uint8_t)LC_MXQ_NAN;
    }
    const int32_t e = (int32_t)(amax >> 23);
    int32_t s = (e == 0 ? -127 : e - 127) - f->emax;
    s = s < -127 ? -127 : (s > 127 ? 127 : s);
    *s23 = (int32_t)((uint32_t)s << 23);
    return (uint8_t)(s + 127);
}

/* RNE(sig / 2^k), k >= 1 (0 for k >= 32) */
static inline uint32_t lc_mxq_rne_shift(uint32_t sig, int32_t k) {
    if (k >= 32) return 0;
    return (sig + ((1u << (k - 1)) - 1u) + ((sig >> k) & 1u)) >> k;
}

/* the code of x (bits u) in a block of scale s (s23 = s << 23; the block holds no NaN/inf) */
static inline uint8_t lc_mxq_code(uint32_t u, int32_t s23, const lc_mxq_fmt *f) {
    const uint32_t a = u & 0x7fffffffu;
    int32_t A;
    if (a >= 0x800000u) {
        A = (int32_t)a;
    } else {
        float m = (float)(int32_t)a;                 /* exact: a < 2^23 */
        uint32_t mb;
        memcpy(&mb, &m, 4);
        A = (int32_t)mb - (149 << 23);
        if (A < LC_MXQ_ZERO_A) A = LC_MXQ_ZERO_A;
    }
    const int32_t av = A - s23;
    int32_t mag;
    if (av >= f->thresh) {
        const uint32_t v = (uint32_t)av;
        mag = (int32_t)((v + (1u << (f->shift - 1)) - 1u + ((v >> f->shift) & 1u)) >> f->shift) - f->off;
    } else {
        const uint32_t sig = ((uint32_t)av & 0x7fffffu) | 0x800000u;
        mag = (int32_t)lc_mxq_rne_shift(sig, f->c0 - (av >> 23));
    }
    if (mag > f->max_mag) mag = f->max_mag;
    if (!(u >> 31)) return (uint8_t)mag;
    return f->twos ? (uint8_t)(-mag) : (uint8_t)(mag | f->smag);
}

#endif /* LUTCORE_MXQUANT_JOB_H */
