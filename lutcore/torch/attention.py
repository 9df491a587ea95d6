"""Attention's two products through units: the transformers attention implementation "lutcore",
``lut_attention`` (its functional form) beside ``float_attention`` (the float reference, same
keywords), and ``UnitMatmul`` (torch.matmul through a unit, for attention of one's own).

Design: this module is the bridge between torch tensors and the numpy contract of attention's
products (``lutcore.quant.attn_scores`` / ``attn_values`` / ``check_attention_units``, docs/DESIGN.md
"Attention through the units", *In PyTorch*); it computes nothing of the products itself.  Per (batch, kv head) the
G query heads that share the kv head are stacked as rows (``attn_scores`` quantizes each query row on
its own and ``attn_values`` each probability row on its own: stacking changes no bit) and

    qs = float32(q * float32(scaling))                             (R, D)   R = G * T
    s  = attn_scores(qs, k, qk_units)                              (R, S)   (units None: torch's
                                                                             q @ k^T * scaling)
    x  = s + mask                                                  (R, S)   float32
    p  = lutcore's softmax of x: minus the row max, lutcore's exp (lutcore.ops.mathfn: the same bits
         on every SIMD path), over the row sum taken in order (np.cumsum), as the stage's and the
         GPT's causal softmax (csrc/softmax); a masked position is exactly 0
    p' = p * dropout mask (training only; its 0 / 1/(1-d) factors drawn by torch)
    o  = attn_values(p', v, pv_units)                              (R, Dv)  (units None: torch's p' @ v)

    tensor   dtype    shape               what
    query    float32  (B, H, T, D)        IN   H = KV * G; query head h reads kv head h // G
    key      float32  (B, KV, S, D)       IN
    value    float32  (B, KV, S, Dv)      IN
    mask     float32  (B|1, 1|H, T, >=S)  IN   additive (its first S columns), bool (True: attend) or None
    out      float32  (B, T, H, Dv)       OUT  (as transformers' eager_attention_forward returns it)
    p        float32  (B, H, T, S)        OUT  the probabilities p' (attn_weights; no gradient)

A position is *masked* where an additive mask holds float32's lowest value or -inf (transformers'
"cannot attend", ``eager_mask``) or a bool mask holds False: p there is 0 exactly (exp underflows to 0
when the row has a visible position; a row with none — a left-padding query — is all 0, so its
output is 0, where eager attention would average every value).  Every other mask value is added as it
is.  The row sum runs in position order and a masked position adds +0: a row's bits depend on its
visible positions alone, so a token decoded with a KV cache has the bits of the full recompute.  torch's
softmax is not used: its vectorised sum changes order with the row's length.  When both products are
float (units None) the whole function is ``float_attention``: transformers' eager bits.

Backward ("ste" | "table", per product).  Both "ste" (or float): the gradient of ``float_attention``
at the same q, k, v (recomputed in float: eager's formula, torch's autograd, twice differentiable).
Otherwise the chain at the forward's values, each product's gradient "table" — through the unit's
gradient tables Ga = df/da, Gb = df/db (``Units.gradients`` / attached tables, ``grad_h`` as the layers;
signed 8 x 8 units without a declared accumulator), the rounding passed straight through, scales held —
or "ste" (the float product's gradient at the forward's operands):

    scores (a = qs rows, b = k^T columns, blocks of 32 along D; UnitMatmul's "table" likewise):
        dA[m, k] = sum_n dY[m, n] sb[blk(k), n] Ga[qa[m, k], qb[k, n]]
        dB[k, n] = sum_m dY[m, n] sa[m, blk(k)] Gb[qa[m, k], qb[k, n]]
    values (p' rows in position-aligned blocks, per-position V scale s_v folded into p'):
        dP[r, s] = s_v[s] * sum_c dO[r, c] Ga[qp[r, s], qv[s, c]]
        dV[s, c] = (sum_r dO[r, c] s_p[r, blk(s)] Gb[qp[r, s], qv[s, c]]) / s_v[s]      (0 where s_v = 0)
    softmax: dX = (dP - sum_s p dP) * p, the sum in order;  dq = dqs * float32(scaling)

each sum in index order (``lutcore.ops.gradtables``; float products through ``lutcore.ops.matmul``):
the same bits at any thread count (a product or softmax too small to share runs on one thread, as the
layers' ``gemm_threads``).  "table" is differentiable once (``_once``).  Dropout's mask is drawn once
in the forward and reused by the backward.  Not traceable (torch.compile / export break the graph
here: the products are numpy calls).

Registration: ``register()`` (called by ``approximate(model, units, attention=True)``) adds "lutcore"
to transformers' ``AttentionInterface`` and, so that the model builds its masks, ``eager_mask`` under
the same name to ``AttentionMaskInterface`` (an implementation without one gets no mask at all).
The attention modules carry their settings as attributes (``attach``): ``lutcore_qk_units``,
``lutcore_pv_units`` (Units or None: float), ``lutcore_qk_backward``, ``lutcore_pv_backward``,
``lutcore_threads``, ``lutcore_grad_h``, ``lutcore_block``, ``lutcore_name``, ``lutcore_skipped``; their
products are the layers ``<module>.qk`` / ``<module>.pv`` that ``approximate`` / ``set_units`` /
``set_backward`` / ``assignment`` (convert.py) name, covered only by mapping keys that name them
(``lutcore.units.assign.names_attention``).
"""
from __future__ import annotations

