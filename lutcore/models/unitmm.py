"""Matmuls through the units, with straight-through estimators.

Forward: ``y = x @ w.T`` runs as a block-scaled int8 matmul through the
unit's multiplier table (``lutcore.qmatmul``; x quantized per row along K,
w per output row along K — the same blocks).  Backward: by default the
straight-through estimator passes the float gradient through the
quantization (dX = dY w, dW = dY^T x in float); with ``unit_backward=True``
both backward matmuls run through the units too, each quantized along its own
reduction axis.  ``two_pass=True`` adds a second block-scaled pass for the
quantization residual of the gradient operand, extending its dynamic range.
With ``unit_backward="table"`` the backward runs through the unit's gradient
tables Ga = df/da, Gb = df/db (``Units.gradients``, central differences, or the
unit's attached tables), the rounding passed straight through (docs/DESIGN.md,
"Gradient tables", the block-scaled form):
    dX[m, k] = sum_n dY[m, n] sb[b(k), n] Ga[qa[m, k], qb[k, n]]
    dW[n, k] = sum_m dY[m, n] sa[m, b(k)] Gb[qa[m, k], qb[k, n]]
per block of K, through the gradient-table pass (``lutcore.ops.gradtables``,
csrc/gradtables/gradtables.h: each sum in index order, the same bits at any thread count).
``threads`` (None: the scope of the model calling it) is the team size of that pass.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check
from lutcore.ops.gradtables import table_pass
from lutcore.quant import Q8, qmatmul, quantize
from lutcore.units import resolve

__all__ = ["UnitMatmul", "unit_backward_arg"]

TABLE = "table"


def unit_backward_arg(v):
    """False (the float STE backward), True (through the units) or "table" (through the
    unit's gradient tables)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if v == TABLE:
        return TABLE
    raise TypeError(f"unit_backward: expected True or False (or {TABLE!r}: the gradient tables), got {v!r}")


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def _as_b(w: np.ndarray, block: int) -> Q8:
    """w (N, K) -> the Q8 right operand (K, N) of x @ w.T, blocks along K."""
    qw = quantize(_f32(w), block, axis=-1)
    return Q8._made(np.ascontiguousarray(qw.q.T), np.ascontiguousarray(qw.scale.T), block, 0, (w.shape[1], w.shape[0]))


class UnitMatmul:
    def __init__(self, units, unit_backward=False, block: int = 32, two_pass: bool = False,
                 threads: int | None = None):
        self.units = resolve(units)
        self.unit_backward = unit_backward_arg(unit_backward)
        self.threads = threads
        self.block = int(block)
        self.two_pass = _check.bool_arg(two_pass, "two_pass")
        self.label = None                # the layer's name, for the overflow log (lutcore.ops.accum)
        f = self.units.format
        if not self.units.plain:         # another format (zero points) or an accumulator: lutcore.quant.QF
            if self.unit_backward == TABLE or self.two_pass:
                acc = self.units.accumulator
                raise ValueError(f"unit_backward / two_pass: units {self.units.name!r} ({f}"
                                 f"{', accumulator ' + str(acc) if acc is not None else ''}) run the block-scaled "
                                 f"product of operand formats; their backward is the float STE or, for units "
                                 f"whose operands share one format, through the units (unit_backward=True)")
            if self.unit_backward and (f.a_bits, f.a_signed) != (f.b_bits, f.b_signed):
                raise ValueError(f"unit_backward: True passes the gradient through the unit as its first operand "
                                 f"and the input as its second; units {self.units.name!r} have operands of two "
                                 f"formats ({f}): use unit_backward=False")

    def _mm(self, a, b):
        """a (M, K) float @ b (K, N) float through the units, each operand
        quantized once along K (the residual pass reuses both).  A transposed view
        (dY^T) is quantized as it lies (``qmatmul`` / ``quantize``)."""
        a, b = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)
        if not self.units.plain:
            return qmatmul(a, b, self.units, self.block)
        qb = quantize(b, self.block, axis=0)
        if not self.two_pass:
            return qmatmul(a, qb, self.units, self.block)
        qa = quantize(a, self.block)
        y = qmatmul(qa, qb, self.units, self.block)
        y += qmatmul(a - qa.dequantize(), qb, self.units, self.block)
        return y

    def forward(self, x2, w):
        if not self.units.plain:
            from lutcore.ops.accum import labelled
            with labelled(self.label):
                y = qmatmul(_f32(x2), np.ascontiguousarray(_f32(w).T), self.units, self.block)
            return y.astype(x2.dtype, copy=False)
        y = qmatmul(_f32(x2), _as_b(w, self.block), self.units, self.block)
        return y.astype(x2.dtype, copy=False)

    def _tables(self):
        """(Ga, GbT) float32 (65536,) of the current units (cached per digest / attached tables)."""
        key = (self.units.digest, id(getattr(self.units, "grad_tables", None)))
        if getattr(self, "_gt_key", None) != key:
            att = getattr(self.units, "grad_tables", None)
            ga, gb = att if att is not None else self.units.gradients(1)
            ga = np.ascontiguousarray(ga, dtype=np.float32).reshape(65536)
            gbt = np.ascontiguousarray(np.asarray(gb, dtype=np.float32).reshape(256, 256).T).reshape(65536)
            self._gt, self._gt_key = (ga, gbt), key
        return self._gt

    def table_backward(self, dy2, x2, w, need_dx=True):
        """(dW (N, K), dX (M, K) or None) through the gradient tables (module docstring)."""
        nt = self.threads                                     # None: the model's scope
        M, K = x2.shape
        N = w.shape[0]
        blk = self.block
        qa = quantize(_f32(x2), blk, axis=-1)                 # the forward's codes and scales
        qw = quantize(_f32(w), blk, axis=-1)                  # (N, Kq), scale (N, nb)
        dy = _f32(dy2)
        ga, gbt = self._tables()
        dw = np.empty((N, K), np.float32)
        dx = np.empty((M, K), np.float32) if need_dx else None
        for bi, k0 in enumerate(range(0, K, blk)):
            k1 = min(K, k0 + blk)
            a = np.ascontiguousarray(qa.q[:, k0:k1])
            b = np.ascontiguousarray(qw.q[:, k0:k1])
            if need_dx:
                g = np.ascontiguousarray(dy * qw.scale[:, bi][None, :])      # dY[m, n] sb[b, n]
                dx[:, k0:k1] = table_pass(0, a, b, g, ga, nt)
            d = np.ascontiguousarray(dy * qa.scale[:, bi][:, None])           # dY[m, n] sa[m, b]
            dw[:, k0:k1] = table_pass(1, a, b, d, gbt, nt)
        return dw.astype(x2.dtype, copy=False), (None if dx is None else dx.astype(x2.dtype, copy=False))

    def backward(self, dy2, x2, w, need_dx=True):
        if self.unit_backward == TABLE:
            return self.table_backward(dy2, x2, w, need_dx)
        if not self.unit_backward:
            from lutcore.ops.matmul import matmul
            gw = matmul(dy2.T, x2)
            dx = matmul(dy2, w) if need_dx else None
            return gw, dx
        gw = self._mm(dy2.T, x2).astype(x2.dtype, copy=False)          # (N, M) @ (M, K)
        dx = self._mm(dy2, w).astype(x2.dtype, copy=False) if need_dx else None   # (M, N) @ (N, K)
        return gw, dx
