"""The exact float32 summation's element passes (csrc/exactsum/exactsum.h).

Design: the room of the ``exactsum`` family.  The accumulator, its window of limbs and its
contract live in ``lutcore.train.exactsum`` (with the numpy passes these equal, bit for
bit); here are the three passes over elements — the limbs an array adds into, adding it,
carry normalisation — and the final rounding.  The native wrapper checks every buffer (limbs
C-contiguous int64 (nl, n), x C-contiguous float32 (n,), flags uint8 (n,) or None); OpenMP
over elements, so any thread count gives the same bits.  ``threads``: None reads the
enclosing ``lutcore._threads.scope`` (or lutcore's default).

    L       (nl, n)  int64   limb j weighs 2**(32 (lo + j)) units of 2**-149
    x       (n,)     float32
    flags   (n,)     uint8   inf / NaN bits (1 +inf, 2 -inf, 4 NaN), or None
"""
from __future__ import annotations

from lutcore._native import exactsum as _x
from lutcore._threads import resolve_threads

__all__ = ["MAX_LIMBS", "limb_range", "add", "normalise", "round_f32"]

MAX_LIMBS = _x.MAX_LIMBS          # the most limbs round_f32 takes


def limb_range(x, threads=None):
    """(qmin, qmax, nonfinite): the limbs the finite nonzero elements of x add into ((-1, -1)
    if none), and whether any element is inf or NaN."""
    return _x.limb_range(x, resolve_threads(threads))


def add(L, lo: int, x, flags=None, threads=None) -> None:
    """L += x's contributions (the window [lo, lo + nl) must cover them); ``flags`` gets the
    inf / NaN bits (None: x must be finite)."""
    _x.add(L, int(lo), x, flags, resolve_threads(threads))


def normalise(L, threads=None) -> None:
    """Carry-normalise L in place: limbs 0..nl-2 in [0, 2**32), the top one signed."""
    _x.normalise(L, resolve_threads(threads))


def round_f32(L, lo: int, threads=None):
    """The exact sums L rounded once to float32 (nearest, ties to even): a new (n,) array."""
    return _x.round_f32(L, int(lo), resolve_threads(threads))
