"""The one place that turns ``threads=None`` into a number.

``None`` resolves at call time, in the calling thread: the value given to
``lutcore.set_num_threads`` if any, else OpenMP's max threads (so
``OMP_NUM_THREADS`` and threadpoolctl are honoured).  0, negative or more than
MAX_THREADS is an error.
Without OpenMP every kernel is serial and this returns 1.
"""
from __future__ import annotations

import numbers

from lutcore._native import _cpu

_default: int | None = None


MAX_THREADS = 4096     # an OpenMP team larger than this is a typo, not a machine


def _check(n, name="threads"):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name}: expected a positive int or None, got {type(n).__name__} {n!r}")
    if not 0 < n <= MAX_THREADS:
        raise ValueError(f"{name}: expected a positive int <= {MAX_THREADS} or None, got {n}")
    return int(n)


def set_num_threads(n: int | None) -> None:
    """Default thread count for every lutcore kernel (None: back to OpenMP's)."""
    global _default
    _default = None if n is None else _check(n, "n")


def get_num_threads() -> int:
    """The thread count a kernel called now with ``threads=None`` would use."""
    return resolve_threads(None)


def resolve_threads(threads) -> int:
    if threads is None:
        n = _default if _default is not None else _cpu.max_threads()
    else:
        n = _check(threads)
    if not _cpu.openmp_enabled():
        return 1
    return max(1, int(n))
