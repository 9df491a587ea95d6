"""GEMM and elementwise products through a multiplier given as a gate netlist, evaluated
bit-sliced (csrc/netlist/netlist.h): multipliers too wide for a table (11x11 .. 16x16 bits, e.g.
EvoApproxLib's mul16u), bit-exact against the circuit.

Design: the room of the ``netlist`` family.  The netlist IR (fixed; lutcore's circuit readers
build it):

    a_bits, b_bits   operand widths, 1..16;  P = len(outputs), the product width, 1..32
    node ids         0, 1 the constants; 2 .. 2+a_bits-1 bit i of a (LSB first);
                     2+a_bits .. 2+a_bits+b_bits-1 bit j of b; then gate g is node 2+a_bits+b_bits+g
    gates            (G, 4) int32, rows [x, y, z, tt]: x, y, z node ids below the gate's own,
                     out = (tt >> (4 x + 2 y + z)) & 1 (vpternlog's imm8; unused inputs: node 0)
    outputs          (P,) int32: the node of product bit p (a constant or an input node allowed)
    value            sum_p bit_p 2^p, minus 2^P bit_{P-1} when product_signed

    gemm(a, b, ...)      C[m, n] = sum_k value(P(a[m, k], b[k, n]))   a (M, K), b (K, N) -> int64 (M, N)
    products(a, b, ...)  out[i] = value(P(a[i], b[i]))                 a, b (n,)           -> int64 (n,)

The operands are integer arrays of codes (any integer dtype): each value must lie in its
operand's range -- [-2^(w-1), 2^(w-1)) with ``a_signed`` / ``b_signed``, else [0, 2^w) -- and
its low w bits (two's complement) are the circuit's input bits.  Every (m, n, k) product is the
netlist's output on that pair, padded lanes never counted (an approximate circuit's P(0, 0)
need not be 0).  Sums are exact int64: K 2^P must stay below 2^62.  Checked here: dtypes,
shapes, code ranges, the netlist's form (ids, order, truth tables, widths) -- each a TypeError
or ValueError naming the argument, what was expected and what came; the SIMD path is read here
and ``threads`` (None: the enclosing ``lutcore._threads.scope``) resolved.  The same bits at any
thread count and on every body.
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._native import netlist as _nl
from lutcore._threads import resolve_threads

__all__ = ["gemm", "products"]

MAX_OPERAND_BITS = 16
MAX_PRODUCT_BITS = 32


def _width(v, name, hi):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 1 <= int(v) <= hi:
        raise ValueError(f"{name}: expected an int in 1..{hi}, got {v!r}")
    return int(v)


def _flag(v, name):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(v).__name__} {v!r}")
    return bool(v)


def _array(x, name, ndim):
    """x as an ndarray of an integer dtype and ndim dimensions."""
    x = np.asarray(x)
    if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array of codes, got dtype {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {x.shape}")
    return x


def _codes(x, name, bits, signed):
    """x (checked by _array) as C-contiguous uint16 patterns, after checking its range."""
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if x.size:
        xmin, xmax = int(x.min()), int(x.max())
        if xmin < lo or xmax >= hi:
            flat = x.ravel()
            bad = flat[np.flatnonzero((flat < lo) | (flat >= hi))[0]]
            kind = "signed" if signed else "unsigned"
            raise ValueError(f"{name}: expected {kind} {bits}-bit codes in [{lo}, {hi}), got {int(bad)} "
                             f"(first out of range)")
    if x.dtype in (np.int16, np.uint16):
        return np.ascontiguousarray(x).view(np.uint16)
    return np.ascontiguousarray((x.astype(np.int64) & 0xFFFF).astype(np.uint16))


def _netlist(gates, outputs, a_bits, b_bits):
    """(gates int32 (G, 4), outputs int32 (P,)) after checking the IR's form."""
    g = np.asarray(gates)
    if g.dtype == np.bool_ or not np.issubdtype(g.dtype, np.integer):
        raise TypeError(f"gates: expected an int32 array (G, 4), got dtype {g.dtype}")
    if g.ndim != 2 or g.shape[1] != 4:
        raise ValueError(f"gates: expected shape (G, 4), got {g.shape}")
    o = np.asarray(outputs)
    if o.dtype == np.bool_ or not np.issubdtype(o.dtype, np.integer):
        raise TypeError(f"outputs: expected an int32 array (P,), got dtype {o.dtype}")
    if o.ndim != 1 or not 1 <= o.shape[0] <= MAX_PRODUCT_BITS:
        raise ValueError(f"outputs: expected shape (P,) with P in 1..{MAX_PRODUCT_BITS}, got {o.shape}")
    G = g.shape[0]
    first = 2 + a_bits + b_bits
    g64 = g.astype(np.int64)
    own = first + np.arange(G, dtype=np.int64)                           # (G,) each gate's node
    bad = (g64[:, :3] < 0) | (g64[:, :3] >= own[:, None])                # (G, 3)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"gates: row {r} input {'xyz'[c]} must be a node id in [0, {first + r}) "
                         f"(below gate {r}'s own node {first + r}), got {int(g64[r, c])}")
    badt = (g64[:, 3] < 0) | (g64[:, 3] > 255)
    if badt.any():
        r = int(np.flatnonzero(badt)[0])
        raise ValueError(f"gates: row {r} truth table must be in 0..255, got {int(g64[r, 3])}")
    o64 = o.astype(np.int64)
    bado = (o64 < 0) | (o64 >= first + G)
    if bado.any():
        p = int(np.flatnonzero(bado)[0])
        raise ValueError(f"outputs: bit {p} must be a node id in [0, {first + G}), got {int(o64[p])}")
    return np.ascontiguousarray(g64.astype(np.int32)), np.ascontiguousarray(o64.astype(np.int32))


