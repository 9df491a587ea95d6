"""Linear and convolution products through a unit, as torch.autograd.Functions.

Design: the contract (docs/DESIGN.md, "Approximate PyTorch layers") in one place.
``QWeight`` quantizes a weight once per change of its values (per output channel,
with ``lutcore.quantize`` at block = the whole row; a layer's ``WeightCache``
compares the weight with the float copy it quantized on every call); each call quantizes its input per
tensor, gathers patches and dequantizes natively (``lutcore.ops.im2col``),
and runs the products through ``lutcore.lut_gemm`` (exact tables on the integer
SIMD path, any other through the table path).  The layers (``layers.py``) cache a
``QWeight``; the functional forms build one per call.

    tensor   dtype    shape                  what
    x        float32  (M, K) / (N, C, H, W)  IN   dense CPU tensor (contiguous or channels_last)
    weight   float32  (O, K) / (O, Cg, KH, KW)   IN
    bias     float32  (O,) or None           IN
    A        int8     (G, M, Kg)             the patches, Kg = KH*KW*Cg in (i, j, c) order
    acc      int32    (M, O)                 sum_k mul8[q_x[m, k], q_w[o, k]] (activation = row)
    y        float32  (M, O) / (N, O, OH, OW)   OUT  float32(acc) * (s_x * s_w[o]) + bias[o]

Conv1d is Conv2d with H = 1.  Padding here is zeros only (the code 0 through the
table); the layers pad in float first for other padding modes.

Backward ``"ste"``: the float layer's gradients at the float weight and input
(``aten.convolution_backward``, ``dY W`` / ``dY^T X`` / ``sum dY``).  Backward
``"units"``: with q_w, s_w and q_x, s_x of the forward,
    dX  = s_g * float32(sum_o mul8[q_g[m, o], q_w[o, k]]),  g = dY * s_w[o] per tensor (q_g, s_g)
    dW  = (s_dy * s_x) * float32(sum_m mul8[q_dy[m, o], q_x[m, k]]),  dY per tensor (q_dy, s_dy)
the gradient being the table's row; a conv's dX is folded back from patch gradients
(``F.fold``, float32).  The sum over m runs in chunks short enough for int32,
added in float32 in chunk order.  db = sum dY in float, as the STE.  The unit
backward is differentiable once: under create_graph=True its gradients carry an
edge whose backward raises (_DelayedError); the STE is twice differentiable.

A zero-size dimension (no product) returns torch's own F.linear / F.conv*d result.
Under tracing (torch.compile, torch.export, torch.jit.trace) the same bodies run as
the custom ops ``lutcore::linear``, ``lutcore::conv`` and their ``*_units_backward``
(the end of this file), so traced programs give the eager bits.
"""
from __future__ import annotations

import itertools
import os
import weakref
from typing import List, Optional

import numpy as np
import torch
import torch.nn.functional as F

from lutcore import _check, _workspace
from lutcore._threads import resolve_threads
from lutcore.ops import gradtables as _gtroom      # the planes pass (backward="table")
from lutcore.ops import im2col as _im2col          # its fast twins: nt is resolved once per call here
from lutcore.ops.gemm import INT32_MAX, lut_gemm, pack_b
from lutcore.quant import quantize
from lutcore.torch import _formats, _gradtables, _mx
from lutcore.torch._once import _DelayedError, _double_backward_error, _once_differentiable  # noqa: F401
from lutcore.units import Units, resolve as resolve_units
from lutcore.units.mantissa import MantissaUnits
from lutcore.units.mxunits import MXUnits

__all__ = ["lut_linear", "lut_conv1d", "lut_conv2d", "LutLinearFunction", "LutConvFunction", "LutLinearTableFunction",
           "LutConvTableFunction", "QWeight"]

BACKWARDS = ("ste", "units", "table")
_127 = np.float32(127.0)


# ----------------------------------------------------------------------------- checks

def check_tensor(t, what: str, layer: str, ndim=None) -> None:
    """t is a float32 CPU tensor (else TypeError naming the layer, what and the dtype/device)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{layer}: {what}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise TypeError(f"{layer}: {what} is on device {t.device}; lutcore's units run on the CPU "
                        f"(move the model and its inputs with .cpu())")
    if t.dtype != torch.float32:
        raise TypeError(f"{layer}: {what} has dtype {t.dtype}; expected torch.float32 "
                        f"(convert with .float(): the units take float32 in and give float32 out)")
    if ndim is not None and t.dim() not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise ValueError(f"{layer}: {what}: expected a {ndim}-D tensor, got shape {tuple(t.shape)}")


def backward_arg(v, layer: str = "backward") -> str:
    if v not in BACKWARDS:
        raise ValueError(f"{layer}: backward: expected one of {BACKWARDS}, got {v!r}")
    return v


@torch.compiler.assume_constant_result          # TorchDynamo: a constant, checked for real
def scale_arg(v, layer: str):
    """A static input scale: None (dynamic), or a number > 0 that stays finite and > 0 in
    float32, the precision it is used in (1e39 is inf there, 1e-46 is 0); a 0-d tensor too.
    Returns a Python float holding that float32 value exactly (a constant to the tracers)."""
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError(f"{layer}: input_scale: expected one number, got shape {tuple(v.shape)}")
        v = float(v)
    v = _check.float_arg(v, f"{layer}: input_scale", lo=0.0, lo_open=True)
    with np.errstate(over="ignore", under="ignore"):
        s = np.float32(v)
    if not np.isfinite(s) or s <= 0:
        f32 = np.finfo(np.float32)
        raise ValueError(f"{layer}: input_scale: expected a number > 0 that is finite in float32 (at most "
                         f"{float(f32.max):.8g}, at least {float(f32.smallest_subnormal):.3g}), got {v!r}, "
                         f"which is {float(s)} in float32")
    return float(s)


def _pair(v, name: str, layer: str, n: int = 2, lo: int = 0) -> tuple:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n:
        raise ValueError(f"{layer}: {name}: expected {n} ints, got {v!r}")
    return tuple(_check.int_arg(x, f"{layer}: {name}", lo=lo) for x in t)


# ---------------------------------------------------------------------- quantization

class QWeight:
    """A weight quantized per output channel: ``q`` int8 (O, K) in the GEMM's k order,
    ``scale`` float32 (O,), and per group the (Kg, Og) right operand packed once.

    ``w2d`` is float32 (O, K): a linear weight, or a conv weight (O, Cg, KH, KW)
    permuted to (O, KH, KW, Cg) and flattened."""

    def __init__(self, w2d: np.ndarray, groups: int, layer: str, threads=None):
        O, K = w2d.shape
        if K == 0 or O == 0:                     # no product (the layers compute these with torch)
            self.q, self.scale = np.zeros((O, K), np.int8), np.zeros(O, np.float32)
            self.groups, self.qt, self.b = groups, self.q.T, []
            self._scaled = None
            return
        q8 = quantize(w2d, block=K, axis=-1, threads=threads, name=f"{layer}: weight")           # one block = one row
        self.q, self.scale = np.ascontiguousarray(q8.q[:, :K]), np.ascontiguousarray(q8.scale[:, 0])
        Og = O // groups
        self.groups = groups
        self.qt = np.ascontiguousarray(self.q.T)                            # (K, O): the direct pass's
        self.b = [pack_b(self.qt)] if groups == 1 else \
            [pack_b(np.ascontiguousarray(self.q[g * Og:(g + 1) * Og].T)) for g in range(groups)]
        self._scaled = None                      # (s_x, s_x * scale): the last input scale's product

    def input_scaled(self, s_x: np.float32) -> np.ndarray:
        """float32 (O,) s_x * scale[o] (rounded in float32), kept for the next call with the same s_x
        (a static input scale: every call); read-only to callers."""
        c = getattr(self, "_scaled", None)
        if c is not None and c[0] == s_x:
            return c[1]
        v = (s_x * self.scale).astype(np.float32)
        self._scaled = (s_x, v)                  # one assignment: a concurrent caller sees old or new
        return v

    @classmethod
    def of_conv(cls, weight: torch.Tensor, groups: int, layer: str, threads=None) -> "QWeight":
        w = weight.detach().permute(0, 2, 3, 1) if weight.dim() == 4 else weight.detach().permute(0, 2, 1)
        return cls(np.ascontiguousarray(w.reshape(weight.shape[0], -1).numpy()), groups, layer, threads)

    @classmethod
    def of_linear(cls, weight: torch.Tensor, layer: str, threads=None) -> "QWeight":
        return cls(np.ascontiguousarray(weight.detach().numpy()), 1, layer, threads)


class WeightCache:
    """A layer's ``QWeight`` of its weight's current values.

    ``get`` compares the weight with a float copy of the values it quantized
    (bitwise: a threaded memcmp of the two dense spans, ``_same_values``,
    bench/ab_weight_check.py) on every call and quantizes
    again when they differ: the version counter alone misses in-place edits
    through ``.data`` (``weight.data.mul_(mask)``, ``.data.copy_(...)``).  The
    state is one tuple, replaced in one assignment (threads calling a layer at
    once see an old or a new state, never a mix).  ``key`` finds the cache from
    the custom ops (``_CACHES``, weakly held); a deep copy or an unpickled
    copy is a new, empty cache with its own key."""

    def __init__(self):
        self.key = f"c{next(_CACHE_IDS)}"
        self._state = None    # (groups, float copy of the weight, QWeight, the copy's bytes or None)
        _CACHES[self.key] = self

    def get(self, weight: torch.Tensor, groups, layer: str, threads=None) -> "QWeight":
        """The QWeight of ``weight`` (a linear (O, K) weight for groups None, else a conv's)."""
        w = weight.detach()
        st = self._state
        if st is not None and st[0] == groups and st[1].shape == w.shape and st[1].stride() == w.stride() \
                and _same_values(st[1], st[3], w, threads):
            return st[2]
        qw = QWeight.of_linear(w, layer, threads) if groups is None else QWeight.of_conv(w, groups, layer, threads)
        copy = w.clone()                             # clone keeps w's strides (HF Conv1D passes W.t())
        dense = copy.numel() >= _SAME_MIN and _fills_span(copy)
        self._state = (groups, copy, qw, _flat(copy).view(np.uint8) if dense else None)
        return qw

    def __deepcopy__(self, memo):
        return WeightCache()

    def __reduce__(self):
        return WeightCache, ()


_SAME_MIN = 1 << 13                 # elements: below, torch.equal checks a weight faster


def _fills_span(t: torch.Tensor) -> bool:
    """Whether t's elements fill their storage span densely, in any dimension order (a
    transposed weight too): then ``_flat`` views them all."""
    expect = 1
    for st, sz in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz != 1):
        if st != expect:
            return False
        expect *= sz
    return True


