"""Layer math shared by the models: each a forward that returns what its
backward needs, and a backward that ACCUMULATES parameter gradients into the
given arrays (the caller zeroes) — llm.c's convention, in numpy.

Shapes: x (..., C_in); w (C_out, C_in) as PyTorch/Hugging Face store it.
Matmuls run in the model's dtype through ``lutcore.ops.matmul`` (float32:
lutcore's own GEMM, the same bits at any thread count — BLAS's rounding
depends on its thread count; float64: numpy), or — when the model is given
``units`` — through lutcore's block-scaled int8 matmul (see
``lutcore.models.unitmm``).  The norms are ``lutcore.ops.rows``' (float32 natively, float64
in numpy), here under the models' names (``rmsnorm_fwd`` / ``rmsnorm_bwd``, ``layernorm_fwd`` /
``layernorm_bwd``); every kernel reads the thread count of the model's scope.
"""
from __future__ import annotations

import numpy as np

from lutcore.ops import elementwise as _ew
from lutcore.ops.matmul import matmul
from lutcore.ops.rows import layernorm as layernorm_fwd, layernorm_backward as layernorm_bwd   # noqa: F401
from lutcore.ops.rows import rmsnorm as rmsnorm_fwd, rmsnorm_backward as rmsnorm_bwd           # noqa: F401


def embedding_bwd(grad, ids, dy):
    """grad[ids[t]] += dy[t] for every token t, in token order (np.add.at's result, bit for
    bit); float32 natively with the columns split between threads."""
    ids = ids.reshape(-1)
    dy = dy.reshape(ids.size, grad.shape[1])
    if grad.dtype == np.float32 and dy.dtype == np.float32 and grad.flags.c_contiguous:
        _ew.scatter_add_rows(grad, ids, dy)
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

