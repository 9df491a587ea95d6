"""Approximate 8-bit multipliers to try at once.

Each builder returns a ``Units`` whose multiplier table is the named circuit's
product for every int8 pair; requant and ReLU stay exact.  All are
sign-magnitude designs: the magnitude |a|·|b| is approximated and the sign
applied after, so every table is symmetric in a, b and odd in each operand.

* ``truncated(k)``        — the k low bits of the magnitude product dropped
                            (a truncated array multiplier); k = 0 is exact.
* ``mitchell()``          — Mitchell's logarithmic multiplier (1962): add the
                            piecewise-linear log2 of both operands, take the
                            piecewise-linear antilog.  Never overestimates;
                            worst relative error 11.1 %.
* ``reduced_operands(b)`` — each operand keeps only its ``b`` leading
                            significant bits (the rest truncated) before an
                            exact multiply.
"""
from __future__ import annotations

import re

import numpy as np

from lutcore.units import Units

__all__ = ["truncated", "mitchell", "reduced_operands", "by_name", "NAMES"]


def _grid():
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)
    return v[:, None], v[None, :]


def _signed(mag, a, b):
    sign = np.where((a < 0) ^ (b < 0), -1, 1)
    return (sign * mag).astype(np.int64)


def truncated(k: int = 4) -> Units:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= 14:
        raise ValueError(f"k: expected an int in [0, 14], got {k!r}")
    a, b = _grid()
    mag = (np.abs(a) * np.abs(b)) >> k << k
    return Units.from_mul(_signed(mag, a, b).astype(np.int16), name=f"truncated:{k}")


def _floor_log2(x):
    out = np.zeros_like(x)
    y = x.copy()
    for s in (4, 2, 1):
        m = y >= (1 << s)
        out = np.where(m, out + s, out)
        y = np.where(m, y >> s, y)
    return out


def mitchell() -> Units:
    a, b = np.broadcast_arrays(*_grid())
    x, y = np.abs(a), np.abs(b)
    nz = (x > 0) & (y > 0)
    xs, ys = np.where(nz, x, 1), np.where(nz, y, 1)
    k1, k2 = _floor_log2(xs), _floor_log2(ys)
    m1, m2 = xs - (1 << k1), ys - (1 << k2)          # fraction * 2^k
    # x = 2^k1 (1 + f1), y = 2^k2 (1 + f2);  f1 + f2 = (m1 2^k2 + m2 2^k1) / 2^(k1+k2)
    s = (m1 << k2) + (m2 << k1)
    base = 1 << (k1 + k2)
    mag = np.where(s < base, base + s, 2 * s)
    mag = np.where(nz, mag, 0)
    return Units.from_mul(_signed(mag, a, b).astype(np.int16), name="mitchell")


def reduced_operands(bits: int = 4) -> Units:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
        raise ValueError(f"bits: expected an int in [1, 8], got {bits!r}")
    a, b = _grid()

    def keep(v):
        v = np.abs(v)
        lead = _floor_log2(np.maximum(v, 1))
        drop = np.maximum(lead + 1 - bits, 0)
        return (v >> drop) << drop

    mag = keep(a) * keep(b)
    return Units.from_mul(_signed(mag, a, b).astype(np.int16), name=f"reduced:{bits}")


NAMES = ("exact", "truncated:K", "mitchell", "reduced:BITS")


_NAME_RE = r"(truncated|trunc|reduced|reduced_operands)[:_=]?(\d+)"


def is_name(name: str) -> bool:
    """Whether ``name`` is a built-in units name (see ``by_name``)."""
    s = str(name).strip().lower()
    return s in ("exact", "mitchell") or re.fullmatch(_NAME_RE, s) is not None


def by_name(name: str) -> Units:
    """'exact', 'truncated:6', 'mitchell', 'reduced:4' (also 'trunc6', 'reduced4')."""
    s = str(name).strip().lower()
    if s == "exact":
        return Units.exact()
    if s == "mitchell":
        return mitchell()
    m = re.fullmatch(_NAME_RE, s)
    if m:
        n = int(m.group(2))
        return truncated(n) if m.group(1).startswith("trunc") else reduced_operands(n)
    raise ValueError(f"units: unknown name {name!r}; expected a directory, a Verilog file (.v), a C model "
                     f"(file.c:function), a text table (.txt, .lut, .csv) or one of {NAMES}")