def _same_values(copy: torch.Tensor, copy_bytes, w: torch.Tensor, threads) -> bool:
    """Bitwise equality of a weight and its float copy (one shape and strides): a threaded memcmp
    of their dense spans (lutcore.ops.im2col.same_bytes) when the copy's bytes were kept (w, with the
    copy's strides, fills its span too), else torch.equal of int32 views (small weights, where it
    is faster: ~3 against ~10 us; spans with gaps)."""
    if copy_bytes is None:
        return torch.equal(copy.view(torch.int32), w.view(torch.int32))
    return _im2col.same_bytes(copy_bytes, _flat(w).view(np.uint8), threads)


_CACHES = weakref.WeakValueDictionary()
_CACHE_IDS = itertools.count()


def _dense(x: torch.Tensor) -> torch.Tensor:
    """x itself when its elements fill its storage span densely (contiguous, channels_last), else a copy."""
    if x.is_contiguous() or (x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)):
        return x
    return x.contiguous()


def _flat(x: torch.Tensor) -> np.ndarray:
    """The numpy view of a dense tensor's elements in memory order (element 0 = x's data pointer)."""
    return x.detach().as_strided((x.numel(),), (1,)).numpy()


def _nhwc_view(x: torch.Tensor) -> tuple:
    """(shape, strides) of a dense (N, C, H, W) / (N, C, L) / (M, K) tensor as (N, H, W, C)."""
    if x.dim() == 2:
        return (x.shape[0], 1, 1, x.shape[1]), (x.stride(0), 0, 0, x.stride(1))
    if x.dim() == 3:
        return (x.shape[0], 1, x.shape[2], x.shape[1]), (x.stride(0), 0, x.stride(2), x.stride(1))
    s = x.stride()
    return (x.shape[0], x.shape[2], x.shape[3], x.shape[1]), (s[0], s[2], s[3], s[1])


def _nchw_view(x: torch.Tensor) -> tuple:
    """(shape, strides) of a dense (N, C, H, W) / (N, C, L) tensor as (N, C, H, W) (L: H = 1)."""
    if x.dim() == 3:
        return (x.shape[0], x.shape[1], 1, x.shape[2]), (x.stride(0), x.stride(1), 0, x.stride(2))
    return tuple(x.shape), tuple(x.stride())


def quantize_tensor(x: torch.Tensor, scale, what: str, layer: str, nt: int, nchw: bool = False):
    """(q (N*H*W*C,) int8 NHWC codes in scratch, s) of a dense tensor, one scale:
    ``scale`` (static) or max|x| / 127 (dynamic, scale None); ``nchw``: the codes in (N, C, H, W)
    order instead (a conv's input)."""
    flat = _flat(x)
    if scale is None:
        amax, bad = _im2col._absmax(flat, nt)
        if bad:
            raise ValueError(f"{layer}: {what} holds {bad} non-finite value(s) (NaN/Inf), which have no int8 code")
        scale = np.float32(amax) / _127
    shape, strides = _nchw_view(x) if nchw else _nhwc_view(x)
    q = _workspace.scratch(f"lt_q_{what}", x.numel(), np.int8)
    bad = _im2col._quantize_nhwc(q, flat, shape, strides, scale, nt)
    if bad:
        raise ValueError(f"{layer}: {what} holds {bad} non-finite value(s) (NaN/Inf), which have no int8 code")
    return q, np.float32(scale)


# Below this many multiply-accumulates a product runs on one thread (same bits at any count):
# a thread team's start and barrier cost more than the work (batch-1 inference), and on a
# busy machine a descheduled team member stalls the call for a whole time slice.
SERIAL_MACS_EXACT = 1 << 21
SERIAL_MACS_TABLE = 1 << 18


# backward="table"'s planes path folds dX's patch gradients a few images at a time, at most this
# many bytes of them: the pass writes them and the fold reads them in the last-level cache.
FOLD_CHUNK = 8 << 20


# Grouped convolutions with fewer output channels per group than this (depthwise: 1) run
# every group in one native pass of direct products from the codes (im2col.h,
# lc_grouped_direct) instead of im2col and one LUT GEMM per group, whose call, packing and
# thread team cost more than its few products; the same integer sums, so the same bits.
NARROW_GROUP = 8


def gemm_threads(M: int, K: int, N: int, units: Units, nt: int) -> int:
    return 1 if M * K * N < (SERIAL_MACS_EXACT if units.kernel_path == "exact" else SERIAL_MACS_TABLE) else nt


# A table product runs A (M, K) x the weight's packed B (K, O) as it is where the SIMD path's
# any-table body reads a staged B (VBMI, AVX-512BW: QWeight's PackedB holds the staged form,
# built once per weight, csrc/gemm/table_packed.h): each loaded table row serves up to 256
# output channels, and a call only quantizes and gathers A.  Without one (AVX2, generic) a
# product with few rows and many columns (batch-1 and small-batch inference: M of 8..63
# against hundreds of output channels) runs as its transpose, acc^T = W (O, K) times
# x^T (K, M) through the transposed table (mul^T[b, a] = mul[a, b]: the same products, the
# same integer sums, the same bits): the row-table path wants the long side as rows.
TRANSPOSE_ROWS = (8, 64)
TRANSPOSE_MIN_COLS = 256
_TRANSPOSED: dict = {}


