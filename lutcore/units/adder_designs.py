"""Built-in approximate adders for a declared accumulator, as gate netlists: the lower-part-OR
adder and the truncated adder, each cut at k low bits.

Design: each builder writes the adder's netlist gate by gate (``lutcore.units.netlist``'s IR:
x ^ y ^ z and majority for a full adder, two-input OR / AND) and returns an
``lutcore.units.adders.Adder`` with ``bits`` + 1 output bits -- the carry out, or for a signed
adder the sum's sign extension -- so a register of any policy can use it.  Above bit k both are
the exact ripple-carry adder; below it they differ:

* ``loa(bits, signed, k)`` -- the lower-part-OR adder (Mahdiani et al., 2010): sum bit i =
  a_i | b_i for i < k, and the carry into bit k is a_{k-1} & b_{k-1} (the original design's
  one AND gate: it catches the case where both top low bits are 1, the largest carry the OR
  misses).  k OR gates + 1 AND replace k full adders;
* ``truncated(bits, signed, k)`` -- the k low sum bits tied to 0, no carry into bit k: the
  upper parts added exactly, the low parts dropped.  k full adders removed, nothing added.

In numbers (a, b the operands, ``>>`` an arithmetic shift when signed, patterns on W bits):

    loa:        (a >> k) + (b >> k) + (a_{k-1} & b_{k-1}),  times 2^k,  plus (a | b) mod 2^k
    truncated:  (a >> k) + (b >> k),                         times 2^k

k = 0 is the exact adder (``Adder.exact``'s netlist, the same digest); k runs 0..bits - 1 (the
top bit stays a full adder: it makes the sign extension / the carry out).  A
step's error (output minus the exact sum): loa's is 2^k c - ((a & b) mod 2^k) with c the AND
carry, in [-(2^(k-1) - 1), 2^(k-1)] -- either way, small on average; truncated's is
-(a mod 2^k) - (b mod 2^k), in [-(2^(k+1) - 2), 0] -- always down, and a register that sums
many addends through it drifts down by about the addends' mean low part a step.

Cost: ``{"cells": the gate count, "source": ...}`` -- gates of lutcore's 3-input netlist (a
full adder is 2), a proxy for area, not a synthesised PDK figure.

    loa(bits, signed, k) -> Adder          name "loa16s_k6"
    truncated(bits, signed, k) -> Adder    name "trunc16s_k6"
"""
from __future__ import annotations

import numbers

from lutcore.units.adders import MAX_ADDER_BITS, Adder, ripple_netlist
from lutcore.units.netlist import Netlist

__all__ = ["loa", "truncated", "COST_SOURCE"]

COST_SOURCE = "gates of lutcore's netlist (a proxy, not PDK45 figures)"


def _args(bits, signed, k, what):
    for v, name in ((bits, "bits"), (k, "k")):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{what}: {name}: expected an int, got {type(v).__name__} {v!r}")
    if not 1 <= int(bits) <= MAX_ADDER_BITS:
        raise ValueError(f"{what}: bits: expected an int in 1..{MAX_ADDER_BITS}, got {bits}")
    if not 0 <= int(k) < int(bits):
        raise ValueError(f"{what}: k: expected the low bits to approximate, 0..{int(bits) - 1}, got {k}")
    if not isinstance(signed, bool):
        raise TypeError(f"{what}: signed: expected a bool, got {type(signed).__name__} {signed!r}")
    return int(bits), int(k)


def _build(n: int, signed: bool, k: int, low: str) -> Netlist:
    """The netlist: the k low sum bits as ``low`` says ("or": a_i | b_i, carry a_{k-1} & b_{k-1};
    "zero": constant 0, no carry), a ripple-carry adder from bit k up, then bit n (the sign
    extension when signed, else the carry out) -- ``adders.ripple_netlist``."""
    return ripple_netlist(n, signed, n + 1, k, low)


def _adder(net: Netlist, signed: bool, name: str, source: str) -> Adder:
    u = Adder.from_netlist(net, signed, name=name)
    u.cost = {"cells": net.gate_count, "source": COST_SOURCE}
    u.source = source
    return u


def loa(bits: int, signed: bool, k: int) -> Adder:
    """A ``bits``-bit lower-part-OR adder: the k low sum bits a_i | b_i, the carry into bit k
    a_{k-1} & b_{k-1}, exact above; ``bits`` + 1 output bits (module docstring)."""
    n, k = _args(bits, signed, k, "loa")
    s = "s" if signed else "u"
    how = f"{k} low bits OR'd, carry in a_{k - 1} & b_{k - 1}" if k else "k = 0: exact"
    return _adder(_build(n, signed, k, "or"), signed, f"loa{n}{s}_k{k}",
                  f"lutcore.units.adder_designs.loa: a {n}-bit lower-part-OR adder, {how}")


def truncated(bits: int, signed: bool, k: int) -> Adder:
    """A ``bits``-bit truncated adder: the k low sum bits 0, no carry into bit k, exact above;
    ``bits`` + 1 output bits (module docstring)."""
    n, k = _args(bits, signed, k, "truncated")
    s = "s" if signed else "u"
    return _adder(_build(n, signed, k, "zero"), signed, f"trunc{n}{s}_k{k}",
                  f"lutcore.units.adder_designs.truncated: a {n}-bit adder, {k} low sum bits tied to 0, no carry "
                  f"from them")
