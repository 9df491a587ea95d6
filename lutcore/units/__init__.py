"""Verified arithmetic units: the 8-bit multiplier, requantizer and ReLU tables.

Design: a ``Units`` is immutable once built — three read-only tables plus what
the kernels derive from them once (an int32 copy of the multiplier in both
index orders, whether the requantizer is a plain saturation).  Everything
that runs "through the units" takes one.  The file format is the one hardware
teams already have: ``mul_lut.bin`` (int16 little-endian, 65536 entries, index
``(a & 0xff) * 256 + (b & 0xff)``), ``requant_lut.bin`` (int8, 65536, indexed
by a 16-bit two's-complement value) and ``relu_lut.bin`` (int8, 256).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re

import numpy as np

__all__ = ["Units", "Format", "FloatFormat", "fp_format", "FPUnit", "fp_metrics", "fp_report", "MantissaUnit", "TableReport", "VerifyReport", "exact_mul_table", "default_requant_table", "library",
           "default_relu_table"]

MUL_FILE, REQUANT_FILE, RELU_FILE = "mul_lut.bin", "requant_lut.bin", "relu_lut.bin"
COST_FILE = "cost.json"        # optional: {"cost": {...}, "published": {...}} (Units.cost / .published)
GRAD_A_FILE, GRAD_B_FILE = "grad_a.bin", "grad_b.bin"   # optional: float32 LE, 65536, Units.grad_tables
FORMAT_FILE = "format.json"    # a unit of another format than signed 8 x 8: {"a": "8u", "b": "4u", "product": "12u"}
NETLIST_FILE = "netlist.npz"   # a unit wider than a table: its gate netlist (lutcore.units.netlist), instead of mul_lut.bin
ACC_FILE = "accumulator.json"  # a declared accumulator (lutcore.units.accumulator): width, overflow, order
ADDER_FILES = ("adder.json", "adder.net")   # its adder circuit, when it has one (lutcore.units.adders.Adder.save)
_FORMAT_FORMAT = "lutcore-units-format/1"
_ACC_FORMAT = "lutcore-units-accumulator/1"
_COST_FORMAT = "lutcore-units-cost/1"


def _as_format_table(x, name: str, fmt) -> np.ndarray:
    """A table of format ``fmt`` (table shape or flat) as int32 (2^a_bits * 2^b_bits,), every
    value a product of the format (checked), or TypeError/ValueError naming ``name``."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    shape = fmt.table_shape
    if arr.shape not in (shape, (shape[0] * shape[1],)):
        raise ValueError(f"{name}: a {fmt} unit's table has shape {shape} (or {shape[0] * shape[1]} entries), "
                         f"got shape {arr.shape}")
    lo, hi = fmt.p_range
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        v = arr.reshape(-1).astype(np.int64)
        i = int(np.flatnonzero((v < lo) | (v > hi))[0])
        a, b = int(fmt.codes("a")[i // shape[1]]), int(fmt.codes("b")[i % shape[1]])
        raise ValueError(f"{name}: the product of a={a}, b={b} is {int(v[i])}, outside the {fmt.p_bits}-bit "
                         f"{'signed' if fmt.p_signed else 'unsigned'} product of format {fmt} [{lo}, {hi}]")
    return arr.reshape(-1).astype(np.int32)


def _int8_grid():
    v = np.arange(256, dtype=np.int64).astype(np.uint8).view(np.int8).astype(np.int64)
    return v[:, None], v[None, :]          # a (256,1), b (1,256): index (a&0xff, b&0xff)


def exact_mul_table() -> np.ndarray:
    a, b = _int8_grid()
    return (a * b).astype(np.int16).reshape(65536)


def default_requant_table() -> np.ndarray:
    t = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16).astype(np.int64)
    return np.clip(t, -127, 127).astype(np.int8)


def default_relu_table() -> np.ndarray:
    x = np.arange(256).astype(np.uint8).view(np.int8)
    return np.maximum(x, 0).astype(np.int8)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _as_table(x, name: str, dtype, size: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.size != size:
        raise ValueError(f"{name}: expected {size} entries, got shape {arr.shape}")
    info = np.iinfo(dtype)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise ValueError(f"{name}: values must lie in [{info.min}, {info.max}] ({np.dtype(dtype)}), "
                         f"got [{arr.min()}, {arr.max()}]")
    return arr.reshape(size).astype(dtype)


@dataclasses.dataclass(frozen=True)
class TableReport:
    """How one table compares with its exact reference."""
    name: str
    exact: bool
    max_abs_err: float
    mean_abs_err: float
    bias: float                    # mean signed error (table - reference)
    entries_wrong: int
    entries: int
    symmetric: bool | None = None  # mul only: table(a,b) == table(b,a)
    metrics: dict | None = None    # mul only: EvoApproxLib's error metrics (lutcore.units.metrics)


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    digest: str
    mul: TableReport
    requant: TableReport
    relu: TableReport
    defaulted: tuple = ()          # tables a units directory lacked: the exact defaults were used
    layout: str | None = None      # set when mul looks like a rotated (e.g. natural-order) exact table
    format: str = "8s x 8s -> 16s"  # the multiplier's operand and product formats

    @property
    def ok(self) -> bool:
        return self.mul.exact and self.requant.exact and self.relu.exact

    def to_dict(self) -> dict:
        """The report as plain numbers: {"digest", "ok", "mul": {..., "metrics": {...}}, ...}."""
        return {"digest": self.digest, "ok": self.ok, "format": self.format, "defaulted": list(self.defaulted),
                "layout": self.layout,
                **{t.name: dataclasses.asdict(t) for t in (self.mul, self.requant, self.relu)}}

    def rows(self):
        for t in (self.mul, self.requant, self.relu):
            sym = "-" if t.symmetric is None else ("yes" if t.symmetric else "no")
            yield (t.name, "exact" if t.exact else "APPROX", f"{t.entries_wrong}/{t.entries}",
                   f"{t.max_abs_err:g}", f"{t.mean_abs_err:.4g}", f"{t.bias:+.4g}", sym)

    def __str__(self) -> str:
        head = ("table", "status", "wrong", "max|err|", "mean|err|", "bias", "symmetric")
        rows = [head] + list(self.rows())
        w = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"units {self.digest[:16]}  format {self.format} (a x b -> product; s signed, u unsigned)"]
        for i, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w[j]) for j, c in enumerate(r)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * x for x in w))
        m = self.mul.metrics
        if m:
            over = (f"{self.mul.entries:,} sampled pairs (fixed seed, and every pair of edge codes)"
                    if m.get("sampled") else f"all {self.mul.entries} pairs")
            lines.append(f"mul error metrics (EvoApproxLib; {over} vs the exact product):")
            lines.append("  " + "  ".join(f"{k} {m[k]:.4g}" for k in ("mae", "mae_pct", "wce", "wce_pct")))
            lines.append("  " + "  ".join(f"{k} {m[k]:.4g}" for k in ("wcre_pct", "ep_pct", "mre_pct", "mse")))
        if self.defaulted:
            lines.append(f"not in the directory, exact defaults used: {', '.join(self.defaulted)}")
        if self.layout:
            lines.append(f"WARNING: {self.layout}")
        return "\n".join(lines)


