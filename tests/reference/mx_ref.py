"""Scalar oracle for the floating-point element formats and OCP MX blocks (DESIGN.md,
"Floating-point element formats and MX blocks").

Design: one value at a time, in exact rationals (fractions.Fraction) -- no bit tricks.  A
format is the sorted list of its finite non-negative values, each decoded from its
magnitude code by the textbook formula; rounding finds the two neighbours of |v| in that
list (above the largest, a "virtual" next value one step further, whose choice means
overflow) and picks one: nearest (ties to the even code; E8M0 ties upward, as ml_dtypes)
or stochastic (up iff floor(t * 2^32) + r >= 2^32, t the position between the neighbours,
r the element's 32 random bits).  The special-value rules are written out per format from
the contract; MX follows the spec's algorithm per block with math.frexp.  Never imports
lutcore.

    encode_ref(x, fmt, rounding, saturate, r)   x float (a float32 value)    -> int code
    decode_ref(code, fmt)                        int                          -> float
    splitmix_bits(seed, n)                       SplitMix64, high 32 bits     -> list of n ints
    mx_quantize_ref(x, fmt, block, axis, rounding, seed)
        x       float32  (..., L, ...)   IN   L along ``axis``
        codes   uint8    (..., Lp, ...)  OUT  Lp = ceil(L / block) * block, zero padded
        scales  uint8    (..., nb, ...)  OUT  nb = Lp / block, E8M0 codes
    mx_dequantize_ref(codes, scales, fmt, block, axis, L) -> float32 (..., L, ...)
"""
import bisect
import functools
import math
from fractions import Fraction

import numpy as np

# name: (bits, exponent bits, mantissa bits, bias, specials); specials:
#   "fn"    no inf; the all-ones magnitude is NaN (OFP8 E4M3)
#   "ieee"  top exponent: inf (mantissa 0) and NaN (OFP8 E5M2)
#   "none"  every code finite (FP6, FP4)
#   "scale" unsigned 2^(code - 127), 0xff NaN (E8M0)
#   "int"   two's complement / 64 (MXINT8)
SPECS = {
    "e4m3": (8, 4, 3, 7, "fn"),
    "e5m2": (8, 5, 2, 15, "ieee"),
    "e3m2": (6, 3, 2, 3, "none"),
    "e2m3": (6, 2, 3, 1, "none"),
    "e2m1": (4, 2, 1, 1, "none"),
    "e8m0": (8, 8, 0, 127, "scale"),
    "int8": (8, 0, 6, 0, "int"),
}
# the exponent of the largest normal, from the OCP MX v1.0 spec's element table
EMAX = {"e4m3": 8, "e5m2": 15, "e3m2": 4, "e2m3": 2, "e2m1": 2, "int8": 0}


def _mag_value(mag, fmt):
    """The exact value of a magnitude code, or None when it is inf/NaN."""
    bits, E, M, bias, sp = SPECS[fmt]
    if sp == "int":
        return Fraction(mag, 64)
    if sp == "scale":
        return None if mag == 255 else Fraction(2) ** (mag - 127)
    e, m = mag >> M, mag % (1 << M)
    if sp == "fn" and e == (1 << E) - 1 and m == (1 << M) - 1:
        return None
    if sp == "ieee" and e == (1 << E) - 1:
        return None
    if e == 0:
        return Fraction(m, 1 << M) * Fraction(2) ** (1 - bias)
    return (1 + Fraction(m, 1 << M)) * Fraction(2) ** (e - bias)


@functools.lru_cache(maxsize=None)
def grid(fmt):
    """[(value, magnitude code)] of every finite non-negative value, ascending."""
    bits, E, M, bias, sp = SPECS[fmt]
    n = 128 if sp == "int" else (256 if sp == "scale" else 1 << (bits - 1))
    out = [(_mag_value(c, fmt), c) for c in range(n)]
    return tuple(sorted((v, c) for v, c in out if v is not None))


