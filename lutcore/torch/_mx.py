"""lutcore.torch through MX units (``lutcore.units.mxunits.MXUnits``): block-scaled FP8 / FP6 /
FP4 / INT8 products through a floating-point multiplier and a declared accumulator -- and through
bf16 / fp16 mantissa-product units (``lutcore.units.mantissa.MantissaUnits``: the same function,
their product ``FloatMatmul``'s; "ste" and "units" backward, no gradient tables).

Design: a linear layer's rows X (M, K) and weight W (O, K) -- a conv's patches (``F.unfold``, per
group) -- go through ``MXMatmul`` (lutcore.models.mxmm), the models' MX product: X quantized per
row in blocks of 32 along K in the multiplier's first format, W per output channel along K in
its second, products through the table, sums in the declared accumulator; y = that + bias
(float32).  Every call quantizes both (an MX block has no static scale: ``activations="static"``
is refused, naming the layer).  Padding of a conv is zeros before quantization, as any zero.

Backward: "ste" -- the float layer's gradients at the float weight and input (torch's own ops:
twice differentiable); "units" -- dX = dY W and dW = dY^T X, each through the unit (dY in the
first format, in blocks along the reduced axis); "table" -- the unit's gradient tables
(``MXUnits.gradients``), the quantization passed straight through: for the exact multiplier
the gradient at the quantized operands.  db is torch's sum of dY in every mode.  "units" and
"table" are differentiable once (a second derivative raises naming the layer).
"""
from __future__ import annotations

import numpy as np
import torch

from lutcore.models.mxmm import WeightMX, matmul_for
from lutcore.torch._formats import _fold, _operands, _output, _rows, float_grads
from lutcore.torch._once import _once_differentiable

__all__ = ["MXFunction", "linear", "conv"]


_WEIGHTS: dict = {}          # (id(weight), data_ptr, group) -> WeightMX, the last 64


def _weight_cache(weight: torch.Tensor, g: int) -> WeightMX:
    """The kept MX blocks of a weight's group (content-checked at every call: WeightMX)."""
    key = (id(weight), weight.data_ptr(), g)
    got = _WEIGHTS.get(key)
    if got is None:
        if len(_WEIGHTS) >= 64:
            _WEIGHTS.pop(next(iter(_WEIGHTS)))
        got = _WEIGHTS[key] = WeightMX()
    return got


class MXFunction(torch.autograd.Function):
    """y = x through MX ``units`` (a linear layer when ``geo`` is None, else a conv)."""

    @staticmethod
    def forward(ctx, x, weight, bias, units, geo, backward, layer, nt):
        X, W = _operands(x, weight, geo)
        groups = 1 if geo is None else geo.groups
        mm = matmul_for(units, {"ste": False, "units": True, "table": "table"}[backward], nt)
        O, Kg = W.shape
        Og = O // groups
        y = np.empty((X.shape[0], O), np.float32)
        for g in range(groups):
            y[:, g * Og:(g + 1) * Og] = mm.forward(np.ascontiguousarray(X[:, g * Kg:(g + 1) * Kg]),
                                                   np.ascontiguousarray(W[g * Og:(g + 1) * Og]),
                                                   _weight_cache(weight, g))
        if bias is not None:
            y += bias.detach().numpy().astype(np.float32)[None, :]
        ctx.save_for_backward(x, weight, bias)
        ctx.mm, ctx.geo, ctx.mode, ctx.layer = mm, geo, backward, layer
        return _output(torch.from_numpy(y), geo, O)

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        geo, mode = ctx.geo, ctx.mode
        need = (ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        need_b = bias is not None and ctx.needs_input_grad[2]
        dx, dw, db = float_grads(x, weight, bias, geo, dy, mode == "ste", need, need_b)
        if mode == "ste":
            return dx, dw, db, None, None, None, None, None
        dY = _rows(dy, geo)
        X, W = _operands(x, weight, geo)
        groups = 1 if geo is None else geo.groups
        O, Kg = W.shape
        Og = O // groups
        dX = np.empty_like(X) if need[0] else None
        dW = np.empty_like(W) if need[1] else None
        for g in range(groups):
            so, sk = slice(g * Og, (g + 1) * Og), slice(g * Kg, (g + 1) * Kg)
            gw, gx = ctx.mm.backward(np.ascontiguousarray(dY[:, so]), np.ascontiguousarray(X[:, sk]),
                                     np.ascontiguousarray(W[so]), need[0])
            if need[0]:
                dX[:, sk] = gx
            if need[1]:
                dW[so] = gw
        dx = dw = None
        if need[0]:
            dx = torch.from_numpy(dX) if geo is None else _fold(dX, geo)
        if need[1]:
            dw = torch.from_numpy(dW).reshape(weight.shape)
        dx, dw = _once_differentiable(ctx.layer, (dx, dw), (dy, x, weight), mode)
        return dx, dw, db, None, None, None, None, None


def linear(x2, weight, bias, units, backward, layer, nt):
    """y (M, O) of x2 (M, K) through MX ``units``."""
    return MXFunction.apply(x2, weight, bias, units, None, backward, layer, nt)


def conv(x, weight, bias, units, geo, backward, layer, nt):
    """The conv of x (N, C, H, W) or (N, C, L) through MX ``units``."""
    return MXFunction.apply(x, weight, bias, units, geo, backward, layer, nt)
