"""Causal softmax attention, forward and backward, and the decode attention products.

Design: the room of the ``attn`` family and of attention built from the others.
``causal_attention`` / ``causal_attention_backward`` are one head-batched attention
(GPT): the products through ``lutcore.ops.matmul`` (the causal zeros declared, so not
computed: ``tri``), the softmax rows through ``lutcore.ops.rows`` in float32 (one parallel
pass of in-order rows); float64 (the gradient-check reference) computes everything in numpy.
``scores`` / ``values`` are the decode layer's products (csrc/attn/attn.h: one query row
against the KV cache, the sgemm's bits), serial.  ``threads``: None reads the enclosing
``lutcore._threads.scope`` (or lutcore's default).

    q, k, v, y, dq, dk, dv   (B, H, L, hd)
    att                      (B, H, L, L)   row-stochastic, zero above the diagonal
    scores: q (R, hd), K (S, hd) -> (R, S);   values: p (R, S), V (S, hd) -> (R, hd)
"""
from __future__ import annotations

import math

import numpy as np

from lutcore import _simd
from lutcore._native import attn as _a
from lutcore._threads import resolve_threads
from lutcore.ops import rows as _rows
from lutcore.ops.matmul import matmul

__all__ = ["causal_attention", "causal_attention_backward", "scores", "values"]


def _bmm(a, b, tri=None, threads=None):
    """(..., M, K) @ (..., K, N) over the leading axes (lutcore.ops.matmul, deterministic)."""
    lead = a.shape[:-2]
    c = matmul(a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:]), tri=tri, threads=threads)
    return c.reshape(*lead, a.shape[-2], b.shape[-1])


def _native_rows(s):
    """float32 scores take the native softmax rows; float64 (the gradient-check reference)
    keeps numpy's."""
    return s.dtype == np.float32 and s.flags.c_contiguous


def causal_attention(q, k, v, threads=None):
    """Causal softmax attention per (batch, head): returns ``(y, att)``, att saved for the backward.

    q, k, v  (B, H, L, hd)  IN
    y        (B, H, L, hd)  OUT
    att      (B, H, L, L)   OUT  row-stochastic, zero above the diagonal
    """
    L, hd = q.shape[-2], q.shape[-1]
    scale = q.dtype.type(1.0 / math.sqrt(hd))
    # causal zeros are not computed: scores above the diagonal are masked anyway, and
    # att is zero there (lutcore.ops.matmul's tri; float64 computes everything)
    s = _bmm(q, k.swapaxes(-1, -2), "out_lower", threads)                 # (B, H, L, L)
    s *= scale
    if _native_rows(s):
        # mask, minus the row max, lutcore's exp, over the in-order row sum: one parallel
        # pass (csrc/softmax/softmax.h; the same bits on every SIMD path and thread count)
        _rows._softmax_causal(s.reshape(-1, L, L), L, 0, 0, resolve_threads(threads))   # s: checked just above
        return _bmm(s, v, "a_lower", threads), s
    future = np.triu(np.ones((L, L), dtype=bool), 1)
    np.copyto(s, s.dtype.type(-np.inf), where=future)                     # broadcast over (B, H)
    s -= s.max(axis=-1, keepdims=True)                                    # the diagonal is always finite
    att = np.exp(s, out=s)
    att /= att.sum(axis=-1, keepdims=True)
    return _bmm(att, v, threads=threads), att                             # (B, H, L, hd)


def causal_attention_backward(dy, q, k, v, att, threads=None):
    """dy (B, H, L, hd) and the forward's q, k, v, att -> (dq, dk, dv), each (B, H, L, hd)."""
    scale = q.dtype.type(1.0 / math.sqrt(q.shape[-1]))
    dv = _bmm(att.swapaxes(-1, -2), dy, "a_upper", threads)                # (B, H, L, hd)
    # softmax backward, in place: ds = att * (datt - <datt, att>_row) * scale; masked entries have att = 0
    ds = _bmm(dy, v.swapaxes(-1, -2), "out_lower", threads)                # datt (B, H, L, L), on/below the diagonal
    if _native_rows(ds) and att.dtype == np.float32 and att.flags.c_contiguous:
        L = ds.shape[-1]
        _rows.softmax_causal_backward(ds.reshape(-1, L, L), att.reshape(-1, L, L), L, 0, float(scale), threads)
    else:
        ds -= np.sum(ds * att, axis=-1, keepdims=True)
        ds *= att
        ds *= scale
    dq = _bmm(ds, k, "a_lower", threads)                                   # (B, H, L, hd); ds: 0 above the diagonal
    dk = _bmm(ds.swapaxes(-1, -2), q, "a_upper", threads)                  # (B, H, L, hd)
    return dq, dk, dv


def _rows2(x, name):
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim != 2:
        raise TypeError(f"{name}: expected a 2-D float32 array, got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x)


def scores(q, K):
    """(R, S) float32 = q (R, hd) @ K (S, hd)^T through the decode layer's products (serial)."""
    return _a.attn_scores(_rows2(q, "q"), _rows2(K, "K"), _simd.isa())


def values(p, V):
    """(R, hd) float32 = p (R, S) @ V (S, hd) through the decode layer's products (serial)."""
    return _a.attn_values(_rows2(p, "p"), _rows2(V, "V"), _simd.isa())