def decode_ref(code, fmt):
    bits, E, M, bias, sp = SPECS[fmt]
    if sp == "int":
        return (code - 256 if code >= 128 else code) / 64.0
    if sp == "scale":
        return math.nan if code == 255 else math.ldexp(1.0, code - 127)
    neg = code >> (bits - 1)
    mag = code % (1 << (bits - 1))
    v = _mag_value(mag, fmt)
    if v is None:
        e, m = mag >> M, mag % (1 << M)
        out = math.inf if (sp == "ieee" and m == 0) else math.nan
    else:
        out = float(v)
    return -out if neg else out


def neighbours(v, fmt):
    """(lo, lo_code, hi, hi_code) around |value| v (a Fraction >= 0): lo the largest value <= v,
    hi the next one (above the largest, the virtual next: one more step, code + 1); None when v
    is a value or below the smallest (e8m0)."""
    g = grid(fmt)
    vals = [a for a, _ in g]
    top, top_code = g[-1]
    if v > top:
        return top, top_code, 2 * top if SPECS[fmt][4] == "scale" else top + (top - g[-2][0]), top_code + 1
    i = bisect.bisect_right(vals, v) - 1
    if i < 0 or g[i][0] == v:
        return None
    return g[i] + g[i + 1]


def sr_threshold(x, fmt):
    """The smallest 32-bit r that rounds the float x up under stochastic rounding (2^32: never)."""
    nb = neighbours(abs(Fraction(x)), fmt)
    if nb is None:
        return 1 << 32
    lo, _, hi, _ = nb
    return max(0, (1 << 32) - math.floor((abs(Fraction(x)) - lo) / (hi - lo) * 2 ** 32))   # beyond: always up


def _round_mag(v, fmt, rounding, r):
    """|value| v (a Fraction >= 0) -> (magnitude code, overflowed)."""
    g = grid(fmt)
    top = g[-1][0]
    nb = neighbours(v, fmt)
    if nb is None:                                 # a value, or e8m0 below 2^-127 (the smallest)
        i = bisect.bisect_right([a for a, _ in g], v) - 1
        return g[max(i, 0)][1], False
    lo, lo_code, hi, hi_code = nb
    if rounding == "nearest":
        d_lo, d_hi = v - lo, hi - v
        if d_lo != d_hi:
            up = d_hi < d_lo
        else:
            up = SPECS[fmt][4] == "scale" or hi_code % 2 == 0     # ties: e8m0 upward, else to even
    else:
        t = (v - lo) / (hi - lo)
        up = math.floor(t * 2 ** 32) + r >= 2 ** 32
    if not up:
        return lo_code, False
    return (hi_code, False) if v <= top else (hi_code, True)


def encode_ref(x, fmt, rounding="nearest", saturate=False, r=0):
    """The code of the float ``x`` (a float32 value); ``r`` its 32 random bits (stochastic)."""
    neg = math.copysign(1.0, x) < 0
    return encode_exact_ref(None if math.isnan(x) else (neg, x), fmt, rounding, saturate, r, nan_sign=neg)


def encode_exact_ref(sv, fmt, rounding="nearest", saturate=False, r=0, nan_sign=False):
    """``sv`` = (negative, value) with value a float or Fraction (inf allowed), None for NaN."""
    bits, E, M, bias, sp = SPECS[fmt]
    smag = 1 << (bits - 1)
    if sp == "scale":
        if sv is None or sv[0] or sv[1] == 0 or math.isinf(sv[1]):
            return 0xFF
        mag, over = _round_mag(Fraction(sv[1]), fmt, rounding, r)
        return (0xFE if saturate else 0xFF) if over else mag
    if sv is None:                                 # NaN (the sign of the NaN: nan_sign)
        if sp == "fn":
            return 0x7F | (smag if nan_sign else 0)
        if sp == "ieee":
            return 0x7E | (smag if nan_sign else 0)
        if saturate or sp == "int":
            raise ValueError("NaN has no code")
        return 0 if nan_sign else smag             # ml_dtypes: a zero of the opposite sign
    neg, v = sv
    top_code = grid(fmt)[-1][1]
    if math.isinf(v):
        if sp == "fn":
            mag = 0x7F
        elif sp == "ieee":
            mag = 0x7C
        elif saturate and sp == "none":
            raise ValueError("inf has no code")
        else:
            mag = top_code
    else:
        mag, over = _round_mag(abs(Fraction(v)), fmt, rounding, r)
        if over:
            mag = top_code if (saturate or sp in ("none", "int")) else (0x7F if sp == "fn" else 0x7C)
    if sp == "int":
        return (256 - mag) % 256 if neg else mag
    return mag | (smag if neg else 0)


