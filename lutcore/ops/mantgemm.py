"""The mantissa-product GEMM: float32 operands rounded to bf16 or fp16 and multiplied through a
table of significand products (ApproxTrain's form of an approximate FP multiplier; docs/DESIGN.md,
"Mantissa-product units (bf16 / fp16)"; csrc/mantgemm/mantgemm.h).

    a     float32 (M, K)                   IN
    b     float32 (K, N)                   IN
    unit  a MantissaUnit (lutcore.units.mantissa), or any object with .fmt ("bf16" | "fp16") and
          .table float32 (2^m, 2^m), T[ma, mb] = the unit's (1 + ma/2^m)(1 + mb/2^m), finite, >= 0
    -> y  float32 (M, N)                   OUT (``out=``)

* Each operand is rounded to the format once: bf16 to nearest even from float32's bits (bit for bit
  ml_dtypes.bfloat16 / torch.bfloat16 on every non-NaN), fp16 as numpy's astype(np.float16)
  (nearest even, overflow to inf).  A subnormal of the format is flushed to zero (ApproxTrain's
  rule: the unit sees normal significands only).  NaN payloads are not kept.
* p = a NaN or inf operand: the IEEE product of the rounded values (inf x 0 = NaN, a flushed
  subnormal counting as 0); else a zero operand: 0; else (-1)^(sa ^ sb) T[ma, mb] 2^(ea + eb),
  exact in float64, rounded once to float32 (nearest even; float32's subnormals; overflow to inf).
* y = 0; for k = 0 .. K-1: y = fl32(y + p_k) — float32, sequential in k.  Every NaN output is the
  canonical 0x7fc00000, zeros are +0.  The same bits at any thread count and on every SIMD body
  (threads split rows and columns of y, never k).

The exact table (every entry (1 + x)(1 + y), which float32 holds exactly) takes the mul route: the
product of two rounded operands is then fl32(va * vb), one float32 multiply, the table's bits — no
lookups.  Any other table takes the table route.

Design: the room of the ``mantgemm`` family: everything a caller can get wrong is checked here —
``a`` and ``b`` float32 ndarrays (another dtype is a TypeError: converting float64 first would round
twice; non-contiguous ones are copied), 2-D, K matching, ``out``, ``threads``, the unit (its format,
its table's dtype, shape, entries) — and C trusts its inputs.  A unit's table is checked and its
route chosen once per read-only table object (a MantissaUnit's is; the last few are kept), a
writeable table on every call.  This module does not import lutcore.units.mantissa (the unit's
``matmul`` imports this room: units sit below the rooms), so it reads the unit by its attributes.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd, _workspace
from lutcore._native import mantgemm as _mt
from lutcore._threads import resolve_threads

__all__ = ["mant_gemm", "mant_round", "FORMATS"]

FORMATS = {"bf16": (_mt.BF16, 7), "fp16": (_mt.FP16, 10)}     # name -> (the C format, mantissa bits)

_PREPARED: dict = {}      # id(table) -> (table, fmt, route) of the last few read-only tables
_PREPARED_MAX = 8


def _fmt(fmt, name: str) -> str:
    if not isinstance(fmt, str):
        raise TypeError(f"{name}: expected a format name, one of {', '.join(FORMATS)}, got {type(fmt).__name__}")
    if fmt not in FORMATS:
        raise ValueError(f"{name}: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def _exact_table(m: int) -> np.ndarray:
    """float32 (2^m, 2^m): (1 + i/2^m)(1 + j/2^m), exact."""
    s = (1 << m) + np.arange(1 << m, dtype=np.int64)
    return np.ldexp(np.multiply.outer(s, s).astype(np.float64), -2 * m).astype(np.float32)


def _route(t: np.ndarray, fmt: str) -> int:
    """The table's entries checked (finite, >= 0: ValueError naming unit.table); its route."""
    bad = ~(np.isfinite(t) & (t >= 0))
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        raise ValueError(f"unit.table: expected finite entries >= 0, got T[{i}, {j}] = {float(t[i, j])!r}")
    exact = np.array_equal(t.view(np.uint32), _exact_table(FORMATS[fmt][1]).view(np.uint32))
    return _mt.ROUTE_MUL if exact else _mt.ROUTE_TABLE