import inspect

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lutcore._threads import resolve_threads, scope
from lutcore.ops import accum as _accum
from lutcore.ops import mathfn as _mathfn
from lutcore.ops.gradtables import table_pass
from lutcore.ops.matmul import matmul as _fmatmul
from lutcore.quant import attn_scores, attn_values, check_attention_units, qmatmul, quantize, quantize_codes
from lutcore.torch._once import _once_differentiable
from lutcore.units import Units
from lutcore.units import resolve as resolve_units

__all__ = ["NAME", "register", "attention_forward", "lut_attention", "float_attention", "attach",
           "attention_modules", "products", "UnitMatmul", "unit_matmul", "BACKWARDS"]

NAME = "lutcore"
BACKWARDS = ("ste", "table")          # per product; "units" is not offered for attention's products
_LOWEST = float(np.finfo(np.float32).min)
ATTRS = ("lutcore_qk_units", "lutcore_pv_units", "lutcore_qk_backward", "lutcore_pv_backward", "lutcore_threads",
         "lutcore_grad_h", "lutcore_block", "lutcore_name", "lutcore_skipped")


# ----------------------------------------------------------------------------- registration

def register() -> str:
    """Add "lutcore" to transformers' attention interface (and ``eager_mask`` as its mask, so the
    model passes additive float masks); idempotent.  Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, eager_mask)
    return NAME


_CALLS_INTERFACE: dict = {}


def _calls_interface(cls) -> bool:
    """Whether ``cls.forward`` picks its attention from transformers' ALL_ATTENTION_FUNCTIONS."""
    got = _CALLS_INTERFACE.get(cls)
    if got is None:
        try:
            src = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            src = ""
        got = _CALLS_INTERFACE[cls] = "ALL_ATTENTION_FUNCTIONS" in src
    return got


def attention_modules(model: nn.Module) -> list:
    """(name, module) of every module of ``model`` whose forward calls transformers' attention
    interface (and that has the ``config`` it reads the implementation from), in model order."""
    return [(n, m) for n, m in model.named_modules() if hasattr(m, "config") and _calls_interface(type(m))]


def products(model: nn.Module) -> list:
    """(product name "<module>.qk" / "<module>.pv", attention module, "qk" | "pv") of every attention
    module ``attach`` set up (not the skipped ones), in model order."""
    return [(f"{n}.{w}", m, w) for n, m in model.named_modules()
            if "lutcore_qk_units" in m.__dict__ and not m.__dict__.get("lutcore_skipped") for w in ("qk", "pv")]


def product_backward_arg(v, where: str) -> str:
    if v not in BACKWARDS:
        raise ValueError(f"{where}: backward={v!r} is not available for attention's products: use 'ste' or "
                         f"'table' (a mapping gives the weights another: {{'*': {v!r}}} covers the weights "
                         f"only, and attention's products keep 'ste')")
    return v


def check_product(units, backward, grad_h, where: str) -> None:
    """A product's units and backward can run (``check_attention_units``; "table": signed 8 x 8 with
    exact sums, and its gradient tables) — a ValueError naming ``where`` otherwise."""
    if units is None:
        return
    _check_units(units, where)
    if backward == "table" and not _is_mx(units):
        _table_units(units, where)
        from lutcore.torch._gradtables import tables_for
        tables_for(units, grad_h, where)


def attach(module: nn.Module, qk, pv, *, qk_backward="ste", pv_backward="ste", threads=None, grad_h=None,
           block: int = 32, name: str | None = None, skipped: bool = False) -> nn.Module:
    """Set the attributes ``attention_forward`` reads on an attention module (every value checked
    first; ``qk`` / ``pv``: Units, a spec, or None for a float product; ``skipped``: a module
    ``approximate`` was told to skip — float, and not among ``products``)."""
    name = name or type(module).__name__
    qk = None if qk is None else qk if isinstance(qk, Units) else resolve_units(qk, mx=True)
    pv = None if pv is None else pv if isinstance(pv, Units) else resolve_units(pv, mx=True)
    product_backward_arg(qk_backward, f"{name}.qk")
    product_backward_arg(pv_backward, f"{name}.pv")
    from lutcore.torch._gradtables import grad_arg
    grad_arg(grad_h, name)
    if threads is not None:
        resolve_threads(threads)
    check_product(qk, qk_backward, grad_h, f"{name}.qk")
    check_product(pv, pv_backward, grad_h, f"{name}.pv")
    vals = (qk, pv, qk_backward, pv_backward, threads, grad_h, int(block), name, bool(skipped))
    for a, v in zip(ATTRS, vals):
        setattr(module, a, v)
    return module