def _transposed(units: Units) -> Units:
    """units with its table's operands swapped (the last 8 cached by digest)."""
    t = _TRANSPOSED.get(units.digest)
    if t is None:
        if len(_TRANSPOSED) >= 8:                       # a sweep over many units keeps only the recent
            _TRANSPOSED.pop(next(iter(_TRANSPOSED)))
        mul_t = np.ascontiguousarray(units.mul.reshape(256, 256).T)          # mul_t[b, a] = mul[a, b]
        t = _TRANSPOSED[units.digest] = Units.from_mul(mul_t, name=f"{units.name}^T")
    return t


def product(a: np.ndarray, qw: "QWeight", g: int, units: Units, nt: int, out: np.ndarray) -> np.ndarray:
    """out (M, Og) int32 = sum_k mul8[a[m, k], q_w[g*Og + o, k]] for group g of qw, a (M, K)
    int8: lut_gemm on the packed weight, or in the faster orientation (TRANSPOSE_ROWS)."""
    M, K = a.shape
    Og = out.shape[1]
    t = gemm_threads(M, K, Og, units, nt)
    if units.kernel_path == "table" and TRANSPOSE_ROWS[0] <= M < TRANSPOSE_ROWS[1] and Og >= TRANSPOSE_MIN_COLS \
            and not qw.b[g].table_staged(t):
        out[...] = lut_gemm(qw.q[g * Og:(g + 1) * Og], np.ascontiguousarray(a.T), _transposed(units), threads=t).T
        return out
    return lut_gemm(a, qw.b[g], units, threads=t, out=out)


