"""Block-scaled int8 kernels: the Q8 quantizer (rows or columns) and the block-scaled
product through a multiplier table (csrc/q8/q8.h, csrc/gemm/).

Design: the kernel room under ``lutcore.quant`` (which owns ``Q8``, ``quantize``,
``qmatmul`` and ``QLinear``: the contract, the operands' lifetimes and the audit).  The
native wrappers take pointers and trust the sizes, so the public functions here check
every buffer against the shapes (dtype, C-contiguity, sizes) before calling C.  The
underscored ones (``_quantize_rows``, ``_quantize_cols``, ``_qmatmul_exact``,
``_qmatmul_table``) are the same calls unchecked, on a thread count already resolved: the
private fast functions of this room for ``lutcore.quant``, which builds every buffer they
read itself (a ``Q8`` is checked when it is made) — a decode step calls them per weight
per token.  The SIMD path is read here.  Every output element is owned by one thread and
summed in a fixed order: the same bits at any thread count and on every SIMD path.

    x        float32 (R, K)            quantize_rows: blocks along K;  quantize_cols: x (K, N), along K
    q, s     int8 (R, nblk*block), float32 (R, nblk)     (cols: (nblk*block, N), (nblk, N))
    qa, sa   the left operand's codes and scales, rows   (M, nblk*block), (M, nblk)
    bp, sbp  the right operand's exact panels and packed scales (``lutcore.ops.gemm.pack_panels``,
             ``pack_scales``), Kp = nblk * even(block)
    qb, sb   the right operand's codes and scales, columns   (nblk*block, N), (nblk, N)
    table    int32 (2, 65536)          ``Units.kernel_table``: the table and its transpose
    y        float32 (M, N)            rows ``ld`` elements apart (-1: N)
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd, _workspace
from lutcore._native import gemm as _g
from lutcore._threads import resolve_threads
from lutcore.ops.gemm import even_depth, pack_a16

__all__ = ["MR", "NR", "quantize_rows", "quantize_cols", "pack_scales", "padded_rows", "qmatmul_exact",
           "qmatmul_table", "table_work"]

MR, NR = _g.MR, _g.NR            # the exact kernel's row / column panel heights


def padded_rows(M: int) -> int:
    """M rounded up to the exact kernel's row panels (the rows of its int16 A buffer)."""
    return -(-M // MR) * MR


def _buf(a, name, dtype, shape=None, size=None, write=False):
    if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous
            and (a.flags.writeable or not write)):
        got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise ValueError(f"{name}: expected a{' writeable' if write else ''} C-contiguous {np.dtype(dtype)} array, "
                         f"got {got}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if size is not None and a.size < size:
        raise ValueError(f"{name}: expected at least {size} values, got {a.size}")
    return a


def _codes(x, block, q, s, rows: bool):
    _buf(x, "x", np.float32)
    if x.ndim != 2:
        raise ValueError(f"x: expected a 2-D array, got shape {x.shape}")
    L = x.shape[1] if rows else x.shape[0]
    nblk = -(-L // block)
    qshape = (x.shape[0], nblk * block) if rows else (nblk * block, x.shape[1])
    sshape = (x.shape[0], nblk) if rows else (nblk, x.shape[1])
    q = np.empty(qshape, np.int8) if q is None else _buf(q, "q", np.int8, qshape, write=True)
    s = np.empty(sshape, np.float32) if s is None else _buf(s, "s", np.float32, sshape, write=True)
    return q, s


def quantize_rows(x, block: int, q=None, s=None, threads=None):
    """``(q, s, bad)``: x (R, K) quantized per row in blocks of ``block`` along K (zero-padded to
    whole blocks) into ``q`` / ``s`` (new arrays by default); ``bad`` counts the non-finite
    inputs (they have no code)."""
    if int(block) < 1:
        raise ValueError(f"block: expected >= 1, got {block}")
    q, s = _codes(x, int(block), q, s, True)
    return q, s, _quantize_rows(q, s, x, int(block), resolve_threads(threads))


def quantize_cols(x, block: int, q=None, s=None, threads=None):
    """``(q, s, bad)``: x (K, N) quantized per column in blocks of ``block`` along K."""
    if int(block) < 1:
        raise ValueError(f"block: expected >= 1, got {block}")
    q, s = _codes(x, int(block), q, s, False)
    return q, s, _quantize_cols(q, s, x, int(block), resolve_threads(threads))


def _quantize_rows(q, s, x, block, nt) -> int:
    """``quantize_rows`` unchecked into the given q, s on ``nt`` threads; returns ``bad``."""
    return _g.quantize_rows(q, s, x, block, _simd.isa(), nt)


def _quantize_cols(q, s, x, block, nt) -> int:
    """``quantize_cols`` unchecked into the given q, s on ``nt`` threads; returns ``bad``."""
    return _g.quantize_cols(q, s, x, block, _simd.isa(), nt)


def pack_scales(sb: np.ndarray) -> np.ndarray:
    """The right operand's scales (nblk, N) as the exact kernel streams them: (Np/NR, nblk, NR)
    flat, zero-padded columns."""
    nblk, N = sb.shape
    Np = -(-N // NR) * NR
    p = np.zeros((nblk, Np), np.float32)
    p[:, :N] = sb
    return np.ascontiguousarray(p.reshape(nblk, Np // NR, NR).transpose(1, 0, 2)).reshape(-1)


def _left(y, qa, sa, block):
    M, N = y.shape if isinstance(y, np.ndarray) and y.ndim == 2 else (-1, -1)
    if M < 0 or y.dtype != np.float32 or not y.flags.writeable:
        raise ValueError(f"y: expected a writeable float32 (M, N) array, got "
                         f"{getattr(y, 'dtype', type(y).__name__)} {getattr(y, 'shape', '')}")
    _buf(sa, "sa", np.float32)
    if sa.ndim != 2 or sa.shape[0] != M:
        raise ValueError(f"sa: expected ({M}, nblk), got {sa.shape}")
    nblk = sa.shape[1]
    _buf(qa, "qa", np.int8, (M, nblk * block))
    return M, N, nblk


def qmatmul_exact(y, qa, sa, bp, sbp, block: int, threads=None, ld: int = -1):
    """y = the block-scaled product of rows (qa, sa) and a right operand's exact panels
    (bp, sbp), for the exact table only (``Units.kernel_path == "exact"``)."""
    M, N, nblk = _left(y, qa, sa, int(block))
    Np = -(-N // NR) * NR
    _buf(bp, "bp", np.int8, size=Np * nblk * even_depth(int(block)))
    _buf(sbp, "sbp", np.float32, size=Np * nblk)
    _qmatmul_exact(y, qa, sa, bp, sbp, int(block), resolve_threads(threads), ld=ld)
    return y


def qmatmul_table(y, qa, sa, qb, sb, table, block: int, threads=None, ld: int = -1):
    """y = the block-scaled product of rows (qa, sa) and columns (qb, sb) through ``table``
    (any table; ``block`` * the table's largest |product| must fit int32)."""
    M, N, nblk = _left(y, qa, sa, int(block))
    _buf(qb, "qb", np.int8, (nblk * int(block), N))
    _buf(sb, "sb", np.float32, (nblk, N))
    _buf(table, "table", np.int32, (2, 65536))
    _qmatmul_table(y, qa, sa, qb, sb, table, int(block), resolve_threads(threads), ld=ld)
    return y


def _qmatmul_exact(y, qa, sa, bp, sbp, block, nt, ap=None, ld=-1):
    """``qmatmul_exact`` unchecked on ``nt`` threads; ``ap``: a caller-owned int16
    (padded_rows(M), nblk * even(block)) buffer for the widened rows (default: scratch)."""
    bkp = even_depth(block)
    if ap is None:
        ap = pack_a16(qa, block, bkp, nt)
    else:
        _g.pack_a16(ap, qa, block, bkp, nt)
    _g.qmatmul_exact_packed(y, ap, sa, bp, sbp, sa.shape[1], bkp, _simd.isa(), nt, ld)


def _qmatmul_table(y, qa, sa, qb, sb, table, block, nt, ld=-1):
    """``qmatmul_table`` unchecked on ``nt`` threads (its work buffer in scratch)."""
    M, N = y.shape
    nblk = sb.shape[0]
    work = _workspace.scratch("table", _g.table_auto_work_size(M, N, nblk * block, nblk, nt, True), np.int32)
    _g.qmatmul_table_auto(y, qa, sa, qb, sb, table, nblk, block, work, _simd.isa(), nt, ld)


def table_work(N: int, threads=None) -> np.ndarray:
    """The int32 work buffer the table kernel needs for one row of N columns on ``threads``
    (the decode layer's table linears keep one each)."""
    return np.empty(max(1, _g.table_work_size(1, int(N), resolve_threads(threads), True)), np.int32)
