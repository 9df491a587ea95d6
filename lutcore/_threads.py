"""The one place that turns ``threads=None`` into a number.

``None`` resolves at call time, in the calling thread: the value given to
``lutcore.set_num_threads`` if any, else OpenMP's max threads (so
``OMP_NUM_THREADS`` and threadpoolctl are honoured).  0, negative or more than
MAX_THREADS is an error.
Without OpenMP every kernel is serial and this returns 1.
"""
from __future__ import annotations

from lutcore._native import _cpu

_default: int | None = None


MAX_THREADS = 4096     # an OpenMP team larger than this is a typo, not a machine


def _check(n, name="threads"):
    from lutcore._check import int_arg
    return int_arg(n, f"{name} (or None)", lo=1, hi=MAX_THREADS)


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
