"""Row kernels: RMSNorm and LayerNorm over the last axis, causal (and sliding-window)
softmax rows — forward and backward (csrc/norm/norm.h, csrc/softmax/softmax.h).

Design: the room of the ``norm`` and ``softmax`` families.  float32 runs natively (every row
an in-order chain owned by one thread: the same bits at any thread count and on every SIMD
path); float64 (the models' gradient-check reference) runs the numpy formulas here.  Each
function takes numpy arrays and ``threads`` (None: the enclosing ``lutcore._threads.scope``
or lutcore's default), reads the SIMD path itself and allocates what it returns.  The norm
backwards ACCUMULATE into the given ``dw`` / ``db`` (the caller zeroes), as the models'
layer math does.  The native wrappers check every buffer's dtype, layout and shape; here the
arrays are made contiguous and the outputs allocated, so a caller cannot hand C a bad one.
The private fast functions ``_rmsnorm_rows``, ``_layernorm_rows`` and ``_softmax_causal``
are the native calls alone, on a thread count already resolved: for the per-token paths
whose caller owns every buffer (the pipeline stage's rows, this package's attention), which
would otherwise pay the checks on every layer of every token; a wrong buffer there is still
a ValueError of the native wrapper, never a bad read.

    x, y, dy, dx, xhat   (..., C)     float32 | float64
    w, b, dw, db         (C,)
    rstd                 (..., 1)     (a norm's forward returns it for the backward)
    s, ds, att           (KV, R, S)   scores: row r of head group k is the query at position
                                      pos + r % T, keys 0..S-1 (masked past it / outside the window)
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._native import norm as _n, softmax as _s
from lutcore._threads import resolve_threads

__all__ = ["rmsnorm", "rmsnorm_backward", "layernorm", "layernorm_backward", "softmax_causal",
           "softmax_causal_backward"]

_F32 = np.dtype(np.float32)


def _f32(*arrays) -> bool:
    for a in arrays:
        if a.dtype != _F32:
            return False
    return True


def _rows_out(out, shape, name="out"):
    """``out`` as the kernel writes it: a C-contiguous writeable float32 array of ``shape``."""
    if out is None:
        return np.empty(shape, np.float32)
    if not (isinstance(out, np.ndarray) and out.dtype == _F32 and out.shape == shape and out.flags.c_contiguous
            and out.flags.writeable):
        got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"{name}: expected a writeable C-contiguous float32 array of shape {shape}, got {got}")
    return out


def rmsnorm(x, w, eps, threads=None, out=None, keep_rstd=True):
    """y = x * rstd * w over the last axis, rstd = 1/sqrt(mean(x^2) + eps); returns
    ``(y, rstd (..., 1))`` (rstd None with ``keep_rstd=False``).  float32: native rows
    (in-order sums, parallel over rows; ``out`` (x's shape) receives y); float64: numpy."""
    if _f32(x, w):
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        y = _rows_out(out, x.shape).reshape(x2.shape)
        rstd = np.empty(x2.shape[0], np.float32) if keep_rstd else None
        _n.rmsnorm_rows(y, x2, np.ascontiguousarray(w), float(eps), rstd, _simd.isa(), resolve_threads(threads))
        return y.reshape(x.shape), (rstd.reshape(*x.shape[:-1], 1) if keep_rstd else None)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(ms + x.dtype.type(eps))
    y = x * rstd * w
    if out is not None:
        out[...] = y
        y = out
    return y, (rstd if keep_rstd else None)


def rmsnorm_backward(dy, x, w, rstd, dw, threads=None):
    """dx of ``rmsnorm`` given dL/dy and the forward's rstd; ``dw`` += the weight's gradient."""
    if _f32(dy, x, w, rstd, dw) and dw.flags.c_contiguous:
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        dx = np.empty(x2.shape, np.float32)
        _n.rmsnorm_rows_backward(dx, dw, np.ascontiguousarray(dy).reshape(-1, C), x2, np.ascontiguousarray(w),
                                 np.ascontiguousarray(rstd).reshape(-1), _simd.isa(), resolve_threads(threads))
        return dx.reshape(x.shape)
    g = dy * w
    dw += (dy * x * rstd).reshape(-1, x.shape[-1]).sum(axis=0)
    d = x.shape[-1]
    dot = np.sum(g * x, axis=-1, keepdims=True)
    return rstd * g - x * (rstd ** 3) * dot / x.dtype.type(d)


def layernorm(x, w, b, eps, threads=None, out=None, xhat=None):
    """LayerNorm over the last axis; returns ``(y, (xhat, rstd))`` (what the backward takes).
    float32: native rows (``out`` / ``xhat``, of x's shape, receive y / xhat); float64: numpy."""
    if _f32(x, w, b):
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        y = _rows_out(out, x.shape).reshape(x2.shape)
        xh = _rows_out(xhat, x.shape, "xhat").reshape(x2.shape)
        rstd = np.empty(x2.shape[0], np.float32)
        _n.layernorm_rows(y, xh, rstd, x2, np.ascontiguousarray(w), np.ascontiguousarray(b), float(eps),
                          _simd.isa(), resolve_threads(threads))
        return y.reshape(x.shape), (xh.reshape(x.shape), rstd.reshape(*x.shape[:-1], 1))
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    xh = xc * rstd
    y = xh * w + b
    if out is not None:
        out[...] = y
        y = out
    return y, (xh, rstd)


def layernorm_backward(dy, w, cache, dw, db, threads=None):
    """dx of ``layernorm`` given dL/dy and its ``(xhat, rstd)``; ``dw``, ``db`` += their gradients."""
    xhat, rstd = cache
    if _f32(dy, w, xhat, rstd, dw, db) and dw.flags.c_contiguous and db.flags.c_contiguous:
        C = xhat.shape[-1]
        dx = np.empty((xhat.size // max(C, 1), C), np.float32)
        _n.layernorm_rows_backward(dx, dw, db, np.ascontiguousarray(dy).reshape(-1, C),
                                   np.ascontiguousarray(xhat).reshape(-1, C), np.ascontiguousarray(w),
                                   np.ascontiguousarray(rstd).reshape(-1), _simd.isa(), resolve_threads(threads))
        return dx.reshape(xhat.shape)
    dw += (dy * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    db += dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    g = dy * w
    n = xhat.shape[-1]
    return rstd * (g - np.mean(g, axis=-1, keepdims=True) - xhat * np.mean(g * xhat, axis=-1, keepdims=True)) \
        if n else g


def _rmsnorm_rows(out, x, w, eps, rstd, nt) -> None:
    """out (R, C) = RMSNorm of x (R, C) float32 C-contiguous rows with w (C,), rstd (R,) or None:
    the native call unchecked, on ``nt`` threads (a number)."""
    _n.rmsnorm_rows(out, x, w, eps, rstd, _simd.isa(), nt)


def _layernorm_rows(out, xhat, rstd, x, w, b, eps, nt) -> None:
    """out, xhat (R, C), rstd (R,) = LayerNorm of x (R, C) float32 C-contiguous rows: the native
    call unchecked, on ``nt`` threads (a number)."""
    _n.layernorm_rows(out, xhat, rstd, x, w, b, eps, _simd.isa(), nt)


def _softmax_causal(s, T, pos, window, nt) -> None:
    """``softmax_causal`` on a C-contiguous float32 (KV, R, S) ``s``, unchecked, on ``nt`` threads."""
    _s.softmax_causal(s, T, pos, window, _simd.isa(), nt)


def _scores(s, name):
    if not (isinstance(s, np.ndarray) and s.dtype == _F32 and s.ndim == 3 and s.flags.c_contiguous
            and s.flags.writeable):
        got = f"{s.dtype} {s.shape}" if isinstance(s, np.ndarray) else type(s).__name__
        raise ValueError(f"{name}: expected a writeable C-contiguous float32 (KV, R, S) array, got {got}")
    return s


def softmax_causal(s, T, pos=0, window=0, threads=None):
    """In place on float32 scores ``s`` (KV, R, S): row r's query sits at position pos + r % T;
    keys past it (and, with ``window`` > 0, ``window`` or more positions behind it) are masked;
    then minus the row max, lutcore's exp, over the in-order row sum.  Returns s."""
    _s.softmax_causal(_scores(s, "s"), int(T), int(pos), int(window), _simd.isa(), resolve_threads(threads))
    return s


def softmax_causal_backward(ds, att, T, pos=0, scale=1.0, threads=None):
    """In place on ``ds`` = dL/d(att) (KV, R, S), given ``softmax_causal``'s output ``att`` (same
    shape, rows laid out alike): the scores' gradient ((ds - <ds, att>_row) * att) * scale, zero
    past each query's position.  Returns ds."""
    _s.softmax_causal_backward(_scores(ds, "ds"), att, int(T), int(pos), float(scale), resolve_threads(threads))
    return ds
