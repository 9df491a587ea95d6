"""``backward="table"``: gradients through the unit's gradient tables.

Design: for a unit f (row a = activation code, column b = weight code) with gradient
tables ``Ga = df/da`` and ``Gb = df/db`` (``Units.gradients(h)``, central differences
over +-h codes, or the tables a user attached with ``Units.with_gradients``), and the
forward ``y[m, o] = s_x * s_w[o] * sum_k f(q_x[m, k], q_w[o, k]) + b[o]`` with the
rounding passed straight through:

    g[m, o]  = float32(dY[m, o] * s_w[o])
    dX[m, k] = sum_o g[m, o] * Ga[q_x[m, k], q_w[o, k]]            (0 where x was clamped)
    dW[o, k] = s_x * sum_m dY[m, o] * Gb[q_x[m, k], q_w[o, k]]
    db       = sum_m dY[m, o], as the STE

in float32.  A conv runs the same over its im2col patches (per group) and folds dX
back (``F.fold``, as backward="units").  "Clamped" is |round(x / s_x)| > 127, which
only a static input scale produces.  The gradient is float, not a product through
the 8-bit table, so this is its own pass: natively (``lutcore.ops.gradtables``,
csrc/gradtables/gradtables.h, threaded over rows of dX and of dW, each sum in index
order: o = 0, 1, ... for dX, m = 0, 1, ... for dW), or without the native module in
numpy: rows of M in fixed blocks of ``BLOCK_ELEMS // K`` rows, dX summed over o in order
(the native bits), each block's dW part numpy's sum over its rows, the parts added in
block order (threads over blocks).  Every order depends on the shapes only: the same bits
at any thread count.  Differentiable once, as backward="units".  Not traceable yet
(torch.compile, export, jit.trace: a ValueError naming the layer).

Layout: this module holds the tables (``tables_for``: cached per unit and ``grad_h``; their
planes form ``planes_for`` / ``use_planes``) and the two sums (``table_grads``; the planes form
is run k-major by ``lutcore.torch.functional._table_backward_planes``); ``table_backward``,
which uses them, and the layers' autograd Functions (one per layer kind for every backward mode: the tables travel in their
``backward`` argument) live in ``lutcore.torch.functional``, which imports this module (and
never the other way round).

The planes form (``lutcore.ops.gradtables.planes_pass``, csrc/gradtables/planes.h): where a
table's entries are int16 multiples of one power of two 2^e (the default tables: central
differences of int16 products over 2 codes, e = -1), its rows are held as byte planes and the
pass reads them with byte permutes (AVX-512 VBMI) — the same sums in the same order, so the same
bits, several times faster than the gathers.  dX runs with lanes over m (row q_w[o, k] of Ga
transposed, entry q_x[m, k]), dW with lanes over o (row q_x[m, k] of Gb, entry q_w[o, k]);
both read the codes and write the results k-major.  Other tables, and paths without VBMI, run
the gathers.
"""
from __future__ import annotations

import operator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lutcore.ops import gradtables as _room
from lutcore.units import Units

__all__ = ["GRAD_SUPPLIED", "grad_arg", "tables_for", "check_layer", "table_grads", "planes_for", "use_planes"]

USE_NATIVE = True                       # tests compare the numpy fallback by turning this off

GRAD_SUPPLIED = "supplied"
BLOCK_ELEMS = 1 << 16            # elements of (rows, K) per block: 256 KiB of float32
_TABLES: dict = {}               # (digest, h) -> (Ga, Gb) flat float32, the last 8
_PLANES: dict = {}               # id(Ga) -> (Ga, Gb, planes or None): planes_for's, the last 8
USE_PLANES = True                # tests and benchmarks compare the gathers by turning this off


def grad_arg(v, layer: str):
    """The gradient-table option: None (the unit's attached tables if it has them, else
    central differences with h = 1), an int h in 1..127 (central differences over +-h codes,
    even when the unit has attached tables) or "supplied" (the unit's attached tables,
    required)."""
    if v is None or v == GRAD_SUPPLIED:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{layer}: grad_h: expected None, an int 1..127 or {GRAD_SUPPLIED!r}, got {v!r}")
    v = operator.index(v)
    if not 1 <= v <= 127:
        raise ValueError(f"{layer}: grad_h: expected None, an int 1..127 or {GRAD_SUPPLIED!r}, got {v}")
    return v


