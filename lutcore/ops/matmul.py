"""Deterministic float32 matmul: ``matmul(a, b)`` for 2-D or batched 3-D arrays.

Every output element is one fused multiply-add chain over k in order, owned
by one thread, so the result has the same bits at any thread count and on
every SIMD path — which BLAS does not promise (OpenBLAS's rounding changes
with its thread count).  Transposed views (``w.T``) are read in place through
their strides, no copy.  float64 inputs go to numpy (used for gradient checks).
"""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd, _workspace
from lutcore._native import sgemm as _s
from lutcore._threads import resolve_threads

__all__ = ["matmul", "PackedMatrix", "pack_matrix"]


class PackedMatrix:
    """A constant float32 right operand (K, N) packed once into the GEMM's panel
    layout — for weights used many times (decoding: one row per call)."""

    def __init__(self, b):
        b = np.asarray(b)
        if b.dtype != np.float32 or b.ndim != 2:
            raise TypeError(f"b: expected a 2-D float32 array, got {b.dtype} {b.shape}")
        st = _strides(b)
        if st is None:
            b = np.ascontiguousarray(b)
            st = _strides(b)
        K, N = b.shape
        self.shape = (K, N)
        self.panels = np.empty(max(1, -(-N // _s.NR) * _s.NR * K), np.float32)
        _s.pack_b(self.panels, b, K, N, st[0], st[1])
        self._dummy = self.panels[:1]

    def __repr__(self):
        return f"PackedMatrix(shape={self.shape})"


def pack_matrix(b) -> PackedMatrix:
    return PackedMatrix(b)


def _strides(x: np.ndarray):
    st = [s // x.itemsize for s in x.strides]
    if any(s * x.itemsize != t for s, t in zip(st, x.strides)) or any(s < 0 for s in st):
        return None
    return st


def matmul(a, b, out=None, accumulate: bool = False, threads=None, tri=None):
    """``a @ b`` (float32, 2-D (M,K)@(K,N) or 3-D (B,M,K)@(B,K,N)); with
    ``accumulate=True`` adds into ``out``.

    ``tri`` declares known zeros (causal attention), which are then not added:
    ``"a_lower"`` (``a[..., i, k] == 0`` for ``k > i``), ``"a_upper"`` (``== 0``
    for ``k < i``), or ``"out_lower"`` (only ``out[..., i, j]`` with ``j <= i`` is
    wanted; output tiles wholly above the diagonal are written as zeros, or left
    alone with ``accumulate``).  The caller vouches for the zeros; each element is
    still one in-order chain, so the result equals the full product up to the
    sign of an exact zero.  float64 inputs compute the full product.

    ``out`` may be any float32 array of the result's shape, as numpy's: it is
    written in place when its rows have unit stride (``big[:, j:j + N]``
    included) and it shares no memory with ``a`` or ``b``, else through a copy."""
    accumulate = _check.bool_arg(accumulate, "accumulate")
    a = np.asarray(a)
    if not (tri is None or isinstance(tri, str)) or tri not in _s.TRI:
        raise ValueError(f"tri: expected one of {sorted(k for k in _s.TRI if k)} or None, got {tri!r}")
    if isinstance(b, PackedMatrix):
        if tri is not None:
            raise ValueError("tri: not supported with a packed right operand")
        return _matmul_packed(a, b, out, accumulate, threads)
    b = np.asarray(b)
    if a.dtype not in (np.float32, np.float64) or b.dtype not in (np.float32, np.float64):
        raise TypeError(f"a, b: expected float32 (or float64), got {a.dtype} and {b.dtype}")
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise ValueError(f"a, b: expected two 2-D or two 3-D arrays, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2] or (a.ndim == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"a, b: shapes {a.shape} and {b.shape} do not multiply")
    if a.dtype == np.float64 or b.dtype == np.float64:
        shape = a.shape[:-1] + b.shape[-1:]
        if out is None:
            if accumulate:
                raise ValueError("out: accumulate=True needs an out array")
            return np.matmul(a, b)
        _check.out_checked(out, "out", shape, np.float64)     # float64 of exactly the result's shape
        if accumulate:
            out += a @ b
            return out
        return np.matmul(a, b, out=out)
    batched = a.ndim == 3
    if not batched:
        a, b = a[None], b[None]
    nb, M, K = a.shape
    if b.shape[0] != nb or b.shape[1] != K:
        raise ValueError(f"a, b: shapes {a.shape[int(not batched):]} and {b.shape[int(not batched):]} "
                         f"do not multiply")
    N = b.shape[2]
    sa, sb = _strides(a), _strides(b)
    if sa is None:
        a = np.ascontiguousarray(a)
        sa = _strides(a)
    if sb is None:
        b = np.ascontiguousarray(b)
        sb = _strides(b)
    shape = (nb, M, N) if batched else (M, N)
    dst, ld, sc = _out(out, shape, accumulate, a, b)
    if M == 0 or N == 0 or nb == 0 or K == 0:
        return _empty_product(out, dst, accumulate)
    work = _workspace.scratch("sgemm", _s.work_size(M, N, K) * nb, np.float32)
    _s.sgemm(dst, sc, ld, a, sa[0], sa[1], sa[2], b, sb[0], sb[1], sb[2], nb, M, N, K, accumulate, work,
             None, _simd.isa(), resolve_threads(threads), _s.TRI[tri])
    return _check.out_done(out, dst)


def _out(out, shape, accumulate, *inputs):
    """(dst, ld, batch stride) for ``out`` (see _check.out_rows); a stand-in for
    ``out`` starts as its copy when the product is added into it."""
    if out is None and accumulate:
        raise ValueError("out: accumulate=True needs an out array")
    dst, ld, sc = _check.out_rows(out, "out", shape, np.float32, *inputs)
    if accumulate and dst is not out:
        np.copyto(dst, out)
    return dst, ld, sc


def _empty_product(out, dst, accumulate):
    """An empty product (some dimension 0; K = 0 sums nothing): zeros, or ``out`` unchanged."""
    res = dst if out is None else out
    if not accumulate:
        res.fill(0)
    return res


def _matmul_packed(a, pb: PackedMatrix, out, accumulate, threads):
    if a.dtype != np.float32 or a.ndim != 2:
        raise TypeError(f"a: expected a 2-D float32 array for a packed right operand, got {a.dtype} {a.shape}")
    M, K = a.shape
    if K != pb.shape[0]:
        raise ValueError(f"a, b: shapes {a.shape} and {pb.shape} do not multiply")
    N = pb.shape[1]
    sa = _strides(a)
    if sa is None:
        a = np.ascontiguousarray(a)
        sa = _strides(a)
    dst, ld, sc = _out(out, (M, N), accumulate, a)
    if M == 0 or N == 0 or K == 0:
        return _empty_product(out, dst, accumulate)
    npa = -(-M // 6) * 6
    work = _workspace.scratch("sgemm", npa * K, np.float32)
    _s.sgemm(dst, sc, ld, a, 0, sa[0], sa[1], pb._dummy, 0, 0, 0, 1, M, N, K, accumulate, work, pb.panels,
             _simd.isa(), resolve_threads(threads))
    return _check.out_done(out, dst)