def splitmix_bits(seed, n):
    """The high 32 bits of SplitMix64's first n outputs from state ``seed``."""
    mask = (1 << 64) - 1
    state, out = seed, []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out.append(z >> 32)
    return out


def _bits_for(seed, n):
    if isinstance(seed, np.random.Generator):
        return [int(v) for v in seed.integers(0, 1 << 32, size=n, dtype=np.uint32)]
    return splitmix_bits(seed, n)


def encode_array_ref(x, fmt, rounding="nearest", saturate=False, seed=None):
    x = np.asarray(x, dtype=np.float32)                          # (...)
    flat = x.reshape(-1)
    r = _bits_for(seed, flat.size) if rounding == "stochastic" else [0] * flat.size
    nan_sign = np.signbit(flat)
    out = [encode_exact_ref(None if math.isnan(v) else (bool(s), float(v)), fmt, rounding, saturate, ri,
                            nan_sign=bool(s))
           for v, s, ri in zip(flat.tolist(), nan_sign.tolist(), r)]
    return np.array(out, dtype=np.uint8).reshape(x.shape)        # (...) uint8


def mx_quantize_ref(x, fmt, block=32, axis=-1, rounding="nearest", seed=None):
    """The OCP MX v1.0 conversion, block by block (see the module's docstring)."""
    x = np.asarray(x, dtype=np.float32)
    axis = axis % x.ndim
    r = _bits_for(seed, x.size) if rounding == "stochastic" else [0] * x.size
    ridx = np.moveaxis(np.arange(x.size).reshape(x.shape), axis, -1)   # (..., L) C-order index in x
    xm = np.moveaxis(x, axis, -1)                                      # (..., L)
    L = xm.shape[-1]
    nb = -(-L // block)
    lead = xm.shape[:-1]
    codes = np.zeros(lead + (nb * block,), np.uint8)                   # (..., Lp)
    scales = np.zeros(lead + (nb,), np.uint8)                          # (..., nb)
    emax = EMAX[fmt]
    for pos in np.ndindex(*lead):
        row, rrow = xm[pos].tolist(), ridx[pos].tolist()
        for b in range(nb):
            vals = row[b * block:(b + 1) * block]
            if any(math.isnan(v) or math.isinf(v) for v in vals):
                scales[pos + (b,)] = 0xFF                              # X = NaN: codes stay 0
                continue
            amax = max(abs(v) for v in vals)
            shared = -127 if amax == 0 else math.frexp(amax)[1] - 1 - emax   # floor(log2 amax) - emax
            shared = min(max(shared, -127), 127)
            scales[pos + (b,)] = shared + 127
            X = Fraction(2) ** shared
            for j, v in enumerate(vals):
                neg = math.copysign(1.0, v) < 0
                codes[pos + (b * block + j,)] = encode_exact_ref(
                    (neg, abs(Fraction(v)) / X), fmt, rounding, True, r[rrow[b * block + j]])
    return np.moveaxis(codes, -1, axis), np.moveaxis(scales, -1, axis)


def mx_dequantize_ref(codes, scales, fmt, block, axis, L):
    codes = np.moveaxis(np.asarray(codes), axis, -1)                   # (..., Lp)
    scales = np.moveaxis(np.asarray(scales), axis, -1)                 # (..., nb)
    out = np.zeros(codes.shape[:-1] + (L,), np.float32)                # (..., L)
    for pos in np.ndindex(*codes.shape[:-1]):
        for k in range(L):
            s = int(scales[pos + (k // block,)])
            out[pos + (k,)] = math.nan if s == 255 else decode_ref(int(codes[pos + (k,)]), fmt) * 2.0 ** (s - 127)
    return np.moveaxis(out, -1, axis)
