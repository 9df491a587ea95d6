"""Dot products accumulated in a declared register: width, wrap or saturate, the order of the
additions, an exact or approximate adder (csrc/netlist/accum.h; the contract:
lutcore/units/accumulator.py).

Design: the room of the accumulator kernels, in the ``netlist`` family (an approximate adder is
a gate netlist, evaluated bit-sliced by that family's bodies).

    gemm(a, b, units, accumulator, *, counts=False)   C[m, n] = the register after the products
                                                      units[a[m, k], b[k, n]], k = 0 .. K-1
                                                      -> int64 (M, N) [, counts int64 (M, N)]
    accumulate(products, accumulator, *, counts=False)  products int64 (L, K), one dot product a
                                                      row -> int64 (L,) [, counts (L,)]

``units``: a table unit (any format up to 8 x 8 bits; a and b its codes, as ``lut_gemm`` takes
them).  ``counts``: the overflow events of each output (addends brought into range plus steps
that overflowed).  These always run the step-by-step kernel; ``lut_gemm`` (the door units with a
register take) serves an exact adder that wraps, or a register that holds every partial sum, with
its table kernels when no log is open (``plain_sums_suffice``: the same bits).  Overflow
events of every call are added to the active ``OverflowLog`` (``overflow_log()``) under the
label the caller set (``layer(name)``): how ``lutcore eval`` reports them per layer.

Checked here (each a TypeError / ValueError naming the argument): the accumulator (its own
checks, and ``check_products``: a register narrower than one of the unit's products), the
codes (the format's ranges), the products' dtype and shape.  The same bits at any thread
count and on every body.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from lutcore import _simd
from lutcore._native import netlist as _nl
from lutcore._threads import resolve_threads
from lutcore.units.accumulator import Accumulator

__all__ = ["gemm", "accumulate", "OverflowLog", "overflow_log", "layer", "record"]


# ------------------------------------------------------------------------------ overflow log
class OverflowLog:
    """Overflow events per layer label: {label: {"outputs": dot products formed, "overflowed":
    those with at least one event, "events": events, "additions": register steps}}."""

    def __init__(self):
        self.layers: dict = {}
        self._lock = threading.Lock()

    def add(self, label, outputs, overflowed, events, additions):
        with self._lock:
            r = self.layers.setdefault(label or "(unlabelled)",
                                       {"outputs": 0, "overflowed": 0, "events": 0, "additions": 0})
            r["outputs"] += int(outputs)
            r["overflowed"] += int(overflowed)
            r["events"] += int(events)
            r["additions"] += int(additions)

    def to_dict(self) -> dict:
        return {k: dict(v) for k, v in self.layers.items()}


_state = threading.local()


def _logs() -> list:
    s = getattr(_state, "logs", None)
    if s is None:
        s = _state.logs = []
    return s


@contextlib.contextmanager
def overflow_log():
    """Collect the overflow events of every accumulator call made in this thread while open."""
    log = OverflowLog()
    _logs().append(log)
    try:
        yield log
    finally:
        _logs().remove(log)


@contextlib.contextmanager
def layer(name):
    """Label the accumulator calls made inside (a layer's name) for the open logs."""
    prev = getattr(_state, "label", None)
    _state.label = name
    try:
        yield
    finally:
        _state.label = prev


def labelled(label):
    """``layer(label)``, or a no-op context for None."""
    return layer(label) if label else contextlib.nullcontext()


def logging() -> bool:
    """Whether an overflow log is open in this thread (then callers ask for counts)."""
    return bool(getattr(_state, "logs", None))


def record(counts: np.ndarray, additions: int) -> None:
    """Add one call's per-output counts to the open logs (``additions``: register steps made)."""
    logs = getattr(_state, "logs", None)
    if not logs:
        return
    c = np.asarray(counts)
    for log in logs:
        log.add(getattr(_state, "label", None), c.size, int(np.count_nonzero(c)), int(c.sum()), additions)


# ------------------------------------------------------------------------------ the kernels
def _acc(accumulator) -> Accumulator:
    if not isinstance(accumulator, Accumulator):
        raise TypeError(f"accumulator: expected a lutcore.units.accumulator.Accumulator, got "
                        f"{type(accumulator).__name__}")
    return accumulator


def _adder_args(acc):
    if acc.adder is None:
        return None, None
    n = acc.adder.netlist
    return np.ascontiguousarray(n.gates, np.int32), np.ascontiguousarray(n.outputs, np.int32)


def _steps(acc, K) -> int:
    return -(-K // acc.chunk) if K else 0


def accumulate(products, accumulator, *, counts: bool = False, threads=None):
    """int64 (L,) [, counts int64 (L,)]: each row of products (L, K) accumulated (module docstring)."""
    acc = _acc(accumulator)
    p = np.asarray(products)
    if p.dtype == np.bool_ or not np.issubdtype(p.dtype, np.integer):
        raise TypeError(f"products: expected an integer array (L, K), got dtype {p.dtype}")
    if p.ndim != 2:
        raise ValueError(f"products: expected a 2-D array (L, K): one dot product's products a row, got shape "
                         f"{p.shape}")
    if p.size:
        acc.check_products(int(p.min()), int(p.max()), "the products array")
    p = np.ascontiguousarray(p, np.int64)
    L, K = p.shape
    want = counts or logging()
    out = np.empty(L, np.int64)
    cnt = np.empty(L, np.int64) if want else None
    g, o = _adder_args(acc)
    _nl.accumulate(out, cnt, p, acc.bits, acc.signed, acc.overflow == "saturate", acc.chunk, g, o, _simd.isa(),
                   resolve_threads(threads))
    if want:
        record(cnt, L * _steps(acc, K))
    return (out, cnt) if counts else out


def gemm(a, b, units, accumulator, *, counts: bool = False, threads=None):
    """int64 (M, N) [, counts int64 (M, N)]: a @ b through ``units``' table, every output
    accumulated in ``accumulator``'s register (module docstring)."""
    from lutcore.units import Units
    acc = _acc(accumulator)
    if not isinstance(units, Units):
        raise TypeError(f"units: expected a lutcore.units.Units, got {type(units).__name__}")
    fmt = units.format
    lo, hi = units.product_range
    acc.check_products(lo, hi, f"units {units.name!r}")
    if units.mul is None:
        return _netlist_gemm(a, b, units, acc, counts, threads)
    a = fmt.kernel_bytes(a, "a", "a")
    b = fmt.kernel_bytes(b, "b", "b")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: inner dimensions differ: a is {a.shape}, b is {b.shape} "
                         f"(expected a (M, K) and b (K, N))")
    (M, K), N = a.shape, b.shape[1]
    want = counts or logging()
    nt = resolve_threads(threads)
    out = np.empty(M * N, np.int64)
    cnt = np.empty(M * N, np.int64) if want else None
    g, o = _adder_args(acc)
    tab = np.ascontiguousarray(units.table().reshape(-1), np.int32)
    a16 = np.ascontiguousarray(a.view(np.uint8), np.uint16)
    b16 = np.ascontiguousarray(b.view(np.uint8), np.uint16)
    _nl.accum_gemm(out, cnt, a16, b16, tab, fmt.a_bits, fmt.b_bits, acc.bits, acc.signed,
                   acc.overflow == "saturate", acc.chunk, g, o, _simd.isa(), nt)
    if want:
        record(cnt, M * N * _steps(acc, K))
    out = out.reshape(M, N)
    return (out, cnt.reshape(M, N)) if counts else out


def plain_sums_suffice(units, acc, K: int) -> bool:
    """Whether a table unit's plain sums give the register's bits without a step-by-step pass (no
    log open; exact adder wrapping -- the sum modulo 2^W -- or a register that holds every partial
    sum of K products) and fit int32: then ``lut_gemm``'s kernels serve it."""
    lo, hi = units.product_range
    return (units.mul is not None and not logging() and (acc.holds_every_sum(lo, hi, K) or acc.exact_wrap)
            and K * max(abs(lo), abs(hi)) < 2**31)


_NETLIST_TILE = 1 << 22          # products a tile of a netlist unit's rows holds (int64)


def _netlist_gemm(a, b, units, acc, counts, threads):
    """A unit wider than a table: its products (the netlist kernel), a tile of rows at a time, then
    accumulated (the exact adder: a product this wide fits no approximate adder's register)."""
    from lutcore.ops.netlist import _array, _codes as _nl_codes
    fmt = units.format
    a, b = _array(a, "a", 2), _array(b, "b", 2)
    _nl_codes(a, "a", fmt.a_bits, fmt.a_signed)
    _nl_codes(b, "b", fmt.b_bits, fmt.b_signed)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: expected (M, K) and (K, N), got {a.shape} and {b.shape}")
    (M, K), N = a.shape, b.shape[1]
    out = np.empty((M, N), np.int64)
    cnt = np.empty((M, N), np.int64)
    rows = max(1, _NETLIST_TILE // max(1, K * N))
    a64, bT = a.astype(np.int64), np.ascontiguousarray(b.T.astype(np.int64))       # bT (N, K)
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        p = units.products(a64[m0:m1, None, :], bT[None, :, :])                     # (rows, N, K)
        v, c = accumulate(p.reshape(-1, K), acc, counts=True, threads=threads)
        out[m0:m1], cnt[m0:m1] = v.reshape(m1 - m0, N), c.reshape(m1 - m0, N)
    return (out, cnt) if counts else out
