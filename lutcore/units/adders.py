"""Adders for a declared accumulator: exact, or approximate adder circuits (EvoApproxLib's add8u,
add8s, add8se, add9se, add12u, add12se, add16u, add16se; any Verilog or C adder).

Design: an adder is a gate netlist (``lutcore.units.netlist.Netlist``, the IR the bit-sliced
kernels run) with two ``bits``-bit operands -- a, the accumulator's register, and b, the
addend -- and ``out_bits`` = bits + 1 (the carry out, or the sign-extended sum) or bits
output bits, plus whether it reads its operands as ``signed``.  ``lutcore.units.accumulator``
says how a register uses it; the kernels (``lutcore.ops.accum``) evaluate it bit-sliced.

    Adder.exact(bits, signed, out_bits=None)    a ripple-carry adder's netlist (out_bits: bits + 1)
    Adder.from_netlist(net, signed, name=)      any netlist of the shape
    adder.add(a, b) -> int64                    its outputs on operand values, read as a number
                                                (out_bits wide, signed as the adder is)
    adder.save(dir) / Adder.load(dir)           adder.json + adder.net
"""
from __future__ import annotations

import json
import os

import numpy as np

__all__ = ["Adder", "MAX_ADDER_BITS"]

MAX_ADDER_BITS = 16          # the netlist kernels' operand width
ADDER_JSON, ADDER_NET = "adder.json", "adder.net"


