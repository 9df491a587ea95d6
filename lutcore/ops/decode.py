"""The llama decode layer: one token through every layer of a stage in one native call, and
the rotary embedding rows (csrc/models/decode.h, the native ``models`` module).

Design: the room of the ``models`` native module — a model built from the kernel families,
not a family.  ``lutcore.pipeline.stage`` builds a native linear per weight
(``float_linear`` from a ``PackedMatrix``'s panels, ``q8_linear`` from
``QLinear.decode_operands``), a ``layer`` per transformer layer over one shared
``scratch``, once, then calls ``run_layers`` once per token.  The builders check what the
native objects keep pointers to (dtypes, layout, sizes against the shapes they are given),
since the C side only takes pointers; ``run_layers`` checks the token, the caches and the
rope rows per call (in the native wrapper: one loop over the layers); the stage, which built
the layers for a resolved count, calls the private ``_run_layers`` with it.  ``threads``: None
reads the enclosing ``lutcore._threads.scope`` (or lutcore's default).

    x            (1, C)          float32, updated in place
    Ks[i], Vs[i] (KV, cap, hd)   layer i's KV cache, cap > pos (row pos is written)
    cos, sin     (hd/2,)         the rope rows of position pos (``rope``: tables (>= pos+T, hd/2))
    scratch      h (C), qkv (Q + 2 KVd), rq (Q + KVd), att (Q), o (C), up (2 I),
                 scores (H * capacity), kt (KV * kt_floats(hd))
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._native import models as _m
from lutcore._threads import resolve_threads

__all__ = ["float_linear", "q8_linear", "scratch", "layer", "run_layers", "rope"]

_PATHS = {1: ("bp", "sbp", "ap", "qa", "sa"), 2: ("qb", "sb", "T32", "twork", "qa", "sa")}


def _buf(a, name, dtype, size=None):
    if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous):
        got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise ValueError(f"{name}: expected a C-contiguous {np.dtype(dtype)} array, got {got}")
    if size is not None and a.size < size:
        raise ValueError(f"{name}: expected at least {size} values, got {a.size}")
    return a


def _bias(b, N):
    if b is not None:
        _buf(b, "bias", np.float32)
        if b.shape != (N,):
            raise ValueError(f"bias: expected ({N},), got {b.shape}")
    return b


def float_linear(panels, K: int, N: int, bias=None):
    """y (1, N) = x (1, K) @ W (+ bias) with W float32 in the GEMM's panels (a ``PackedMatrix``'s)."""
    _buf(panels, "panels", np.float32, K * N)
    return _m.Linear(0, int(K), int(N), {"panels": panels, "bias": _bias(bias, N)})


def q8_linear(path: int, K: int, N: int, buffers: dict, block: int, bkp: int, bias=None):
    """y (1, N) = x (1, K) @ W (+ bias) with W block-quantized: ``QLinear.decode_operands``'
    ``(path, buffers, block, bkp)`` — path 1 the exact kernel, 2 the table kernel."""
    if path not in _PATHS:
        raise ValueError(f"path: expected 1 (exact) or 2 (table), got {path!r}")
    missing = [k for k in _PATHS[path] if k not in buffers]
    if missing:
        raise ValueError(f"buffers: path {path} needs {list(_PATHS[path])}, missing {missing}")
    nblk = -(-K // block) if block > 0 else 0
    want = {"qa": (np.int8, nblk * block), "sa": (np.float32, nblk), "ap": (np.int16, nblk * bkp),
            "bp": (np.int8, N * nblk * bkp), "sbp": (np.float32, N * nblk), "qb": (np.int8, nblk * block * N),
            "sb": (np.float32, nblk * N), "T32": (np.int32, 65536), "twork": (np.int32, 1)}
    for k in _PATHS[path]:
        _buf(buffers[k], k, *want[k])
    return _m.Linear(path, int(K), int(N), dict(buffers, bias=_bias(bias, N)), int(block), int(bkp))


def scratch(hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int, capacity: int) -> dict:
    """The rows every layer of a stage shares, with room for ``capacity`` positions."""
    Q, KVd = heads * head_dim, kv_heads * head_dim
    return {"h": np.empty(hidden, np.float32), "qkv": np.empty(Q + 2 * KVd, np.float32),
            "rq": np.empty(Q + KVd, np.float32), "att": np.empty(Q, np.float32),
            "o": np.empty(hidden, np.float32), "up": np.empty(2 * inter, np.float32),
            "scores": np.empty(heads * capacity, np.float32),
            "kt": np.empty(kv_heads * _m.kt_floats(head_dim), np.float32)}


def layer(qkv, o, up, down, n1w, n2w, heads: int, kv_heads: int, head_dim: int, inter: int, eps: float,
          scale: float, window: int, scratch: dict):
    """One llama-family layer (RMSNorm, RoPE, GQA attention, SwiGLU with SiLU) for one token:
    the four linears (``float_linear`` / ``q8_linear``: qkv C -> Q + 2 KVd, o Q -> C, up C -> 2I,
    down I -> C), the two norm weights (C,), and the stage's ``scratch``."""
    C = n1w.shape[0] if isinstance(n1w, np.ndarray) else -1
    for w, name in ((n1w, "n1w"), (n2w, "n2w")):
        _buf(w, name, np.float32)
        if w.shape != (C,):
            raise ValueError(f"{name}: expected ({C},), got {w.shape}")
    if heads < 1 or kv_heads < 1 or heads % kv_heads or head_dim < 2 or head_dim % 2:
        raise ValueError(f"heads, kv_heads, head_dim: expected kv_heads dividing heads and an even head_dim, got "
                         f"{heads}, {kv_heads}, {head_dim}")
    want = {"h": C, "qkv": (heads + 2 * kv_heads) * head_dim, "rq": (heads + kv_heads) * head_dim,
            "att": heads * head_dim, "o": C, "up": 2 * inter, "scores": heads,
            "kt": kv_heads * _m.kt_floats(head_dim)}
    for k, n in want.items():
        _buf(scratch.get(k), f"scratch[{k!r}]", np.float32, n)
    return _m.DecodeLayer(qkv, o, up, down, n1w, n2w, int(heads), int(kv_heads), int(head_dim), int(inter),
                          float(eps), float(scale), int(window), scratch)


def run_layers(layers: list, x, Ks: list, Vs: list, pos: int, cos, sin, threads=None):
    """One token ``x`` (1, C) through ``layers`` (built by ``layer`` over one scratch), in place:
    each layer's K and V rows of position ``pos`` written into its cache.  Returns x; a
    non-finite activation reaching a block-quantized linear is a ValueError."""
    return _run_layers(layers, x, Ks, Vs, int(pos), cos, sin, resolve_threads(threads))


def _run_layers(layers, x, Ks, Vs, pos, cos, sin, nt):
    """``run_layers`` on ``nt`` threads, a count already resolved: the stage's per-token call (it
    built the layers' linears for that count).  The native wrapper checks x, the caches and the
    rope rows either way."""
    if _m.run_layers(layers, x, Ks, Vs, pos, cos, sin, _simd.isa(), nt):
        raise ValueError("x: non-finite value(s) (NaN or Inf) cannot be quantized")
    return x


def rope(x, cos, sin, pos: int, out=None):
    """x (T, nh, hd) rotated (rotate-half, as Hugging Face) at positions pos..pos+T-1 (each head
    contiguous), into ``out`` (a new float32 (T, nh, hd) array by default); cos, sin float32
    tables (>= pos + T, hd/2)."""
    if out is None:
        out = np.empty(x.shape, np.float32)
    _m.rope_rows(out, x, cos, sin, int(pos))
    return out
