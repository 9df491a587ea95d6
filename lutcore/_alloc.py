"""Reuse of large array memory inside lutcore's own calls.

Fresh memory costs a page fault per 4 KiB on first touch (docs/DESIGN.md,
Performance), and a training step allocates the same activations every step.
Inside ``reuse()`` (and functions decorated with ``reusing``) numpy allocates
array data through lutcore's caching allocator (csrc/core/alloc.h): a
freed block of 256 KiB or more is kept and handed out again, so from the
second step on the same shapes reuse the same mapped memory.  The handler is
a numpy context variable: code outside lutcore's calls is never affected.
Arrays keep their allocator for life, so one returned to the user is freed
into the cache whenever the user drops it.

``LUTCORE_REUSE_MEMORY=0`` turns it off; ``lutcore.cache_info()`` and
``lutcore.empty_cache()`` inspect and release the cache; the cache holds at
most 2 GiB by default (``set_cache_limit``).
"""
from __future__ import annotations

import contextlib
import functools
import os

from lutcore._native import alloc as _a

ENABLED = os.environ.get("LUTCORE_REUSE_MEMORY", "1").strip() not in ("0", "false", "no", "off")


@contextlib.contextmanager
def reuse():
    """numpy allocates through lutcore's cache inside the block."""
    if not ENABLED:
        yield
        return
    old = _a.set_handler(_a.HANDLER)
    try:
        yield
    finally:
        _a.set_handler(old)


def reusing(fn):
    """Decorator: run ``fn`` inside ``reuse()``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with reuse():
            return fn(*args, **kwargs)
    return wrapper


def cache_info() -> dict:
    """Bytes and blocks the cache holds, its limit, and its hit/miss counts."""
    return _a.info()


def empty_cache() -> None:
    """Return every cached block to the system (live arrays are not touched)."""
    _a.trim()


def set_cache_limit(nbytes: int) -> None:
    """Most bytes the cache may hold (oldest blocks are freed first)."""
    from lutcore import _check
    nbytes = _check.int_arg(nbytes, "nbytes", lo=0, hi=1 << 62)
    _a.set_limit(nbytes)