def _is_mx(units) -> bool:
    return getattr(units, "kind", None) == "mx"


def _mx_grads(units, dy, a, b, nt, need=(True, True)):
    """(dA (M, K), dB (K, N)) of ``units.matmul(a, b)`` (MX units) through their gradient tables
    (``lutcore.models.mxmm.MXMatmul``'s table backward: b's columns are its weight rows)."""
    from lutcore.models.mxmm import MXMatmul
    dw, dx = MXMatmul(units, "table", threads=nt).table_backward(dy, a, np.ascontiguousarray(b.T), need[0])
    return dx, (np.ascontiguousarray(dw.T) if need[1] else None)


def _table_units(units: Units, where: str) -> None:
    if _is_mx(units):
        return
    if not units.plain:
        acc = units.accumulator
        raise ValueError(f"{where}: backward='table' through a block-scaled product needs signed 8 x 8 units with "
                         f"exact sums; units {units.name!r} are {units.format}"
                         f"{', accumulator ' + str(acc) if acc is not None else ''}: use backward='ste'")


# ----------------------------------------------------------------------------- the implementation

def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention function "lutcore": ``(attn_output (B, T, H, Dv), attn_weights (B, H,
    T, S))`` with the products through the module's units (``attach``; module docstring)."""
    d = module.__dict__
    if "lutcore_qk_units" not in d:
        raise ValueError(f"{type(module).__name__}: the attention implementation {NAME!r} reads its units from "
                         f"the module; convert the model with lutcore.torch.approximate(model, units, "
                         f"attention=True) (or set them with lutcore.torch.attention.attach)")
    name = d["lutcore_name"]
    for k in ("softcap", "s_aux"):
        if kwargs.get(k) is not None:
            raise ValueError(f"{name}: {k} is not supported by the {NAME!r} attention (its products through units "
                             f"follow eager attention: mask, softmax, dropout)")
    drop = None
    if dropout and module.training:
        B, H, T = query.shape[:3]
        drop = F.dropout(torch.ones(B, H, T, key.shape[2], dtype=torch.float32), float(dropout), True)
    return lut_attention(query, key, value, attention_mask, scaling, qk_units=d["lutcore_qk_units"],
                         pv_units=d["lutcore_pv_units"], backward=(d["lutcore_qk_backward"], d["lutcore_pv_backward"]),
                         block=d["lutcore_block"], threads=d["lutcore_threads"], grad_h=d["lutcore_grad_h"],
                         dropout_mask=drop, layer=name)


def _repeat_kv(x: torch.Tensor, G: int) -> torch.Tensor:
    """(B, KV, S, D) -> (B, KV * G, S, D), kv head g for query heads g*G .. g*G+G-1 (transformers'
    repeat_kv, so the float gradient sums a group's heads as eager attention does)."""
    if G == 1:
        return x
    B, KV, S, D = x.shape
    return x[:, :, None].expand(B, KV, G, S, D).reshape(B, KV * G, S, D)


def _float_mask(mask: torch.Tensor | None, S: int):
    """An additive float32 mask (its first S columns; bool True -> 0, False -> lowest; -inf -> lowest)."""
    if mask is None:
        return None
    m = mask[..., :S]
    if m.dtype == torch.bool:
        return torch.where(m, torch.zeros((), dtype=torch.float32), torch.full((), _LOWEST))
    return m.clamp_min(_LOWEST)


def float_attention(query, key, value, attention_mask=None, scaling=None, *, dropout_mask=None):
    """The float reference with ``lut_attention``'s keywords: transformers' eager attention
    (``softmax(q k^T * scaling + mask, float32) @ v``, heads repeated for GQA), masked positions' p
    set to 0 (module docstring; the same bits as eager wherever a row has a visible position), times
    ``dropout_mask`` when given.  Returns (out (B, T, H, Dv), p (B, H, T, S)); differentiable."""
    B, H, T, D = query.shape
    KV, S = key.shape[1], key.shape[2]
    G = H // KV
    if scaling is None:
        scaling = D ** -0.5
    w = torch.matmul(query, _repeat_kv(key, G).transpose(2, 3)) * scaling
    m = _float_mask(attention_mask, S)
    if m is not None:
        w = w + m
    p = F.softmax(w, dim=-1, dtype=torch.float32)
    if m is not None:
        masked = m <= _LOWEST
        if bool(masked.any()):
            p = p.masked_fill(masked, 0.0)
    if dropout_mask is not None:
        p = p * dropout_mask
    out = torch.matmul(p, _repeat_kv(value, G))
    return out.transpose(1, 2).contiguous(), p


