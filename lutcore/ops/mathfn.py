"""Vectorised exp / exp2 / softplus / silu / sigmoid (float32: lutcore's own polynomial,
the same bits on every SIMD path; float64: libm).  Error budgets are measured
in tests/ops/test_mathfns.py."""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd
from lutcore._native import mathfn as _m
from lutcore._threads import resolve_threads

__all__ = ["exp", "exp2", "softplus", "silu", "silu_backward", "sigmoid", "gelu_tanh", "gelu_tanh_backward"]


def _float_array(x, name):
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64, got {x.dtype}")
    return _check.contiguous(x)


def _apply(x, fn: int, name: str, threads, out):
    x = _float_array(x, "x")
    o = _check.out_flat(out, "out", x.shape, x.dtype, x)
    _m.mathfn(o, x, fn, _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def exp(x, threads=None, out=None):
    return _apply(x, 0, "exp", threads, out)


def exp2(x, threads=None, out=None):
    """2^x.  float32: the scan's decay factors use it (exp(dt A) = 2^(dt (A log2 e)))."""
    return _apply(x, 4, "exp2", threads, out)


def softplus(x, threads=None, out=None):
    """log(1 + exp(x)), and x itself for x > 20 (torch's threshold)."""
    return _apply(x, 1, "softplus", threads, out)


def silu(x, threads=None, out=None):
    return _apply(x, 2, "silu", threads, out)


def silu_backward(dy, x, dy2=None, threads=None, out=None):
    """dL/dx of ``silu(x)`` given dL/dy (plus a second gradient ``dy2`` of the same
    output, summed first): ``(dy + dy2) * s * (1 + x * (1 - s))``, s = sigmoid(x).
    float32: one native pass with the rounding of that numpy sequence; float64: numpy."""
    x = _float_array(x, "x")
    grads = [("dy", dy)] + ([("dy2", dy2)] if dy2 is not None else [])
    arrs = []
    for name, g in grads:
        g = np.asarray(g)
        if g.shape != x.shape or g.dtype != x.dtype:
            raise ValueError(f"{name}: expected {x.dtype} {x.shape} like x, got {g.dtype} {g.shape}")
        arrs.append(_check.contiguous(g))
    o = _check.out_flat(out, "out", x.shape, x.dtype, x, *arrs)
    if x.dtype == np.float64:
        g = arrs[0] + arrs[1] if len(arrs) > 1 else arrs[0]
        s = sigmoid(x)
        o[...] = (1 - s) * x
        o += 1
        o *= s
        o *= g
        return _check.out_done(out, o)
    _m.silu_bwd(o, arrs[0], arrs[1] if len(arrs) > 1 else None, x, _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, o)


def sigmoid(x, threads=None, out=None):
    return _apply(x, 3, "sigmoid", threads, out)


_GELU_C = 0.7978845608028654      # sqrt(2 / pi)
_GELU_A = 0.044715


def gelu_tanh(u, threads=None):
    """GELU, tanh form (GPT-2, torch ``approximate="tanh"``): returns ``(y, t)`` with
    ``t = tanh(c (u + a u^3))`` (kept for the backward) and ``y = 0.5 u (1 + t)``.
    float32: one native pass (tanh as 1 - 2/(exp(2z) + 1), within a few ulp of 1 —
    what ``1 + t`` needs); float64: numpy."""
    u = _float_array(u, "u")
    if u.dtype == np.float64:
        c, a = np.float64(_GELU_C), np.float64(_GELU_A)
        t = np.tanh(c * (u + a * u * u * u))
        return 0.5 * u * (1 + t), t
    y, t = np.empty_like(u), np.empty_like(u)
    _m.gelu(y, t, u, _simd.isa(), resolve_threads(threads))
    return y, t


def gelu_tanh_backward(dy, u, t, threads=None):
    """dL/du of ``gelu_tanh`` given dL/dy, its input u and its saved t."""
    u = _float_array(u, "u")
    dy = _float_array(dy, "dy")
    t = _float_array(t, "t")
    for name, x in (("dy", dy), ("t", t)):
        if x.shape != u.shape or x.dtype != u.dtype:
            raise ValueError(f"{name}: expected {u.dtype} {u.shape} like u, got {x.dtype} {x.shape}")
    if u.dtype == np.float64:
        c, a = np.float64(_GELU_C), np.float64(_GELU_A)
        return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * c * (1 + 3 * a * u * u))
    dx = np.empty_like(u)
    _m.gelu_bwd(dx, dy, u, t, _simd.isa(), resolve_threads(threads))
    return dx
