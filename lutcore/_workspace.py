"""Reusable scratch buffers.

Fresh memory costs a page fault per 4 KiB on first touch (docs/DESIGN.md,
Performance), so kernels that need packing or scratch space borrow it from
here: one growing buffer per (Python thread, purpose), never shared between
threads that may call into lutcore concurrently.
"""
from __future__ import annotations

import threading

import numpy as np

_local = threading.local()


def aligned(buf: np.ndarray, nbytes: int, dtype) -> np.ndarray:
    """The 64-byte aligned view of ``nbytes`` bytes of ``buf`` (uint8, at least nbytes + 64) as dtype."""
    off = (-buf.ctypes.data) % 64
    return buf[off:off + nbytes].view(dtype)


def empty_aligned(nbytes: int, dtype=np.uint8) -> np.ndarray:
    """A fresh 64-byte aligned 1-D array of ``nbytes`` bytes of ``dtype``, contents undefined."""
    return aligned(np.empty(int(nbytes) + 64, np.uint8), int(nbytes), dtype)


def scratch(purpose: str, count: int, dtype) -> np.ndarray:
    """A 1-D array of ``count`` elements of ``dtype``, contents undefined."""
    dtype = np.dtype(dtype)
    nbytes = max(int(count), 1) * dtype.itemsize
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    buf = bufs.get(purpose)
    if buf is None or buf.nbytes < nbytes + 64:
        buf = np.empty(max(nbytes, 64) + 64, dtype=np.uint8)
        bufs[purpose] = buf
    return aligned(buf, nbytes, dtype)[:count]


def release() -> None:
    """Drop this thread's scratch buffers."""
    _local.bufs = {}