def _backward_pair(backward):
    if isinstance(backward, str):
        return backward, backward
    if isinstance(backward, (tuple, list)) and len(backward) == 2:
        return tuple(backward)
    raise ValueError(f"backward: expected 'ste', 'table' or a (qk, pv) pair of them, got {backward!r}")


class _Cfg:
    __slots__ = ("qk", "pv", "qk_mode", "pv_mode", "scaling", "block", "nt", "grad_h", "layer")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _check_input(t, what, layer, ndim=4):
    from lutcore.torch.functional import check_tensor
    check_tensor(t, what, layer, ndim)


def lut_attention(query, key, value, attention_mask=None, scaling=None, *, qk_units="exact", pv_units="exact",
                  backward="ste", block: int = 32, threads=None, grad_h=None, dropout_mask=None,
                  layer: str = "attention"):
    """Attention with its products through units (module docstring): ``qk_units`` for q k^T,
    ``pv_units`` for p v (Units, a spec, or None: float); ``backward`` "ste", "table" or a (qk, pv)
    pair; ``dropout_mask`` (B, H, T, S) factors applied to p.  Returns (out (B, T, H, Dv), p (B, H,
    T, S)); ``layer`` names the call in errors and in an accumulator's overflow log."""
    for t, n in ((query, "query"), (key, "key"), (value, "value")):
        _check_input(t, n, layer)
    B, H, T, D = query.shape
    Bk, KV, S, Dk = key.shape
    if key.shape[:3] != value.shape[:3] or Bk != B or Dk != D or KV == 0 or H % KV:
        raise ValueError(f"{layer}: expected query (B, H, T, D), key (B, KV, S, D) and value (B, KV, S, Dv) with H "
                         f"a multiple of KV, got {tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
    qk = None if qk_units is None else qk_units if isinstance(qk_units, Units) else resolve_units(qk_units, mx=True)
    pv = None if pv_units is None else pv_units if isinstance(pv_units, Units) else resolve_units(pv_units, mx=True)
    qk_mode, pv_mode = _backward_pair(backward)
    product_backward_arg(qk_mode, f"{layer}.qk")
    product_backward_arg(pv_mode, f"{layer}.pv")
    for u, mode, w in ((qk, qk_mode, "qk"), (pv, pv_mode, "pv")):
        if u is not None:
            _check_units(u, f"{layer}.{w}")
            if mode == "table":
                _table_units(u, f"{layer}.{w}")
    if scaling is None:
        scaling = D ** -0.5
    mask = _mask_arg(attention_mask, B, H, T, S, layer)
    if dropout_mask is not None and tuple(dropout_mask.shape) != (B, H, T, S):
        raise ValueError(f"{layer}: dropout_mask: expected shape {(B, H, T, S)}, got {tuple(dropout_mask.shape)}")
    if (qk is None and pv is None) or 0 in (B, H, T, S, D):
        return float_attention(query, key, value, attention_mask, scaling, dropout_mask=dropout_mask)
    cfg = _Cfg(qk=qk, pv=pv, qk_mode=qk_mode if qk is not None else "ste", pv_mode=pv_mode if pv is not None else "ste",
               scaling=float(scaling), block=int(block), nt=resolve_threads(threads), grad_h=grad_h, layer=layer)
    out, p = _AttentionFunction.apply(query, key, value, mask, dropout_mask, cfg)
    return out, p


_CHECKED: dict = {}                     # digest -> True: units check_attention_units passed (the last 64)


def _check_units(u: Units, where: str) -> None:
    """check_attention_units, once per digest."""
    if u.digest not in _CHECKED:
        check_attention_units(u, where)
        if len(_CHECKED) >= 64:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[u.digest] = True


def _mask_arg(mask, B, H, T, S, layer):
    """The mask as an additive float32 tensor broadcastable to (B, H, T, S), or None."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{layer}: attention_mask: expected a tensor or None, got {type(mask).__name__}")
    if mask.dim() != 4 or mask.shape[0] not in (1, B) or mask.shape[1] not in (1, H) or mask.shape[2] not in (1, T) \
            or mask.shape[3] < S:
        raise ValueError(f"{layer}: attention_mask: expected (B|1, 1|H, T|1, >= S) = ({B}, {H}, {T}, >= {S}), got "
                         f"{tuple(mask.shape)}")
    if mask.dtype != torch.bool and mask.dtype != torch.float32:
        raise TypeError(f"{layer}: attention_mask: expected float32 (additive) or bool, got {mask.dtype}")
    return _float_mask(mask.detach(), S)


# ----------------------------------------------------------------------------- the numpy body

def softmax_rows(x: np.ndarray, masked, nt: int) -> np.ndarray:
    """p = lutcore's softmax of float32 ``x`` (..., S) along the last axis (module docstring):
    masked positions (bool, broadcastable; None: none) are 0, a row with none visible is all 0."""
    x = np.array(x, np.float32, copy=True)
    if masked is not None:
        np.copyto(x, np.float32(-np.inf), where=masked)
    m = x.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0                                 # a row with no visible position
    e = _mathfn.exp(x - m, threads=nt)                       # exp(-inf) = 0
    tot = np.cumsum(e, axis=-1, dtype=np.float32)[..., -1:]  # in position order: a masked one adds +0
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


SERIAL_ELEMS = 1 << 15                  # a softmax of fewer scores runs on one thread (same bits at any count)


def _per_head(product, a, b, cols, macs, units, cfg, suffix):
    """``product(a[b, g], b[b, g], units)`` for every batch and kv head -> float32 (B, KV, R, cols),
    labelled ``<layer><suffix>`` for the overflow log."""
    B, KV, R = a.shape[:3]
    out = np.empty((B, KV, R, cols), np.float32)
    nt = _serial(macs, units, cfg.nt)
    with _accum.labelled(cfg.layer + suffix):
        for i in range(B):
            for g in range(KV):
                out[i, g] = product(a[i, g], b[i, g], units, cfg.block, nt)
    return out


def _serial(macs: int, units: Units, nt: int) -> int:
    """The team size of one product: 1 below the layers' threshold (``functional.gemm_threads``:
    a thread team costs more than the work), else ``nt``."""
    from lutcore.torch.functional import SERIAL_MACS_EXACT, SERIAL_MACS_TABLE
    path = getattr(units, "kernel_path", "table")
    return 1 if macs < (SERIAL_MACS_EXACT if path == "exact" else SERIAL_MACS_TABLE) else nt


def _np(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy())


def _forward(q, k, v, mask, drop, cfg: _Cfg):
    """(out (B, T, H, Dv), p' (B, H, T, S), keep) as numpy; keep: what the chain backward reads."""
    B, H, T, D = q.shape
    KV, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // KV
    R = G * T
    kn, vn = _np(k), _np(v)
    qs = None
    if cfg.qk is not None:
        qs = (_np(q) * np.float32(cfg.scaling)).reshape(B, KV, R, D)          # (B, KV, R, D)
        s = _per_head(attn_scores, qs, kn, S, R * D * S, cfg.qk, cfg, ".qk").reshape(B, H, T, S)
    else:
        with torch.no_grad():
            s = _np(torch.matmul(q, _repeat_kv(k, G).transpose(2, 3)) * cfg.scaling)
    masked = None
    if mask is not None:
        mn = mask.numpy()
        s = s + mn                                                             # (B, H, T, S) float32
        masked = mn <= np.float32(_LOWEST)
        if not masked.any():
            masked = None
    p = softmax_rows(s, masked, 1 if s.size < SERIAL_ELEMS else cfg.nt)       # (B, H, T, S)
    pu = p if drop is None else (p * drop.numpy()).astype(np.float32)
    if cfg.pv is not None:
        pr = pu.reshape(B, KV, R, S)
        o = _per_head(attn_values, pr, vn, Dv, R * S * Dv, cfg.pv, cfg, ".pv").reshape(B, H, T, Dv)
    else:
        with torch.no_grad():
            o = _np(torch.matmul(torch.from_numpy(pu), _repeat_kv(v, G)))
    out = np.ascontiguousarray(o.transpose(0, 2, 1, 3))                       # (B, T, H, Dv)
    return out, pu, (qs, p, pu)


class _AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, drop, cfg):
        with scope(cfg.nt):
            out, pu, keep = _forward(q, k, v, mask, drop, cfg)
        ctx.save_for_backward(q, k, v, mask, drop)
        ctx.cfg = cfg
        ctx.keep = None if (cfg.qk_mode == "ste" and cfg.pv_mode == "ste") else keep
        p = torch.from_numpy(pu)
        ctx.mark_non_differentiable(p)
        return torch.from_numpy(out), p

    @staticmethod
    def backward(ctx, dout, _dp):
        q, k, v, mask, drop = ctx.saved_tensors
        cfg = ctx.cfg
        need = ctx.needs_input_grad[:3]
        if ctx.keep is None:                       # STE: float attention's gradient at q, k, v
            create = torch.is_grad_enabled()
            with torch.enable_grad():
                xs = [t if n else t.detach() for t, n in zip((q, k, v), need)]
                o, _ = float_attention(*xs, mask, cfg.scaling, dropout_mask=drop)
                want = [t for t, n in zip(xs, need) if n]
                got = iter(torch.autograd.grad(o, want, dout, create_graph=create, allow_unused=True))
            return tuple(next(got) if n else None for n in need) + (None, None, None)
        with scope(cfg.nt):
            dq, dk, dv = _chain_backward(_np(dout), q, k, v, drop, ctx.keep, cfg)
        grads = tuple(torch.from_numpy(g) if n else None for g, n in zip((dq, dk, dv), need))
        grads = _once_differentiable(cfg.layer, grads, (dout, q, k, v), "table")
        return tuple(grads) + (None, None, None)


