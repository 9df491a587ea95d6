"""The accumulator of a multiply-accumulate unit: its width, its overflow policy, the order of
its additions and its adder (exact, or an approximate adder circuit).

Design: lutcore adds a dot product's products exactly unless a unit declares an
``Accumulator`` (``Units.with_accumulator``); then every integer dot product a kernel forms
through that unit -- one output of ``lut_gemm``, one block of a block-scaled product -- is
this register's final value, computed step by step as below.  Nothing here runs a kernel;
``lutcore.ops.accum`` does, and ``tests/reference/accum_ref.py`` is the plain definition.

The contract.  W = ``bits`` (2..32); the register holds [lo, hi] = [-2^(W-1), 2^(W-1) - 1]
when ``signed``, else [0, 2^W - 1]; it starts at 0.  The products p_0 .. p_{K-1} of one dot
product (k order) become addends:

* ``order="sequential"`` (a MAC): addend j = p_j, K steps;
* ``order="chunks"``, ``chunk=C`` (an adder tree feeding the register): addend j = the exact
  sum of p_{jC} .. p_{min(jC+C, K)-1} (the tree is as wide as it needs: no overflow inside
  it), ceil(K / C) steps.  An addend outside [lo, hi] is first brought into it by the
  overflow policy (one overflow event).

One step, with r the register and d the addend (both in [lo, hi]):

* exact adder (``adder=None``): s = r + d;  the step overflows when s is outside [lo, hi];
* an adder circuit (``lutcore.units.adders.Adder``: W-bit operands, the register its first
  input a and the addend its second b, their W-bit two's-complement patterns): o = its
  output pattern, of W + 1 bits (a carry out / sign-extended sum) or W bits.
  - W + 1 bits: s = o read as a (W+1)-bit signed (``signed``) or unsigned number; the step
    overflows when s is outside [lo, hi];
  - W bits (signed adders only, EvoApproxLib's add8s): s = o read as W-bit signed; the step
    overflows when r and d have the same sign and s the other (a two's-complement adder's
    overflow flag);

then r = s when the step does not overflow; when it does, ``overflow="wrap"`` keeps s's low W
bits (read as ``signed`` says), ``overflow="saturate"`` sets r = hi when s (for a W-bit
output: r) is >= 0 or the register is unsigned, else lo.  The result is r after the last
step; each output also counts its overflow events (addends brought in + steps).

``wrap`` with the exact adder is order-free (r = the exact sum modulo 2^W, into [lo, hi]);
``saturate`` and approximate adders are not.  A register wide enough that no sum of K
products can leave it gives the plain sum: the default (no accumulator) is that, at today's
speed.

Checks (each a ValueError naming the argument): ``bits`` in 2..32, ``overflow`` one of
wrap/saturate, ``order`` one of sequential/chunks, ``chunk`` >= 2 with chunks (1 with
sequential); an adder whose operand width or signedness differs from the register's, or an
unsigned adder without a carry out (W output bits); ``check_products`` a register narrower
than one of the unit's products.

Spelt ``"16s"``, ``"12u:saturate"``, ``"16s:wrap:chunks=8"`` (``parse``; ``str()`` gives it
back without the adder, which is named after it).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json

__all__ = ["Accumulator", "OVERFLOW", "ORDERS", "accumulator_arg"]

OVERFLOW = ("wrap", "saturate")
ORDERS = ("sequential", "chunks")
MIN_BITS, MAX_BITS = 2, 32


@dataclasses.dataclass(frozen=True, eq=False)
class Accumulator:
    """A declared accumulator register (the module docstring is its contract)."""
    bits: int
    signed: bool = True
    overflow: str = "wrap"
    order: str = "sequential"
    chunk: int = 1
    adder: object = None            # None: exact; else a lutcore.units.adders.Adder

    def __post_init__(self):
        import numbers
        b = self.bits
        if isinstance(b, bool) or not isinstance(b, numbers.Integral):
            raise TypeError(f"bits: expected an int (the accumulator's width, {MIN_BITS}..{MAX_BITS}), "
                            f"got {type(b).__name__} {b!r}")
        if not MIN_BITS <= int(b) <= MAX_BITS:
            raise ValueError(f"bits: expected the accumulator's width in {MIN_BITS}..{MAX_BITS}, got {b}")
        object.__setattr__(self, "bits", int(b))
        if not isinstance(self.signed, bool):
            raise TypeError(f"signed: expected a bool, got {type(self.signed).__name__} {self.signed!r}")
        if self.overflow not in OVERFLOW:
            raise ValueError(f"overflow: expected one of {', '.join(OVERFLOW)}, got {self.overflow!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order: expected one of {', '.join(ORDERS)}, got {self.order!r}")
        c = self.chunk
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"chunk: expected an int, got {type(c).__name__} {c!r}")
        c = int(c)
        if self.order == "sequential" and c != 1:
            raise ValueError(f"chunk: order='sequential' adds one product a step (chunk 1), got chunk={c} "
                             f"(give order='chunks' for an adder tree of {c} products)")
        if self.order == "chunks" and c < 2:
            raise ValueError(f"chunk: order='chunks' sums chunks of C >= 2 products, got chunk={c}")
        object.__setattr__(self, "chunk", c)
        a = self.adder
        if a is not None:
            from lutcore.units.adders import Adder
            if not isinstance(a, Adder):
                raise TypeError(f"adder: expected a lutcore.units.adders.Adder or None (exact), got "
                                f"{type(a).__name__}")
            if a.bits != self.bits or a.signed != self.signed:
                raise ValueError(f"adder: {a.name} is a {a.bits}-bit {'signed' if a.signed else 'unsigned'} adder; "
                                 f"the accumulator is {self.bits}-bit {'signed' if self.signed else 'unsigned'} "
                                 f"(they must match)")
            if not a.signed and a.out_bits != a.bits + 1:
                raise ValueError(f"adder: {a.name} is unsigned with {a.out_bits} output bits: an unsigned "
                                 f"accumulator's adder needs its carry out ({a.bits + 1} output bits)")

    # ------------------------------------------------------------------ range and checks
    @property
    def range(self) -> tuple:
        """(lo, hi): the values the register holds."""
        W = self.bits
        return (-(1 << (W - 1)), (1 << (W - 1)) - 1) if self.signed else (0, (1 << W) - 1)

    def check_products(self, lo: int, hi: int, what: str = "the unit") -> None:
        """A ValueError when a product in [lo, hi] (the unit's smallest and largest) does not fit."""
        rlo, rhi = self.range
        if lo < rlo or hi > rhi:
            raise ValueError(f"accumulator: a {self.bits}-bit {'signed' if self.signed else 'unsigned'} accumulator "
                             f"({rlo}..{rhi}) is narrower than one product: {what}'s products span {lo}..{hi}")

    def holds_every_sum(self, lo: int, hi: int, K: int) -> bool:
        """Whether no sum of K products in [lo, hi] (nor a partial one) can leave the register:
        then an exact adder gives the plain sum, whatever the policy and order."""
        if self.adder is not None:
            return False
        rlo, rhi = self.range
        return K * min(lo, 0) >= rlo and K * max(hi, 0) <= rhi

    @property
    def exact_wrap(self) -> bool:
        """Exact adder, wrap: the result is the plain sum modulo 2^W (no step-by-step pass needed)."""
        return self.adder is None and self.overflow == "wrap"

    def wrap(self, v):
        """Integer values (an int64 array or an int) wrapped into the register's range."""
        W, (lo, _) = self.bits, self.range
        return ((v - lo) & ((1 << W) - 1)) + lo

    # ------------------------------------------------------------------ spelling, identity
    def __str__(self) -> str:
        s = f"{self.bits}{'s' if self.signed else 'u'}:{self.overflow}"
        if self.order == "chunks":
            s += f":chunks={self.chunk}"
        if self.adder is not None:
            s += f" through {self.adder.name}"
        return s

    def __repr__(self) -> str:
        return f"Accumulator({self})"

    def to_dict(self) -> dict:
        d = {"bits": self.bits, "signed": self.signed, "overflow": self.overflow, "order": self.order,
             "chunk": self.chunk, "adder": None}
        if self.adder is not None:
            d["adder"] = {"name": self.adder.name, "digest": self.adder.digest}
        return d

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, Accumulator) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def adder_power_mw(self):
        """The adder's power (mW, PDK45 as EvoApproxLib publishes it), None when unknown (exact adder)."""
        return None if self.adder is None else self.adder.cost.get("power_mw")

    @classmethod
    def parse(cls, text, adder=None, where: str = "accumulator") -> "Accumulator":
        """``"16s"``, ``"12u:saturate"``, ``"16s:wrap:chunks=8"``, ``"20s:saturate:sequential"``."""
        if not isinstance(text, str):
            raise TypeError(f"{where}: expected a spec such as '16s:saturate', got {type(text).__name__}")
        parts = [p.strip() for p in text.strip().split(":")]
        head = parts[0].lower()
        if len(head) < 2 or head[-1] not in "su" or not head[:-1].isdigit():
            raise ValueError(f"{where}: expected a width and signedness first ('16s', '12u'), got {text!r}")
        kw = {"bits": int(head[:-1]), "signed": head[-1] == "s", "adder": adder}
        for p in parts[1:]:
            pl = p.lower()
            if pl in OVERFLOW:
                kw["overflow"] = pl
            elif pl == "sequential":
                kw["order"] = "sequential"
            elif pl.startswith("chunks="):
                try:
                    kw["chunk"] = int(pl[7:])
                except ValueError:
                    raise ValueError(f"{where}: chunks= takes an int, got {p!r} in {text!r}") from None
                kw["order"] = "chunks"
            else:
                raise ValueError(f"{where}: unknown part {p!r} in {text!r} (expected an overflow policy "
                                 f"{'/'.join(OVERFLOW)}, 'sequential' or 'chunks=C')")
        return cls(**kw)


def accumulator_arg(acc, name: str = "accumulator"):
    """None, an Accumulator, or a spec string -> None or an Accumulator."""
    if acc is None or isinstance(acc, Accumulator):
        return acc
    if isinstance(acc, str):
        return Accumulator.parse(acc, where=name)
    raise TypeError(f"{name}: expected an Accumulator, a spec such as '16s:saturate', or None, "
                    f"got {type(acc).__name__}")
