"""Matmuls through the units, with straight-through estimators.

Forward: ``y = x @ w.T`` runs as a block-scaled int8 matmul through the
unit's multiplier table (``lutcore.qmatmul``; x quantized per row along K,
w per output row along K — the same blocks).  Backward: by default the
straight-through estimator passes the float gradient through the
quantization (dX = dY w, dW = dY^T x in float); with ``unit_backward=True``
both backward matmuls run through the units too, each quantized along its own
reduction axis.  ``two_pass=True`` adds a second block-scaled pass for the
quantization residual of the gradient operand, extending its dynamic range.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check
from lutcore.quant import Q8, qmatmul, quantize
from lutcore.units import resolve

__all__ = ["UnitMatmul"]


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def _as_b(w: np.ndarray, block: int) -> Q8:
    """w (N, K) -> the Q8 right operand (K, N) of x @ w.T, blocks along K."""
    qw = quantize(_f32(w), block, axis=-1)
    return Q8._made(np.ascontiguousarray(qw.q.T), np.ascontiguousarray(qw.scale.T), block, 0, (w.shape[1], w.shape[0]))


class UnitMatmul:
    def __init__(self, units, unit_backward: bool = False, block: int = 32, two_pass: bool = False):
        self.units = resolve(units)
        self.unit_backward = _check.bool_arg(unit_backward, "unit_backward")
        self.block = int(block)
        self.two_pass = _check.bool_arg(two_pass, "two_pass")

    def _mm(self, a, b):
        """a (M, K) float @ b (K, N) float through the units, each operand
        quantized once along K (the residual pass reuses both).  A transposed view
        (dY^T) is quantized as it lies (``qmatmul`` / ``quantize``)."""
        a, b = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)
        qb = quantize(b, self.block, axis=0)
        if not self.two_pass:
            return qmatmul(a, qb, self.units, self.block)
        qa = quantize(a, self.block)
        y = qmatmul(qa, qb, self.units, self.block)
        y += qmatmul(a - qa.dequantize(), qb, self.units, self.block)
        return y

    def forward(self, x2, w):
        y = qmatmul(_f32(x2), _as_b(w, self.block), self.units, self.block)
        return y.astype(x2.dtype, copy=False)

    def backward(self, dy2, x2, w, need_dx=True):
        if not self.unit_backward:
            from lutcore.ops.matmul import matmul
            gw = matmul(dy2.T, x2)
            dx = matmul(dy2, w) if need_dx else None
            return gw, dx
        gw = self._mm(dy2.T, x2).astype(x2.dtype, copy=False)          # (N, M) @ (M, K)
        dx = self._mm(dy2, w).astype(x2.dtype, copy=False) if need_dx else None   # (M, N) @ (N, K)
        return gw, dx
