"""The one place that turns ``threads=None`` into a number.

``None`` resolves at call time, in the calling thread: the value given to
``lutcore.set_num_threads`` if any, else OpenMP's max threads (so
``OMP_NUM_THREADS`` and threadpoolctl are honoured).  0, negative or more than
MAX_THREADS is an error.
Without OpenMP every kernel is serial and this returns 1.

MAX_THREADS is the machine's CPU count times THREADS_PER_CPU (8): beyond that an
OpenMP team only oversubscribes, and at some size libgomp cannot create its
threads and ends the process ("libgomp: Thread creation failed", exit 1, no
exception).  A larger ``threads=`` is a ValueError; a larger OpenMP default
(``OMP_NUM_THREADS``) is capped to it.
"""
from __future__ import annotations

import os

from lutcore._native import _cpu

_default: int | None = None

THREADS_PER_CPU = 8
MAX_THREADS = max(1, os.cpu_count() or 1) * THREADS_PER_CPU


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
        n = _default if _default is not None else min(_cpu.max_threads(), MAX_THREADS)
    else:
        n = _check(threads)
    if not _cpu.openmp_enabled():
        return 1
    return max(1, int(n))