def _with_transpose(ga, gb, fmt=None) -> tuple:
    """(Ga, Gb, GbT) flat byte-indexed float32; tables of another format than signed 8 x 8
    ((2^a_bits, 2^b_bits), natural low-bits index) are first placed at their codes' bytes."""
    if fmt is not None and not fmt.legacy:
        ga, gb = (_embed(t, fmt) for t in (ga, gb))
    gbt = np.ascontiguousarray(gb.reshape(256, 256).T).reshape(65536)     # GbT[b * 256 + a]
    return ga, gb, gbt


def _embed(t: np.ndarray, fmt) -> np.ndarray:
    out = np.zeros(65536, np.float32)
    out[fmt.kernel_index().reshape(-1)] = np.asarray(t, np.float32).reshape(-1)
    return out


def tables_for(units: Units, grad_h, layer: str) -> tuple:
    """(Ga, Gb, GbT), each float32 (65536,): Ga, Gb indexed (a & 0xff) * 256 + (b & 0xff), GbT
    = Gb transposed (the native dW pass's), for ``units`` under the option ``grad_h`` (grad_arg)."""
    grad_h = grad_arg(grad_h, layer)
    attached = getattr(units, "grad_tables", None)
    if grad_h == GRAD_SUPPLIED or (grad_h is None and attached is not None):
        if attached is None:
            raise ValueError(f"{layer}: grad_h={GRAD_SUPPLIED!r} asks for the unit's own gradient tables, but "
                             f"units {units.name!r} ({units.digest[:16]}) carry none: attach them with "
                             f"units.with_gradients(Ga, Gb) (or grad_a.bin and grad_b.bin in its directory), "
                             f"or use grad_h=None / an int for central differences")
        shape = units.format.table_shape
        for t, n in zip(attached, ("Ga", "Gb")):         # a Units built around with_gradients' checks
            if not (isinstance(t, np.ndarray) and t.dtype == np.float32 and t.shape == shape):
                raise ValueError(f"{layer}: units {units.name!r}: gradient table {n}: expected float32 {shape}, "
                                 f"got {getattr(t, 'dtype', type(t).__name__)} {getattr(t, 'shape', '')}")
            if not np.isfinite(t).all():
                raise ValueError(f"{layer}: units {units.name!r}: gradient table {n} holds non-finite entries")
        key = ("attached", id(attached))           # the cache holds `attached`: its id is not reused
        t = _TABLES.get(key)
        if t is None or t[3] is not attached:
            _evict()
            t = _TABLES[key] = _with_transpose(attached[0].reshape(-1), attached[1].reshape(-1),
                                               units.format) + (attached,)
        return t[:3]
    h = 1 if grad_h is None else grad_h
    key = (units.digest, h)
    t = _TABLES.get(key)
    if t is None:
        _evict()
        ga, gb = units.gradients(h)
        t = _TABLES[key] = _with_transpose(ga.reshape(-1), gb.reshape(-1), units.format)
    return t


def check_layer(layer) -> None:
    """An approximate layer's backward="table" settings are usable with its units now (a
    ValueError naming the layer otherwise, e.g. grad_h="supplied" on units without tables)."""
    if getattr(layer, "backward", None) == "table" and getattr(layer.units, "kind", None) == "mantissa":
        raise ValueError(f"{layer._lc_name}: units {layer.units.name!r} (bf16/fp16 through a significand table) have "
                         f"no gradient tables: use backward='ste' or 'units'")
    if getattr(layer, "backward", None) == "table" and getattr(layer.units, "kind", None) == "mx":
        if layer.grad_h is not None:
            raise ValueError(f"{layer._lc_name}: MX units {layer.units.name!r} take their gradient tables from "
                             f"differences between neighbouring values: grad_h={layer.grad_h!r} does not apply")
    elif getattr(layer, "backward", None) == "table" and layer.units is not None:
        tables_for(layer.units, layer.grad_h, layer._lc_name)


def _evict():
    if len(_TABLES) >= 8:
        _TABLES.pop(next(iter(_TABLES)))