def _chain_backward(dout, q, k, v, drop, keep, cfg: _Cfg):
    """(dq, dk, dv) numpy: the chain at the forward's values (module docstring)."""
    qs, p, pu = keep
    B, H, T, D = q.shape
    KV, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // KV
    R = G * T
    nt = cfg.nt
    qn, kn, vn = _np(q).reshape(B, KV, R, D), _np(k), _np(v)
    dO = np.ascontiguousarray(dout.transpose(0, 2, 1, 3)).reshape(B, KV, R, Dv)
    pr, pur = p.reshape(B, KV, R, S), pu.reshape(B, KV, R, S)
    dr = None if drop is None else drop.numpy().reshape(B, KV, R, S)
    dq = np.empty((B, KV, R, D), np.float32)
    dk = np.empty((B, KV, S, D), np.float32)
    dv = np.empty((B, KV, S, Dv), np.float32)
    tabs = {}
    for w, u, mode in (("qk", cfg.qk, cfg.qk_mode), ("pv", cfg.pv, cfg.pv_mode)):
        if u is not None and mode == "table":
            from lutcore.torch._gradtables import tables_for
            tabs[w] = u if _is_mx(u) else tables_for(u, cfg.grad_h, f"{cfg.layer}.{w}")
    sc = np.float32(cfg.scaling)
    for b in range(B):
        for g in range(KV):
            go = dO[b, g]                                                          # (R, Dv)
            if "pv" in tabs and _is_mx(tabs["pv"]):
                dP, dv[b, g] = tabs["pv"].values_table_grads(go, pur[b, g], vn[b, g], nt)
            elif "pv" in tabs:
                dP, dv[b, g] = values_table_grads(go, pur[b, g], vn[b, g], cfg.block, tabs["pv"], nt)
            else:
                dP = _fmatmul(go, vn[b, g].T, threads=nt)                          # (R, S)
                dv[b, g] = _fmatmul(pur[b, g].T, go, threads=nt)                   # (S, Dv)
            if dr is not None:
                dP = (dP * dr[b, g]).astype(np.float32)
            pg = pr[b, g]
            dot = np.cumsum(pg * dP, axis=-1, dtype=np.float32)[:, -1:]            # in order
            dS = np.ascontiguousarray((dP - dot) * pg, np.float32)                 # (R, S)
            if cfg.qk is None:                                                     # s = (q k^T) * scaling
                dSs = np.ascontiguousarray(dS * sc)
                dq[b, g] = _fmatmul(dSs, kn[b, g], threads=nt)
                dk[b, g] = _fmatmul(dSs.T, qn[b, g], threads=nt)
                continue
            if "qk" in tabs:
                grads = _mx_grads if _is_mx(tabs["qk"]) else \
                    lambda t, *a: matmul_table_grads(*a[:3], cfg.block, t, nt)
                dqs, dkt = grads(tabs["qk"], dS, qs[b, g], np.ascontiguousarray(kn[b, g].T), nt)
                dk[b, g] = dkt.T
            else:
                dqs = _fmatmul(dS, kn[b, g], threads=nt)                           # (R, D)
                dk[b, g] = _fmatmul(dS.T, qs[b, g], threads=nt)                    # (S, D)
            dq[b, g] = dqs * sc
    return dq.reshape(B, H, T, D), dk, dv


