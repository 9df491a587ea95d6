"""Argument validation at the Python boundary.

Every public entry point sends its array arguments through here so the native
layer only ever sees C-contiguous arrays of the dtype and rank it expects.
Errors name the argument, what was expected and what came.  Non-contiguous
inputs are copied (documented on each entry point), never refused.
"""
from __future__ import annotations

import numpy as np


def _dtype_name(x) -> str:
    return str(x.dtype) if isinstance(x, np.ndarray) else type(x).__name__


def array(x, name: str, dtype, ndim: int | tuple | None = None, *, kind: str | None = None) -> np.ndarray:
    """Return ``x`` as a C-contiguous ndarray of ``dtype``.

    ``dtype`` is the required dtype: an array of another dtype is refused
    (TypeError), except that Python scalars/lists are converted when they are
    losslessly representable.  ``kind`` ('f' for any float) relaxes that to a
    cast into ``dtype``.
    """
    dtype = np.dtype(dtype)
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float, np.generic)):
            arr = np.asarray(x)
            if arr.dtype == object:
                raise TypeError(f"{name}: expected an array of {dtype}, got {type(x).__name__}")
            if arr.dtype != dtype:
                if kind == "f" and arr.dtype.kind in "fiub":
                    arr = arr.astype(dtype)
                elif dtype.kind in "iu" and arr.dtype.kind in "iub" and arr.size and (
                        arr.min() < np.iinfo(dtype).min or arr.max() > np.iinfo(dtype).max):
                    raise ValueError(f"{name}: values outside {dtype} range")
                elif dtype.kind in "iu" and arr.dtype.kind in "iub":
                    arr = arr.astype(dtype)
                elif dtype.kind == "f" and arr.dtype.kind in "fiu":
                    arr = arr.astype(dtype)
                else:
                    raise TypeError(f"{name}: expected {dtype}, got {arr.dtype}")
            x = arr
        else:
            raise TypeError(f"{name}: expected a numpy array of {dtype}, got {type(x).__name__}")
    if x.dtype != dtype:
        if kind == "f" and x.dtype.kind == "f":
            x = x.astype(dtype)
        else:
            raise TypeError(f"{name}: expected dtype {dtype}, got {x.dtype}")
    if ndim is not None:
        nd = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim not in nd:
            want = " or ".join(f"{d}-D" for d in nd)
            raise ValueError(f"{name}: expected a {want} array, got shape {x.shape}")
    return contiguous(x)


