"""Runtime audit of the fast paths (seed 003's ``audit`` hook).

When a rate r > 0 is set (``set_audit(r)`` or ``LUTCORE_AUDIT=r``), every
``lut_gemm`` and ``qmatmul`` recomputes a random sample of its outputs — at
least one whole row and one whole column, plus about r of the rest — from the
scalar table definition with numpy, and raises ``AuditError`` naming the first
position that differs.  It checks the public table (``units.mul``), never the
copy the kernels read, so a corrupted kernel table is caught too.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["AuditError", "set_audit", "get_audit"]


class AuditError(AssertionError):
    """A fast-path output differs from the table definition."""


def _parse_env() -> float:
    v = os.environ.get("LUTCORE_AUDIT", "").strip()
    if not v:
        return 0.0
    try:
        r = float(v)
    except ValueError:
        raise ValueError(f"LUTCORE_AUDIT: expected a rate in [0, 1], got {v!r}") from None
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"LUTCORE_AUDIT: expected a rate in [0, 1], got {v!r}")
    return r


_rate = _parse_env()
_rng = np.random.default_rng()


def set_audit(rate: float) -> None:
    """Audit a fraction ``rate`` of every LUT GEMM's outputs (0 turns it off)."""
    global _rate
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating, np.integer)):
        raise TypeError(f"rate: expected a float in [0, 1], got {type(rate).__name__}")
    if not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"rate: expected a float in [0, 1], got {rate}")
    _rate = float(rate)


def get_audit() -> float:
    return _rate


def _sample(n: int, rate: float) -> np.ndarray:
    k = min(n, max(1, int(round(rate * n))))
    return np.sort(_rng.choice(n, size=k, replace=False))


def _lut_rows(mul, a_rows, b):
    """int64 (len(rows), N): sum_k mul[a[r,k], b[k,n]] for the given rows of a,
    by plain table lookups (numpy fancy indexing), k in chunks of ~1M lookups."""
    R, K = a_rows.shape
    N = b.shape[1]
    ia = (a_rows.astype(np.int64) & 0xFF) * 256          # (R, K)
    ib = b.astype(np.int64) & 0xFF                          # (K, N)
    out = np.zeros((R, N), np.int64)
    step = max(1, (1 << 20) // max(1, R * N))
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        out += mul[ia[:, k0:k1, None] + ib[None, k0:k1, :]].sum(axis=1)
    return out


def check_gemm(c, a, b, units, what="lut_gemm"):
    M, N = c.shape
    if M == 0 or N == 0 or _rate <= 0:
        return
    mul = units.byte_products
    rows = _sample(M, _rate)
    ref = _lut_rows(mul, a[rows], b)
    _compare(c[rows], ref, lambda i, j: (rows[i], j), what)
    cols = _sample(N, _rate)
    ref = _lut_rows(mul, a, b[:, cols])
    _compare(c[:, cols], ref, lambda i, j: (i, cols[j]), what)


def _fold(mul, qa_rows, sa_rows, qb, sb, block):
    """float32 (R, N): the block-scaled contract for the given rows."""
    R, N = qa_rows.shape[0], qb.shape[1]
    nblk = sb.shape[0]
    y = np.zeros((R, N), np.float32)
    for blk in range(nblk):
        ks = slice(blk * block, (blk + 1) * block)
        I = _lut_rows(mul, qa_rows[:, ks], qb[ks]).astype(np.float32)
        y = y + (sa_rows[:, blk, None] * sb[None, blk, :]) * I
    return y


def check_qmatmul(y, qa, sa, qb, sb, block, units):
    M, N = y.shape
    if M == 0 or N == 0 or _rate <= 0:
        return
    mul = units.byte_products
    rows = _sample(M, _rate)
    ref = _fold(mul, qa[rows], sa[rows], qb, sb, block)
    _compare(y[rows], ref, lambda i, j: (rows[i], j), "qmatmul", bits=True)
    cols = _sample(N, _rate)
    ref = _fold(mul, qa, sa, qb[:, cols], sb[:, cols], block)
    _compare(y[:, cols], ref, lambda i, j: (i, cols[j]), "qmatmul", bits=True)


def _compare(got, ref, where, what, bits=False):
    if bits:
        bad = got.view(np.int32) != ref.astype(np.float32).view(np.int32)
    else:
        bad = got.astype(np.int64) != ref
    if bad.any():
        i, j = np.argwhere(bad)[0]
        m, n = where(i, j)
        raise AuditError(f"{what}: output [{m}, {n}] is {got[i, j]!r}, the table definition gives "
                         f"{ref[i, j]!r} ({int(bad.sum())} of {bad.size} sampled outputs differ)")