def _rotation(table: np.ndarray) -> str | None:
    """A description if ``table`` (65536,) matches a row/column rotation of the exact product
    better than the exact product itself — the signature of a table written in natural order
    (row 0 = -128) or with an offset index — else None.  The zero operand's row and column
    (all products 0, for exact and approximate units alike) locate the rotation."""
    t = table.astype(np.int64).reshape(256, 256)
    dr = int(np.argmin(np.abs(t).sum(axis=1)))        # where a = 0 sits
    dc = int(np.argmin(np.abs(t).sum(axis=0)))        # where b = 0 sits
    if dr == 0 and dc == 0:
        return None
    e = exact_mul_table().astype(np.int64).reshape(256, 256)
    err = np.abs(t - e).mean()
    err_rot = np.abs(t - np.roll(e, (dr, dc), axis=(0, 1))).mean()
    if not err_rot < 0.5 * err:
        return None
    what = "natural order (row 0 = -128, entry [a + 128, b + 128])" if (dr, dc) == (128, 128) else \
        f"a rotated index (the a = 0 row at {dr}, the b = 0 column at {dc})"
    return (f"mul looks like a table laid out in {what}: it matches the exact product rotated by ({dr}, {dc}) "
            f"rows/columns (mean|err| {err_rot:.4g}) far better than in lutcore's order (mean|err| {err:.4g}). "
            f"lutcore indexes entry (a & 0xff) * 256 + (b & 0xff) (two's-complement bytes: row 0 is a = 0, "
            f"row 255 is a = -1); rewrite the table in that order")


def _compare(name, table, ref, symmetric=None, metrics=None) -> TableReport:
    d = table.astype(np.int64) - ref.astype(np.int64)
    ad = np.abs(d)
    return TableReport(name=name, exact=bool(not d.any()), max_abs_err=float(ad.max()),
                       mean_abs_err=float(ad.mean()), bias=float(d.mean()),
                       entries_wrong=int(np.count_nonzero(d)), entries=int(d.size), symmetric=symmetric,
                       metrics=metrics)


