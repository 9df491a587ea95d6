"""Requantizer, ReLU table and fp16 rounding over whole arrays; the embedding's
gradient scatter (csrc/elementwise/).

Each of the first takes any shape, returns the same shape, accepts ``out=`` (any writeable
array of that shape and dtype; a C-contiguous one, or the input itself, is written
in place) so hot loops reuse memory, and copies non-contiguous inputs.
fp16 functions take float32 only: converting float64 first would round twice.
``threads``: None reads the enclosing ``lutcore._threads.scope`` (or lutcore's default).
"""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd
from lutcore._native import elementwise as _e
from lutcore._threads import resolve_threads
from lutcore.units import Units, resolve as _resolve_units

__all__ = ["requant", "relu8", "fp16_round", "fp16_encode", "fp16_decode", "scatter_add_rows"]

_MODES = {"nearest": 0, "truncate": 1}


def _mode(mode) -> int:
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"mode: expected 'nearest' or 'truncate', got {mode!r}")
    return _MODES[mode]


def _arr(x, name, dtype):
    if isinstance(x, np.ndarray) and x.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {np.dtype(dtype)}, got {x.dtype}")
    return _check.array(x, name, dtype)


def requant(acc, shift: int, units: Units | None = None, threads: int | None = None, out=None):
    """int32 accumulators -> int8 through the requantizer table.

    ``t = (acc + (1 << (shift-1))) >> shift`` (arithmetic; ``shift=0``: t = acc),
    saturated to int16, then ``requant_lut[t & 0xffff]``.  ``shift`` in [0, 31].
    """
    units = units if isinstance(units, Units) else _resolve_units(units)
    acc = _arr(acc, "acc", np.int32)
    shift = _check.int_arg(shift, "shift", lo=0, hi=31)
    o = _check.out_flat(out, "out", acc.shape, np.int8, acc)
    is_clamp, lo, hi = units._requant_clamp
    _e.requant(o.reshape(-1), acc.reshape(-1), int(shift), units.requant_lut, lo, hi, is_clamp,
               _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def relu8(x, units: Units | None = None, threads: int | None = None, out=None):
    """int8 -> int8 through the ReLU table: ``relu_lut[x & 0xff]``."""
    units = units if isinstance(units, Units) else _resolve_units(units)
    x = _arr(x, "x", np.int8)
    o = _check.out_flat(out, "out", x.shape, np.int8, x)
    _e.relu8(o.reshape(-1), x.reshape(-1), units.relu_lut, _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def fp16_encode(x, mode: str = "nearest", threads: int | None = None, out=None):
    """float32 -> IEEE binary16 bits (uint16).  'nearest' equals ``x.astype(np.float16)``
    bit for bit; 'truncate' rounds toward zero (finite overflow -> 65504)."""
    m = _mode(mode)
    x = _arr(x, "x", np.float32)
    o = _check.out_flat(out, "out", x.shape, np.uint16, x)
    _e.fp16_encode(o.reshape(-1), x.reshape(-1), m, _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def fp16_decode(bits, threads: int | None = None, out=None):
    """IEEE binary16 bits (uint16, or a float16 array) -> float32, subnormals included."""
    if isinstance(bits, np.ndarray) and bits.dtype == np.float16:
        bits = bits.view(np.uint16)
    h = _arr(bits, "bits", np.uint16)
    o = _check.out_flat(out, "out", h.shape, np.float32, h)
    _e.fp16_decode(o.reshape(-1), h.reshape(-1), _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def fp16_round(x, mode: str = "nearest", threads: int | None = None, out=None):
    """float32 -> float32 holding what fp16 storage keeps (``decode(encode(x))``).
    ``out`` may be ``x`` itself (in place)."""
    m = _mode(mode)
    x = _arr(x, "x", np.float32)
    o = _check.out_flat(out, "out", x.shape, np.float32, x)
    _e.fp16_round(o.reshape(-1), x.reshape(-1), m, _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def scatter_add_rows(grad, ids, dy, threads=None):
    """``grad[ids[t]] += dy[t]`` for every t in order — ``np.add.at(grad, ids, dy)``'s result bit
    for bit — in place on a writeable C-contiguous float32 ``grad`` (V, C); ``ids`` (n,) integers
    in [0, V), ``dy`` (n, C) float32.  The columns are split between threads.  Returns grad."""
    if not (isinstance(grad, np.ndarray) and grad.dtype == np.float32 and grad.ndim == 2
            and grad.flags.c_contiguous and grad.flags.writeable):
        raise ValueError(f"grad: expected a writeable C-contiguous float32 (V, C) array, got "
                         f"{getattr(grad, 'dtype', type(grad).__name__)} {getattr(grad, 'shape', '')}")
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"ids: expected integers, got {ids.dtype}")
    ids = np.ascontiguousarray(ids.reshape(-1), np.int64)
    dy = np.asarray(dy)
    if dy.dtype != np.float32:
        raise TypeError(f"dy: expected float32, got {dy.dtype}")
    _e.scatter_add_rows(grad, ids, np.ascontiguousarray(dy.reshape(ids.size, grad.shape[1])),
                        resolve_threads(threads))
    return grad