def matmul_table_grads(dy, a, b, block, tables, nt, need=(True, True)):
    """(dA (M, K), dB (K, N)) float32 of the block-scaled product a (M, K) @ b (K, N) (a per row, b
    per column, blocks along K) through the gradient tables (module docstring; None where not needed)."""
    ga, _gb, gbt = tables
    M, K = a.shape
    N = b.shape[1]
    qa = quantize(np.ascontiguousarray(a, np.float32), block, axis=-1)              # (M, Kq), scale (M, nb)
    qb = quantize(np.ascontiguousarray(b.T, np.float32), block, axis=-1)            # (N, Kq), scale (N, nb)
    dy = np.ascontiguousarray(dy, np.float32)
    da = np.empty((M, K), np.float32) if need[0] else None
    dbt = np.empty((N, K), np.float32) if need[1] else None
    for bi, k0 in enumerate(range(0, K, block)):
        k1 = min(K, k0 + block)
        A, Bq = np.ascontiguousarray(qa.q[:, k0:k1]), np.ascontiguousarray(qb.q[:, k0:k1])
        if need[0]:
            da[:, k0:k1] = table_pass(0, A, Bq, np.ascontiguousarray(dy * qb.scale[:, bi][None, :]), ga, nt)
        if need[1]:
            dbt[:, k0:k1] = table_pass(1, A, Bq, np.ascontiguousarray(dy * qa.scale[:, bi][:, None]), gbt, nt)
    return da, (None if dbt is None else np.ascontiguousarray(dbt.T))


