"""Vectorised exp / softplus / silu / sigmoid (float32: lutcore's own polynomial,
the same bits on every SIMD path; float64: libm).  Error budgets are measured
in tests/test_mathfns.py."""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._native import mamba as _m
from lutcore._threads import resolve_threads

__all__ = ["exp", "softplus", "silu", "sigmoid"]


def _apply(x, fn: int, name: str, threads, out):
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x: expected float32 or float64, got {x.dtype}")
    x = np.ascontiguousarray(x)
    if out is None:
        out = np.empty_like(x)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a C-contiguous {x.dtype} array of shape {x.shape}")
    _m.mathfn(out, x, fn, _simd.isa(), resolve_threads(threads))
    return out


def exp(x, threads=None, out=None):
    return _apply(x, 0, "exp", threads, out)


def softplus(x, threads=None, out=None):
    """log(1 + exp(x)), and x itself for x > 20 (torch's threshold)."""
    return _apply(x, 1, "softplus", threads, out)


def silu(x, threads=None, out=None):
    return _apply(x, 2, "silu", threads, out)


def sigmoid(x, threads=None, out=None):
    return _apply(x, 3, "sigmoid", threads, out)