class Adder:
    """A ``bits``-bit adder as a gate netlist (the module docstring)."""

    def __init__(self, netlist, signed: bool, *, name: str | None = None):
        from lutcore.units.netlist import Netlist
        if not isinstance(netlist, Netlist):
            raise TypeError(f"netlist: expected a lutcore.units.netlist.Netlist, got {type(netlist).__name__}")
        if not isinstance(signed, bool):
            raise TypeError(f"signed: expected a bool, got {type(signed).__name__} {signed!r}")
        n = netlist.a_bits
        if netlist.b_bits != n:
            raise ValueError(f"netlist: an adder's operands have one width, got {netlist.a_bits} and {netlist.b_bits} bits")
        if not 1 <= n <= MAX_ADDER_BITS:
            raise ValueError(f"netlist: adder operands of 1..{MAX_ADDER_BITS} bits, got {n}")
        if netlist.p_bits not in (n, n + 1):
            raise ValueError(f"netlist: a {n}-bit adder has {n} or {n + 1} output bits, got {netlist.p_bits}")
        self.netlist = netlist
        self.bits, self.signed, self.out_bits = n, signed, int(netlist.p_bits)
        self.name = name or "adder"
        self.cost: dict = {}          # power_mw / area_um2 / delay_ns, source (lutcore.units.cost)
        self.published: dict = {}     # error figures a header states
        self.source = None            # what was read, and how
        self.loaded_from = None

    # ---------------------------------------------------------------- builders
    @classmethod
    def exact(cls, bits: int, signed: bool, out_bits: int | None = None) -> "Adder":
        """An exact ripple-carry adder of two ``bits``-bit operands; ``out_bits`` bits + 1 (default:
        the carry out, or for ``signed`` the sum's sign extension) or bits (the sum wraps)."""
        from lutcore.units.netlist import Netlist
        import numbers
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or not 1 <= int(bits) <= MAX_ADDER_BITS:
            raise ValueError(f"bits: expected an int in 1..{MAX_ADDER_BITS}, got {bits!r}")
        n = int(bits)
        out_bits = n + 1 if out_bits is None else out_bits
        if out_bits not in (n, n + 1):
            raise ValueError(f"out_bits: expected {n} or {n + 1}, got {out_bits!r}")
        gates: list = []

        def gate(x, y, z, tt):
            gates.append((x, y, z, tt))
            return 2 + 2 * n + len(gates) - 1

        a = [2 + i for i in range(n)]
        b = [2 + n + i for i in range(n)]
        outs, carry = [], 0
        for i in range(n):
            outs.append(gate(a[i], b[i], carry, 0x96))             # x ^ y ^ z
            carry = gate(a[i], b[i], carry, 0xE8)                  # majority
        if out_bits == n + 1:
            outs.append(gate(a[n - 1], b[n - 1], carry, 0x96) if signed else carry)
        net = Netlist(n, n, out_bits, np.array(gates, np.int32).reshape(-1, 4), np.array(outs, np.int32))
        u = cls(net, signed, name="exact")
        u.source = f"an exact {n}-bit ripple-carry adder, {out_bits} output bits"
        return u

    @classmethod
    def from_netlist(cls, netlist, signed: bool, *, name: str | None = None) -> "Adder":
        return cls(netlist, signed, name=name)

    # ---------------------------------------------------------------- evaluation
    def operand_range(self) -> tuple:
        n = self.bits
        return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if self.signed else (0, (1 << n) - 1)

    def add(self, a, b) -> np.ndarray:
        """int64: the adder's output on operand values a, b (in ``operand_range``; their low bits
        are its inputs), read as an ``out_bits``-bit number, signed as the adder is."""
        a = np.asarray(a, np.int64)
        b = np.asarray(b, np.int64)
        lo, hi = self.operand_range()
        for v, nm in ((a, "a"), (b, "b")):
            if v.size and (int(v.min()) < lo or int(v.max()) > hi):
                raise ValueError(f"{nm}: expected {self.bits}-bit {'signed' if self.signed else 'unsigned'} values in "
                                 f"[{lo}, {hi}], got {int(v.min())}..{int(v.max())}")
        a, b = np.broadcast_arrays(a, b)
        raw = np.asarray(self.netlist.evaluate(a.ravel(), b.ravel()), np.int64).reshape(a.shape)
        q = self.out_bits
        if self.signed:
            raw = np.where(raw >= (1 << (q - 1)), raw - (1 << q), raw)
        return raw

    # ---------------------------------------------------------------- identity
    @property
    def is_exact(self) -> bool:
        """Whether the outputs are the exact sum (to out_bits bits) on every pair (exhaustive up to
        2^20 pairs, sampled beyond)."""
        a, b = self._pairs()
        s = a + b
        q = self.out_bits
        want = ((s - (-(1 << (q - 1)) if self.signed else 0)) & ((1 << q) - 1)) + (-(1 << (q - 1)) if self.signed
                                                                                   else 0)
        return bool(np.array_equal(self.add(a, b), want))

    def _pairs(self):
        lo, hi = self.operand_range()
        if 2 * self.bits <= 20:
            v = np.arange(lo, hi + 1, dtype=np.int64)
            return np.repeat(v, v.size), np.tile(v, v.size)
        rng = np.random.default_rng(0)
        return rng.integers(lo, hi + 1, 1 << 20), rng.integers(lo, hi + 1, 1 << 20)

    @property
    def digest(self) -> str:
        import hashlib
        h = hashlib.sha256(f"lutcore-adder:{self.bits}:{int(self.signed)}:{self.out_bits}\n".encode())
        h.update(self.netlist.digest.encode())
        return h.hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, Adder) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return (f"Adder(name={self.name!r}, {self.bits}-bit {'signed' if self.signed else 'unsigned'}, "
                f"{self.out_bits} output bits, {self.netlist.gate_count} gates)")

    # ---------------------------------------------------------------- files
    def save(self, path) -> None:
        """adder.json (name, signedness, cost, published, source) and adder.net (the netlist) in ``path``."""
        from lutcore._io import atomic_file
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        self.netlist.save(os.path.join(path, ADDER_NET))
        meta = {"name": self.name, "signed": self.signed, "bits": self.bits, "out_bits": self.out_bits,
                "cost": self.cost, "published": self.published, "source": self.source, "digest": self.digest}
        with atomic_file(os.path.join(path, ADDER_JSON)) as tmp:
            with open(tmp, "w") as f:
                json.dump(meta, f, indent=1, sort_keys=True)

    @classmethod
    def load(cls, path) -> "Adder":
        from lutcore.units.netlist import Netlist
        path = os.fspath(path)
        jf = os.path.join(path, ADDER_JSON)
        try:
            with open(jf) as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{jf}: cannot read an adder's description: {e}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("signed"), bool):
            raise ValueError(f"{jf}: expected a JSON object with 'signed' (a bool)")
        net = Netlist.load(os.path.join(path, ADDER_NET))
        u = cls(net, meta["signed"], name=meta.get("name"))
        u.cost = dict(meta.get("cost") or {})
        u.published = dict(meta.get("published") or {})
        u.source = meta.get("source")
        u.loaded_from = path
        if meta.get("digest") not in (None, u.digest):
            raise ValueError(f"{jf}: digest {meta['digest'][:16]} does not match the adder in {ADDER_NET} "
                             f"({u.digest[:16]}): the files disagree")
        return u
