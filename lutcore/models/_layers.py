"""Layer math shared by the models: each a forward that returns what its
backward needs, and a backward that ACCUMULATES parameter gradients into the
given arrays (the caller zeroes) — llm.c's convention, in numpy.

Shapes: x (..., C_in); w (C_out, C_in) as PyTorch/Hugging Face store it.
Matmuls run in the model's dtype through ``lutcore.ops.matmul`` (float32:
lutcore's own GEMM, the same bits at any thread count — BLAS's rounding
depends on its thread count; float64: numpy), or — when the model is given
``units`` — through lutcore's block-scaled int8 matmul (see
``lutcore.models.unitmm``).
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore.kernels import norm as _rows
from lutcore.kernels import elementwise as _ew
from lutcore._threads import resolve_threads
from lutcore.ops.matmul import matmul


def embedding_bwd(grad, ids, dy):
    """grad[ids[t]] += dy[t] for every token t, in token order (np.add.at's result, bit for
    bit); float32 natively with the columns split between threads."""
    ids = ids.reshape(-1)
    dy = dy.reshape(ids.size, grad.shape[1])
    if grad.dtype == np.float32 and dy.dtype == np.float32 and grad.flags.c_contiguous:
        _ew.scatter_add_rows(grad, np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(dy),
                             resolve_threads(None))
    else:
        np.add.at(grad, ids, dy)


def linear_fwd(x, w, b=None, mm=None):
    """y = x @ w.T + b over the last axis."""
    x2 = x.reshape(-1, x.shape[-1])
    y = matmul(x2, w.T) if mm is None else mm.forward(x2, w)
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[0])


def linear_bwd(dy, x, w, dw, db=None, mm=None, need_dx=True):
    """Accumulate dw (+= dy^T x) and db; return dx = dy @ w (or None)."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    if mm is None:
        matmul(dy2.T, x2, out=dw, accumulate=True)
        dx = matmul(dy2, w) if need_dx else None
    else:
        gw, dx = mm.backward(dy2, x2, w, need_dx)
        dw += gw
    if db is not None:
        db += dy2.sum(axis=0)
    return None if dx is None else dx.reshape(*dy.shape[:-1], w.shape[1])


def _f32_rows(*arrays):
    return all(a.dtype == np.float32 for a in arrays)


def rmsnorm_fwd(x, w, eps):
    """y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps); returns (y, rstd).  float32: native
    rows (csrc/norm/norm.h: in-order sums, parallel over rows); float64: numpy."""
    if _f32_rows(x, w):
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        y = np.empty(x2.shape, np.float32)
        rstd = np.empty(x2.shape[0], np.float32)
        _rows.rmsnorm_rows(y, x2, np.ascontiguousarray(w), float(eps), rstd, _simd.isa(), resolve_threads(None))
        return y.reshape(x.shape), rstd.reshape(*x.shape[:-1], 1)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(ms + x.dtype.type(eps))
    return x * rstd * w, rstd


def rmsnorm_bwd(dy, x, w, rstd, dw):
    if _f32_rows(dy, x, w, rstd, dw) and dw.flags.c_contiguous:
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        dx = np.empty(x2.shape, np.float32)
        _rows.rmsnorm_rows_backward(dx, dw, np.ascontiguousarray(dy).reshape(-1, C), x2, np.ascontiguousarray(w),
                                    np.ascontiguousarray(rstd).reshape(-1), _simd.isa(), resolve_threads(None))
        return dx.reshape(x.shape)
    g = dy * w
    dw += (dy * x * rstd).reshape(-1, x.shape[-1]).sum(axis=0)
    d = x.shape[-1]
    dot = np.sum(g * x, axis=-1, keepdims=True)
    return rstd * g - x * (rstd ** 3) * dot / x.dtype.type(d)


def layernorm_fwd(x, w, b, eps):
    """LayerNorm over the last axis; returns (y, (xhat, rstd)).  float32: native rows
    (csrc/norm/norm.h); float64: numpy."""
    if _f32_rows(x, w, b):
        C = x.shape[-1]
        x2 = np.ascontiguousarray(x).reshape(-1, C)
        y, xhat = np.empty(x2.shape, np.float32), np.empty(x2.shape, np.float32)
        rstd = np.empty(x2.shape[0], np.float32)
        _rows.layernorm_rows(y, xhat, rstd, x2, np.ascontiguousarray(w), np.ascontiguousarray(b), float(eps),
                             _simd.isa(), resolve_threads(None))
        return y.reshape(x.shape), (xhat.reshape(x.shape), rstd.reshape(*x.shape[:-1], 1))
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    xhat = xc * rstd
    return xhat * w + b, (xhat, rstd)


def layernorm_bwd(dy, w, cache, dw, db):
    xhat, rstd = cache
    if _f32_rows(dy, w, xhat, rstd, dw, db) and dw.flags.c_contiguous and db.flags.c_contiguous:
        C = xhat.shape[-1]
        dx = np.empty((xhat.size // max(C, 1), C), np.float32)
        _rows.layernorm_rows_backward(dx, dw, db, np.ascontiguousarray(dy).reshape(-1, C),
                                      np.ascontiguousarray(xhat).reshape(-1, C), np.ascontiguousarray(w),
                                      np.ascontiguousarray(rstd).reshape(-1), _simd.isa(), resolve_threads(None))
        return dx.reshape(xhat.shape)
    dw += (dy * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    db += dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    g = dy * w
    n = xhat.shape[-1]
    return rstd * (g - np.mean(g, axis=-1, keepdims=True) - xhat * np.mean(g * xhat, axis=-1, keepdims=True)) \
        if n else g


def cross_entropy(logits, targets):
    """Mean cross-entropy over all positions; returns (loss, dlogits)."""
    V = logits.shape[-1]
    lg = logits.reshape(-1, V)
    t = targets.reshape(-1)
    m = lg.max(axis=1, keepdims=True)
    e = np.exp(lg - m)
    s = e.sum(axis=1, keepdims=True)
    logp_t = (lg[np.arange(lg.shape[0]), t] - m[:, 0]) - np.log(s[:, 0])
    n = lg.shape[0]
    loss = float(-np.mean(logp_t, dtype=np.float64))
    p = e / s
    p[np.arange(n), t] -= 1
    p /= n
    return loss, p.reshape(logits.shape)


def bmm(a, b, tri=None):
    """Batched matmul over the leading axes: (..., M, K) @ (..., K, N), deterministic;
    ``tri`` declares causal zeros (lutcore.ops.matmul)."""
    lead = a.shape[:-2]
    a3 = a.reshape(-1, *a.shape[-2:])
    b3 = b.reshape(-1, *b.shape[-2:])
    return matmul(a3, b3, tri=tri).reshape(*lead, a.shape[-2], b.shape[-1])