class Units:
    """A verified set of 8-bit arithmetic units (multiplier, requantizer, ReLU).

    Build with ``Units.exact()``, ``Units.load(dir)``, ``Units.from_mul(...)``,
    ``Units.from_verilog(file.v)``, ``Units.from_c(file.c, function)`` or the
    approximate multipliers in ``lutcore.units.approx``.
    """

    def __init__(self, mul, requant=None, relu=None, *, name: str | None = None, format=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a str or None, got {type(name).__name__}")
        fmt = format_arg(format) or SIGNED8
        if not fmt.is_table:
            raise ValueError(f"format: {fmt} has an operand wider than 8 bits: such a unit is a gate netlist, "
                             f"not a table (Units.from_verilog / Units.from_c / Units.from_netlist)")
        self.format = fmt
        self.netlist = None        # a wide unit's gate netlist (lutcore.units.netlist.Netlist)
        if fmt.legacy:
            self.mul = _readonly(_as_table(mul, "mul", np.int16, 65536))
        else:
            self.mul = _readonly(_as_format_table(mul, "mul", fmt))
        self.requant_lut = _readonly(default_requant_table() if requant is None
                                     else _as_table(requant, "requant", np.int8, 65536))
        self.relu_lut = _readonly(default_relu_table() if relu is None
                                  else _as_table(relu, "relu", np.int8, 256))
        exact = fmt.exact_table().reshape(-1)
        self.is_exact = bool(np.array_equal(self.mul, exact))
        h = hashlib.sha256()
        if not fmt.legacy:                 # the signed 8 x 8 digest is the tables alone, as it always was
            h.update(f"lutcore-format:{fmt}\n".encode())
        for t in (self.mul.astype("<i2" if fmt.legacy else "<i4"), self.requant_lut, self.relu_lut):
            h.update(t.tobytes())
        self.digest = h.hexdigest()
        self._provenance(name)
        # What kernels read: the table as int32 byte-indexed (a & 0xff) * 256 + (b & 0xff), in (a,b)
        # and (b,a) order, minus kernel_offset so that every entry fits int16 (the table bodies
        # hold products in 16 bits): a sum of K of them plus K * kernel_offset is the sum of the
        # products.  Codes outside the format hold the smallest product (range-checked before any
        # kernel, never read).
        lo, hi = int(self.mul.min()), int(self.mul.max())
        if hi - lo > 65535:
            raise ValueError(f"mul: the products span {lo}..{hi}, more than 65,536 values: the table kernels "
                             f"hold a product in 16 bits (after one offset per table)")
        self.kernel_offset = 0 if lo >= -32768 and hi <= 32767 else lo + 32768
        m = np.full(65536, lo, np.int64)
        m[fmt.kernel_index().reshape(-1)] = self.mul
        self._byte_products = _readonly(m)
        m = (m - self.kernel_offset).astype(np.int32).reshape(256, 256)
        self._kernel_mul = np.ascontiguousarray(np.stack([m.reshape(65536), m.T.reshape(65536)]))
        self.max_abs_product = int(np.abs(self.mul.astype(np.int64)).max())
        # the int8 dot-product body computes a*b of signed bytes: it serves a table that is exactly that
        a, b = fmt.grid()
        self._true_product = bool(fmt.a_signed and fmt.b_signed and
                                  np.array_equal(self.mul, (a * b).reshape(-1)))
        # A requant table that is a plain saturation of t to [lo, hi] runs without lookups.
        lo, hi = int(self.requant_lut[0x8000]), int(self.requant_lut[0x7fff])
        t = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16)
        self._requant_clamp = (lo <= hi and
                               bool(np.array_equal(np.clip(t, lo, hi).astype(np.int8), self.requant_lut)), lo, hi)

    def _provenance(self, name):
        """The name and what a builder or loader fills in later (every constructor sets these)."""
        self.name = name or ("exact" if self.is_exact else "custom")
        self.defaulted: tuple = ()          # Units.load: tables the directory lacked
        self.source = None         # from_verilog / from_c: what was read, and how its ports were taken
        self.cost: dict = {}       # power_mw / area_um2 / delay_ns (any may be missing) and source
        self.published: dict = {}  # error metrics a circuit's header states (EvoApproxLib style)
        self.loaded_from = None    # what it was built from, as resolve() takes it: dir, mul.v[:top], mul.c:fn
        self.grad_tables = None    # with_gradients / a units directory's grad_a.bin, grad_b.bin: (Ga, Gb)
        self.accumulator = None    # with_accumulator: the declared register (None: exact sums, as always)

    # ---------------------------------------------------------------- the accumulator
    @property
    def product_range(self) -> tuple:
        """(lo, hi): the smallest and largest product the unit gives (a netlist: its format's range)."""
        if self.mul is None:
            return self.format.p_range
        return int(self.mul.min()), int(self.mul.max())

    def with_accumulator(self, accumulator) -> "Units":
        """A copy of these units whose dot products accumulate in ``accumulator`` (a
        ``lutcore.units.accumulator.Accumulator`` or a spec such as ``"16s:saturate"``; None: exact
        sums again): its width, overflow policy, order and adder (the contract:
        ``lutcore.units.accumulator``).  Every product through the copy -- ``lut_gemm``,
        ``qmatmul`` (each block), ``lutcore.torch``, the models and pipeline stages -- forms its
        integer sums in that register.  A register narrower than one of the unit's products is a
        ValueError.  The digest covers the accumulator; the tables are shared, not copied."""
        import copy
        from lutcore.units.accumulator import accumulator_arg
        acc = accumulator_arg(accumulator)
        base = self.table_digest
        if acc is not None:
            lo, hi = self.product_range
            acc.check_products(lo, hi, f"units {self.name!r}")
        out = copy.copy(self)
        out.accumulator = acc
        out.table_digest = base
        out.digest = base if acc is None else hashlib.sha256(f"{base}\naccumulator:{acc.digest}".encode()).hexdigest()
        out.cost, out.published = dict(self.cost), dict(self.published)
        return out

    @property
    def plain(self) -> bool:
        """Whether the int8 paths serve these units: signed 8 x 8 operands and exact sums (no declared
        accumulator).  Every other unit takes the paths of operand formats (zero points, codes,
        ``lutcore.quant.QF``), which honour the accumulator."""
        return self.format.legacy and self.accumulator is None

    def without_accumulator(self) -> "Units":
        """These units with exact sums (no declared accumulator): self when there is none."""
        return self if self.accumulator is None else self.with_accumulator(None)

    @property
    def table_digest(self) -> str:
        """The digest of the multiplier and the requant/ReLU tables alone (``digest`` without the
        accumulator)."""
        return self.__dict__.get("table_digest", self.digest)

    @table_digest.setter
    def table_digest(self, v):
        self.__dict__["table_digest"] = v

    # ---------------------------------------------------------------- kernel path
    @property
    def kernel_path(self) -> str:
        """Which integer kernel every product through these units runs: ``"exact"`` (the
        table is ``a*b``: the int8 dot-product fast path) or ``"table"`` (the vectorised
        lookup path).  The one place lutcore makes that choice — ``lut_gemm``, ``qmatmul``,
        ``QLinear``, the fused decode and the PyTorch layers all ask here.  Both paths give
        the contract's bits; only the speed differs."""
        if self.mul is None:
            return "netlist"
        return "exact" if self._true_product else "table"

    @property
    def kernel_table(self) -> np.ndarray:
        """The multiplier as the table kernels read it: int32 (2, 65536), rows (a, b) and (b, a)
        order, byte-indexed, each entry the product minus ``kernel_offset`` (0 unless the
        products leave int16, as an unsigned 8 x 8 unit's do: then the kernels' sums are
        corrected by K * kernel_offset) (read-only use)."""
        return self._kernel_mul

    @property
    def byte_products(self) -> np.ndarray:
        """int64 (65536,): the product of every pair of codes at index (a & 0xff) * 256 + (b & 0xff)
        (the plain definition the kernels are held to; read-only)."""
        return self._byte_products

    # ---------------------------------------------------------------- builders
    @classmethod
    def exact(cls, format=None) -> "Units":
        """The exact multiplier (a*b) of ``format`` (default signed 8 x 8): a table, or for operands
        wider than 8 bits an exact multiplier's gate netlist (``netlist.exact_netlist``)."""
        fmt = format_arg(format) or SIGNED8
        if fmt.legacy:
            return cls(exact_mul_table(), name="exact")
        if not fmt.is_table:                        # a wide format: an exact multiplier's netlist
            from lutcore.units.netlist import exact_netlist, optimise
            return cls.from_netlist(optimise(exact_netlist(fmt)), fmt, name="exact")
        return cls(fmt.exact_table(), name="exact", format=fmt)

    @classmethod
    def from_mul(cls, table_or_fn, requant=None, relu=None, *, name: str | None = None, format=None) -> "Units":
        """From an integer table or a function f(a, b).  ``format`` (a ``Format`` or a spec such as
        ``"8u x 4u -> 12u"``; default signed 8 x 8) gives the operands' widths and signedness: the
        table has shape (2^a_bits, 2^b_bits) (or is flat), entry [a & (2^a_bits-1), b & (2^b_bits-1)]
        (two's-complement low bits).  A function is called once with two int32 arrays of that shape
        holding every pair of codes (int32, so that ``a * b`` is the exact product); what it returns
        must be products of the format (``p_bits`` wide, signed or not: checked, never wrapped)."""
        fmt = format_arg(format) or SIGNED8
        if callable(table_or_fn):
            a, b = (g.astype(np.int32) for g in fmt.grid())
            out = np.asarray(table_or_fn(a, b))
            if out.shape != fmt.table_shape:
                raise ValueError(f"table_or_fn: the function must return a {fmt.table_shape} array for "
                                 f"{fmt.table_shape} inputs, got shape {out.shape}")
            if out.dtype.kind not in "iu":
                raise TypeError(f"table_or_fn: the function must return integers, got dtype {out.dtype}")
            table = out
        else:
            table = np.asarray(table_or_fn)
            n = fmt.table_shape[0] * fmt.table_shape[1]
            if table.shape not in (fmt.table_shape, (n,)):
                raise ValueError(f"table_or_fn: expected shape {fmt.table_shape} or ({n},) for format {fmt}, "
                                 f"got {table.shape}")
        try:
            return cls(table, requant, relu, name=name, format=None if fmt.legacy else fmt)
        except (TypeError, ValueError) as e:       # the table's own check says "mul"
            msg = str(e)
            if msg.startswith("mul:"):
                raise type(e)("table_or_fn:" + msg[4:]) from None
            raise

    @classmethod
    def from_netlist(cls, netlist, format, *, name: str | None = None) -> "Units":
        """A unit too wide for a table (an operand of more than 8 bits): its gate netlist
        (``lutcore.units.netlist.Netlist``, run bit-sliced by ``lutcore.ops.netlist``) and its
        ``format`` (the netlist holds bits only).  The netlist's operand widths must be the
        format's; its outputs are the product's bits (a wider netlist output is cut to the
        product's width, a narrower one extended: the circuit loaders check that first)."""
        from lutcore.units.netlist import Netlist
        fmt = format_arg(format, "format")
        if fmt is None:
            raise TypeError("format: expected the unit's Format (a netlist holds bits, not signedness), got None")
        if not isinstance(netlist, Netlist):
            raise TypeError(f"netlist: expected a lutcore.units.netlist.Netlist, got {type(netlist).__name__}")
        if (netlist.a_bits, netlist.b_bits, netlist.p_bits) != (fmt.a_bits, fmt.b_bits, fmt.p_bits):
            raise ValueError(f"netlist: {netlist.a_bits} x {netlist.b_bits} -> {netlist.p_bits} bits, but format "
                             f"{fmt} states {fmt.a_bits} x {fmt.b_bits} -> {fmt.p_bits}")
        u = cls.__new__(cls)
        u.format, u.netlist, u.mul = fmt, netlist, None
        u.requant_lut, u.relu_lut = _readonly(default_requant_table()), _readonly(default_relu_table())
        u.digest = hashlib.sha256(f"lutcore-format:{fmt}\nnetlist:{netlist.digest}\n".encode()
                                  + u.requant_lut.tobytes() + u.relu_lut.tobytes()).hexdigest()
        a, b = _sample_pairs(fmt)
        u.is_exact = bool(np.array_equal(u.products(a, b), fmt.read_product(a * b)))
        u._provenance(name)
        u.kernel_offset, u._true_product = 0, False
        lo, hi = fmt.p_range
        u.max_abs_product = max(abs(lo), abs(hi))
        u._kernel_mul = u._byte_products = None
        u._requant_clamp = (True, -127, 127)
        return u

    def swapped(self) -> "Units":
        """These units with the operands exchanged: ``swapped().products(b, a) == products(a, b)``,
        the format's a and b swapped — for a circuit whose weight port (or parameter) comes first,
        since lutcore's first operand is the activation.  Cost and published figures carry over."""
        fmt = self.format.swapped()
        name = self.name[:-2] if self.name.endswith("^T") else f"{self.name}^T"
        if self.mul is not None:
            u = Units.from_mul(np.ascontiguousarray(self.table().T), name=name,
                               format=None if fmt.legacy else fmt)
        else:
            from lutcore.units.netlist import Netlist
            n = self.netlist
            wa, wb = n.a_bits, n.b_bits
            remap = np.arange(2 + wa + wb + n.gate_count, dtype=np.int64)
            remap[2:2 + wa] = np.arange(2 + wb, 2 + wb + wa)          # a's bits become the second operand's
            remap[2 + wa:2 + wa + wb] = np.arange(2, 2 + wb)          # b's the first's
            g = np.asarray(n.gates, np.int64).copy()
            g[:, :3] = remap[g[:, :3]]
            u = Units.from_netlist(Netlist(wb, wa, n.p_bits, g.astype(np.int32),
                                           remap[np.asarray(n.outputs, np.int64)].astype(np.int32)), fmt, name=name)
        u.cost, u.published = dict(self.cost), dict(self.published)
        u.source = f"{self.name} with its operands swapped" + (f" ({self.source})" if self.source else "")
        if self.accumulator is not None:        # the register adds the same products in the same order
            u = u.with_accumulator(self.accumulator)
        return u

    def products(self, a, b) -> np.ndarray:
        """int64: the unit's product of each pair of codes (a, b broadcast; checked against the
        format's ranges), read at the product's width and signedness."""
        fmt = self.format
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        fmt.check_codes(a, "a", "a")
        fmt.check_codes(b, "b", "b")
        if self.mul is not None:
            ma, mb = (1 << fmt.a_bits) - 1, (1 << fmt.b_bits) - 1
            return self.mul.astype(np.int64)[(a & ma) * (mb + 1) + (b & mb)]
        try:
            from lutcore.ops import netlist as _net
            n = self.netlist
            out = _net.products(a.reshape(-1), b.reshape(-1), n.gates, n.outputs, a_bits=fmt.a_bits,
                                b_bits=fmt.b_bits, a_signed=fmt.a_signed, b_signed=fmt.b_signed,
                                product_signed=fmt.p_signed)
            return out.reshape(a.shape)
        except ImportError:                              # no native netlist family in this build
            return fmt.read_product(self.netlist.evaluate(a, b))

    @classmethod
    def from_verilog(cls, path, top: str | None = None, *, timeout: float = 120, format=None) -> "Units":
        """Map a Verilog multiplier to gates with Yosys (``pip install 'lutcore[hdl]'``) and tabulate
        its netlist on all 65,536 pairs; ``top``: the module (default: found by Yosys); ``timeout``:
        seconds Yosys may take (its one-time WebAssembly compile not counted).  An EvoApproxLib
        header or meta.json gives ``cost`` and ``published`` (``lutcore.units.cost``).  ``format``
        (e.g. ``"8u x 4u"``) states the operands' formats; by default the ports' widths, their
        ``signed`` declarations, an EvoApproxLib name (mul8u_, mul8x4u_) or else the values give
        them.  Port rules and errors: ``lutcore.units.hdl``."""
        from lutcore.units.hdl import WideCircuit, from_verilog
        try:
            u = from_verilog(path, top, timeout=timeout, format=format)
        except WideCircuit as w:                    # too wide for a table: its gate netlist
            from lutcore.units import netlist
            u = netlist.units_from_verilog(os.fspath(path), top, w, timeout=timeout)
        u.loaded_from = os.path.abspath(os.fspath(path)) + (f":{top}" if top else "")
        return u

    @classmethod
    def from_c(cls, path, function: str | None = None, *, timeout: float = 60, format=None) -> "Units":
        """Compile ``function(a, b)`` (two integers in, one out: ``int16_t f(int8_t, int8_t)``,
        EvoApproxLib's ``uint16_t mul8s_X(uint8_t, uint8_t)`` or ``uint64_t mul8u_X(uint64_t,
        uint64_t)``...) from a C file with the system C compiler and tabulate it in a child process,
        for at most ``timeout`` seconds (``function`` may be omitted when the file defines only
        one).  ``format`` states the operands' formats; by default an EvoApproxLib name, or 8-bit
        parameters and the values, give them.  A crash, exit or hang of the model is a
        ValueError, never the caller's end.  An EvoApproxLib header gives ``cost`` and ``published``."""
        from lutcore.units.hdl import WideCircuit, from_c
        try:
            u = from_c(path, function, timeout=timeout, format=format)
        except WideCircuit as w:                    # too wide for a table: traced into its gate netlist
            from lutcore.units import netlist
            u = netlist.units_from_c(os.fspath(path), w, timeout=timeout)
        u.loaded_from = f"{os.path.abspath(os.fspath(path))}:{function or u.name}"
        return u

    @classmethod
    def from_text(cls, path, *, name: str | None = None, format=None) -> "Units":
        """A text table, one ``a b product`` line per operand pair (whitespace or commas, ``#``
        comments), as retraining frameworks ship their LUTs: the operand formats are inferred from
        the values (or ``format`` states them) and every pair must be there exactly once
        (``lutcore.units.text``)."""
        from lutcore.units.text import from_text
        return from_text(path, name=name, format=format)

    @classmethod
    def load(cls, path) -> "Units":
        """Read the tables from directory ``path``: ``mul_lut.bin`` is required; a missing
        ``requant_lut.bin`` / ``relu_lut.bin`` is the exact default (listed in ``defaulted``,
        ``repr`` and ``verify()``); any other file draws a warning naming it; a file that is
        there but cannot be read (a dangling or looping symlink, no permission, the wrong
        size) is a ValueError naming it.

        Symlinks: a table (or ``cost.json``) that is a symlink is read when its target resolves inside
        ``path`` (``path`` itself may be a link); one pointing outside is refused with a
        ValueError naming the file and its target (``lutcore._io.contained``, the rule every
        loader of a units or checkpoint directory follows)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a directory path, got {type(path).__name__}")
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"path: no such units directory: {path!r}")

        from lutcore._io import contained, saved_dir
        src = saved_dir(path)                # a save killed mid-switch: its complete copy

        def read(fname, dtype, size):
            f = contained(src, fname)
            if not os.path.lexists(f):
                return None                  # absent: the exact default; present: it must be readable
            if not os.path.isfile(f):
                what = "a dangling or looping symlink" if os.path.islink(f) else "not a regular file"
                raise ValueError(f"{f}: cannot read this table: {what}")
            nbytes = size * np.dtype(dtype).itemsize
            try:
                with open(f, "rb") as fh:
                    raw = fh.read(nbytes + 1)
            except OSError as e:
                raise ValueError(f"{f}: cannot read this table ({e.strerror or e})") from None
            if len(raw) != nbytes:
                raise ValueError(f"{f}: expected {nbytes} bytes ({size} x {np.dtype(dtype).name}), got {len(raw)}"
                                 + ("+" if len(raw) > nbytes else ""))
            return np.frombuffer(raw, dtype=dtype).copy()

        _check_dir(src)
        fmt = _read_format(contained(src, FORMAT_FILE))
        if not fmt.is_table:
            return _read_accumulator(_load_netlist_units(cls, path, src, fmt, read), src)
        n = fmt.table_shape[0] * fmt.table_shape[1]
        mul = read(MUL_FILE, "<i2" if fmt.legacy else "<i4", n)
        requant, relu = read(REQUANT_FILE, np.int8, 65536), read(RELU_FILE, np.int8, 256)
        try:
            units = cls(mul.astype(np.int16 if fmt.legacy else np.int32), requant, relu,
                        name=os.path.basename(os.path.normpath(path)), format=None if fmt.legacy else fmt)
        except ValueError as e:
            raise ValueError(f"{os.path.join(src, MUL_FILE)}: {e}") from None
        units.defaulted = tuple(n for n, t in (("requant", requant), ("relu", relu)) if t is None)
        units.loaded_from = os.path.abspath(path)
        f = contained(src, COST_FILE)        # a link out of the directory: refused, as the tables
        if os.path.lexists(f):
            units.cost, units.published = _read_cost(f)
        ga, gb = read(GRAD_A_FILE, "<f4", n), read(GRAD_B_FILE, "<f4", n)
        if (ga is None) != (gb is None):
            have, lack = (GRAD_A_FILE, GRAD_B_FILE) if gb is None else (GRAD_B_FILE, GRAD_A_FILE)
            raise ValueError(f"{os.path.join(src, lack)}: missing: a units directory holds both gradient "
                             f"tables or neither, and {have} is there")
        if ga is not None:
            for fname, t in ((GRAD_A_FILE, ga), (GRAD_B_FILE, gb)):
                bad = int(np.count_nonzero(~np.isfinite(t)))
                if bad:
                    raise ValueError(f"{os.path.join(src, fname)}: {bad} non-finite entries (NaN/Inf); a "
                                     f"gradient table holds finite float32 values")
            units.grad_tables = (_readonly(ga.astype(np.float32).reshape(fmt.table_shape)),
                                 _readonly(gb.astype(np.float32).reshape(fmt.table_shape)))
        return _read_accumulator(units, src)

    def save(self, path) -> None:
        """Write the three tables into directory ``path`` (created if needed).

        Crash-safe as every lutcore save (``lutcore._io.atomic_dir``): the tables are
        written and fsynced under new names and switched in with one rename, so a save
        killed at any instant leaves the old or the new three tables loadable, never a
        mixture; a failed save removes what it created (a directory too) and is an
        OSError naming ``path``.  ``cost`` and ``published`` figures, when there are any,
        go to ``cost.json`` beside the tables (an earlier save's is removed otherwise)."""
        import json
        from lutcore._io import atomic_dir
        legacy = self.format.legacy
        with atomic_dir(path, owned=(COST_FILE, GRAD_A_FILE, GRAD_B_FILE, FORMAT_FILE, NETLIST_FILE,
                                     MUL_FILE, ACC_FILE) + ADDER_FILES) as tmp:
            if self.accumulator is not None:
                acc = self.accumulator
                with open(os.path.join(tmp, ACC_FILE), "w", encoding="utf-8") as f:
                    json.dump({"format": _ACC_FORMAT, **acc.to_dict()}, f, indent=1)
                if acc.adder is not None:
                    acc.adder.save(tmp)
            tables = ((REQUANT_FILE, self.requant_lut), (RELU_FILE, self.relu_lut))
            if self.mul is not None:
                tables = ((MUL_FILE, self.mul.astype("<i2" if legacy else "<i4")),) + tables
            else:
                self.netlist.save(os.path.join(tmp, NETLIST_FILE))
            for fname, arr in tables:
                with open(os.path.join(tmp, fname), "wb") as f:
                    f.write(arr.tobytes())
            if not legacy:
                with open(os.path.join(tmp, FORMAT_FILE), "w", encoding="utf-8") as f:
                    json.dump({"format": _FORMAT_FORMAT, **self.format.to_dict()}, f, indent=1)
            if self.cost or self.published:
                with open(os.path.join(tmp, COST_FILE), "w", encoding="utf-8") as f:
                    json.dump({"format": _COST_FORMAT, "cost": dict(self.cost),
                               "published": dict(self.published)}, f, indent=1)
            if self.grad_tables is not None:
                for fname, t in zip((GRAD_A_FILE, GRAD_B_FILE), self.grad_tables):
                    with open(os.path.join(tmp, fname), "wb") as f:
                        f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())

    _COST_KEYS = ("power_mw", "area_um2", "delay_ns")

    def with_cost(self, *, power_mw=None, area_um2=None, delay_ns=None, source: str | None = None) -> "Units":
        """A copy of these units with hardware cost figures attached (the tables are shared, not
        copied).  Figures not given keep their current value; each given one must be a finite
        number >= 0.  ``source`` says where the figures come from (default: "stated by the user")."""
        import copy
        out = copy.copy(self)
        out.cost = stated_cost(self.cost, power_mw, area_um2, delay_ns, source)
        out.published = dict(self.published)
        return out

    def gradients(self, h: int = 1) -> tuple:
        """(Ga, Gb): the multiplier's partial derivatives as float32 (256, 256) tables indexed
        like ``table()`` ([a & 0xff, b & 0xff]): ``Ga[a, b] = (f(a+h, b) - f(a-h, b)) / (2h)`` on the
        integer grid, ``Gb`` the same along b; near -128 and 127 the differences are taken over
        the codes that exist (``(f(min(a+h, 127), b) - f(max(a-h, -128), b)) / (hi - lo)``: one-sided
        at the edges).  ``h`` (an int, 1..127): the smoothing half-width, for jagged tables such
        as truncation.  Computed from the table; ``grad_tables`` (supplied tables) is not read."""
        import operator
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)):
            raise TypeError(f"h: expected an int (the smoothing half-width, 1..127), got {type(h).__name__}")
        h = operator.index(h)
        if not 1 <= h <= 127:
            raise ValueError(f"h: expected the smoothing half-width in 1..127, got {h}")
        return _difference_tables(self.table(), self.format, h)

    def with_gradients(self, Ga, Gb) -> "Units":
        """A copy of these units carrying the gradient tables ``Ga`` = df/da and ``Gb`` = df/db,
        each a (256, 256) or (65536,) float array of finite values indexed like ``table()``
        ([a & 0xff, b & 0xff]; stored as float32), for ``backward="table"`` to use instead of
        the table's central differences; ``save`` writes them to ``grad_a.bin`` and
        ``grad_b.bin`` (float32 little-endian, 65536 entries each), and an assignment file
        (``save_assignment(..., units_dir=)``) saves such units as a directory.  ``with_gradients(None,
        None)`` drops them.  The multiplier tables are shared, not copied."""
        import copy
        if Ga is None and Gb is None:
            tables = None
        else:
            tables = tuple(_as_grad_table(t, n, self.format.table_shape) for t, n in ((Ga, "Ga"), (Gb, "Gb")))
        out = copy.copy(self)
        out.grad_tables = tables
        out.cost, out.published = dict(self.cost), dict(self.published)
        out.loaded_from = None      # no longer what its source gives: an assignment file saves its tables
        return out

    # ------------------------------------------------------------- inspection
    def table(self) -> np.ndarray:
        """The multiplier as a table of shape (2^a_bits, 2^b_bits), indexed [a & mask, b & mask]:
        (256, 256) int16 for signed 8 x 8 units, int32 for other formats."""
        if self.mul is None:
            raise ValueError(f"units {self.name!r}: format {self.format} has no table (a gate netlist runs it)")
        return self.mul.reshape(self.format.table_shape)

    def verify(self) -> VerifyReport:
        fmt = self.format
        if self.mul is None:                  # a netlist: over the pairs error_metrics() reads
            a, b = _sample_pairs(fmt)
            got = self.products(a, b)
            return VerifyReport(
                digest=self.digest,
                mul=_compare("mul", got, fmt.read_product(a * b), metrics=self.error_metrics()),
                requant=_compare("requant", self.requant_lut, default_requant_table()),
                relu=_compare("relu", self.relu_lut, default_relu_table()), format=str(fmt))
        sym = None
        if fmt.a_bits == fmt.b_bits and fmt.a_signed == fmt.b_signed:
            m = self.table()
            sym = bool(np.array_equal(m, m.T))
        return VerifyReport(
            digest=self.digest,
            mul=_compare("mul", self.mul, fmt.exact_table().reshape(-1), symmetric=sym,
                         metrics=self.error_metrics()),
            requant=_compare("requant", self.requant_lut, default_requant_table()),
            relu=_compare("relu", self.relu_lut, default_relu_table()),
            defaulted=self.defaulted,
            layout=None if self.is_exact or not fmt.legacy else _rotation(self.mul),
            format=str(fmt),
        )

    def error_metrics(self) -> dict:
        """EvoApproxLib's metrics of the multiplier (mae, mae_pct, wce, wce_pct, wcre_pct, ep_pct,
        mre_pct, mse; see ``lutcore.units.metrics``), over every pair of the unit's format."""
        from lutcore.units.metrics import error_metrics, metrics_of
        if self.mul is None:
            fmt = self.format
            a, b = _sample_pairs(fmt)
            m = metrics_of(self.products(a, b), a * b, fmt.a_bits + fmt.b_bits)
            m["pairs"] = float(a.size)
            m["sampled"] = float(a.size < (1 << (fmt.a_bits + fmt.b_bits)))
            return m
        return error_metrics(self.mul, self.format)

    def __repr__(self) -> str:
        kind = "exact" if self.is_exact else "approx"
        if self.mul is None:
            kind += f" netlist of {self.netlist.gate_count} gates"
        dflt = f", defaulted={'+'.join(self.defaulted)}" if self.defaulted else ""
        acc = f", accumulator={self.accumulator}" if self.accumulator is not None else ""
        return f"Units(name={self.name!r}, format={self.format}, mul={kind}{acc}, digest={self.digest[:16]}{dflt})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Units) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)


