"""Operand formats of a multiplier: each operand's width and signedness, and the product's.

Design: a ``Format`` is a frozen value — ``a`` (the activation, the table's row), ``b`` (the
weight, its column) and ``p`` (the product), each ``bits`` (operands 1..16, product 1..32) and
``signed`` — spelt ``"8s x 8s -> 16s"`` (``Format.parse`` also takes ``"8u*4u"``, ``"8x4u"``,
``"12s"``, and EvoApproxLib's names ``mul8x4u_0C9`` / ``mul12s_2PP``).  Everything that
depends on an operand's format asks here: the range of its codes, the table's shape and
index, the exact product.  A unit is a table when both operands have at most 8 bits, a gate
netlist otherwise.

    codes       signed w bits: -2^(w-1) .. 2^(w-1)-1;  unsigned: 0 .. 2^w-1
    table       (2^wa, 2^wb), entry [a & (2^wa-1), b & (2^wb-1)] (two's-complement low bits)
    kernel      the 8-bit table kernels index by bytes: entry (a & 0xff) * 256 + (b & 0xff);
                codes outside the format hold 0 there and never reach a kernel
    product     read at p bits: Σ bit_j 2^j, minus 2^p * bit_{p-1} when the product is signed

The signed 8 x 8 format (``SIGNED8``) is lutcore's first and default: its units keep their
int16 table, file and digest.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

__all__ = ["Format", "SIGNED8", "format_arg"]

_SPEC = re.compile(r"\s*(\d+)\s*([su])\s*(?:[x*×]\s*(\d+)\s*([su])\s*)?(?:(?:->|→|=)\s*(\d+)\s*([su])\s*)?",
                   re.I)
_EVO = re.compile(r"(?i)(?:^|[^a-z0-9])mul(\d+)(?:x(\d+))?([su])(?:_|$)")


@dataclasses.dataclass(frozen=True)
class Format:
    """A multiplier's operand and product formats (see the module's docstring)."""
    a_bits: int = 8
    a_signed: bool = True
    b_bits: int = 8
    b_signed: bool = True
    p_bits: int | None = None        # None: a_bits + b_bits
    p_signed: bool | None = None     # None: signed if either operand is

    def __post_init__(self):
        for name, lo, hi in (("a_bits", 1, 16), ("b_bits", 1, 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name}: expected an int (1..16 bits), got {type(v).__name__}")
            if not lo <= int(v) <= hi:
                raise ValueError(f"{name}: an operand has {lo} to {hi} bits, got {int(v)}")
            object.__setattr__(self, name, int(v))
        for name in ("a_signed", "b_signed"):
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{name}: expected a bool, got {type(v).__name__}")
            object.__setattr__(self, name, bool(v))
        p = self.a_bits + self.b_bits if self.p_bits is None else self.p_bits
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"p_bits: expected an int (1..32 bits) or None, got {type(p).__name__}")
        if not 1 <= int(p) <= 32:
            raise ValueError(f"p_bits: the product has 1 to 32 bits, got {int(p)}")
        object.__setattr__(self, "p_bits", int(p))
        ps = (self.a_signed or self.b_signed) if self.p_signed is None else self.p_signed
        if not isinstance(ps, (bool, np.bool_)):
            raise TypeError(f"p_signed: expected a bool or None, got {type(ps).__name__}")
        object.__setattr__(self, "p_signed", bool(ps))

    # ------------------------------------------------------------------ spelling
    def __str__(self) -> str:
        s = "su"
        return (f"{self.a_bits}{s[not self.a_signed]} x {self.b_bits}{s[not self.b_signed]} -> "
                f"{self.p_bits}{s[not self.p_signed]}")

    def to_dict(self) -> dict:
        s = "su"
        return {"a": f"{self.a_bits}{s[not self.a_signed]}", "b": f"{self.b_bits}{s[not self.b_signed]}",
                "product": f"{self.p_bits}{s[not self.p_signed]}"}

    @classmethod
    def from_dict(cls, d, where="format") -> "Format":
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ("a", "b", "product")):
            raise ValueError(f"{where}: expected {{\"a\": \"8u\", \"b\": \"4u\", \"product\": \"12u\"}}, got {d!r}")
        return cls.parse(f"{d['a']} x {d['b']} -> {d['product']}", where)

    @classmethod
    def parse(cls, text, where: str = "format") -> "Format":
        """``"8s x 8s -> 16s"``, ``"8u*4u"`` (product a_bits + b_bits), ``"8x4u"`` (both operands
        of the one signedness), ``"12s"`` (square), or an EvoApproxLib name (``mul8x4u_0C9``)."""
        if isinstance(text, Format):
            return text
        if not isinstance(text, str):
            raise TypeError(f"{where}: expected a Format or a str such as '8u x 4u -> 12u', got "
                            f"{type(text).__name__}")
        m = re.fullmatch(r"\s*(\d+)\s*[x*×]\s*(\d+)\s*([su])\s*", text, re.I)
        if m:
            s = m.group(3).lower() == "s"
            return cls._make(int(m.group(1)), s, int(m.group(2)), s, None, None, where, text)
        m = _SPEC.fullmatch(text)
        if m:
            ab, asg, bb, bsg, pb, psg = m.groups()
            if bb is None:
                bb, bsg = ab, asg
            return cls._make(int(ab), asg.lower() == "s", int(bb), bsg.lower() == "s",
                             None if pb is None else int(pb), None if psg is None else psg.lower() == "s",
                             where, text)
        ev = evoapprox_name(text)
        if ev is not None:
            return ev
        raise ValueError(f"{where}: expected an operand format such as '8u x 4u -> 12u', '8s x 8s', "
                         f"'12u' or an EvoApproxLib name (mul8x4u_0C9), got {text!r}")

    @classmethod
    def _make(cls, ab, asg, bb, bsg, pb, psg, where, text):
        try:
            return cls(ab, asg, bb, bsg, pb, psg)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: {text!r}: {e}") from None

    # ------------------------------------------------------------------ codes
    @property
    def is_table(self) -> bool:
        """Both operands fit in 8 bits: the unit is a (2^a_bits, 2^b_bits) table."""
        return self.a_bits <= 8 and self.b_bits <= 8

    @property
    def table_shape(self) -> tuple:
        return (1 << self.a_bits, 1 << self.b_bits)

    def range(self, which: str) -> tuple:
        """(lo, hi) inclusive of operand ``which`` ("a" or "b") codes."""
        bits, signed = (self.a_bits, self.a_signed) if which == "a" else (self.b_bits, self.b_signed)
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    @property
    def p_range(self) -> tuple:
        return (-(1 << (self.p_bits - 1)), (1 << (self.p_bits - 1)) - 1) if self.p_signed \
            else (0, (1 << self.p_bits) - 1)

    def codes(self, which: str) -> np.ndarray:
        """int64 (2^bits,): the code of each table index (index = code's low bits)."""
        bits = self.a_bits if which == "a" else self.b_bits
        signed = self.a_signed if which == "a" else self.b_signed
        i = np.arange(1 << bits, dtype=np.int64)
        return i - ((i >> (bits - 1)) << bits) if signed else i

    def grid(self) -> tuple:
        """(a, b): int64 arrays of table shape holding each entry's operand codes."""
        a, b = self.codes("a"), self.codes("b")
        return np.broadcast_to(a[:, None], self.table_shape), np.broadcast_to(b[None, :], self.table_shape)

    def exact_table(self) -> np.ndarray:
        """The exact product a*b of every pair, int64 of table shape, read at the product's width."""
        a, b = self.grid()
        return self.read_product(a * b)

    def read_product(self, v) -> np.ndarray:
        """int64 values ``v`` read at the product's width and signedness (their low p_bits bits)."""
        v = np.asarray(v, dtype=np.int64) & ((1 << self.p_bits) - 1)
        if self.p_signed:
            v = v - ((v >> (self.p_bits - 1) & 1) << self.p_bits)
        return v

    def kernel_index(self) -> np.ndarray:
        """int64 of table shape: each entry's index in the byte-indexed (65536,) kernel table."""
        a, b = self.grid()
        return (a & 0xFF) * 256 + (b & 0xFF)

    def check_codes(self, x, which: str, name: str) -> None:
        """A ValueError naming ``name`` when an integer array holds a value outside the codes."""
        lo, hi = self.range(which)
        x = np.asarray(x)
        if x.size == 0:
            return
        mn, mx = int(x.min()), int(x.max())
        if mn < lo or mx > hi:
            bad = x.reshape(-1)[np.flatnonzero((x.reshape(-1) < lo) | (x.reshape(-1) > hi))[0]]
            bits = self.a_bits if which == "a" else self.b_bits
            signed = self.a_signed if which == "a" else self.b_signed
            raise ValueError(f"{name}: expected {bits}-bit {'signed' if signed else 'unsigned'} codes in "
                             f"[{lo}, {hi}] (the unit's {'first' if which == 'a' else 'second'} operand, "
                             f"format {self}), got {int(bad)}")

    def kernel_bytes(self, x, which: str, name: str):
        """``x`` (M, K) as the bytes the table kernels index by: int8 for signed 8 x 8 (as always);
        for another format any integer array of the operand's codes (``check_codes``: a ValueError
        naming ``name``), its low 8 bits as int8."""
        from lutcore import _check
        if self.legacy:
            return _check.array(x, name, np.int8, 2)
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected an integer array of {self} codes, got dtype {x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D array, got shape {x.shape}")
        self.check_codes(x, which, name)
        if x.dtype == np.int8 or x.dtype == np.uint8:
            return np.ascontiguousarray(x).view(np.int8)
        return np.ascontiguousarray((x & 0xFF).astype(np.uint8)).view(np.int8)

    def swapped(self) -> "Format":
        """The format with the operands exchanged (b becomes the activation)."""
        return Format(self.b_bits, self.b_signed, self.a_bits, self.a_signed, self.p_bits, self.p_signed)

    @property
    def legacy(self) -> bool:
        """The signed 8 x 8 -> 16 format of lutcore's original units (int16 table, file, digest)."""
        return self == SIGNED8


SIGNED8 = Format()


def evoapprox_name(name: str):
    """The format an EvoApproxLib circuit name states (``mul8u_1DMU`` -> 8u x 8u -> 16u,
    ``mul8x4u_0C9`` -> 8u x 4u -> 12u, ``mul12s_2PP`` -> 12s x 12s -> 24s), else None."""
    m = _EVO.search(name or "")
    if not m:
        return None
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else a
    s = m.group(3).lower() == "s"
    if not (1 <= a <= 16 and 1 <= b <= 16):
        return None
    return Format(a, s, b, s)


def format_arg(fmt, name: str = "format"):
    """None -> None; a Format -> itself; a str -> Format.parse; else TypeError naming ``name``."""
    if fmt is None or isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return Format.parse(fmt, name)
    raise TypeError(f"{name}: expected a Format or a str such as '8u x 4u -> 12u', got {type(fmt).__name__}")