def values_table_grads(dy, p, v, block, tables, nt):
    """(dP (R, S), dV (S, Dv)) float32 of ``attn_values(p, v)`` (signed 8 x 8 units) through the
    gradient tables, with its codes and scales (module docstring)."""
    ga, _gb, gbt = tables
    R, S = p.shape
    qv, sv, _ = quantize_codes(v, 8, True, axis=1)                                  # (S, Dv), (S, 1)
    pp = (p * sv.reshape(1, S)).astype(np.float32)
    nblk = -(-S // block)
    ppad = np.zeros((R, nblk * block), np.float32)
    ppad[:, :S] = pp
    qp, sp, _ = quantize_codes(ppad.reshape(R, nblk, block), 8, True, axis=2)
    qp = qp.reshape(R, nblk * block)[:, :S].astype(np.int8)                         # (R, S)
    sp = sp.reshape(R, nblk)
    qvt = np.ascontiguousarray(qv.T.astype(np.int8))                                # (Dv, S)
    dy = np.ascontiguousarray(dy, np.float32)
    dp = table_pass(0, qp, qvt, dy, ga, nt) * sv.reshape(1, S)                      # (R, S)
    dvt = np.empty((qvt.shape[0], S), np.float32)
    for bi in range(nblk):
        s0, s1 = bi * block, min(S, (bi + 1) * block)
        dvt[:, s0:s1] = table_pass(1, np.ascontiguousarray(qp[:, s0:s1]), np.ascontiguousarray(qvt[:, s0:s1]),
                                   np.ascontiguousarray(dy * sp[:, bi][:, None]), gbt, nt)
    svr = sv.reshape(S, 1)
    dv = np.divide(dvt.T, svr, out=np.zeros((S, qvt.shape[0]), np.float32), where=svr > 0)
    return dp.astype(np.float32), dv


# ----------------------------------------------------------------------------- UnitMatmul

class _MatmulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, cfg):
        batch, M, K, N, ia, ib = cfg.geo
        an = _np(a).reshape(-1, M, K)
        bn = _np(b).reshape(-1, K, N)
        y = np.empty((len(ia), M, N), np.float32)
        nt = _serial(M * K * N, cfg.units, cfg.nt)
        with scope(nt), _accum.labelled(cfg.layer):
            for i, (x, z) in enumerate(zip(ia, ib)):
                y[i] = cfg.units.matmul(an[x], bn[z], nt) if _is_mx(cfg.units) else \
                    qmatmul(an[x], bn[z], cfg.units, cfg.block, nt)
        ctx.save_for_backward(a, b)
        ctx.cfg = cfg
        return torch.from_numpy(y).reshape(*batch, M, N)

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        cfg = ctx.cfg
        need = ctx.needs_input_grad[:2]
        if cfg.mode == "ste":
            create = torch.is_grad_enabled()
            with torch.enable_grad():
                xs = [t if n else t.detach() for t, n in zip((a, b), need)]
                want = [t for t, n in zip(xs, need) if n]
                got = iter(torch.autograd.grad(torch.matmul(xs[0], xs[1]), want, dy, create_graph=create))
            return tuple(next(got) if n else None for n in need) + (None,)
        batch, M, K, N, ia, ib = cfg.geo
        an = _np(a).reshape(-1, M, K)
        bn = _np(b).reshape(-1, K, N)
        dyn = _np(dy).reshape(-1, M, N)
        da = np.zeros(an.shape, np.float32) if need[0] else None
        db = np.zeros(bn.shape, np.float32) if need[1] else None
        from lutcore.torch._gradtables import tables_for
        mx = _is_mx(cfg.units)
        tabs = None if mx else tables_for(cfg.units, cfg.grad_h, cfg.layer)
        with scope(cfg.nt):
            for i, (x, z) in enumerate(zip(ia, ib)):             # broadcast slices summed in slice order
                ga_, gb_ = (_mx_grads(cfg.units, dyn[i], an[x], bn[z], cfg.nt, need) if mx else
                            matmul_table_grads(dyn[i], an[x], bn[z], cfg.block, tabs, cfg.nt, need))
                if need[0]:
                    da[x] += ga_
                if need[1]:
                    db[z] += gb_
        grads = (None if da is None else torch.from_numpy(da).reshape(a.shape),
                 None if db is None else torch.from_numpy(db).reshape(b.shape))
        return tuple(_once_differentiable(cfg.layer, grads, (dy, a, b), "table")) + (None,)