def _unit(unit) -> tuple:
    """(fmt, table, route) of ``unit``, checked (TypeError/ValueError naming unit)."""
    if not (hasattr(unit, "fmt") and hasattr(unit, "table")):
        raise TypeError(f"unit: expected a MantissaUnit (lutcore.units.mantissa) or an object with .fmt and .table, "
                        f"got {type(unit).__name__}")
    fmt = _fmt(unit.fmt, "unit.fmt")
    m = FORMATS[fmt][1]
    t = unit.table
    if not isinstance(t, np.ndarray) or t.dtype != np.float32:
        raise TypeError(f"unit.table: expected a float32 ndarray, got {type(t).__name__} {getattr(t, 'dtype', '')}")
    if t.shape != (1 << m, 1 << m):
        raise ValueError(f"unit.table: a {fmt} unit's table has shape {(1 << m, 1 << m)}, got {t.shape}")
    got = _PREPARED.get(id(t))
    if got is not None and got[0] is t and got[1] == fmt and not t.flags.writeable:
        return fmt, t, got[2]
    t = _check.contiguous(t)
    route = _route(t, fmt)
    if not t.flags.writeable:
        while len(_PREPARED) >= _PREPARED_MAX:
            _PREPARED.pop(next(iter(_PREPARED)))
        _PREPARED[id(t)] = (t, fmt, route)
    return fmt, t, route


def _operand(x, name: str, shape_name: str) -> np.ndarray:
    """x as a C-contiguous float32 2-D ndarray (copied if not contiguous), else TypeError/ValueError."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a float32 numpy array {shape_name}, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name}: expected dtype float32 {shape_name}, got {x.dtype} (convert with "
                        f".astype(np.float32): the operand is rounded from float32 to the format once)")
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array {shape_name}, got shape {x.shape}")
    return _check.contiguous(x)


def mant_gemm(a: np.ndarray, b: np.ndarray, unit, threads: int | None = None, out=None) -> np.ndarray:
    """y float32 (M, N) = a (M, K) @ b (K, N) through ``unit`` (the module's docstring has the
    contract).  ``out``: float32 (M, N), written in place when C-contiguous (else through a copy)
    and returned; it may be ``a`` or ``b`` (the operands are read whole before y is written).
    ``threads``: None reads the enclosing scope."""
    fmt, table, route = _unit(unit)
    a = _operand(a, "a", "(M, K)")
    b = _operand(b, "b", "(K, N)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: inner dimensions differ: a is {a.shape}, b is {b.shape} (expected (M, K) and (K, N))")
    (M, K), N = a.shape, b.shape[1]
    nt = resolve_threads(threads)
    y = _check.out_flat(out, "out", (M, N), np.float32, a, b)
    isa = _simd.isa()
    code = FORMATS[fmt][0]
    work = _workspace.scratch("mantgemm", _mt.work_size(M, N, K, code, route, isa, nt), np.uint8)
    _mt.gemm(y, a, b, table, code, route, work, isa, nt)
    return _check.out_done(out, y)


def mant_round(x, fmt: str) -> np.ndarray:
    """float32 array of x's shape: x (float32) rounded to ``fmt`` as ``mant_gemm`` rounds its
    operands — nearest even, subnormals of the format flushed to zero of their sign, NaN a quiet
    NaN of its sign."""
    code = FORMATS[_fmt(fmt, "fmt")][0]
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise TypeError(f"x: expected a float32 ndarray, got {type(x).__name__} {getattr(x, 'dtype', '')}")
    src = _check.contiguous(x).reshape(-1)
    y = np.empty(src.shape, np.float32)
    _mt.round_values(y, src, code, _simd.isa())
    return y.reshape(x.shape)