def _blocks(M: int, K: int):
    step = max(1, BLOCK_ELEMS // max(K, 1))
    return [(m0, min(M, m0 + step)) for m0 in range(0, M, step)]


def table_grads(qx: np.ndarray, qw: np.ndarray, g, dy, ga: np.ndarray, gb: np.ndarray, nt: int, gbt=None):
    """(dX (M, K) or None, S (O, K) or None) with dX = sum_o g[m, o] Ga[qx[m, k], qw[o, k]] and
    S = sum_m dy[m, o] Gb[qx[m, k], qw[o, k]] (no s_x), float32: qx (M, K), qw (O, K) int8 codes,
    g / dy (M, O) float32 (None: that gradient is not needed).  With ``gbt`` (Gb transposed) and
    the native module: the native pass (the same dX bits; S summed over m in order 0, 1, ...)."""
    if gbt is not None and _room.native() and USE_NATIVE:
        dx = None if g is None else _room.table_pass(0, qx, qw, g, ga, nt)
        s = None if dy is None else _room.table_pass(1, qx, qw, dy, gbt, nt)
        return dx, s
    M, K = qx.shape
    O = qw.shape[0]
    qw32 = qw.astype(np.int32) & 0xff
    blocks = _blocks(M, K)
    dx = np.zeros((M, K), np.float32) if g is not None else None

    def run(blk):
        m0, m1 = blk
        rows = (qx[m0:m1].astype(np.int32) & 0xff) << 8          # a's row offset in the table
        idx = np.empty_like(rows)
        t = np.empty(rows.shape, np.float32)
        part = np.empty((O, K), np.float32) if dy is not None else None
        for o in range(O):
            np.add(rows, qw32[o], out=idx)
            if g is not None:
                np.take(ga, idx, out=t)
                t *= g[m0:m1, o:o + 1]
                dx[m0:m1] += t
            if dy is not None:
                np.take(gb, idx, out=t)
                t *= dy[m0:m1, o:o + 1]
                np.add.reduce(t, axis=0, out=part[o])
        return part

    if nt > 1 and len(blocks) > 1:
        with ThreadPoolExecutor(max_workers=min(nt, len(blocks))) as ex:
            parts = list(ex.map(run, blocks))
    else:
        parts = [run(b) for b in blocks]
    s = None
    if dy is not None:
        s = parts[0] if parts else np.zeros((O, K), np.float32)
        for p in parts[1:]:
            s += p
    return dx, s


# ------------------------------------------------------------------ the planes form

def _int16_form(t: np.ndarray):
    """(planes (256, 512) uint8, scale float32) of a table t (256 rows, 256 entries) float32 whose
    entries are v * 2^e with v int16 and 2^(e - 16) a normal float32 (planes.h's layout: per row
    lo(x < 128), hi(x < 128), lo(x >= 128), hi(x >= 128)); None for any other table."""
    t64 = t.astype(np.float64)
    nz = t64[t64 != 0]
    e = 0
    if nz.size:
        m, ex = np.frexp(np.abs(nz))                       # |t| = m 2^ex, m in [0.5, 1): 24 significant bits
        mi = (m * (1 << 24)).astype(np.int64)
        low = (mi & -mi).astype(np.float64)                # the lowest set bit of the significand
        e = int((ex - 24 + np.log2(low).astype(np.int64)).min())
    if not -110 <= e <= 143:
        return None
    v = t64 / 2.0 ** e
    if np.abs(v).max(initial=0) > 32767:
        return None
    v = v.astype(np.int32)
    scale = np.float32(2.0 ** (e - 16))
    if not np.array_equal((v * 65536).astype(np.float32) * scale, t):     # the kernel's value, exactly
        return None
    lo, hi = (v & 0xff).astype(np.uint8), ((v >> 8) & 0xff).astype(np.uint8)
    planes = np.concatenate([lo[:, :128], hi[:, :128], lo[:, 128:], hi[:, 128:]], axis=1)
    return np.ascontiguousarray(planes), scale


def planes_for(tables):
    """The planes form of ``tables`` (tables_for's (Ga, Gb, GbT)): (dX's planes: Ga transposed, row
    b entry a; their scale; dW's planes: Gb, row a entry b; their scale), or None where a table is
    not int16 multiples of a power of two (then the gathers run).  Cached for the last 8 tables."""
    ga, gb = tables[0], tables[1]
    hit = _PLANES.get(id(ga))
    if hit is not None and hit[0] is ga and hit[1] is gb:
        return hit[2]
    pa = _int16_form(np.ascontiguousarray(ga.reshape(256, 256).T))
    pb = _int16_form(gb.reshape(256, 256))
    planes = None if pa is None or pb is None else (pa[0], pa[1], pb[0], pb[1])
    if len(_PLANES) >= 8:
        _PLANES.pop(next(iter(_PLANES)))
    _PLANES[id(ga)] = (ga, gb, planes)          # holds ga: its id is not reused while cached
    return planes


def use_planes(tables):
    """planes_for(tables) where the current SIMD path runs the planes pass's vector body, else None."""
    if not (USE_PLANES and _room.planes_fast()):
        return None
    return planes_for(tables)
