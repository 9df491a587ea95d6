"""Selective scan (S6) and causal depthwise conv1d: numpy in, numpy out.

Shape table (dtype float32 or float64, all inputs alike):

    u, delta, z, y       (batch, L, D)
    A                    (D, N)
    B, C                 (batch, L, N)
    D, delta_bias        (D,)
    initial_state, last  (batch, D, N)
    conv x, y            (batch, L, D);  weight (D, K);  bias (D,)

``selective_scan_forward`` returns a ``ScanContext`` holding what the backward
needs (the state at every chunk start, not the (batch, L, D, N) states), so a
model runs the forward once; ``selective_scan_backward`` recomputes it when no
context is given.  Non-contiguous inputs are copied.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from lutcore import _check, _simd, _workspace
from lutcore._alloc import reusing
from lutcore._native import conv as _conv, scan as _scan
from lutcore._threads import resolve_threads

__all__ = ["selective_scan", "selective_scan_forward", "selective_scan_backward", "ScanContext",
           "causal_conv1d", "causal_conv1d_backward", "causal_conv1d_step"]

CHUNK = 64
_DISC = ("zoh", "simplified")


def _dtype_of(u, name="u"):
    if not isinstance(u, np.ndarray):
        u = np.asarray(u)
    if u.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64, got {u.dtype}")
    return u.dtype


def _need(x, name, dtype, shape):
    """A required array argument (see _arr)."""
    if x is None:
        raise TypeError(f"{name}: expected a {dtype} array of shape {tuple(shape)}, got None")
    return _arr(x, name, dtype, shape)


def _check_ctx(ctx):
    """The context of a forward: a ScanContext whose arrays still fit together (the
    kernel indexes them by the shapes of u and A)."""
    if not isinstance(ctx, ScanContext):
        raise TypeError(f"ctx: expected the ScanContext of selective_scan_forward, got {type(ctx).__name__}")
    if not isinstance(ctx.u, np.ndarray) or ctx.u.ndim != 3 or not isinstance(ctx.A, np.ndarray) or ctx.A.ndim != 2:
        raise ValueError("ctx: u must be (batch, L, D) and A (D, N) arrays")
    dt = ctx.u.dtype
    bsz, L, Dm = ctx.u.shape
    N = ctx.A.shape[1]
    chunk = ctx.chunk
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk <= 0:
        raise ValueError(f"ctx: chunk must be a positive int, got {chunk!r}")
    nck = -(-L // int(chunk)) if L else 0
    want = {"u": (bsz, L, Dm), "delta": (bsz, L, Dm), "A": (Dm, N), "B": (bsz, L, N), "C": (bsz, L, N),
            "D": (Dm,), "z": (bsz, L, Dm), "delta_bias": (Dm,), "initial_state": (bsz, Dm, N),
            "chunk_states": (bsz, nck, Dm, N), "ypre": (bsz, L, Dm)}
    for name, shape in want.items():
        x = getattr(ctx, name)
        if x is None and name in ("D", "delta_bias", "initial_state", "z", "ypre"):
            continue
        if not isinstance(x, np.ndarray) or x.dtype != dt or x.shape != shape or not x.flags.c_contiguous:
            got = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
            raise ValueError(f"ctx: {name} must be a C-contiguous {dt} array of shape {shape}, got {got}")
    if (ctx.z is None) != (ctx.ypre is None):
        raise ValueError("ctx: z and ypre go together")
    _check.bool_arg(ctx.delta_softplus, "ctx: delta_softplus")
    _check.bool_arg(ctx.zoh, "ctx: zoh")


def _arr(x, name, dtype, shape):
    if x is None:
        return None
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {dtype} (like the first array argument), got {x.dtype}")
    if x.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {x.shape}")
    return np.ascontiguousarray(x)


@dataclasses.dataclass
class ScanContext:
    """What ``selective_scan_backward`` needs from the forward."""
    u: np.ndarray
    delta: np.ndarray
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray | None
    z: np.ndarray | None
    delta_bias: np.ndarray | None
    initial_state: np.ndarray | None
    delta_softplus: bool
    zoh: bool
    chunk_states: np.ndarray          # (batch, ceil(L/chunk), D, N)
    ypre: np.ndarray | None           # y before the silu(z) gate
    chunk: int


def _validate(u, delta, A, B, C, D, z, delta_bias, initial_state, discretization):
    dt = _dtype_of(u)
    u = np.asarray(u)
    if u.ndim != 3:
        raise ValueError(f"u: expected a (batch, L, D) array, got shape {np.shape(u)}")
    bsz, L, Dm = u.shape
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != Dm:
        raise ValueError(f"A: expected shape ({Dm}, N), got {A.shape}")
    N = A.shape[1]
    if discretization not in _DISC:
        raise ValueError(f"discretization: expected 'zoh' or 'simplified', got {discretization!r}")
    return (dt, bsz, L, Dm, N,
            np.ascontiguousarray(u),
            _arr(delta, "delta", dt, (bsz, L, Dm)),
            _arr(A, "A", dt, (Dm, N)),
            _arr(B, "B", dt, (bsz, L, N)),
            _arr(C, "C", dt, (bsz, L, N)),
            _arr(D, "D", dt, (Dm,)),
            _arr(z, "z", dt, (bsz, L, Dm)),
            _arr(delta_bias, "delta_bias", dt, (Dm,)),
            _arr(initial_state, "initial_state", dt, (bsz, Dm, N)))


@reusing
def selective_scan_forward(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=True,
                           discretization="zoh", initial_state=None, return_last_state=False,
                           threads=None, save_for_backward=True, chunk=CHUNK, out=None):
    """Forward scan; returns ``(y, last_state or None, ScanContext or None)``."""
    missing = [k for k, v in (("u", u), ("delta", delta), ("A", A), ("B", B), ("C", C)) if v is None]
    if missing:
        raise TypeError(f"{', '.join(missing)}: required, got None")
    dt, bsz, L, Dm, N, u, delta, A, B, C, D, z, delta_bias, h0 = _validate(
        u, delta, A, B, C, D, z, delta_bias, initial_state, discretization)
    chunk = _check.int_arg(chunk, "chunk", lo=1, hi=1 << 30)
    chunk = min(chunk, max(L, 1))       # one chunk either way: the backward's scratch is sized by the data
    delta_softplus = _check.bool_arg(delta_softplus, "delta_softplus")
    return_last_state = _check.bool_arg(return_last_state, "return_last_state")
    save_for_backward = _check.bool_arg(save_for_backward, "save_for_backward")
    # out may not share memory with an input: the context keeps the inputs for the backward
    y = _check.out_flat(out, "out", (bsz, L, Dm), dt, u, delta, A, B, C, D, z, delta_bias, h0, same_ok=False)
    nck = -(-L // chunk) if L else 0
    hs = np.empty((bsz, nck, Dm, N), dt) if save_for_backward else None
    ypre = np.empty((bsz, L, Dm), dt) if (save_for_backward and z is not None) else None
    last = np.zeros((bsz, Dm, N), dt) if return_last_state else None
    if return_last_state and L == 0 and h0 is not None:
        last[...] = h0
    zoh = discretization == "zoh"
    _scan.scan_fwd(y, ypre, hs, last, u, delta, A, B, C, D, z, delta_bias, h0, chunk,
                bool(delta_softplus), zoh, _simd.isa(), resolve_threads(threads))
    ctx = None
    if save_for_backward:
        kept = [u, delta, A, B, C, D, z, delta_bias, h0]
        if y is not out and out is not None:     # y goes into out, over an input: keep that input's copy
            kept = [x.copy() if x is not None and np.may_share_memory(x, out) else x for x in kept]
        ctx = ScanContext(*kept, bool(delta_softplus), zoh, hs, ypre, chunk)
    return _check.out_done(out, y), last, ctx


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=True,
                   discretization="zoh", initial_state=None, return_last_state=False, threads=None):
    """The S6 selective scan (see the module shape table and docs/DESIGN.md).

    Returns ``y`` (batch, L, D), or ``(y, last_state)`` with
    ``return_last_state=True``.
    """
    y, last, _ = selective_scan_forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                        discretization, initial_state, return_last_state, threads,
                                        save_for_backward=False)
    return (y, last) if return_last_state else y


@reusing
def selective_scan_backward(dy, u=None, delta=None, A=None, B=None, C=None, D=None, z=None,
                            delta_bias=None, delta_softplus=True, discretization="zoh",
                            initial_state=None, threads=None, ctx: ScanContext | None = None):
    """Gradients of ``sum(dy * y)`` for every input: a dict with keys u, delta,
    A, B, C, and D, z, delta_bias, initial_state when those were given.

    Pass ``ctx`` from ``selective_scan_forward`` to skip recomputing it.
    """
    if ctx is None:
        delta_softplus = _check.bool_arg(delta_softplus, "delta_softplus")
        _, _, ctx = selective_scan_forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus,
                                           discretization, initial_state, False, threads,
                                           save_for_backward=True)
    _check_ctx(ctx)
    dt = ctx.u.dtype
    bsz, L, Dm = ctx.u.shape
    N = ctx.A.shape[1]
    dy = _need(dy, "dy", dt, (bsz, L, Dm))
    nt = resolve_threads(threads)
    ng = -(-Dm // _scan.GROUP_CHANNELS) if Dm else 0
    g = {
        "u": np.empty((bsz, L, Dm), dt), "delta": np.empty((bsz, L, Dm), dt),
        "A": np.zeros((Dm, N), dt), "B": np.zeros((bsz, L, N), dt), "C": np.zeros((bsz, L, N), dt),
    }
    if ctx.D is not None:
        g["D"] = np.zeros(Dm, dt)
    if ctx.z is not None:
        g["z"] = np.empty((bsz, L, Dm), dt)
    if ctx.delta_bias is not None:
        g["delta_bias"] = np.zeros(Dm, dt)
    if ctx.initial_state is not None:
        g["initial_state"] = np.zeros((bsz, Dm, N), dt)
    # per-(batch, channel-group) partials, reduced in the kernel: scratch, not fresh pages
    dAp = _workspace.scratch("scan_dA", bsz * Dm * N, dt).reshape(bsz, Dm, N)
    dBp = _workspace.scratch("scan_dB", bsz * ng * N * L, dt).reshape(bsz, ng, N, L)
    dCp = _workspace.scratch("scan_dC", bsz * ng * N * L, dt).reshape(bsz, ng, N, L)
    dDp = _workspace.scratch("scan_dD", bsz * Dm, dt).reshape(bsz, Dm) if ctx.D is not None else None
    ddbp = (_workspace.scratch("scan_ddb", bsz * Dm, dt).reshape(bsz, Dm)
            if ctx.delta_bias is not None else None)
    _scan.scan_bwd(g["u"], g["delta"], g["A"], g["B"], g["C"], g.get("D"), g.get("z"), g.get("delta_bias"),
                g.get("initial_state"), dAp, dBp, dCp, dDp, ddbp,
                dy, ctx.u, ctx.delta, ctx.A, ctx.B, ctx.C, ctx.D, ctx.z, ctx.delta_bias, ctx.chunk_states,
                ctx.ypre, min(ctx.chunk, max(L, 1)), ctx.delta_softplus, ctx.zoh, _simd.isa(), nt)
    return g


# ------------------------------------------------------------------ conv1d

def _conv_args(x, weight, bias):
    dt = _dtype_of(x, "x")
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"x: expected a (batch, L, D) array, got shape {x.shape}")
    Dm = x.shape[2]
    weight = np.asarray(weight)
    if weight.ndim != 2 or weight.shape[0] != Dm or weight.shape[1] < 1:
        raise ValueError(f"weight: expected shape ({Dm}, K) with K >= 1, got {weight.shape}")
    if weight.dtype != dt:
        raise TypeError(f"weight: expected dtype {dt} (like x), got {weight.dtype}")
    wt = np.ascontiguousarray(weight.T)
    return dt, np.ascontiguousarray(x), wt, _arr(bias, "bias", dt, (Dm,))


def causal_conv1d(x, weight, bias=None, threads=None):
    """Causal depthwise conv1d, PyTorch tap order: ``w[:, K-1]`` multiplies the current step."""
    dt, x, wt, bias = _conv_args(x, weight, bias)
    y = np.empty_like(x)
    _conv.conv_fwd(y, x, wt, bias, _simd.isa(), resolve_threads(threads))
    return y


def causal_conv1d_backward(dy, x, weight, bias=None, threads=None):
    """Returns ``(dx, dweight, dbias)`` of ``sum(dy * causal_conv1d(x, weight, bias))``."""
    dt, x, wt, _ = _conv_args(x, weight, bias)
    dy = _need(dy, "dy", dt, x.shape)
    dx = np.empty_like(x)
    dwt = np.empty_like(wt)
    db = np.empty(x.shape[2], dt)
    if x.shape[0] == 0 or x.shape[1] == 0:
        dx[...] = 0
        dwt[...] = 0
        db[...] = 0
    else:
        _conv.conv_bwd(dx, dwt, db, dy, x, wt, _simd.isa(), resolve_threads(threads))
    return dx, np.ascontiguousarray(dwt.T), db


def causal_conv1d_step(x_t, conv_state, weight, bias=None):
    """One decoding step.  ``conv_state`` (batch, K-1, D) holds the previous K-1
    inputs, oldest first, and is updated in place; returns y_t (batch, D)."""
    dt = _dtype_of(x_t, "x_t")
    x_t = np.ascontiguousarray(x_t)
    if x_t.ndim != 2:
        raise ValueError(f"x_t: expected a (batch, D) array, got shape {x_t.shape}")
    bsz, Dm = x_t.shape
    weight = np.asarray(weight)
    if weight.ndim != 2 or weight.shape[0] != Dm or weight.shape[1] < 1:
        raise ValueError(f"weight: expected shape ({Dm}, K) with K >= 1, got {weight.shape}")
    if weight.dtype.kind != "f":
        raise TypeError(f"weight: expected a float array, got {weight.dtype}")
    K = weight.shape[1]
    if not isinstance(conv_state, np.ndarray) or conv_state.shape != (bsz, K - 1, Dm) or conv_state.dtype != dt:
        raise ValueError(f"conv_state: expected a {dt} array of shape {(bsz, K - 1, Dm)}, got "
                         f"{getattr(conv_state, 'dtype', type(conv_state).__name__)} {np.shape(conv_state)}")
    if not conv_state.flags.c_contiguous or not conv_state.flags.writeable:
        raise ValueError("conv_state: must be a writeable C-contiguous array (it is updated in place)")
    wt = np.ascontiguousarray(weight.T.astype(dt, copy=False))
    bias = _arr(bias, "bias", dt, (Dm,))
    # the kernel shifts conv_state while it reads x_t, weight and bias: an input that
    # overlaps the state (x_t = conv_state[:, -1], say) is read as the copy it was
    x_t, wt = (a.copy() if np.shares_memory(a, conv_state) else a for a in (x_t, wt))
    if bias is not None and np.shares_memory(bias, conv_state):
        bias = bias.copy()
    y = np.empty((bsz, Dm), dt)
    _conv.conv_step(y, conv_state, x_t, wt, bias)
    return y