def contiguous(x) -> np.ndarray:
    """``x`` as a plain C-contiguous ndarray (a subclass such as np.matrix or
    np.memmap is viewed as ndarray), copied only if it is not contiguous; a 0-d
    array stays 0-d (``np.ascontiguousarray`` would make it (1,))."""
    if type(x) is not np.ndarray:
        x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def int_arg(v, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """An int (numpy integers too; not bool, not a float) in [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__} {v!r}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        raise ValueError(f"{name}: expected an int {rng}, got {v}")
    return v


def bool_arg(v, name: str) -> bool:
    """A bool (numpy's np.bool_ too); not a string, not a number: ``'no'`` is not False."""
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {type(v).__name__} {v!r}")
    return bool(v)


def float_arg(v, name: str, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
              hi_open: bool = False) -> float:
    """A finite real number (int or float, numpy scalars too; not bool) within the bounds."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {type(v).__name__} {v!r}")
    v = float(v)
    bad = not np.isfinite(v)
    bad = bad or (lo is not None and (v <= lo if lo_open else v < lo))
    bad = bad or (hi is not None and (v >= hi if hi_open else v > hi))
    if bad:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi}")
        raise ValueError(f"{name}: expected a finite number{' ' + ' and '.join(parts) if parts else ''}, got {v}")
    return v


def seed_arg(v, name: str = "seed"):
    """None, or a non-negative int (what numpy's default_rng takes as a seed)."""
    return None if v is None else int_arg(v, name, lo=0)


def token_ids(ids, name: str, vocab: int, ndim: int = 1) -> np.ndarray:
    """Integer token ids in [0, vocab) as int64.  ndim 1: a (T,) sequence (a (1, T) row is
    accepted); ndim 2: (batch, T) (a 1-D sequence becomes one row).  Empty input passes —
    callers that need a token say so."""
    a = np.asarray(ids)
    if a.size == 0 and a.dtype == np.float64:
        a = a.astype(np.int64)             # [] (or [[]]): an empty list has no integer dtype of its own
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer token ids, got dtype {a.dtype}")
    if ndim == 1 and a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    elif ndim == 2 and a.ndim == 1:
        a = a[None]
    if a.ndim != ndim:
        want = "a 1-D sequence of" if ndim == 1 else "(batch, L)"
        raise ValueError(f"{name}: expected {want} token ids, got shape {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= vocab):
        raise ValueError(f"{name}: token ids must lie in [0, {vocab}), got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


def out_checked(out, name: str, shape, dtype) -> np.dtype:
    """``out`` is a writeable ndarray of exactly ``shape`` and ``dtype``."""
    dtype = np.dtype(dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(out).__name__}")
    if out.dtype != dtype or out.shape != tuple(shape):
        raise ValueError(f"{name}: expected {dtype} of shape {tuple(shape)}, got {out.dtype} of shape {out.shape}")
    if not out.flags.writeable:
        raise ValueError(f"{name}: must be writeable")
    return dtype


def out_rows(out, name: str, shape, dtype, *inputs) -> tuple[np.ndarray, int, int]:
    """Validate a caller's ``out`` for a product (2-D (M, N) or batched (B, M, N)):
    any writeable array of exactly ``shape`` and ``dtype``, as numpy's ``out=``.

    Returns ``(dst, ld, sb)``: the array the kernel writes, its row and batch
    strides in elements.  ``dst`` is ``out`` itself when the kernel can write it
    in place: unit stride along the last axis, rows (and batches) that neither
    overlap one another nor run backwards, and no memory shared with ``inputs``
    (a row-strided view such as ``big[:, j:j + N]`` qualifies).  Otherwise it is
    a new C-contiguous array, and ``out_done`` copies it into ``out``.  ``out=None``:
    a new array."""
    if out is None:
        return np.empty(shape, dtype), shape[-1], shape[-2] * shape[-1]
    dtype = out_checked(out, name, shape, dtype)
    it, st, sh = dtype.itemsize, out.strides, out.shape
    N = sh[-1]
    ok = (N <= 1 or st[-1] == it) and all(s % it == 0 for s in st)
    ld = st[-2] // it if sh[-2] > 1 else N                 # a lone row's stride is never used
    ok = ok and ld >= N
    sb = ld * sh[-2]
    if ok and len(sh) == 3:
        sb = st[0] // it if sh[0] > 1 else sb
        ok = sb >= ld * (sh[-2] - 1) + N
    if ok and out.size and any(isinstance(x, np.ndarray) and np.may_share_memory(out, x) for x in inputs):
        ok = False
    if ok:
        return out, ld, sb
    dst = np.empty(shape, dtype)
    return dst, N, sh[-2] * N


def out_flat(out, name: str, shape, dtype, *inputs, same_ok: bool = True) -> np.ndarray:
    """Validate a caller's ``out`` for an element-by-element kernel (which walks flat
    C-contiguous buffers, split between threads): any writeable array of exactly
    ``shape`` and ``dtype``.  Returns the array the kernel writes: ``out`` itself when
    it is C-contiguous and, for each input, shares no memory with it or (``same_ok``)
    is the very same elements (``out=x``, in place); else (and for ``out=None``) a
    new array that ``out_done`` copies into ``out``."""
    if out is None:
        return np.empty(shape, dtype)
    dtype = out_checked(out, name, shape, dtype)

    def apart_or_same(x):
        if not isinstance(x, np.ndarray) or not out.size or not np.may_share_memory(out, x):
            return True
        return (same_ok and x.dtype.itemsize == dtype.itemsize and x.flags.c_contiguous
                and x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
                and x.size == out.size)

    if type(out) is np.ndarray and out.flags.c_contiguous and all(apart_or_same(x) for x in inputs):
        return out                         # (a subclass such as np.matrix cannot be flattened: stand-in)
    return np.empty(shape, dtype)


def out_done(out, dst: np.ndarray) -> np.ndarray:
    """Finish an ``out_rows`` / ``out_flat`` call: when the kernel wrote a stand-in,
    copy it into ``out``.  Returns what the caller returns."""
    if out is None or dst is out:
        return dst
    np.copyto(out, dst)
    return out
