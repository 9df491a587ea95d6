"""The gradient-table pass: float32 sums of weighted gradient-table entries indexed by 8-bit
codes (csrc/gradtables/gradtables.h) — the backward of ``backward="table"`` (lutcore.torch)
and of ``UnitMatmul(unit_backward="table")`` (lutcore's models).

Design: the room of the ``gradtables`` family.  With a table G float32 (65536,) indexed
``(a & 0xff) * 256 + (b & 0xff)``, codes qx (M, K) and qw (O, K) int8 and weights w
float32 (M, O):

    which 0:  out[m, k] = sum_o w[m, o] * Ga[qx[m, k], qw[o, k]]           out (M, K)
    which 1:  out[o, k] = sum_m w[m, o] * GbT[qw[o, k], qx[m, k]]          out (O, K)

(``which`` 1 takes the transposed table, GbT[b * 256 + a] = Gb[a * 256 + b]).  Each sum
runs in index order (o, resp. m = 0, 1, ...), threaded over rows of out: the same bits at any
thread count and on every SIMD path.  Without the native module (a build that lacks it) the
same sums run in the same order in numpy.  Arguments are checked here (dtypes, shapes; inputs
made contiguous); ``threads``: None reads the enclosing ``lutcore._threads.scope``.

The planes pass (csrc/gradtables/planes.h) is the same sums with the lanes of a vector sharing
their table row, read by byte permutes from registers instead of gathers: for a table of int16
multiples of one power of two (``planes``: (256, 512) uint8, ``scale`` = 2^(e - 16)),

    planes_pass:  outT[k, l] = sum_i w[i, l] * G[c[i, k]][idxT[k, l]]      outT (K, L)

c (NI, K) int8 with any strides, idxT (K, L) uint8, w (NI, L) float32 (idxT and w may be a range of
lanes of wider arrays: rows contiguous, equally far apart; outT rows contiguous); each sum in i
order from 0.
``planes_fast()`` says whether the current SIMD path has its vector body (AVX-512 VBMI); elsewhere
``table_pass``'s gathers are faster.
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._threads import resolve_threads

try:                                    # the native pass; numpy without it
    from lutcore._native import gradtables as _gt
except ImportError:                     # pragma: no cover - a build without it
    _gt = None

__all__ = ["native", "table_pass", "planes_fast", "planes_pass"]


def native() -> bool:
    """Whether the native pass is built (else ``table_pass`` runs its numpy sums)."""
    return _gt is not None


def _arr(x, name, dtype, ndim):
    x = np.asarray(x)
    if x.dtype != dtype or x.ndim != ndim:
        raise TypeError(f"{name}: expected a {ndim}-D {np.dtype(dtype)} array, got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x)


def table_pass(which: int, qx, qw, w, table, threads=None) -> np.ndarray:
    """The pass ``which`` (0: (M, K) over o, with Ga; 1: (O, K) over m, with GbT) of the module
    docstring, as a new float32 array."""
    if which not in (0, 1):
        raise ValueError(f"which: expected 0 (summed over o) or 1 (summed over m), got {which!r}")
    qx = _arr(qx, "qx", np.int8, 2)
    qw = _arr(qw, "qw", np.int8, 2)
    w = _arr(w, "w", np.float32, 2)
    table = _arr(table, "table", np.float32, 1)
    (M, K), O = qx.shape, qw.shape[0]
    if qw.shape[1] != K or w.shape != (M, O) or table.shape != (65536,):
        raise ValueError(f"qx, qw, w, table: expected (M, K), (O, K), (M, O) and (65536,), got {qx.shape}, "
                         f"{qw.shape}, {w.shape} and {table.shape}")
    if _gt is None:
        return _numpy_pass(which, qx, qw, w, table)
    out = np.empty(((O if which else M), K), np.float32)
    _gt.table_pass(which, out, qx, qw.view(np.uint8), w, table, _simd.isa(), resolve_threads(threads))
    return out


def planes_fast() -> bool:
    """Whether the current SIMD path runs a vector body of ``planes_pass`` (AVX-512 VBMI)."""
    return _gt is not None and _gt.planes_fast(_simd.isa())


def planes_pass(outT, c, idxT, w, planes, scale, threads=None, skip=False, sym=False) -> np.ndarray:
    """outT (K, L) float32 = sum_i w[i, l] * G[c[i, k]][idxT[k, l]] (the module docstring; the sums
    in i order), written in place and returned: c (NI, K) int8 (any strides), idxT (K, L) int8 or
    uint8, w (NI, L) float32, planes (256, 512) uint8, scale a float32 power of two.  ``skip``: many
    codes c are 0 — where the table's row 0 is all zeros and every weight is finite, the steps of
    code 0 add nothing and are left out; ``sym``: the codes idxT are signed — where every row is
    even in its entry (G[r][-x] = G[r][x], 0 < x < 127) they are looked up by magnitude (hints,
    checked natively: the same bits either way)."""
    if _gt is None:
        raise RuntimeError("planes_pass: lutcore was built without its native gradtables module")
    for a, name, dt, nd in ((outT, "outT", np.float32, 2), (c, "c", np.int8, 2), (w, "w", np.float32, 2),
                            (planes, "planes", np.uint8, 2)):
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != nd:
            raise TypeError(f"{name}: expected a {nd}-D {np.dtype(dt)} array, got {getattr(a, 'dtype', type(a))} "
                            f"{getattr(a, 'shape', '')}")
    if not isinstance(idxT, np.ndarray) or idxT.dtype not in (np.int8, np.uint8) or idxT.ndim != 2:
        raise TypeError(f"idxT: expected a 2-D int8 or uint8 array, got {getattr(idxT, 'dtype', type(idxT))}")
    idxT, w = idxT.view(np.uint8), _rows(w)
    if idxT.strides[1] != 1 or (idxT.shape[0] > 1 and w.shape[0] > 1 and idxT.strides[0] * 4 != w.strides[0]):
        idxT, w = np.ascontiguousarray(idxT), np.ascontiguousarray(w)
    _gt.planes_pass(outT, c, idxT, w, np.ascontiguousarray(planes), float(scale), bool(skip), _simd.isa(),
                    resolve_threads(threads), bool(sym))
    return outT


def _rows(a):
    """a itself when its rows are contiguous and apart by a whole number of elements (a column range
    of a wider array), else a contiguous copy."""
    if a.ndim == 2 and a.strides[1] == a.itemsize and a.strides[0] >= a.shape[1] * a.itemsize \
            and a.strides[0] % a.itemsize == 0:
        return a
    return np.ascontiguousarray(a)


def _numpy_pass(which, qx, qw, w, table):
    """The pass in numpy, each sum in the native order (o, resp. m = 0, 1, ...)."""
    (M, K), O = qx.shape, qw.shape[0]
    a = qx.view(np.uint8).astype(np.int64)                     # (M, K)
    b = qw.view(np.uint8).astype(np.int64)                     # (O, K)
    if which == 0:
        out = np.zeros((M, K), np.float32)
        for o in range(O):
            out += w[:, o:o + 1] * table[(a << 8) | b[o][None, :]]
    else:
        out = np.zeros((O, K), np.float32)
        for m in range(M):
            out += w[m][:, None] * table[(b << 8) | a[m][None, :]]
    return out
