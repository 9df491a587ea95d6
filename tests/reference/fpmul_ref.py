"""Scalar oracle for the floating-point multipliers (docs/DESIGN.md, "Floating-point
multipliers"; lutcore.units.fpmul): one pair at a time, in exact rationals.

Design: each operand is decoded by mx_ref (the formats' own oracle, from the bit fields),
split with math.frexp into |v| = (1 + x) * 2^E, x a Fraction of at most M fraction bits; each
multiplier is its paper's formula on x, y written out in Fractions; the result is converted to
float (exact: it has at most 26 significant bits) and rounded once to float32.  Zeros, infinities
and NaNs take Python's float product (IEEE).  Never imports lutcore.

    product_ref(kind, va, vb, Ma, Mb, k=None, offset=None)   -> float   one pair's product
        kind    "exact" | "mitchell" | "lmul" | "truncated"
        va, vb  float   the decoded operands
        Ma, Mb  int     their formats' mantissa bits (int8: 6)
    table_ref(kind, a, b, **kw)   -> float32 (2^bits_a, 2^bits_b), entry [code_a, code_b],
                                     every NaN 0x7fc00000
    lmul_l_ref(m)                 -> int: L-Mul's offset exponent for m mantissa bits
"""
import math
from fractions import Fraction

import numpy as np

from reference.mx_ref import SPECS, decode_ref


def lmul_l_ref(m):
    """Luo & Sun (2024), eq. (3): l(m) = m if m <= 3; 3 if m = 4; 4 if m > 4."""
    if m <= 3:
        return m
    if m == 4:
        return 3
    return 4


def _split(v, M):
    """|v| (finite, nonzero) = (1 + x) * 2^E: (x as a Fraction with at most M fraction bits, E)."""
    m, e = math.frexp(abs(v))                      # |v| = m * 2^e, 1/2 <= m < 1
    x = Fraction(m) * 2 - 1                        # 2m - 1 in [0, 1)
    assert (x * 2 ** M).denominator == 1, (v, M)
    return x, e - 1


def _to_float32(q):
    """A Fraction with few significant bits -> float32, rounded once (to nearest, ties to even)."""
    f = float(q)
    assert Fraction(f) == q, q                     # exact in float64
    return np.float32(f)


def product_ref(kind, va, vb, Ma, Mb, k=None, offset=None):
    if va == 0 or vb == 0 or not math.isfinite(va) or not math.isfinite(vb):
        return np.float32(va * vb)                 # IEEE: +-0, +-inf, NaN
    neg = (va < 0) != (vb < 0)
    x, Ea = _split(va, Ma)
    y, Eb = _split(vb, Mb)
    E = Ea + Eb
    if kind == "exact":
        mag = (1 + x) * (1 + y)
    elif kind == "mitchell":                       # Mitchell 1962: log2(1 + x) ~ x, antilog likewise
        mag = 1 + x + y if x + y < 1 else 2 * (x + y)
    elif kind == "lmul":                           # Luo & Sun 2024, eq. (3)
        off = Fraction(1, 2 ** lmul_l_ref(max(Ma, Mb))) if offset is None else Fraction(offset)
        mag = 1 + x + y + off
    elif kind == "truncated":                      # normalised to [1, 2), k fraction bits, toward zero
        mag = (1 + x) * (1 + y)
        if mag >= 2:
            mag, E = mag / 2, E + 1
        mag = Fraction(math.floor(mag * 2 ** k), 2 ** k)
    else:
        raise ValueError(kind)
    val = mag * Fraction(2) ** E
    return _to_float32(-val if neg else val)


def table_ref(kind, a, b, **kw):
    bits_a, Ma = SPECS[a][0], SPECS[a][2]
    bits_b, Mb = SPECS[b][0], SPECS[b][2]
    vas = [decode_ref(c, a) for c in range(1 << bits_a)]
    vbs = [decode_ref(c, b) for c in range(1 << bits_b)]
    out = np.empty((1 << bits_a, 1 << bits_b), np.float32)       # (na, nb)
    for i, va in enumerate(vas):
        for j, vb in enumerate(vbs):
            out[i, j] = product_ref(kind, va, vb, Ma, Mb, **kw)
    out.view(np.uint32)[np.isnan(out)] = 0x7FC00000
    return out
