"""lutcore.torch through units of other formats than signed 8 x 8: zero-point quantization.

Design: a unit's format (``lutcore.units.formats``) says how each operand is quantized — the
activation as the table's first operand (``a``), the weight as its second (``b``):

    signed w bits     symmetric: qmax = 2^(w-1) - 1, s = max|v| / qmax, zp = 0,
                      q = clamp(round_half_even(v / s), -qmax, qmax)          (w = 8: the int8 contract)
    unsigned w bits   asymmetric: lo = min(min v, 0), hi = max(max v, 0), s = (hi - lo) / (2^w - 1),
                      zp = clamp(round_half_even(-lo / s), 0, 2^w - 1),
                      q = clamp(round_half_even(v / s) + zp, 0, 2^w - 1)
    (float32, a true division; s = 0 — all zeros — gives q = zp = 0)

weights per output channel (or, ``weights="tensor"``, one scale and zero point for the whole
weight), activations per tensor (per call, or the static scale and zero
point ``calibrate`` sets from the calibration data's range; "table" gives no gradient where a
static scale saturated x).  Only the code x code product
goes through the unit; the zero-point terms are exact integers outside it, as TFLite/gemmlowp:

    acc[m, o] = sum_k T[q_x[m, k], q_w[o, k]] - zp_w[o] sum_k q_x[m, k] - zp_x sum_k q_w[o, k]
                + K zp_x zp_w[o]                                               (int64)
    y[m, o]   = float32(acc) * float32(s_x * s_w[o]) + bias[o]                 (float32, in that order)

A conv runs the same over its patches (``F.unfold``, per group), padding zeros quantized like
any zero (the code zp_x).  A unit whose operands are wider than 8 bits (a gate netlist) runs
its code product through ``lutcore.ops.netlist``; every other through ``lut_gemm``.  A unit that
declares an accumulator (``Units.with_accumulator``) sums the code products in that register
(the zero-point terms stay exact beside it); its calls are labelled with the layer's name (a
"units" backward's with "<name> (backward)") for ``lutcore.ops.accum.overflow_log``.

Backward (``FormatFunction``): "ste" — the float layer's gradients at the float weights and
inputs; "table" — through the unit's gradient tables Ga = df/da, Gb = df/db with the rounding
passed straight through: dX[m, k] = sum_o dY[m, o] s_w[o] (Ga[q_x, q_w] - zp_w[o]), dW[o, k] = s_x sum_m dY[m, o] (Gb[q_x, q_w] - zp_x); "units" — dX and dW as products
through the unit (the gradient quantized in the activation's format, as the first operand), for
units whose two operands have one format (another format is refused at the call).  "ste" is
twice differentiable (torch's own ops); "table" and "units" once (a second derivative raises
naming the layer and the mode); db is torch's own sum in every mode.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lutcore.ops.accum import labelled
from lutcore.ops.gemm import PackedB, lut_gemm, pack_b
from lutcore.quant import quantize_codes
from lutcore.torch._once import _once_differentiable

__all__ = ["quantize", "FormatFunction", "linear", "conv"]


def quantize(v: np.ndarray, bits: int, signed: bool, per_row: bool = False):
    """(q int64, s float32, zp int64) of float32 ``v`` in a ``bits``-bit operand format (module
    docstring; ``lutcore.quant.quantize_codes``): one scale for the whole array, or one per row
    (axis 0) with ``per_row``."""
    v = np.asarray(v, np.float32)
    return quantize_codes(v, bits, signed, axis=tuple(range(1, v.ndim)) if per_row else None)


def _codes_at(v, s, zp, bits, signed, clamped=False):
    """int64 codes of float32 ``v`` at a given scale and zero point (the module's rounding); with
    ``clamped``, (codes, where the rounding saturated)."""
    lo, hi = (-((1 << (bits - 1)) - 1), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    s = np.float32(s)
    if s == 0:
        q = np.zeros(np.shape(v), np.int64)
        return (q, np.zeros(q.shape, bool)) if clamped else q
    r = np.rint(np.divide(np.asarray(v, np.float32), s, dtype=np.float32)).astype(np.float64) + int(zp)
    q = np.clip(r, lo, hi).astype(np.int64)
    return (q, (r < lo) | (r > hi)) if clamped else q


def _codes_gemm(qa: np.ndarray, qb: np.ndarray, units, nt: int) -> np.ndarray:
    """int64 (M, N) sum_k T[qa[m, k], qb[k, n]] through the unit (its table, or its netlist)."""
    if units.mul is None and units.accumulator is None:
        from lutcore.ops import netlist as _net
        f, n = units.format, units.netlist
        return _net.gemm(qa, qb, n.gates, n.outputs, a_bits=f.a_bits, b_bits=f.b_bits, a_signed=f.a_signed,
                         b_signed=f.b_signed, product_signed=f.p_signed, threads=nt)
    if units.mul is None:                    # a netlist through a declared accumulator (lut_gemm's room)
        return lut_gemm(qa, qb, units, threads=nt).astype(np.int64)
    f = units.format                         # a table: codes of <= 8 bits as bytes, by signedness
    qa = qa if qa.dtype in (np.int8, np.uint8) else qa.astype(np.int8 if f.a_signed else np.uint8)
    if not isinstance(qb, PackedB):
        qb = qb if qb.dtype in (np.int8, np.uint8) else qb.astype(np.int8 if f.b_signed else np.uint8)
    return lut_gemm(qa, qb, units, threads=nt).astype(np.int64)


def _zp_product(qx, zp_x, qw, zp_w, units, nt, qwt=None, qw_sum=None):
    """acc (M, O) int64 of the module's contract: qx (M, K), qw (O, K) codes, zp_x scalar, zp_w (O,);
    ``qwt``: qw transposed as the GEMM takes it and ``qw_sum`` its row sums (a cached weight's)."""
    K = qx.shape[1]
    acc = _codes_gemm(qx, np.ascontiguousarray(qw.T) if qwt is None else qwt, units, nt)
    if np.any(zp_w):
        acc -= qx.sum(axis=1, dtype=np.int64)[:, None] * zp_w[None, :]
    if zp_x:
        acc -= int(zp_x) * (qw.sum(axis=1, dtype=np.int64) if qw_sum is None else qw_sum)[None, :]
        acc += K * int(zp_x) * zp_w[None, :]
    return acc


class _Weight:
    """A weight's codes in the unit's format, kept while its values stay the same (checked each
    call against a copy: in-place ``.data`` edits are seen): codes, scales, zero points, and per
    group the transposed codes the GEMM takes and their sums."""

    def __init__(self, W, fmt, per_channel, groups, units):
        self.copy = np.array(W, np.float32, copy=True)
        qw, s_w, zp_w = quantize(W, fmt.b_bits, fmt.b_signed, per_row=per_channel)
        self.qw = qw.astype(np.int16 if fmt.b_bits < 16 or fmt.b_signed else np.int32)    # kept: 2 bytes a weight
        O = W.shape[0]
        self.s_w = np.broadcast_to(np.asarray(s_w, np.float32).reshape(-1), (O,)).copy()
        self.zp_w = np.broadcast_to(np.asarray(zp_w, np.int64).reshape(-1), (O,)).copy()
        Og = O // groups
        self.parts = []
        for g in range(groups):
            q = self.qw[g * Og:(g + 1) * Og]
            t = np.ascontiguousarray(q.T)
            if units.mul is not None:                  # the table GEMM's bytes (codes of <= 8 bits fit), packed
                t = pack_b(t.astype(np.int8 if fmt.b_signed else np.uint8))      # once: the body's staged form
            self.parts.append((t, q.sum(axis=1, dtype=np.int64)))


_WEIGHTS: dict = {}          # (id(weight), format, per_channel, groups, table or netlist) -> _Weight, the last 64


def _weight_codes(weight: torch.Tensor, W: np.ndarray, units, per_channel: bool, groups: int) -> _Weight:
    key = (id(weight), weight.data_ptr(), str(units.format), per_channel, groups, units.mul is None)
    got = _WEIGHTS.get(key)
    if got is None or got.copy.shape != W.shape or not np.array_equal(got.copy, W):
        if got is None and len(_WEIGHTS) >= 64:
            _WEIGHTS.pop(next(iter(_WEIGHTS)))
        got = _WEIGHTS[key] = _Weight(W, units.format, per_channel, groups, units)
    return got


def _patches(x4: torch.Tensor, g) -> torch.Tensor:
    """(N * L, C * KH * KW) patches of x (N, C, H, W), columns in (c, i, j) order."""
    cols = F.unfold(x4, (g.KH, g.KW), dilation=g.dilation, padding=g.padding, stride=g.stride)  # (N, CKK, L)
    return cols.transpose(1, 2).reshape(-1, cols.shape[1])


def static(input_scale, zero_point):
    """The static activation quantization (scale float32, zero point int), or None (dynamic)."""
    return None if input_scale is None else (np.float32(input_scale), int(zero_point or 0))


class _Quantized:
    """The forward's codes, kept for the backward.  The activation's scale and zero point are
    the static ones, else come from ``x`` (the whole input); its codes are those of the rows X
    (a conv's patches)."""

    def __init__(self, X, W, units, groups, nt, x=None, static_q=None, per_channel=True, wq=None):
        f = units.format
        if static_q is None:
            q, s_x, zp_x = quantize(X if x is None else x, f.a_bits, f.a_signed)
        else:
            s_x, zp_x = static_q
        # the rows' codes: the ones just made when X is the input itself (a linear layer's); a static
        # scale also says where it saturated x ("table": no gradient there)
        self.clamped = None
        if static_q is not None:
            self.qx, self.clamped = _codes_at(X, s_x, zp_x, f.a_bits, f.a_signed, clamped=True)
        else:
            self.qx = q if x is None else _codes_at(X, s_x, zp_x, f.a_bits, f.a_signed)
        self.s_x, self.zp_x = s_x, zp_x
        self.wq = _Weight(W, f, per_channel, groups, units) if wq is None else wq
        self.qw, self.s_w, self.zp_w = self.wq.qw, self.wq.s_w, self.wq.zp_w
        self.s_x, self.zp_x = np.float32(self.s_x), int(self.zp_x)
        self.groups = groups


def _forward(X: np.ndarray, W: np.ndarray, bias, units, groups: int, nt: int, x=None, static_q=None,
             per_channel=True, wq=None):
    """(y (M, O) float32, _Quantized) for X (M, G * Kg) and W (O, Kg); ``x``: the input the
    activation's scale comes from (a conv's; None: X itself); ``static_q``: (scale, zero point);
    ``per_channel``: one weight scale (and zero point) per output channel, else one per tensor;
    ``wq``: the weight's cached ``_Weight``."""
    z = _Quantized(X, W, units, groups, nt, x, static_q, per_channel, wq)
    M, O = X.shape[0], W.shape[0]
    Kg, Og = W.shape[1], O // groups
    acc = np.empty((M, O), np.int64)
    for g in range(groups):
        sl, ks = slice(g * Og, (g + 1) * Og), slice(g * Kg, (g + 1) * Kg)
        qwt, qsum = z.wq.parts[g]
        acc[:, sl] = _zp_product(np.ascontiguousarray(z.qx[:, ks]), z.zp_x, z.qw[sl], z.zp_w[sl], units, nt,
                                 qwt, qsum)
    scale = (z.s_x * z.s_w).astype(np.float32)
    y = acc.astype(np.float32) * scale[None, :]
    if bias is not None:
        y = y + bias.detach().numpy().astype(np.float32)[None, :]
    return y.astype(np.float32), z


def _bytes(q: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray((q & 0xFF).astype(np.uint8)).view(np.int8)


def _table_grads(dY, z, units, grad_h, layer, nt, need):
    """(dX (M, G * Kg), dW (O, Kg)) through the gradient tables (module docstring)."""
    from lutcore.torch import _gradtables
    ga, gb, gbt = _gradtables.tables_for(units, grad_h, layer)
    M, O = dY.shape
    Kg, Og, G = z.qw.shape[1], O // z.groups, z.groups
    dX = np.zeros((M, G * Kg), np.float32) if need[0] else None
    dW = np.zeros((O, Kg), np.float32) if need[1] else None
    g_all = (dY * z.s_w[None, :]).astype(np.float32)
    for g in range(G):
        sl, ks = slice(g * Og, (g + 1) * Og), slice(g * Kg, (g + 1) * Kg)
        qx, qw = _bytes(z.qx[:, ks]), _bytes(z.qw[sl])
        gg = np.ascontiguousarray(g_all[:, sl]) if need[0] else None
        dd = np.ascontiguousarray(dY[:, sl]) if need[1] else None
        d, s = _gradtables.table_grads(qx, qw, gg, dd, ga, gb, nt, gbt)
        if need[0]:
            corr = (gg * z.zp_w[sl][None, :].astype(np.float32)).sum(axis=1, dtype=np.float32)   # sum_o g zp_w[o]
            dX[:, ks] = d - corr[:, None]
            if z.clamped is not None:
                dX[:, ks][z.clamped[:, ks]] = 0.0
        if need[1]:
            corr = dd.sum(axis=0, dtype=np.float32) * np.float32(z.zp_x)                          # sum_m dY zp_x
            dW[sl] = (s - corr[:, None]) * z.s_x
    return dX, dW


def _units_grads(dY, z, units, nt, need, layer):
    """(dX, dW) as products through the unit (its two operands of one format)."""
    f = units.format
    if (f.a_bits, f.a_signed) != (f.b_bits, f.b_signed):
        raise ValueError(f"{layer}: backward='units' passes the gradient through the unit as its first operand "
                         f"and the input as its second; units of format {f} have operands of two formats: use "
                         f"backward='table' or 'ste'")
    M, O = dY.shape
    Kg, Og, G = z.qw.shape[1], O // z.groups, z.groups
    dX = np.zeros((M, G * Kg), np.float32) if need[0] else None
    dW = np.zeros((O, Kg), np.float32) if need[1] else None
    if need[0]:
        gq, s_g, zp_g = quantize((dY * z.s_w[None, :]).astype(np.float32), f.a_bits, f.a_signed)
        zp_g = int(zp_g)
        for g in range(G):
            sl, ks = slice(g * Og, (g + 1) * Og), slice(g * Kg, (g + 1) * Kg)
            qg, qw, zw = gq[:, sl], z.qw[sl], z.zp_w[sl]
            acc = _codes_gemm(np.ascontiguousarray(qg), np.ascontiguousarray(qw), units, nt)      # (M, Kg) over o
            acc -= (qg * zw[None, :]).sum(axis=1)[:, None]
            acc -= zp_g * qw.sum(axis=0)[None, :]
            acc += zp_g * int(zw.sum())
            dX[:, ks] = acc.astype(np.float32) * np.float32(s_g)
    if need[1]:
        dq, s_d, zp_d = quantize(dY.astype(np.float32), f.a_bits, f.a_signed)
        zp_d = int(zp_d)
        s = np.float32(np.float32(s_d) * z.s_x)
        for g in range(G):
            sl, ks = slice(g * Og, (g + 1) * Og), slice(g * Kg, (g + 1) * Kg)
            qd, qx = dq[:, sl], z.qx[:, ks]
            acc = _codes_gemm(np.ascontiguousarray(qd.T), np.ascontiguousarray(qx), units, nt)     # (Og, Kg) over m
            acc -= z.zp_x * qd.sum(axis=0)[:, None]
            acc -= zp_d * qx.sum(axis=0)[None, :]
            acc += zp_d * z.zp_x * qx.shape[0]
            dW[sl] = acc.astype(np.float32) * s
    return dX, dW


class FormatFunction(torch.autograd.Function):
    """y = the module's contract of x through ``units`` (a linear layer when ``geo`` is None, else a
    conv); ``backward``: "ste", "units" or "table"."""

    @staticmethod
    def forward(ctx, x, weight, bias, units, geo, backward, grad_h, layer, nt, static_q, per_channel):
        f = units.format
        if backward == "units" and (f.a_bits, f.a_signed) != (f.b_bits, f.b_signed):
            raise ValueError(f"{layer}: backward='units' passes the gradient through the unit as its first operand "
                             f"and the input as its second; units of format {f} have operands of two formats: use "
                             f"backward='table' or 'ste'")
        X, W = _operands(x, weight, geo)
        groups = 1 if geo is None else geo.groups
        wq = _weight_codes(weight, W, units, per_channel, groups)
        with labelled(layer):                    # a declared accumulator's overflows, under the layer's name
            y, z = _forward(X, W, bias, units, groups, nt, None if geo is None else x.detach().float().numpy(),
                            static_q, per_channel, wq)
        ctx.save_for_backward(x, weight, bias)
        ctx.z, ctx.units, ctx.geo, ctx.mode, ctx.grad_h, ctx.layer, ctx.nt = z, units, geo, backward, grad_h, layer, nt
        ctx.has_bias = bias is not None
        return _output(torch.from_numpy(y), geo, weight.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        geo, mode = ctx.geo, ctx.mode
        need = (ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        need_b = bias is not None and ctx.needs_input_grad[2]
        dx, dw, db = float_grads(x, weight, bias, geo, dy, mode == "ste", need, need_b)
        if mode == "ste":
            return dx, dw, db, None, None, None, None, None, None, None, None
        dY = _rows(dy, geo)
        if mode == "table":
            dX, dW = _table_grads(dY, ctx.z, ctx.units, ctx.grad_h, ctx.layer, ctx.nt, need)
        else:
            with labelled(f"{ctx.layer} (backward)"):
                dX, dW = _units_grads(dY, ctx.z, ctx.units, ctx.nt, need, ctx.layer)
        dx = dw = None
        if need[0]:
            dx = torch.from_numpy(dX) if geo is None else _fold(dX, geo)
        if need[1]:
            dw = torch.from_numpy(dW).reshape(weight.shape)
        dx, dw = _once_differentiable(ctx.layer, (dx, dw), (dy, x, weight), mode)
        return dx, dw, db, None, None, None, None, None, None, None, None


def float_grads(x, weight, bias, geo, dy, ste: bool, need, need_b: bool) -> tuple:
    """(dx, dw, db): the float layer's gradients at x and the weight where ``ste`` and ``need`` ask
    (twice differentiable, as the signed 8 x 8 STE), and db where ``need_b`` -- torch's own ops, so
    db is torch's sum in every mode; None where not asked."""
    flags = (ste and need[0], ste and need[1], need_b)
    if not any(flags):
        return None, None, None
    with torch.enable_grad():
        xs = [x if flags[0] else x.detach(), weight if flags[1] else weight.detach(), bias]
        y = F.linear(xs[0], xs[1], xs[2]) if geo is None else _float_conv(xs[0], xs[1], geo, xs[2])
        want = [t for t, n in zip(xs, flags) if n]
        got = iter(torch.autograd.grad(y, want, dy, create_graph=torch.is_grad_enabled(), allow_unused=True))
    return tuple(next(got) if n else None for n in flags)


def _operands(x, weight, geo):
    """(X (M, G * Kg), W (O, Kg)) float32 numpy: the rows the product reads."""
    if geo is None:
        return x.detach().float().numpy(), weight.detach().reshape(weight.shape[0], -1).float().numpy()
    x4 = x.detach().unsqueeze(2) if geo.d1 else x.detach()
    X = _patches(x4.float(), geo).numpy()
    return np.ascontiguousarray(X), weight.detach().reshape(weight.shape[0], -1).float().numpy()


def _output(y2: torch.Tensor, geo, O: int) -> torch.Tensor:
    if geo is None:
        return y2
    y = y2.reshape(geo.N, geo.OH * geo.OW, O).permute(0, 2, 1).reshape(geo.N, O, geo.OH, geo.OW)
    return (y[:, :, 0, :] if geo.d1 else y).contiguous()


def _rows(dy: torch.Tensor, geo) -> np.ndarray:
    if geo is None:
        return np.ascontiguousarray(dy.detach().float().numpy())
    d = dy.unsqueeze(2) if geo.d1 else dy
    O = d.shape[1]
    return np.ascontiguousarray(d.permute(0, 2, 3, 1).reshape(-1, O).detach().float().numpy())


def _fold(dX: np.ndarray, geo) -> torch.Tensor:
    cols = torch.from_numpy(dX).reshape(geo.N, geo.OH * geo.OW, -1).permute(0, 2, 1)
    dx = F.fold(cols, (geo.H, geo.W), (geo.KH, geo.KW), dilation=geo.dilation, padding=geo.padding,
                stride=geo.stride)
    return dx[:, :, 0, :] if geo.d1 else dx


def _float_conv(x, w, geo, b=None):
    if geo.d1:
        return F.conv1d(x, w, b, geo.stride[1], geo.padding[1], geo.dilation[1], geo.groups)
    return F.conv2d(x, w, b, geo.stride, geo.padding, geo.dilation, geo.groups)


def linear(x2, weight, bias, units, backward, grad_h, layer, nt, static_q=None, weights="channel"):
    """y (M, O) of x2 (M, K) through a unit of any format; ``static_q``: ``static(scale, zp)``;
    ``weights``: "channel" (a scale and zero point per output channel) or "tensor" (one)."""
    return FormatFunction.apply(x2, weight, bias, units, None, backward, grad_h, layer, nt, static_q,
                                weights == "channel")


def conv(x, weight, bias, units, geo, backward, grad_h, layer, nt, static_q=None, weights="channel"):
    """The conv of x (N, C, H, W) or (N, C, L) through a unit of any format."""
    return FormatFunction.apply(x, weight, bias, units, geo, backward, grad_h, layer, nt, static_q,
                                weights == "channel")
