"""The MX quantizer: float32 to OCP MX blocks -- E8M0 scales and element codes, round to nearest
even -- natively (csrc/mxquant/mxquant.h): what ``lutcore.mx.mx_quantize(x, fmt, block, axis,
rounding="nearest")`` computes, bit for bit (docs/DESIGN.md, "Floating-point element formats
and MX blocks"), along the last axis (rows) or axis 0 (columns: a GEMM's right operand).

    x        float32 (..., L) / (L, ...)                        IN   (non-contiguous: copied)
    codes    uint8   (..., Lp) / (Lp, ...)   element codes      OUT  0 past L (the padding)
    scales   uint8   (..., nb) / (nb, ...)   E8M0 codes         OUT  0xFF: the block holds NaN / inf
    nb = ceil(L / block), Lp = nb * block

Per block: scale = floor(log2 max|x|) - emax + 127, clamped to [0, 254]; each element the
format's code of x / 2^(scale - 127), nearest even, saturating to +-max normal (e4m3, e5m2,
e3m2, e2m3, e2m1, int8); a block holding a NaN or an infinity has scale 0xFF and codes 0.
The same bits on every SIMD body and at any thread count (each block is computed whole by one
thread, from its own values).

Design: the room of the ``mxquant`` family.  It checks what a caller can get wrong (the format,
the block, x's dtype -- float32 only: other dtypes are converted by ``lutcore.mx``, whose
conversion is part of the contract -- and the axis) and allocates the outputs (through
lutcore's memory cache: the codes of a large operand are fresh pages otherwise); C trusts its
inputs.  ``lutcore.mx.mx_quantize`` calls it for rounding="nearest" along these axes and wraps
the arrays in an ``MX``; this room knows nothing of ``MX`` (lutcore.mx imports it, never the
reverse).  Stochastic rounding and other axes stay ``lutcore.mx``'s numpy.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd
from lutcore._alloc import reuse
from lutcore._native import mxquant as _mxq
from lutcore._threads import resolve_threads
from lutcore.units import fp as _fp

__all__ = ["mx_quantize_nearest", "native_axis"]


def native_axis(ndim: int, axis: int) -> bool:
    """Whether the native quantizer runs along ``axis`` (non-negative) of an ndim-array: the last
    axis, or axis 0."""
    return axis == ndim - 1 or axis == 0


def _fields(f: _fp.FloatFormat) -> tuple:
    """(kind, bits, mbits, bias, emax, max_code): the format as csrc/mxquant/job.h reads it."""
    return (1 if f.kind == "int" else 0, f.bits, f.mbits, f.bias, f.emax, f.max_code)


def mx_quantize_nearest(x, fmt, block: int = 32, axis: int = -1, threads: int | None = None):
    """(codes, scales) of float32 ``x`` (ndim >= 1) in MX blocks of ``block`` along ``axis``
    (the last one, or 0) in element format ``fmt`` (e4m3, e5m2, e3m2, e2m3, e2m1, int8, an alias
    or a FloatFormat), round to nearest even -- see the module's docstring for the shapes.

    ``threads``: None reads the enclosing ``lutcore._threads.scope`` (or lutcore's default)."""
    f = _fp.element_arg(fmt, "fmt", "an MX element format", "the scale format, not an element")
    block = _check.int_arg(block, "block", lo=1)
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise TypeError(f"x: expected a float32 ndarray (lutcore.mx.mx_quantize converts other dtypes), got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim == 0:
        raise ValueError("x: expected an array of at least 1 dimension (blocks run along an axis), got a 0-d array")
    axis = _check.int_arg(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    if not native_axis(x.ndim, axis):
        raise ValueError(f"axis: the native quantizer runs along the last axis or axis 0 (lutcore.mx.mx_quantize "
                         f"takes any), got {axis} of a {x.ndim}-D array")
    x = _check.contiguous(x)
    nt = resolve_threads(threads)
    L = x.shape[axis]
    nb = -(-L // block)
    cols = axis == 0 and x.ndim > 1
    rest = x.shape[1:] if cols else x.shape[:-1]
    other = int(np.prod(rest, dtype=np.int64))
    with reuse():
        codes = np.empty((nb * block,) + rest if cols else rest + (nb * block,), np.uint8)
        scales = np.empty((nb,) + rest if cols else rest + (nb,), np.uint8)
    if cols:
        _mxq.quantize_cols(codes.reshape(nb * block, other), scales.reshape(nb, other), x.reshape(L, other),
                           block, _fields(f), _simd.isa(), nt)
    else:
        _mxq.quantize_rows(codes.reshape(other, nb * block), scales.reshape(other, nb), x.reshape(other, L),
                           block, _fields(f), _simd.isa(), nt)
    return codes, scales