def _args(gates, outputs, a_bits, b_bits, a_signed, b_signed, product_signed):
    a_bits = _width(a_bits, "a_bits", MAX_OPERAND_BITS)
    b_bits = _width(b_bits, "b_bits", MAX_OPERAND_BITS)
    a_signed, b_signed = _flag(a_signed, "a_signed"), _flag(b_signed, "b_signed")
    product_signed = _flag(product_signed, "product_signed")
    g, o = _netlist(gates, outputs, a_bits, b_bits)
    return a_bits, b_bits, a_signed, b_signed, product_signed, g, o


def gemm(a, b, gates, outputs, *, a_bits, b_bits, a_signed, b_signed, product_signed, threads=None) -> np.ndarray:
    """C (M, N) int64 = sum_k value(P(a[m, k], b[k, n])) through the netlist (the module docstring)."""
    a_bits, b_bits, a_signed, b_signed, product_signed, g, o = _args(gates, outputs, a_bits, b_bits, a_signed,
                                                                    b_signed, product_signed)
    a, b = _array(a, "a", 2), _array(b, "b", 2)
    (M, K), N = a.shape, b.shape[1]
    if b.shape[0] != K:
        raise ValueError(f"a, b: expected (M, K) and (K, N), got {a.shape} and {b.shape}")
    if K << o.shape[0] >= 1 << 62:
        raise ValueError(f"a: K = {K} too long for exact int64 sums of {o.shape[0]}-bit products "
                         f"(K 2^P must be < 2^62)")
    a16, b16 = _codes(a, "a", a_bits, a_signed), _codes(b, "b", b_bits, b_signed)
    out = np.empty((M, N), np.int64)
    _nl.gemm(out, a16, b16, g, o, a_bits, b_bits, product_signed, _simd.isa(), resolve_threads(threads))
    return out


def products(a, b, gates, outputs, *, a_bits, b_bits, a_signed, b_signed, product_signed,
             threads=None) -> np.ndarray:
    """out (n,) int64 = value(P(a[i], b[i])) through the netlist (the module docstring)."""
    a_bits, b_bits, a_signed, b_signed, product_signed, g, o = _args(gates, outputs, a_bits, b_bits, a_signed,
                                                                    b_signed, product_signed)
    a, b = _array(a, "a", 1), _array(b, "b", 1)
    if a.shape != b.shape:
        raise ValueError(f"a, b: expected equal lengths, got {a.shape} and {b.shape}")
    a16, b16 = _codes(a, "a", a_bits, a_signed), _codes(b, "b", b_bits, b_signed)
    out = np.empty(a16.shape, np.int64)
    _nl.products(out, a16, b16, g, o, a_bits, b_bits, product_signed, _simd.isa(), resolve_threads(threads))
    return out