SAMPLED_PAIRS = 1 << 20    # pairs a netlist unit's metrics read when it has more than 2^20 (16x16: 2^32)


def stated_cost(cost: dict, power_mw=None, area_um2=None, delay_ns=None, source=None) -> dict:
    """``cost`` with the figures given replacing its own (``with_cost``'s checks: each a finite
    number >= 0; ``source`` a str, default "stated by the user")."""
    import math
    new = dict(cost or {})
    for key, v in (("power_mw", power_mw), ("area_um2", area_um2), ("delay_ns", delay_ns)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{key}: expected a number, got {type(v).__name__}")
        if not math.isfinite(float(v)) or float(v) < 0:
            raise ValueError(f"{key}: expected a finite number >= 0, got {v!r}")
        new[key] = float(v)
    if source is not None and not isinstance(source, str):
        raise TypeError(f"source: expected a str, got {type(source).__name__}")
    new["source"] = source or new.get("source") or "stated by the user"
    return new


def _sample_pairs(fmt) -> tuple:
    """(a, b) int64 codes: every pair when there are at most 2^20, else SAMPLED_PAIRS fixed-seed
    pairs plus every pair of the operands' edge codes (0, +-1, the extremes)."""
    n = fmt.a_bits + fmt.b_bits
    if n <= 20:
        a, b = fmt.codes("a"), fmt.codes("b")
        return np.repeat(a, b.size), np.tile(b, a.size)
    rng = np.random.default_rng(20261206)
    out = []
    for which in ("a", "b"):
        lo, hi = fmt.range(which)
        edge = np.array(sorted({lo, lo + 1, -1 if lo < 0 else 0, 0, 1, hi - 1, hi}), np.int64)
        out.append((rng.integers(lo, hi + 1, SAMPLED_PAIRS), edge))
    (ra, ea), (rb, eb) = out
    return np.concatenate([ra, np.repeat(ea, eb.size)]), np.concatenate([rb, np.tile(eb, ea.size)])


def _as_grad_table(t, name: str, shape=(256, 256)) -> np.ndarray:
    """A user's gradient table as read-only float32 of table ``shape``, or TypeError/ValueError naming it."""
    n = shape[0] * shape[1]
    if t is None:
        raise TypeError(f"{name}: expected a {shape} float array, got None (give both tables, or "
                        f"None for both to drop them)")
    arr = np.asarray(t)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float array (float32 or float64), got dtype {arr.dtype}")
    if arr.shape not in (shape, (n,)):
        raise ValueError(f"{name}: expected shape {shape} or ({n},), got {arr.shape}")
    with np.errstate(over="ignore"):
        t32 = arr.astype(np.float32).reshape(shape)
    bad = ~np.isfinite(t32)
    if bad.any():
        i = np.argwhere(bad)[0]
        bits_a, bits_b = (int(x).bit_length() - 1 for x in shape)
        a = int(i[0]) - ((int(i[0]) >> (bits_a - 1)) << bits_a)
        b = int(i[1]) - ((int(i[1]) >> (bits_b - 1)) << bits_b)
        raise ValueError(f"{name}: expected finite values (in float32), got {int(bad.sum())} non-finite "
                         f"entr{'y' if bad.sum() == 1 else 'ies'}, the first at [{i[0]}, {i[1]}] "
                         f"(a={a}, b={b}): {arr.reshape(shape)[i[0], i[1]]!r}")
    return _readonly(t32)


def _difference_tables(table: np.ndarray, fmt, h: int) -> tuple:
    """(Ga, Gb) float32 of table shape [a & mask, b & mask]: differences over +-h codes clipped to
    the format's range, divided by the distance covered (float64, rounded once)."""
    pa, pb = np.argsort(fmt.codes("a"), kind="stable"), np.argsort(fmt.codes("b"), kind="stable")
    nat = table.astype(np.float64)[pa][:, pb]                    # rows and columns in code order

    def diff(t, axis):
        n = t.shape[axis]
        i = np.arange(n)
        hi, lo = np.minimum(i + h, n - 1), np.maximum(i - h, 0)
        d = np.maximum(hi - lo, 1).astype(np.float64)
        if axis == 0:
            return (t[hi, :] - t[lo, :]) / d[:, None]
        return (t[:, hi] - t[:, lo]) / d[None, :]

    out = []
    for g in (diff(nat, 0), diff(nat, 1)):
        back = np.empty_like(g)
        back[np.ix_(pa, pb)] = g
        out.append(np.ascontiguousarray(back.astype(np.float32)))
    return tuple(out)


def _read_json(f, what: str):
    """The JSON value of a units directory's file ``f`` (a regular file: a named pipe would wait
    for a writer forever); anything unreadable is a ValueError naming the file and ``what``."""
    import json
    if not os.path.isfile(f):
        kind = "a dangling or looping symlink" if os.path.islink(f) else "not a regular file"
        raise ValueError(f"{f}: cannot read {what}: {kind}")
    try:
        with open(f, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        raise ValueError(f"{f}: cannot read {what} ({getattr(e, 'strerror', None) or e})") from None


def _read_cost(f):
    """(cost, published) from a units directory's cost.json; anything malformed is a
    ValueError naming the file."""
    import math
    d = _read_json(f, "the cost figures")
    if not isinstance(d, dict) or not isinstance(d.get("cost", {}), dict) or \
            not isinstance(d.get("published", {}), dict):
        raise ValueError(f"{f}: expected {{\"cost\": {{...}}, \"published\": {{...}}}}, got "
                         f"{type(d).__name__ if not isinstance(d, dict) else sorted(d)}")
    cost, pub = dict(d.get("cost", {})), dict(d.get("published", {}))
    for where, m in (("cost", cost), ("published", pub)):
        for k, v in m.items():
            if k == "source" and where == "cost":
                if not isinstance(v, str):
                    raise ValueError(f"{f}: cost source: expected a string, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{f}: {where} {k}: expected a finite number >= 0, got {v!r}")
    return cost, pub


def _read_format(f):
    """The Format a units directory's format.json states (absent: signed 8 x 8); anything
    malformed is a ValueError naming the file."""
    if not os.path.lexists(f):
        return SIGNED8
    d = _read_json(f, "the operand formats")
    if not isinstance(d, dict) or d.get("format") != _FORMAT_FORMAT:
        raise ValueError(f"{f}: expected {{\"format\": \"{_FORMAT_FORMAT}\", \"a\": \"8u\", \"b\": \"4u\", "
                         f"\"product\": \"12u\"}}, got {d!r}"[:400])
    fmt = Format.from_dict(d, f)
    if not fmt.is_table and not os.path.lexists(os.path.join(os.path.dirname(f), NETLIST_FILE)):
        raise ValueError(f"{f}: format {fmt} has an operand wider than 8 bits: such a unit is a gate netlist, "
                         f"and {NETLIST_FILE} is not in the directory")
    return fmt


def _read_accumulator(units, src):
    """units with the accumulator a directory's accumulator.json (+ adder/) declares, if any."""
    from lutcore._io import contained
    from lutcore.units.accumulator import Accumulator
    f = contained(src, ACC_FILE)
    if not os.path.lexists(f):
        return units
    d = _read_json(f, "the accumulator")
    keys = ("bits", "signed", "overflow", "order", "chunk")
    if not isinstance(d, dict) or d.get("format") != _ACC_FORMAT or any(k not in d for k in keys):
        raise ValueError(f"{f}: expected {{\"format\": \"{_ACC_FORMAT}\", \"bits\": 16, \"signed\": true, "
                         f"\"overflow\": \"wrap\", \"order\": \"sequential\", \"chunk\": 1, \"adder\": null}}, "
                         f"got {d!r}"[:400])
    adder = None
    if d.get("adder") is not None:
        from lutcore.units.adders import Adder
        for fname in ADDER_FILES:
            contained(src, fname)                # a link out of the directory: refused, as the tables
        adder = Adder.load(src)
        want = d["adder"].get("digest") if isinstance(d["adder"], dict) else None
        if want is not None and want != adder.digest:
            raise ValueError(f"{f}: names adder digest {str(want)[:16]}, but {ADDER_FILES[1]} holds {adder.digest[:16]}")
    try:
        acc = Accumulator(**{k: d[k] for k in keys}, adder=adder)
        return units.with_accumulator(acc)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{f}: {e}") from None


def _load_netlist_units(cls, path, src, fmt, read):
    """A units directory of a wide unit: format.json + netlist.npz (+ requant/relu, cost.json)."""
    from lutcore._io import contained
    from lutcore.units.netlist import Netlist
    f = contained(src, NETLIST_FILE)
    if not os.path.isfile(f):
        raise ValueError(f"{f}: cannot read the netlist: not a regular file")
    try:
        net = Netlist.load(f)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{f}: cannot read the netlist ({e})") from None
    try:
        units = cls.from_netlist(net, fmt, name=os.path.basename(os.path.normpath(path)))
    except ValueError as e:
        raise ValueError(f"{f}: {e}") from None
    requant, relu = read(REQUANT_FILE, np.int8, 65536), read(RELU_FILE, np.int8, 256)
    if requant is not None or relu is not None:
        if requant is not None:
            units.requant_lut = _readonly(requant)
        if relu is not None:
            units.relu_lut = _readonly(relu)
    units.defaulted = tuple(n for n, t in (("requant", requant), ("relu", relu)) if t is None)
    units.loaded_from = os.path.abspath(path)
    cf = contained(src, COST_FILE)
    if os.path.lexists(cf):
        units.cost, units.published = _read_cost(cf)
    return units


def _check_dir(path: str) -> None:
    """A units directory must hold mul_lut.bin; other files than the three tables are named in a
    warning (a typo such as mul_lut.bn would otherwise pass for "no table")."""
    import warnings
    names = sorted(n for n in os.listdir(path) if not n.startswith("."))
    known = (MUL_FILE, REQUANT_FILE, RELU_FILE, COST_FILE, GRAD_A_FILE, GRAD_B_FILE, FORMAT_FILE, NETLIST_FILE,
             ACC_FILE) + ADDER_FILES
    unknown = [n for n in names if n not in known]
    expected = (f"expected {MUL_FILE} (int16 little-endian, 65536 entries; required) and optionally "
                f"{FORMAT_FILE} (another operand format: then {MUL_FILE} is int32, 2^a_bits * 2^b_bits "
                f"entries), {REQUANT_FILE} (int8, 65536), {RELU_FILE} (int8, 256), {COST_FILE} and "
                f"{GRAD_A_FILE} + {GRAD_B_FILE} (float32 little-endian, 65536 each)")
    if MUL_FILE not in names and not (NETLIST_FILE in names and FORMAT_FILE in names):
        found = f"it holds {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}" if names else "it is empty"
        raise ValueError(f"units directory {path!r} has no {MUL_FILE}: {expected}; {found}")
    if unknown:
        warnings.warn(f"units directory {path!r}: ignoring unknown file(s) {', '.join(unknown[:8])}"
                      f"{' ...' if len(unknown) > 8 else ''} (a units directory holds {', '.join(known)})",
                      UserWarning, stacklevel=3)


_EXACT: Units | None = None


_C_SPEC = re.compile(r"(?s)(.+\.c)(?::([A-Za-z_]\w*))?")
_V_SPEC = re.compile(r"(?s)(.+\.s?v)(?::([A-Za-z_][\w$]*))?", re.I)


def _mx(units):
    """The MXUnits ``units`` names (an MXUnits, an ``mx...`` name, a directory MXUnits.save wrote),
    or None."""
    from lutcore.units.mantissa import MantissaUnits, is_spec as is_mant_spec
    from lutcore.units.mxunits import MXUnits, is_mx_dir, is_mx_spec
    if isinstance(units, (MXUnits, MantissaUnits)):
        return units
    if is_mant_spec(units):
        return MantissaUnits.parse(units)
    if is_mx_spec(units):
        return MXUnits.parse(units)
    if is_mx_dir(units):
        return MXUnits.load(units)
    return None


def resolve(units, mx: bool = False):
    """A Units -> itself (unchanged); a str -> exact/approx name (``exact:FMT``: the exact unit of
    a format, e.g. ``exact:8u``, ``exact:8u x 4u``, ``exact:16s``), a directory, a Verilog file
    (``mul.v``, or ``mul.v:top`` to name the module), a C model (``mul.c:function``, or ``mul.c``
    when it defines one such function) or a text table (``mul.txt`` / ``.lut`` / ``.csv``: ``a b
    product`` lines); None -> the (cached) exact units.

    None is exact here because this is the resolver of the integer ops, which have no float
    path (``lut_gemm``, ``qmatmul``, ``QLinear``, ``requant``, ``relu8``, ``UnitMatmul``: their
    ``units=None`` default is the exact table).  Where a float path exists — models,
    ``set_units``, pipeline stages, ``evaluate_units``, the CLI — None (and "none"/"float")
    means float: those resolve with ``lutcore.units.assign.resolve_spec`` (docs/DESIGN.md,
    "Units and None").

    ``mx=True`` (the front ends that run MX units): an ``mx...`` name (``lutcore.units.mxunits``),
    an MXUnits or a directory ``MXUnits.save`` wrote gives an MXUnits; without it they are a
    TypeError saying where MX units run."""
    global _EXACT
    if mx or isinstance(units, (str, os.PathLike)) or type(units).__name__ in ("MXUnits", "MantissaUnits"):
        got = _mx(units) if units is not None and not isinstance(units, Units) else None
        if got is not None:
            if not mx:
                raise TypeError(f"units: {got.name!r} are {'MX units (block-scaled floating point)' if got.kind == 'mx' else 'bf16/fp16 mantissa-product units'}: they run through "
                                f"{'lutcore.ops.mxgemm.mx_gemm' if got.kind == 'mx' else 'lutcore.ops.mantgemm.mant_gemm'}, lutcore.torch's layers, lutcore's models"
                                f"{', the pipeline' if got.kind == 'mx' else ''} and lutcore eval, not this integer op (it takes lutcore.Units)")
            return got
    if units is None:
        if _EXACT is None:
            _EXACT = Units.exact()
        return _EXACT
    if isinstance(units, Units):
        return units
    if isinstance(units, (str, os.PathLike)):
        s = os.fspath(units)
        if s == "exact":
            return resolve(None)
        if isinstance(units, str) and "@" in s and not os.path.exists(s):     # UNITS@16s:saturate[:adder=FILE]
            base, acc = s.rsplit("@", 1)
            u = resolve(base or None).with_accumulator(accumulator_spec(acc))
            u.name = paired_name(u)
            return u
        if isinstance(units, str) and s.startswith("exact:") and not os.path.exists(s):
            return Units.exact(Format.parse(s[6:], "units"))       # exact:8u, exact:8u x 4u, exact:16s
        if isinstance(units, str) and approx.is_name(s):        # a built-in name wins over a folder
            return approx.by_name(s)
        if os.path.isdir(s):
            return Units.load(s)
        if s.lower().endswith((".txt", ".lut", ".csv")):
            return Units.from_text(s)
        u = _circuit_spec(s, Units.from_verilog, Units.from_c)
        return approx.by_name(s) if u is None else u
    raise TypeError(f"units: expected a lutcore.Units, a name, a directory, a .v file, file.c:function, a text table, or "
                    f"None, got {type(units).__name__}")


def _circuit_spec(s: str, from_verilog, from_c):
    """A Verilog file (``f.v``, ``f.sv``, ``f.v:top``) or a C model (``f.c``, ``f.c:function``) read by
    the given readers; None when ``s`` names neither."""
    if s.lower().endswith((".v", ".sv")):
        return from_verilog(s)
    m = _V_SPEC.fullmatch(s)
    if m and not os.path.exists(s):
        return from_verilog(m.group(1), m.group(2))
    m = _C_SPEC.fullmatch(s)
    if m:
        return from_c(m.group(1), m.group(2))
    return None


def paired_name(u) -> str:
    """A unit's name with its accumulator: ``mul+adder`` (an adder circuit), ``mul@16s:saturate`` (exact adder)."""
    base = u.name.split("@")[0].split("+")[0]
    acc = u.accumulator
    if acc is None:
        return base
    if acc.adder is not None:
        return f"{base}+{acc.adder.name}"
    return f"{base}@{acc}"


def accumulator_spec(text: str):
    """An Accumulator from its spelling with an optional adder: ``"16s:saturate"``,
    ``"16s:wrap:chunks=8"``, ``"16s:wrap:adder=add16se_X.c"`` (the adder a .c / .v file, ``file.c:function``,
    ``file.v:top``, or a directory an Adder was saved to)."""
    from lutcore.units.accumulator import Accumulator
    if not isinstance(text, str):
        raise TypeError(f"accumulator: expected a spec such as '16s:saturate', got {type(text).__name__}")
    head, sep, adder = text.partition(":adder=")
    return Accumulator.parse(head, adder=adder_spec(adder) if sep else None)


def adder_spec(spec: str):
    """An Adder from a file spec: ``add.c``, ``add.c:function``, ``add.v``, ``add.v:top``, a saved directory."""
    from lutcore.units.adders import Adder
    if os.path.isdir(spec):
        return Adder.load(spec)
    a = _circuit_spec(spec, Adder.from_verilog, Adder.from_c)
    if a is not None:
        return a
    raise ValueError(f"adder: expected a .c file (file.c or file.c:function), a .v file (file.v or file.v:top) or "
                     f"a saved adder's directory, got {spec!r}")


from lutcore.units import approx  # noqa: E402  (submodule export)
from lutcore.units.formats import SIGNED8, Format, format_arg  # noqa: E402,F401
from lutcore.units.fp import FloatFormat, fp_format  # noqa: E402,F401  (floating-point element formats)
from lutcore.units.fpmul import FPUnit, fp_metrics, fp_report  # noqa: E402,F401  (FP multipliers as tables)
from lutcore.units.mantissa import MantissaUnit  # noqa: E402,F401  (bf16 / fp16 significand tables)
from lutcore.units.library import library  # noqa: E402  (lutcore.units.library(DIR): the function)