def _reduction_chunk(units: Units) -> int:
    return max(1, INT32_MAX // max(units.max_abs_product, 1))


def _gemm_f32(a: np.ndarray, b: np.ndarray, units: Units, s: np.float32, nt: int) -> np.ndarray:
    """float32 s * float32(sum_k mul8[a, b]) (a (M, K), b (K, N) int8), the sum over k in
    int32 chunks added in float32 in order."""
    K = a.shape[1]
    step = _reduction_chunk(units)
    y = None
    for k0 in range(0, max(K, 1), step):
        a_, b_ = a[:, k0:k0 + step], b[k0:k0 + step]
        t = gemm_threads(a_.shape[0], a_.shape[1], b_.shape[1], units, nt)
        part = lut_gemm(a_, b_, units, threads=t).astype(np.float32) * s
        y = part if y is None else y + part
    return y


# --------------------------------------------------------------------------- forward

class _Conv:
    """The geometry of one convolution call (Conv1d as H = 1)."""

    def __init__(self, x, weight, stride, padding, dilation, groups, layer):
        self.d1 = weight.dim() == 3
        n = 1 if self.d1 else 2
        st, pd, dl = (_pair(v, nm, layer, n, lo) for v, nm, lo in
                      ((stride, "stride", 1), (padding, "padding", 0), (dilation, "dilation", 1)))
        if self.d1:
            st, pd, dl = (1,) + st, (0,) + pd, (1,) + dl
        self.stride, self.padding, self.dilation = st, pd, dl
        self.groups = G = _check.int_arg(groups, f"{layer}: groups", lo=1)
        N, C = x.shape[0], x.shape[1]
        H, W = (1, x.shape[2]) if self.d1 else (x.shape[2], x.shape[3])
        O, Cg = weight.shape[0], weight.shape[1]
        KH, KW = (1, weight.shape[2]) if self.d1 else (weight.shape[2], weight.shape[3])
        if C != Cg * G or O % G:
            raise ValueError(f"{layer}: input has {C} channels and weight shape {tuple(weight.shape)} with "
                             f"groups={G}: expected input channels = weight.shape[1] * groups and "
                             f"out channels divisible by groups")
        OH = (H + 2 * pd[0] - dl[0] * (KH - 1) - 1) // st[0] + 1
        OW = (W + 2 * pd[1] - dl[1] * (KW - 1) - 1) // st[1] + 1
        if OH < 1 or OW < 1:
            raise ValueError(f"{layer}: input spatial size {tuple(x.shape[2:])} is smaller than the kernel "
                             f"{tuple(weight.shape[2:])} (dilation {dl[-n:]}, padding {pd[-n:]})")
        self.N, self.C, self.H, self.W, self.O, self.Cg, self.KH, self.KW = N, C, H, W, O, Cg, KH, KW
        self.OH, self.OW, self.M, self.Kg, self.Og = OH, OW, N * OH * OW, KH * KW * Cg, O // G
        self.nhwc = (N, H, W, C)
        self.window = (KH, KW, OH, OW, st[0], st[1], pd[0], pd[1], dl[0], dl[1])     # ops.im2col's geometry

    def out_shape(self):
        return (self.N, self.O, self.OW) if self.d1 else (self.N, self.O, self.OH, self.OW)

    def patches(self, q: np.ndarray, nt: int) -> np.ndarray:
        """A (G, M, Kg) int8 from NHWC codes (scratch)."""
        A = _workspace.scratch("lt_cols", self.groups * self.M * self.Kg, np.int8).reshape(
            self.groups, self.M, self.Kg)
        _im2col._im2col(A, q, self, nt)
        return A

    def narrow(self) -> bool:
        """Groups narrow enough for the one-pass direct product (NARROW_GROUP)."""
        return self.groups > 1 and self.Og < NARROW_GROUP

    def aten_args(self):
        n = 1 if self.d1 else 2
        return (list(self.stride[-n:]), list(self.padding[-n:]), list(self.dilation[-n:]), False,
                [0] * n, self.groups)


def _dequant(acc: np.ndarray, qw: QWeight, s_x: np.float32, bias, shape, N: int, P: int, nt: int):
    scale = (s_x * qw.scale).astype(np.float32)                  # (O,) float32 s_x * s_w[o]
    y = torch.empty(shape, dtype=torch.float32)
    b = None if bias is None else np.ascontiguousarray(bias.detach().numpy())
    _im2col._dequant(y.view(-1).numpy(), acc, scale, b, N, P, nt)
    return y


def _check_k(K: int, units: Units, layer: str) -> None:
    if K > _reduction_chunk(units):
        raise ValueError(f"{layer}: reduction length {K} with products up to {units.max_abs_product} can "
                         f"overflow the int32 accumulator (at most {_reduction_chunk(units)})")


def conv_forward(x, weight, bias, qw: QWeight, units: Units, geo: _Conv, input_scale, layer: str, nt: int):
    """(y, s_x): the contract's convolution of a dense float32 x."""
    _check_k(geo.Kg, units, layer)
    q, s_x = quantize_tensor(x, input_scale, "input", layer, nt)
    exact = units.kernel_path == "exact"
    if geo.groups == 1 and geo.Kg <= _im2col.KMAX and _im2col.direct_fast(exact) \
            and not os.environ.get("LUTCORE_CONV_IM2COL"):
        # a first conv (C*KH*KW <= KMAX) through the exact table on AVX-512: the direct pass
        # (csrc/conv2d), no patch matrix, no int32 accumulator in memory; the same integer sums
        # and the same float32 scale as below: the same bits
        y = torch.empty(geo.out_shape(), dtype=torch.float32)
        b = None if bias is None else np.ascontiguousarray(bias.detach().numpy())
        _im2col._conv2d_direct(y.view(-1).numpy(), q, geo, qw.qt, units.kernel_table[0], exact,
                               qw.input_scaled(s_x), b, nt)
        return y, s_x
    acc = _workspace.scratch("lt_acc", geo.M * geo.O, np.int32).reshape(geo.M, geo.O)
    if geo.narrow():                                         # depthwise and the like: one pass, no patches
        _im2col._grouped_direct(acc, q, geo, geo.groups, qw.qt, units.kernel_table[0], exact, nt)
    else:
        A = geo.patches(q, nt)
        for g in range(geo.groups):
            product(A[g], qw, g, units, nt, acc[:, g * geo.Og:(g + 1) * geo.Og])
    return _dequant(acc, qw, s_x, bias, geo.out_shape(), geo.N, geo.OH * geo.OW, nt), s_x


def linear_forward(x2, bias, qw: QWeight, units: Units, input_scale, layer: str, nt: int):
    """(y (M, O), s_x) of a dense float32 x2 (M, K)."""
    M, K = x2.shape
    O = qw.q.shape[0]
    _check_k(K, units, layer)
    q, s_x = quantize_tensor(x2, input_scale, "input", layer, nt)
    acc = product(q.reshape(M, K), qw, 0, units, nt, _workspace.scratch("lt_acc", M * O, np.int32).reshape(M, O))
    return _dequant(acc, qw, s_x, bias, (M, O), M, 1, nt), s_x


# -------------------------------------------------------------------------- backward

def _grad_codes(dy: torch.Tensor, what: str, layer: str, nt: int) -> tuple:
    """(q (M, O) int8 copy, s) of a gradient (M, O) / (N, O, ...) quantized per tensor, rows in NHWC order."""
    dy = _dense(dy)
    q, s = quantize_tensor(dy, None, what, layer, nt)
    O = dy.shape[1]
    return q.reshape(-1, O).copy(), s


def units_backward(dy, x, qw: QWeight, s_x, units: Units, geo, input_scale, layer, nt, need):
    """(dx, dw) through the unit (module docstring); geo None: a linear layer, x (M, K)."""
    need_x, need_w = need
    O = qw.q.shape[0]
    shape_w = (1, O, 1, 1)[:dy.dim()] if dy.dim() > 2 else (1, O)
    dx = dw = None
    G = 1 if geo is None else geo.groups
    Og = O // G
    if need_x:
        g = dy * torch.tensor(qw.scale).reshape(shape_w)     # dY[., o] * s_w[o], float32
        qg, s_g = _grad_codes(g, "gradient", layer, nt)
        cols = [_gemm_f32(np.ascontiguousarray(qg[:, i * Og:(i + 1) * Og]), qw.q[i * Og:(i + 1) * Og], units,
                          s_g, nt) for i in range(G)]            # G x (M, Kg) float32
        if geo is None:
            dx = torch.from_numpy(cols[0])
        else:
            dx = _fold(cols, geo)
    if need_w:
        qdy, s_dy = _grad_codes(dy, "gradient", layer, nt)
        s = np.float32(s_dy * s_x)
        xd = _dense(x)
        qx, _ = quantize_tensor(xd, s_x, "input", layer, nt)
        if geo is None:
            Aq = qx.reshape(1, *x.shape)
        else:
            Aq = geo.patches(qx, nt)
        parts = [_gemm_f32(np.ascontiguousarray(qdy[:, i * Og:(i + 1) * Og].T), Aq[i], units, s, nt)
                 for i in range(G)]                               # G x (Og, Kg)
        w = np.concatenate(parts, axis=0)                          # (O, Kg) in (i, j, c) order
        if geo is None:
            dw = torch.from_numpy(w)
        else:
            w4 = torch.from_numpy(w).reshape(O, geo.KH, geo.KW, geo.Cg).permute(0, 3, 1, 2)
            dw = (w4[:, :, 0, :] if geo.d1 else w4).contiguous()
    return dx, dw


def _fold(cols: list, geo: _Conv) -> torch.Tensor:
    """dX (N, C, H, W) from per-group patch gradients (M, Kg) in (i, j, c) order."""
    per = [torch.from_numpy(c).reshape(geo.N, geo.OH * geo.OW, geo.KH, geo.KW, geo.Cg).permute(0, 4, 2, 3, 1)
           for c in cols]                                          # G x (N, Cg, KH, KW, L)
    col = torch.cat(per, dim=1).reshape(geo.N, geo.C * geo.KH * geo.KW, geo.OH * geo.OW)
    dx = F.fold(col, (geo.H, geo.W), (geo.KH, geo.KW), dilation=geo.dilation, padding=geo.padding,
                stride=geo.stride)
    return dx[:, :, 0, :] if geo.d1 else dx


# ------------------------------------------------------------------------- Functions

def _mode(backward) -> str:
    """A Function's ``backward``: "ste", "units", or the gradient tables (ga, gb, gbt): "table"."""
    return backward if isinstance(backward, str) else "table"


def _unit_grads(dy, x, qw, s_x, units, geo, backward, input_scale, layer, nt, need, weight):
    """(dx, dw) of backward="units" or "table" (differentiable once, naming the mode)."""
    mode = _mode(backward)
    if mode == "units":
        grads = units_backward(dy, x, qw, s_x, units, geo, input_scale, layer, nt, need)
    else:
        grads = table_backward(dy, x, qw, s_x, backward, geo, input_scale, layer, nt, need)
    return _once_differentiable(layer, grads, (dy, x, weight), mode)


class LutConvFunction(torch.autograd.Function):
    """y = the contract's conv (1-D or 2-D by the weight's rank) of x through ``units``;
    ``backward``: "ste", "units", or the unit's gradient tables (backward="table")."""

    @staticmethod
    def forward(ctx, x, weight, bias, qw, units, geo, backward, input_scale, layer, nt):
        x = _dense(x)
        y, s_x = conv_forward(x, weight, bias, qw, units, geo, input_scale, layer, nt)
        ctx.save_for_backward(x, weight, bias)
        ctx.lc = (qw, units, geo, backward, input_scale, layer, nt, s_x)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        qw, units, geo, backward, input_scale, layer, nt, s_x = ctx.lc
        nx, nw, nb = ctx.needs_input_grad[:3]
        ste = _mode(backward) == "ste"
        dx = dw = db = None
        if not ste:
            dx, dw = _unit_grads(dy, x, qw, s_x, units, geo, backward, input_scale, layer, nt, (nx, nw), weight)
        mask = [nx and ste, nw and ste, nb and bias is not None]     # db in float in every mode
        if any(mask):
            gx, gw, db = torch.ops.aten.convolution_backward(
                dy, x, weight, None if bias is None else [bias.shape[0]], *geo.aten_args(), mask)
            if ste:
                dx, dw = gx, gw
        return (dx if nx else None, dw if nw else None, db if nb else None) + (None,) * 7


class LutLinearFunction(torch.autograd.Function):
    """y = the contract's x @ weight.T + bias through ``units`` (x (M, K) dense); ``backward``:
    "ste", "units", or the unit's gradient tables (backward="table")."""

    @staticmethod
    def forward(ctx, x2, weight, bias, qw, units, backward, input_scale, layer, nt):
        x2 = _dense(x2)
        y, s_x = linear_forward(x2, bias, qw, units, input_scale, layer, nt)
        ctx.save_for_backward(x2, weight, bias)
        ctx.lc = (qw, units, backward, input_scale, layer, nt, s_x)
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, weight, bias = ctx.saved_tensors
        qw, units, backward, input_scale, layer, nt, s_x = ctx.lc
        nx, nw, nb = ctx.needs_input_grad[:3]
        if _mode(backward) == "ste":
            dx = dy.mm(weight) if nx else None
            dw = dy.t().mm(x2) if nw else None
        else:
            dx, dw = _unit_grads(dy, x2, qw, s_x, units, None, backward, input_scale, layer, nt, (nx, nw), weight)
        db = dy.sum(0) if nb and bias is not None else None
        return (dx, dw, db) + (None,) * 6


# backward="table": the products as above, the gradients through the unit's gradient tables
# (the tables and their sums: lutcore.torch._gradtables)

def _clamped(x: torch.Tensor, s_x, input_scale) -> torch.Tensor | None:
    """The elements of x its static scale saturated (|round(x / s)| > 127), or None (dynamic: none)."""
    if input_scale is None:
        return None
    s = torch.tensor(float(s_x), dtype=torch.float32)
    if float(s) == 0.0:
        return x != 0
    return torch.round(x / s).abs() > 127


def table_backward(dy, x, qw, s_x, tables, geo, input_scale, layer, nt, need):
    """(dx, dw) through the gradient tables (``lutcore.torch._gradtables``' docstring); geo None: a
    linear layer, x (M, K) dense."""
    planes = _gradtables.use_planes(tables) if geo is None or geo.groups == 1 else None
    if planes is not None:
        return _table_backward_planes(dy, x, qw, s_x, planes, geo, input_scale, layer, nt, need)
    need_x, need_w = need
    ga, gb, gbt = tables
    O = qw.q.shape[0]
    G = 1 if geo is None else geo.groups
    Og = O // G
    if geo is None:
        dy2 = dy
        qx, _ = quantize_tensor(_dense(x), s_x, "input", layer, nt)
        A = qx.reshape(1, *x.shape).copy()
    else:
        dy2 = dy.permute(0, 2, 1) if geo.d1 else dy.permute(0, 2, 3, 1)
        dy2 = dy2.reshape(geo.M, O)
        qx, _ = quantize_tensor(_dense(x), s_x, "input", layer, nt)
        A = geo.patches(qx, nt).copy()                                     # (G, M, Kg)
    dy_np = np.ascontiguousarray(dy2.detach().numpy(), dtype=np.float32)
    g_np = (dy_np * qw.scale[None, :]).astype(np.float32) if need_x else None
    cols, parts = [], []
    for i in range(G):
        sl = slice(i * Og, (i + 1) * Og)
        d, s = _gradtables.table_grads(A[i], qw.q[sl], None if g_np is None else np.ascontiguousarray(g_np[:, sl]),
                                       np.ascontiguousarray(dy_np[:, sl]) if need_w else None, ga, gb, nt, gbt)
        cols.append(d)
        parts.append(s)
    dx = dw = None
    if need_x:
        dx = torch.from_numpy(cols[0]) if geo is None else _fold(cols, geo)
        mask = _clamped(x, s_x, input_scale)
        if mask is not None:
            dx = dx.masked_fill(mask, 0.0)
    if need_w:
        w = np.concatenate(parts, axis=0) * np.float32(s_x)            # (O, Kg), s_x after the sum
        if geo is None:
            dw = torch.from_numpy(w)
        else:
            w4 = torch.from_numpy(w).reshape(O, geo.KH, geo.KW, geo.Cg).permute(0, 3, 1, 2)
            dw = (w4[:, :, 0, :] if geo.d1 else w4).contiguous()
    return dx, dw


def _table_backward_planes(dy, x, qw, s_x, planes, geo, input_scale, layer, nt, need):
    """table_backward through the planes pass (one group, or a linear layer): the same sums in the
    same order, k-major — the input's codes gathered k-major (no patch matrix to transpose), dX's
    patch gradients folded back from k-major (the bits of F.fold), the weights dY s_w laid out
    (O, M) and dY (M, O) in scratch.

        AT   int8    (Kg, M)   the codes of x, k-major       dxT  float32 (Kg, nb*P)  dX's patch gradients,
        gT   float32 (O, M)    float32(dY[m, o] * s_w[o])                            nb images at a time
        dyM  float32 (M, O)    dY, rows m                    sT   float32 (Kg, O)    dW / s_x, k-major
    (AT, gT, dxT in scratch rows ROW_PAD elements longer than their width)."""
    need_x, need_w = need
    O = qw.q.shape[0]
    xd = _dense(x)
    if geo is None:                                                     # linear: x (M, K), dy (M, O)
        M, K = x.shape
        q, _ = quantize_tensor(xd, s_x, "input", layer, nt)
        AT = _padded("lt_gt_AT", K, M, np.int8)
        AT[...] = q.reshape(M, K).T
    else:
        M, K = geo.M, geo.Kg
        q, _ = quantize_tensor(xd, s_x, "input", layer, nt, nchw=True)
        AT = _padded("lt_gt_AT", K, M, np.int8)
        _im2col._im2col_kmajor(AT, q, geo, nt)
    pa, sa, pb, sb = planes
    # the weights carry the tables' power-of-two scales where that is exact (then the pass takes
    # scale 1 and skips a multiply a value; an inexact one, an underflow, keeps the scale apart)
    gT = dyM = None
    dyn = dy.detach().numpy()
    dense = dyn.flags.c_contiguous
    dy3 = dyn.reshape(dyn.shape[0], O, -1) if dense else None            # (N, O, P): NCHW, or (M, O, 1)
    if need_x:                                                          # g^T[o, m] = float32(dY[m, o] * s_w[o])
        gT = _padded("lt_gt_gT", O, M, np.float32)
        if dense:
            if not _im2col._scaled_om(gT, dy3, qw.scale, sa, nt):
                _im2col._scaled_om(gT, dy3, qw.scale, 1.0, nt)
            else:
                sa = np.float32(1.0)
        else:
            dyt = dyn.T if geo is None else dyn.swapaxes(0, 1)          # (O, M) / (O, N, ...)
            out = gT.view()
            out.shape = dyt.shape                                       # a view (never a copy): splits rows
            np.multiply(dyt, qw.scale.reshape((O,) + (1,) * (dyn.ndim - 1)), out=out)
    if need_w:
        dyM = _workspace.scratch("lt_gt_dyM", M * O, np.float32).reshape(M, O)
        if dense:                                                       # NCHW: a threaded blocked transpose
            if not _im2col._chw_rows(dyM, dy3, nt, sb):
                _im2col._chw_rows(dyM, dy3, nt, 1.0)
            else:
                sb = np.float32(1.0)
        else:
            dyp = dyn if geo is None else dyn.transpose((0, 2, 1) if geo.d1 else (0, 2, 3, 1))
            np.copyto(dyM.reshape(dyp.shape), dyp)
    dx = dw = None
    if need_x:
        if geo is None:
            dxT = _gtroom.planes_pass(_workspace.scratch("lt_gt_dxT", K * M, np.float32).reshape(K, M), qw.q, AT,
                                      gT, pa, sa, nt)
            dx = torch.from_numpy(np.ascontiguousarray(dxT.T))
        else:
            # a few images at a time: their patch gradients (<= FOLD_CHUNK bytes) are folded while
            # still in the last-level cache (the same sums per output: the same bits)
            dx = torch.empty(x.shape, dtype=torch.float32)
            dxn = dx.view(-1).numpy()
            P, img = geo.OH * geo.OW, geo.C * geo.H * geo.W
            nb = max(1, min(geo.N, FOLD_CHUNK // max(1, 4 * K * P)))
            buf = _padded("lt_gt_dxT", K, nb * P, np.float32)
            for n0 in range(0, geo.N, nb):
                n1 = min(geo.N, n0 + nb)
                dxT = _gtroom.planes_pass(buf[:, :(n1 - n0) * P], qw.q, AT[:, n0 * P:n1 * P], gT[:, n0 * P:n1 * P],
                                          pa, sa, nt)
                _im2col._fold_kmajor(dxn[n0 * img:n1 * img], dxT, geo, nt, images=n1 - n0)
        mask = _clamped(x, s_x, input_scale)
        if mask is not None:
            dx = dx.masked_fill(mask, 0.0)
    if need_w:
        sT = _gtroom.planes_pass(_workspace.scratch("lt_gt_sT", K * O, np.float32).reshape(K, O), AT.T, qw.qt,
                                 dyM, pb, sb, nt, skip=True,          # code 0 (ReLU, padding): nothing to add
                                 sym=True)                            # codes by magnitude where Gb is even in b
        # dW = sT^T * s_x (s_x after the sum), laid out as the weight: (O, Cg, KH, KW) from (KH, KW, Cg, O)
        if geo is None:
            w = np.empty((O, K), np.float32)
            np.multiply(sT.T, np.float32(s_x), out=w)
            dw = torch.from_numpy(w)
        else:
            w = np.empty((O, geo.Cg, geo.KH * geo.KW), np.float32)
            _im2col._dw_layout(w, sT.reshape(geo.KH * geo.KW, geo.Cg, O), s_x, nt)
            dw = torch.from_numpy(w).view(O, geo.Cg, geo.KH, geo.KW)
            if geo.d1:
                dw = dw[:, :, 0, :].contiguous()
    return dx, dw


# Rows of the planes path's k-major and (O, M) operands this many elements longer than their M:
# rows a multiple of 4 KiB apart fall into the same L1 sets (dX's lanes are M = 2^k positions).
ROW_PAD = 64


def _padded(purpose: str, rows: int, cols: int, dtype) -> np.ndarray:
    """A (rows, cols) scratch view whose rows are cols + ROW_PAD elements apart (contents undefined)."""
    ld = cols + ROW_PAD
    return _workspace.scratch(purpose, rows * ld, dtype).reshape(rows, ld)[:, :cols]


# The table mode runs through the same Functions (their ``backward`` argument holds the tables).
LutLinearTableFunction, LutConvTableFunction = LutLinearFunction, LutConvFunction


# --------------------------------------------------------------------- functional API

def _common(x, weight, bias, units, backward, input_scale, threads, layer, ndim):
    check_tensor(x, "input", layer)
    check_tensor(weight, "weight", layer, ndim)
    if bias is not None:
        check_tensor(bias, "bias", layer, 1)
        if bias.shape[0] != weight.shape[0]:
            raise ValueError(f"{layer}: bias: expected shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    if _tracing():
        units = _units_key(units)                    # tracing: the digest (a str)
    elif not isinstance(units, Units) and not _is_mx(units):   # a layer's units were resolved when it was set up
        units = resolve_units(units, mx=True)
    if not (torch.compiler.is_compiling() and isinstance(input_scale, float)):
        input_scale = scale_arg(input_scale, layer)   # (TorchDynamo may trace a float symbolically: the op checks it)
    return (units, backward_arg(backward, layer), input_scale,
            _threads_arg(threads))


def zero_point_arg(zp, units, input_scale, layer: str):
    """A static input zero point, checked against the unit's activation format: None with a
    dynamic input (or a signed activation: 0 too); with a static scale and an unsigned
    activation, an int in the code range 0 .. 2^bits - 1 (a ValueError naming the layer, the
    range and the value otherwise)."""
    if zp is None:
        if input_scale is not None and isinstance(units, Units) and not units.format.a_signed:
            raise ValueError(f"{layer}: input_zero_point: units {units.name!r} ({units.format}) take unsigned "
                             f"activation codes: a static input_scale needs its zero point too (calibrate sets both)")
        return None
    if isinstance(zp, torch.Tensor):
        if zp.numel() != 1 or zp.is_floating_point():
            raise ValueError(f"{layer}: input_zero_point: expected one integer, got {zp.dtype} {tuple(zp.shape)}")
        zp = int(zp)
    if isinstance(zp, bool) or not isinstance(zp, (int, np.integer)):
        raise TypeError(f"{layer}: input_zero_point: expected an int or None, got {type(zp).__name__} {zp!r}")
    zp = int(zp)
    if input_scale is None:
        raise ValueError(f"{layer}: input_zero_point={zp} without a static input_scale: a dynamic input takes its "
                         f"zero point from each call")
    fmt = units.format if isinstance(units, Units) else None
    if fmt is None or fmt.a_signed:
        if zp != 0:
            raise ValueError(f"{layer}: input_zero_point: {'signed 8 x 8' if fmt is None else str(fmt)} units quantize "
                             f"the input symmetrically (zero point 0), got {zp}")
        return None
    hi = (1 << fmt.a_bits) - 1
    if not 0 <= zp <= hi:
        raise ValueError(f"{layer}: input_zero_point: expected a code of the {fmt.a_bits}-bit unsigned activation "
                         f"(format {fmt}) in [0, {hi}], got {zp}")
    return zp


@torch.compiler.assume_constant_result          # TorchDynamo: a constant (the same bits at any count)
def _threads_arg(threads) -> int:
    return resolve_threads(threads)


def _qweight(qw, weight, groups, layer, threads):
    """The QWeight to compute with: qw itself, a WeightCache's (content-checked), or a fresh one
    (quantized with the call's ``threads``)."""
    if isinstance(qw, WeightCache):
        return qw.get(weight, groups, layer, threads)
    if qw is None:
        return (QWeight.of_linear(weight, layer, threads) if groups is None
                else QWeight.of_conv(weight, groups, layer, threads))
    return qw


def _torch_result(f, layer: str):
    """torch's own result where a zero-size dimension leaves no product (bias broadcast, zeros,
    an empty tensor); where torch refuses the shapes, a ValueError naming the layer."""
    try:
        return f()
    except RuntimeError as e:
        raise ValueError(f"{layer}: {e}") from None


def _table_args(units, backward, grad_h, layer):
    """backward="table": the (Ga, Gb) tables for the Function (errors name the layer); else None."""
    if backward != "table":
        return None
    if _tracing():
        raise ValueError(f"{layer}: backward='table' does not run under torch.compile, torch.export or "
                         f"torch.jit.trace yet; trace with backward='ste' or 'units'")
    return _gradtables.tables_for(units, grad_h, layer)


def linear(x, weight, bias, units, backward, input_scale, threads, layer, qw=None, grad_h=None,
           input_zero_point=None, weights="channel"):
    """The shared body of lut_linear and the linear layers: x (..., K) -> (..., O); ``qw`` a
    QWeight, a layer's WeightCache or None (quantize ``weight`` here)."""
    units, backward, input_scale, nt = _common(x, weight, bias, units, backward, input_scale, threads, layer, 2)
    zp = zero_point_arg(input_zero_point, units, input_scale, layer)
    weights = weights_arg(weights, layer)
    K = weight.shape[1]
    if x.dim() < 1 or x.shape[-1] != K:
        raise ValueError(f"{layer}: input: expected last dimension {K} (weight {tuple(weight.shape)}), "
                         f"got shape {tuple(x.shape)}")
    if x.numel() == 0 or weight.numel() == 0:
        return _torch_result(lambda: F.linear(x, weight, bias), layer)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, K)
    if _is_mx(units):
        _mx_args(units, input_scale, weights, grad_h, layer, backward)
        return _mx.linear(x2, weight, bias, units, backward, layer, nt).reshape(*lead, weight.shape[0])
    if _formats_path(units, layer, weights):
        return _formats.linear(x2, weight, bias, units, backward, grad_h, layer, nt,
                               _formats.static(input_scale, zp), weights).reshape(*lead, weight.shape[0])
    tables = _table_args(units, backward, grad_h, layer)
    if tables is not None:
        y = LutLinearFunction.apply(x2, weight, bias, _qweight(qw, weight, None, layer, nt), units, tables,
                                    input_scale, layer, nt)
    elif _tracing():
        y = torch.ops.lutcore.linear(x2, weight, bias, units, backward, _scale_float(input_scale),
                                     layer, nt, qw.key if isinstance(qw, WeightCache) else "")[0]
    elif not _differentiable(x2, weight, bias):    # inference: the Function's forward without its node
        y = linear_forward(_dense(x2), bias, _qweight(qw, weight, None, layer, nt), units, input_scale, layer, nt)[0]
    else:
        y = LutLinearFunction.apply(x2, weight, bias, _qweight(qw, weight, None, layer, nt), units, backward,
                                    input_scale, layer, nt)
    return y.reshape(*lead, weight.shape[0])


def _is_mx(units) -> bool:
    """MX or bf16/fp16 mantissa-product units (lutcore/torch/_mx.py runs both)."""
    return isinstance(units, (MXUnits, MantissaUnits))


def _mx_args(units, input_scale, weights, grad_h, layer, backward=None) -> None:
    """MX units quantize every call in blocks: no static input scale, no per-tensor weight scale;
    not traceable yet (ValueErrors naming the layer)."""
    if input_scale is not None:
        raise ValueError(f"{layer}: units {units.name!r} quantize the input each call (floating point): a static "
                         f"input_scale (activations='static') does not apply; use activations='dynamic'")
    if weights != "channel":
        raise ValueError(f"{layer}: units {units.name!r} are floating point (no per-channel or per-tensor weight "
                         f"scale): weights={weights!r} does not apply")
    if backward == "table" and units.kind == "mantissa":
        raise ValueError(f"{layer}: units {units.name!r} (bf16/fp16 through a significand table) have no gradient "
                         f"tables: use backward='ste' or 'units'")
    if grad_h is not None:
        raise ValueError(f"{layer}: units {units.name!r} are floating point (MX units take their gradient tables "
                         f"from differences between neighbouring values): grad_h={grad_h!r} does not apply")
    if _tracing():
        raise ValueError(f"{layer}: MX units do not run under torch.compile, torch.export or torch.jit.trace yet")


WEIGHTS = ("channel", "tensor")


def weights_arg(v, layer: str) -> str:
    if v not in WEIGHTS:
        raise ValueError(f"{layer}: weights: expected one of {WEIGHTS} (a weight scale per output channel, or one "
                         f"for the whole weight), got {v!r}")
    return v


def _formats_path(units, layer, weights="channel") -> bool:
    """Whether a call runs through lutcore.torch._formats (units of another format than signed
    8 x 8: zero points, narrow and wide codes; or one weight scale per tensor); not traceable yet
    (a ValueError naming the layer)."""
    u = _units_of(units) if isinstance(units, str) else units          # tracing: the digest
    if u.plain and weights == "channel":
        return False
    if _tracing():
        raise ValueError(f"{layer}: units of another format than signed 8 x 8 do not run under torch.compile, "
                         f"torch.export or torch.jit.trace yet")
    return True


def _differentiable(x, weight, bias) -> bool:
    """Whether autograd would record the layer's call (grad mode on and an input requiring grad)."""
    return torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                        or (bias is not None and bias.requires_grad))


def _same_padding(x, weight, dilation, layer, n):
    """padding='same'/'valid' as ints; an odd total pads the far side in float (zeros) first."""
    dl = _pair(dilation, "dilation", layer, n, 1)
    total = [d * (int(k) - 1) for d, k in zip(dl, weight.shape[2:])]     # int: jit.trace gives sizes as tensors
    left = [t // 2 for t in total]
    if any(t % 2 for t in total):
        extra = []
        for t in reversed(total):
            extra += [0, t % 2]
        x = F.pad(x, extra)
    return x, tuple(left)


def conv(x, weight, bias, units, stride, padding, dilation, groups, backward, input_scale, threads, layer,
         qw=None, grad_h=None, input_zero_point=None, weights="channel"):
    """The shared body of lut_conv1d / lut_conv2d and the conv layers."""
    n = weight.dim() - 2
    units, backward, input_scale, nt = _common(x, weight, bias, units, backward, input_scale, threads, layer,
                                               n + 2)
    zp = zero_point_arg(input_zero_point, units, input_scale, layer)
    weights = weights_arg(weights, layer)
    if x.dim() == n + 1:                             # unbatched (channels, ...), as F.conv*d takes
        return conv(x.unsqueeze(0), weight, bias, units, stride, padding, dilation, groups, backward,
                    input_scale, threads, layer, qw, grad_h, zp, weights).squeeze(0)
    if x.dim() != n + 2:
        raise ValueError(f"{layer}: input: expected a {n + 1}-D (channels, ...) or {n + 2}-D (batch, "
                         f"channels, ...) tensor, got shape {tuple(x.shape)}")
    if isinstance(padding, str) and padding not in ("valid", "same"):
        raise ValueError(f"{layer}: padding: expected an int, a tuple, 'valid' or 'same', got {padding!r}")
    if padding == "same" and any(s != 1 for s in _pair(stride, "stride", layer, n, 1)):
        raise ValueError(f"{layer}: padding='same' is not supported for strided convolutions (as in torch): "
                         f"got stride={stride!r}; use stride 1, or explicit padding")
    if x.numel() == 0 or weight.numel() == 0:
        f = F.conv1d if n == 1 else F.conv2d
        return _torch_result(lambda: f(x, weight, bias, stride, padding, dilation, groups), layer)
    if padding == "valid":
        padding = 0
    elif padding == "same":
        x, padding = _same_padding(x, weight, dilation, layer, n)
    geo = _conv_geo(x, weight, stride, padding, dilation, groups, layer)
    if _is_mx(units):
        _mx_args(units, input_scale, weights, grad_h, layer, backward)
        return _mx.conv(x, weight, bias, units, geo, backward, layer, nt)
    if _formats_path(units, layer, weights):
        return _formats.conv(x, weight, bias, units, geo, backward, grad_h, layer, nt,
                             _formats.static(input_scale, zp), weights)
    tables = _table_args(units, backward, grad_h, layer)
    if tables is not None:
        return LutConvFunction.apply(x, weight, bias, _qweight(qw, weight, geo.groups, layer, nt), units, geo,
                                     tables, input_scale, layer, nt)
    if _tracing():
        return torch.ops.lutcore.conv(x, weight, bias, list(geo.stride[-n:]), list(geo.padding[-n:]),
                                      list(geo.dilation[-n:]), geo.groups, units, backward,
                                      _scale_float(input_scale), layer, nt,
                                      qw.key if isinstance(qw, WeightCache) else "")[0]
    qw = _qweight(qw, weight, geo.groups, layer, nt)
    if not _differentiable(x, weight, bias):       # inference: the Function's forward without its node
        return conv_forward(_dense(x), weight, bias, qw, units, geo, input_scale, layer, nt)[0]
    return LutConvFunction.apply(x, weight, bias, qw, units, geo, backward, input_scale, layer, nt)


_GEOS: dict = {}


def _conv_geo(x, weight, stride, padding, dilation, groups, layer) -> _Conv:
    """_Conv(...), kept per (shapes, stride, padding, dilation, groups) for the next call with the
    same ones (a layer's steady state); a failing geometry raises every time and is not kept."""
    if _tracing():
        return _Conv(x, weight, stride, padding, dilation, groups, layer)
    try:
        key = (tuple(x.shape), tuple(weight.shape), _hkey(stride), _hkey(padding), _hkey(dilation), _hkey(groups),
               layer)
        hash(key)
    except TypeError:
        return _Conv(x, weight, stride, padding, dilation, groups, layer)
    geo = _GEOS.get(key)
    if geo is None:
        geo = _Conv(x, weight, stride, padding, dilation, groups, layer)
        if len(_GEOS) >= 256:
            _GEOS.clear()
        _GEOS[key] = geo
    return geo


def _hkey(v):
    """v as a hashable key part that tells an int from a bool, a float or a str (type and value)."""
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple((type(e).__name__, e) for e in v)
    return (type(v).__name__, v)


def lut_linear(x, weight, bias=None, units="exact", *, backward="ste", input_scale=None, threads=None,
               grad_h=None, input_zero_point=None, weights="channel"):
    """``F.linear(x, weight, bias)`` through ``units``' multiplier (the contract in docs/DESIGN.md).

    x (..., K) and weight (O, K) float32 CPU; ``input_scale`` None quantizes x with
    its own max|x| / 127, a number (> 0, finite in float32) uses that scale (values
    beyond saturate).  ``backward="units"`` is differentiable once: a second
    differentiation of its gradients (``create_graph=True``, a gradient penalty)
    raises a RuntimeError; ``"ste"`` is differentiable twice like the float layer.
    A zero-size dimension (no product) gives torch's own result (the bias
    broadcast, zeros, an empty tensor).  Under torch.compile, torch.export and
    torch.jit.trace the products run as the custom ops ``torch.ops.lutcore.*``,
    with the same bits.  ``backward="table"``: through the unit's gradient tables
    (``lutcore.torch._gradtables``; ``grad_h`` None, an int 1..127 or "supplied").  Units of
    another format (``units.format``) quantize x with zero points (``lutcore.torch._formats``):
    a static ``input_scale`` then takes ``input_zero_point`` (a code of an unsigned activation).
    ``weights``: "channel" (a weight scale, and zero point, per output channel) or "tensor" (one)."""
    return linear(x, weight, bias, units, backward, input_scale, threads, "lut_linear", grad_h=grad_h,
                  input_zero_point=input_zero_point, weights=weights)


def lut_conv2d(x, weight, bias=None, units="exact", stride=1, padding=0, dilation=1, groups=1, *,
               backward="ste", input_scale=None, threads=None, grad_h=None, input_zero_point=None,
               weights="channel"):
    """``F.conv2d`` through ``units``' multiplier: x (N, C, H, W), weight (O, C/groups, KH, KW)."""
    return conv(x, weight, bias, units, stride, padding, dilation, groups, backward, input_scale, threads,
                "lut_conv2d", grad_h=grad_h, input_zero_point=input_zero_point, weights=weights)


def lut_conv1d(x, weight, bias=None, units="exact", stride=1, padding=0, dilation=1, groups=1, *,
               backward="ste", input_scale=None, threads=None, grad_h=None, input_zero_point=None,
               weights="channel"):
    """``F.conv1d`` through ``units``' multiplier: x (N, C, L), weight (O, C/groups, K)."""
    return conv(x, weight, bias, units, stride, padding, dilation, groups, backward, input_scale, threads,
                "lut_conv1d", grad_h=grad_h, input_zero_point=input_zero_point, weights=weights)


# ------------------------------------------------- torch.compile / torch.export / jit.trace
#
# Eagerly the products run through the autograd Functions above (the cheapest call).  While
# torch traces (TorchDynamo, torch.export, torch.jit.trace) they run as custom ops instead:
# opaque to the tracer, with a fake (shape-only) implementation and the same backward, and
# with only tensors, numbers and strings as arguments: the units by digest (_UNITS), a
# layer's WeightCache by key (_CACHES; "" quantizes the weight per call).  Both paths call
# the same forward and backward bodies, so they give the same bits.

_UNITS: dict = {}


def _tracing() -> bool:
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


@torch.compiler.assume_constant_result          # run for real while TorchDynamo traces (a side effect)
def _units_key(units) -> str:
    """The digest of resolve(units), which the custom ops find in _UNITS."""
    if isinstance(units, str) and units in _UNITS:  # already a digest (conv's unbatched call)
        return units
    if not isinstance(units, Units):
        units = resolve_units(units)
    _UNITS.setdefault(units.digest, units)
    return units.digest


def _units_of(key: str) -> Units:
    u = _UNITS.get(key)
    if u is None:
        raise ValueError(f"units {key[:16]}: not known in this process (a traced or exported program names "
                         f"its units by digest): resolve the same Units here first, e.g. run the converted "
                         f"model once")
    return u


def _scale_float(s):
    return None if s is None else float(s)


def _scale32(s, layer: str):
    return None if s is None else np.float32(scale_arg(s, layer))


def _op_qweight(cache: str, weight, groups, layer, threads):
    c = _CACHES.get(cache) if cache else None
    return _qweight(c, weight, groups, layer, threads)


def _empty_unless(need: bool, t):
    return t if need else torch.empty(0)


@torch.library.custom_op("lutcore::linear", mutates_args=())
def _linear_op(x2: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], units: str, backward: str,
               input_scale: Optional[float], layer: str, threads: int, cache: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(y (M, O), s_x 0-d) of x2 (M, K): linear_forward."""
    qw = _op_qweight(cache, weight, None, layer, threads)
    y, s_x = linear_forward(_dense(x2), bias, qw, _units_of(units), _scale32(input_scale, layer), layer, threads)
    return y, torch.tensor(float(s_x), dtype=torch.float32)


@_linear_op.register_fake
def _(x2, weight, bias, units, backward, input_scale, layer, threads, cache):
    return x2.new_empty((x2.shape[0], weight.shape[0])), x2.new_empty(())


@torch.library.custom_op("lutcore::linear_units_backward", mutates_args=())
def _linear_ub_op(dy: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor, s_x: torch.Tensor, units: str,
                  input_scale: Optional[float], layer: str, threads: int, cache: str, need_x: bool,
                  need_w: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx (M, K), dw (O, K)) through the unit; an unneeded one is empty."""
    qw = _op_qweight(cache, weight, None, layer, threads)
    dx, dw = units_backward(dy, x2, qw, np.float32(s_x.item()), _units_of(units), None, _scale32(input_scale, layer),
                            layer, threads, (need_x, need_w))
    return _empty_unless(need_x, dx), _empty_unless(need_w, dw)


@_linear_ub_op.register_fake
def _(dy, x2, weight, s_x, units, input_scale, layer, threads, cache, need_x, need_w):
    return x2.new_empty(x2.shape if need_x else (0,)), x2.new_empty(weight.shape if need_w else (0,))


def _linear_setup(ctx, inputs, output):
    x2, weight, bias, units, backward, input_scale, layer, threads, cache = inputs
    ctx.save_for_backward(x2, weight, bias, output[1])
    ctx.lc = (units, backward, input_scale, layer, threads, cache)


def _linear_bwd(ctx, dy, _ds):
    x2, weight, bias, s_x = ctx.saved_tensors
    units, backward, input_scale, layer, threads, cache = ctx.lc
    nx, nw, nb = ctx.needs_input_grad[:3]
    if backward == "ste":
        dx = dy.mm(weight) if nx else None
        dw = dy.t().mm(x2) if nw else None
    else:
        dx, dw = torch.ops.lutcore.linear_units_backward(dy, x2, weight, s_x, units, input_scale, layer, threads,
                                                         cache, nx, nw)
        dx, dw = (dx if nx else None), (dw if nw else None)
    db = dy.sum(0) if nb and bias is not None else None
    return (dx, dw, db) + (None,) * 6


_linear_op.register_autograd(_linear_bwd, setup_context=_linear_setup)


@torch.library.custom_op("lutcore::conv", mutates_args=())
def _conv_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: List[int],
             padding: List[int], dilation: List[int], groups: int, units: str, backward: str,
             input_scale: Optional[float], layer: str, threads: int, cache: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(y (N, O, ...), s_x 0-d): conv_forward (x already padded for 'same')."""
    x = _dense(x)
    geo = _Conv(x, weight, stride, padding, dilation, groups, layer)
    qw = _op_qweight(cache, weight, geo.groups, layer, threads)
    y, s_x = conv_forward(x, weight, bias, qw, _units_of(units), geo, _scale32(input_scale, layer), layer, threads)
    return y, torch.tensor(float(s_x), dtype=torch.float32)


@_conv_op.register_fake
def _(x, weight, bias, stride, padding, dilation, groups, units, backward, input_scale, layer, threads, cache):
    return x.new_empty(_Conv(x, weight, stride, padding, dilation, groups, layer).out_shape()), x.new_empty(())


@torch.library.custom_op("lutcore::conv_units_backward", mutates_args=())
def _conv_ub_op(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, s_x: torch.Tensor, stride: List[int],
                padding: List[int], dilation: List[int], groups: int, units: str, input_scale: Optional[float],
                layer: str, threads: int, cache: str, need_x: bool,
                need_w: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x = _dense(x)
    geo = _Conv(x, weight, stride, padding, dilation, groups, layer)
    qw = _op_qweight(cache, weight, geo.groups, layer, threads)
    dx, dw = units_backward(dy, x, qw, np.float32(s_x.item()), _units_of(units), geo, _scale32(input_scale, layer),
                            layer, threads, (need_x, need_w))
    return _empty_unless(need_x, dx), _empty_unless(need_w, dw)


@_conv_ub_op.register_fake
def _(dy, x, weight, s_x, stride, padding, dilation, groups, units, input_scale, layer, threads, cache, need_x,
      need_w):
    return x.new_empty(x.shape if need_x else (0,)), x.new_empty(weight.shape if need_w else (0,))


def _conv_setup(ctx, inputs, output):
    x, weight, bias, stride, padding, dilation, groups, units, backward, input_scale, layer, threads, cache = inputs
    ctx.save_for_backward(x, weight, bias, output[1])
    ctx.lc = (stride, padding, dilation, groups, units, backward, input_scale, layer, threads, cache)


def _conv_bwd(ctx, dy, _ds):
    x, weight, bias, s_x = ctx.saved_tensors
    stride, padding, dilation, groups, units, backward, input_scale, layer, threads, cache = ctx.lc
    nx, nw, nb = ctx.needs_input_grad[:3]
    ste = backward == "ste"
    dx = dw = db = None
    if not ste:
        dx, dw = torch.ops.lutcore.conv_units_backward(dy, x, weight, s_x, stride, padding, dilation, groups, units,
                                                       input_scale, layer, threads, cache, nx, nw)
    mask = [nx and ste, nw and ste, nb and bias is not None]
    if any(mask):
        gx, gw, db = torch.ops.aten.convolution_backward(
            dy, x, weight, None if bias is None else [bias.shape[0]], stride, padding, dilation, False,
            [0] * len(stride), groups, mask)
        if ste:
            dx, dw = gx, gw
    return (dx if nx else None, dw if nw else None, db if nb else None) + (None,) * 10


_conv_op.register_autograd(_conv_bwd, setup_context=_conv_setup)


def _no_double_backward(ctx, *grads):
    raise _double_backward_error(ctx.layer)


def _ub_setup(ctx, inputs, output):
    ctx.layer = inputs[6] if len(inputs) == 11 else inputs[10]


_linear_ub_op.register_autograd(_no_double_backward, setup_context=_ub_setup)
_conv_ub_op.register_autograd(_no_double_backward, setup_context=_ub_setup)