def unit_matmul(a, b, units="exact", *, backward="ste", block: int = 32, threads=None, grad_h=None,
                layer: str = "matmul"):
    """``torch.matmul(a, b)`` through ``units`` (None: torch's own): each 2-D slice is ``qmatmul``
    (a quantized per row along K, b per column along K, blocks of ``block``); leading dims broadcast
    as torch.matmul's, 1-D operands too.  ``backward``: "ste" (torch.matmul's gradient at a, b) or
    "table" (the gradient tables, module docstring; broadcast slices' gradients summed in order)."""
    if units is None:
        return torch.matmul(a, b)
    from lutcore.torch.functional import check_tensor
    check_tensor(a, "a", layer)
    check_tensor(b, "b", layer)
    if backward not in BACKWARDS:
        raise ValueError(f"{layer}: backward: expected one of {BACKWARDS}, got {backward!r}")
    units = units if isinstance(units, Units) else resolve_units(units, mx=True)
    if backward == "table" and not _is_mx(units):
        _table_units(units, layer)
        from lutcore.torch._gradtables import tables_for
        tables_for(units, grad_h, layer)
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError(f"{layer}: both arguments to matmul need at least 1 dimension, got {a.dim()}D and {b.dim()}D")
    sq = []
    if a.dim() == 1:
        a, sq = a.unsqueeze(0), sq + [-2]
    if b.dim() == 1:
        b, sq = b.unsqueeze(-1), sq + [-1]
    M, K = a.shape[-2:]
    Kb, N = b.shape[-2:]
    if K != Kb:
        raise ValueError(f"{layer}: a and b cannot be multiplied: a is {tuple(a.shape)}, b is {tuple(b.shape)} "
                         f"(inner dimensions {K} and {Kb})")
    try:
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except RuntimeError:
        raise ValueError(f"{layer}: the batch dimensions of a {tuple(a.shape)} and b {tuple(b.shape)} do not "
                         f"broadcast") from None
    if 0 in (M, K, N) or 0 in batch:
        y = torch.matmul(a, b)
    else:
        ia = np.broadcast_to(np.arange(int(np.prod(a.shape[:-2], dtype=np.int64))).reshape(a.shape[:-2]), batch)
        ib = np.broadcast_to(np.arange(int(np.prod(b.shape[:-2], dtype=np.int64))).reshape(b.shape[:-2]), batch)
        cfg = _MCfg(units, backward, int(block), resolve_threads(threads), grad_h, layer,
                    (batch, M, K, N, ia.ravel().tolist(), ib.ravel().tolist()))
        y = _MatmulFunction.apply(a, b, cfg)
    for d in sq:
        y = y.squeeze(d)
    return y


class _MCfg:
    __slots__ = ("units", "mode", "block", "nt", "grad_h", "layer", "geo")

    def __init__(self, units, mode, block, nt, grad_h, layer, geo):
        self.units, self.mode, self.block, self.nt, self.grad_h, self.layer, self.geo = \
            units, mode, block, nt, grad_h, layer, geo


class UnitMatmul(nn.Module):
    """A drop-in for ``torch.matmul`` inside a model of one's own: ``UnitMatmul(units, backward="ste")``,
    ``forward(a, b)`` = ``unit_matmul(a, b, units, ...)`` (2-D, batched with broadcasting, 1-D).
    ``units`` None computes torch.matmul itself.  ``name`` labels the calls (errors, overflow log);
    by default the class name."""

    def __init__(self, units="exact", backward: str = "ste", *, block: int = 32, threads=None, grad_h=None,
                 name: str | None = None):
        super().__init__()
        if backward not in BACKWARDS:
            raise ValueError(f"UnitMatmul: backward: expected one of {BACKWARDS}, got {backward!r}")
        self.units = None if units is None else units if isinstance(units, Units) else resolve_units(units, mx=True)
        self.backward, self.block, self.threads, self.grad_h = backward, int(block), threads, grad_h
        self.name = name or type(self).__name__
        if self.units is not None and backward == "table" and not _is_mx(self.units):
            _table_units(self.units, self.name)
            from lutcore.torch._gradtables import tables_for
            tables_for(self.units, grad_h, self.name)
        if threads is not None:
            resolve_threads(threads)

    def forward(self, a, b):
        return unit_matmul(a, b, self.units, backward=self.backward, block=self.block, threads=self.threads,
                           grad_h=self.grad_h, layer=self.name)

    def extra_repr(self) -> str:
        u = "units=none (float)" if self.units is None else f"units={self.units.name}@{self.units.digest[:16]}"
        return f"{u}, backward={self.backward}, block={self.block}"
