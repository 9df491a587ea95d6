"""Matmuls through MX units (``lutcore.units.mxunits.MXUnits``) -- the models' counterpart of
``UnitMatmul`` for block-scaled floating-point products, with the same interface.

Forward: ``y = x @ w.T`` is ``units.matmul(x, w.T)``: x quantized per row in blocks of K in the
first element format, w per output row in blocks of K in the second (OCP MX v1.0, nearest even),
the products through the unit's table and the sums in its declared accumulator.  Backward:

* ``unit_backward=False``: the straight-through estimator, dX = dY w and dW = dY^T x in float;
* ``True``: both backward matmuls through the units, each operand quantized along its own
  reduction axis -- dX = units.matmul(dY, w) (dY in the first format, in blocks along the
  outputs), dW = units.matmul(dY^T, x) (blocks along the rows);
* ``"table"``: through the unit's gradient tables (``MXUnits.gradients``), the quantization
  passed straight through, with sa / sb the blocks' power-of-two scales of the forward:
      dX[m, k] = sum_n dY[m, n] sb[b(k), n] Ga[ca[m, k], cb[k, n]]
      dW[n, k] = sum_m dY[m, n] sa[m, b(k)] Gb[ca[m, k], cb[k, n]]
  per block of K, through ``lutcore.ops.gradtables.table_pass`` (each sum in index order: the
  same bits at any thread count).  A block whose scale is NaN (0xFF: a NaN or an infinity in
  it) gives NaN gradients there.

``threads`` (None: the scope of the model calling it) is the team size of every pass.
"""
from __future__ import annotations

import numpy as np

from lutcore.units import resolve

__all__ = ["MXMatmul", "FloatMatmul", "WeightMX", "matmul_for"]


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


class WeightMX:
    """A weight w (N, K)'s MX blocks as the product's right operand (w.T along K, the units' second
    format), kept while w's values stay the same: each call compares w with the float32 copy it
    quantized (4 bytes a weight; an in-place edit is seen), so an unchanged weight -- inference, an
    evaluation -- is quantized once."""

    def __init__(self):
        self.copy = self.q = self.key = None

    def get(self, w, units):
        key = (units.b, units.block)
        if (self.q is None or self.key != key or self.copy.shape != np.shape(w)
                or not np.array_equal(self.copy, w)):
            self.copy = np.array(w, np.float32, copy=True)
            self.q, self.key = units.quantize(self.copy.T, 0, "b"), key
        return self.q


class MXMatmul:
    def __init__(self, units, unit_backward=False, threads: int | None = None):
        from lutcore.models.unitmm import unit_backward_arg
        self.units = resolve(units, mx=True)
        self.unit_backward = unit_backward_arg(unit_backward)
        self.threads = threads
        self.label = None
        self.weight = WeightMX()

    @property
    def block(self) -> int:
        return self.units.block

    def forward(self, x2, w, weight: WeightMX | None = None):
        """y = x2 @ w.T through the units; ``weight``: the cache of w's blocks (default this
        matmul's own)."""
        u = self.units
        qw = (self.weight if weight is None else weight).get(w, u)
        y = u.matmul_q(u.quantize(_f32(x2), 1, "a"), qw, self.threads)
        return y.astype(x2.dtype, copy=False)

    def backward(self, dy2, x2, w, need_dx=True):
        if self.unit_backward == "table":
            return self.table_backward(dy2, x2, w, need_dx)
        if not self.unit_backward:
            from lutcore.ops.matmul import matmul
            return matmul(dy2.T, x2), (matmul(dy2, w) if need_dx else None)
        u, dt = self.units, x2.dtype
        gw = u.matmul(_f32(dy2).T, _f32(x2), self.threads).astype(dt, copy=False)       # (N, M) @ (M, K)
        dx = u.matmul(_f32(dy2), _f32(w), self.threads).astype(dt, copy=False) if need_dx else None
        return gw, dx

    def table_backward(self, dy2, x2, w, need_dx=True):
        """(dW (N, K), dX (M, K) or None) through the gradient tables (module docstring)."""
        from lutcore.units.mxunits import table_grads
        u = self.units
        qa = u.quantize(_f32(x2), 1, "a")                     # codes (M, Kp), scales (M, nb)
        qw = u.quantize(_f32(w), 1, "b")                      # w's rows: codes (N, Kp), scales (N, nb)
        dw, dx = table_grads(u, _f32(dy2), qa.codes, qa.scales, qw.codes, qw.scales, x2.shape[1], need_dx,
                             self.threads)
        dt = x2.dtype
        return dw.astype(dt, copy=False), (None if dx is None else dx.astype(dt, copy=False))


class FloatMatmul:
    """UnitMatmul's interface for bf16 / fp16 mantissa-product units (``lutcore.units.mantissa.
    MantissaUnits``): y = units.matmul(x, w.T); backward False (the float STE) or True (dX = dY w,
    dW = dY^T x through the unit, ApproxTrain's training); no gradient tables (a ValueError)."""

    def __init__(self, units, unit_backward=False, threads: int | None = None):
        from lutcore.models.unitmm import unit_backward_arg
        self.units = resolve(units, mx=True)
        self.unit_backward = unit_backward_arg(unit_backward)
        if self.unit_backward == "table":
            raise ValueError(f"unit_backward: units {self.units.name!r} (bf16/fp16 through a significand table) have "
                             f"no gradient tables: use False (the float STE) or True (through the unit)")
        self.threads = threads
        self.label = None

    def forward(self, x2, w, weight=None):
        y = self.units.matmul(_f32(x2), np.ascontiguousarray(_f32(w).T), self.threads)
        return y.astype(x2.dtype, copy=False)

    def backward(self, dy2, x2, w, need_dx=True):
        if not self.unit_backward:
            from lutcore.ops.matmul import matmul
            return matmul(dy2.T, x2), (matmul(dy2, w) if need_dx else None)
        u, dt = self.units, x2.dtype
        gw = u.matmul(np.ascontiguousarray(_f32(dy2).T), _f32(x2), self.threads).astype(dt, copy=False)
        dx = u.matmul(_f32(dy2), _f32(w), self.threads).astype(dt, copy=False) if need_dx else None
        return gw, dx


def matmul_for(units, unit_backward=False, threads: int | None = None):
    """The MXMatmul or FloatMatmul that runs ``units`` (MX or mantissa-product)."""
    return (FloatMatmul if getattr(units, "kind", None) == "mantissa" else MXMatmul)(units, unit_backward, threads)
