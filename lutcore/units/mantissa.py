"""Mantissa-product units: an approximate floating-point multiplier of bf16 or fp16 operands given,
as ApproxTrain gives it, by its table of significand products.

For a = (-1)^sa 2^ea (1 + ma / 2^m) and b likewise (normal operands of the format, m its mantissa
bits), the unit's product is (-1)^(sa ^ sb) 2^(ea + eb) T[ma, mb]: only the significands go
through the unit, the exponents add exactly (docs/DESIGN.md, "Mantissa-product units (bf16 /
fp16)": zeros, subnormals, inf and NaN, and how ``matmul`` rounds and sums).

Design: a unit is a frozen value -- its format, a read-only float32 table and a digest -- built
here once, in vectorised numpy over the (2^m, 2^m) grid of significand pairs.  The GEMM through
it is the room ``lutcore.ops.mantgemm`` (``matmul`` imports it when called: units sit below the
rooms); nothing here imports the ops at module level.

    fmt       "bf16" (m = 7) or "fp16" (m = 10)
    table     float32 (2^m, 2^m), read-only: T[ma, mb] the unit's (1 + ma/2^m)(1 + mb/2^m),
              finite and >= 0 (-0 is stored as +0); in [1, 4) for the exact multiplier
    digest    sha256 of "lutcore-mantunit:<fmt>\\n" + the table as float32 little-endian

    exact         (1 + x)(1 + y)                                   exact in float32 (2m + 2 <= 22 bits)
    mitchell      x + y < 1: 1 + x + y;  x + y >= 1: 2 (x + y)     J. N. Mitchell, IRE Trans. Electronic
                                                                   Computers, 1962 (log2(1 + x) ~ x)
    truncated k   (1 + x)(1 + y) normalised to [1, 2) (P >= 2: P / 2, then times 2 again), its fraction
                  cut after k bits toward zero; k >= 2m + 1 is exact
    from_function fn(sig_a, sig_b) on float64 (2^m, 2^m) grids of the significands in [1, 2), rounded
                  to float32 (nearest even)
    from_table    a float32 (2^m, 2^m) array, copied

Files (``save`` / ``load``): a directory of ``mant_table.bin`` (float32 LE, row-major) and
``mantunit.json`` ({"format": "lutcore-mantunit/1", "fmt", "shape", "dtype": "<f4", "name",
"digest"}), written atomically (lutcore._io.atomic_dir); ``load`` refuses another format than
asked, another size, and a table that does not hash to the digest recorded.

Metrics (``metrics()``): against the exact significand product e over all 2^2m pairs, rel = (T - e)
/ e: mred (mean |rel|), max_red, bias (mean rel), msre, error_rate, max_abs_err
(lutcore.units.metrics.relative_metrics).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import ClassVar

import numpy as np

__all__ = ["MantissaUnit", "MantissaUnits", "is_spec", "FORMATS", "MBITS"]

MBITS = {"bf16": 7, "fp16": 10}
FORMATS = tuple(MBITS)
TABLE_FILE, UNIT_FILE = "mant_table.bin", "mantunit.json"
_UNIT_FORMAT = "lutcore-mantunit/1"


def fmt_arg(fmt, name: str = "fmt") -> str:
    """A mantissa format's name ("bf16" or "fp16"), else TypeError/ValueError naming ``name``."""
    if not isinstance(fmt, str):
        raise TypeError(f"{name}: expected a format name, one of {', '.join(FORMATS)}, got {type(fmt).__name__}")
    if fmt not in MBITS:
        raise ValueError(f"{name}: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def _shape(fmt: str) -> tuple:
    return (1 << MBITS[fmt], 1 << MBITS[fmt])


def _significands(fmt: str):
    """The integer significands 2^m + i as (n, 1) and (1, n) int64 grids, and m."""
    m = MBITS[fmt]
    s = (1 << m) + np.arange(1 << m, dtype=np.int64)
    return s[:, None], s[None, :], m


def _checked_table(table, fmt: str, name: str = "table") -> np.ndarray:
    """``table`` as a read-only float32 copy (-0 as +0), or TypeError/ValueError naming ``name``:
    not a float32 ndarray, not (2^m, 2^m), an entry not finite or below 0."""
    from lutcore.units.fpmul import table_arg
    table_arg(table, name, _shape(fmt), f"a {fmt}", f"2^{MBITS[fmt]} x 2^{MBITS[fmt]} mantissas")
    bad = ~(np.isfinite(table) & (table >= 0))
    if bad.any():
        i, j = (int(t[0]) for t in np.nonzero(bad))
        raise ValueError(f"{name}: expected finite entries >= 0, got T[{i}, {j}] = {float(table[i, j])!r} "
                         f"({int(bad.sum())} such entries)")
    t = np.asarray(table) + np.float32(0)                      # a C-contiguous copy; -0 + 0 = +0
    t.setflags(write=False)
    return t


def _name_arg(name, default: str) -> str:
    if name is None:
        return default
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str or None, got {type(name).__name__}")
    return name


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MantissaUnit:
    """An approximate bf16 / fp16 multiplier as its table of significand products (the module's
    docstring).  Build one with ``exact``, ``mitchell``, ``truncated``, ``from_function``,
    ``from_table`` or ``load``; ``MantissaUnit(fmt, table, name)`` is ``from_table``."""
    fmt: str
    table: np.ndarray           # float32 (2^m, 2^m), read-only: [ma, mb]
    name: str = "custom"
    digest: str = dataclasses.field(init=False)
    kind: ClassVar[str] = "mantissa"

    def __post_init__(self):
        fmt = fmt_arg(self.fmt)
        if not isinstance(self.name, str):
            raise TypeError(f"name: expected a str, got {type(self.name).__name__}")
        t = _checked_table(self.table, fmt)
        h = hashlib.sha256(f"lutcore-mantunit:{fmt}\n".encode())
        h.update(t.astype("<f4").tobytes())
        for k, v in (("fmt", fmt), ("table", t), ("digest", h.hexdigest())):
            object.__setattr__(self, k, v)

    @property
    def mbits(self) -> int:
        """The format's mantissa bits: 7 (bf16) or 10 (fp16)."""
        return MBITS[self.fmt]

    # ------------------------------------------------------------------ built-ins
    @classmethod
    def exact(cls, fmt) -> "MantissaUnit":
        """The exact significand product (1 + x)(1 + y): an exact float32 (at most 2m + 2 bits)."""
        sa, sb, m = _significands(fmt_arg(fmt))
        return cls(fmt, np.ldexp((sa * sb).astype(np.float64), -2 * m).astype(np.float32), "exact")

    @classmethod
    def mitchell(cls, fmt) -> "MantissaUnit":
        """Mitchell's logarithmic multiplier (1962) on the significands: log2(1 + x) ~ x both ways,
        so (1 + x)(1 + y) ~ 1 + x + y when x + y < 1 and 2 (x + y) (the carry into the exponent)
        when x + y >= 1.  Never above the exact product; at most 11.1 % below (x = y = 1/2)."""
        sa, sb, m = _significands(fmt_arg(fmt))
        s = (sa - (1 << m)) + (sb - (1 << m))                     # (n, n): x + y in units of 2^-m
        mag = np.where(s < (1 << m), (1 << m) + s, 2 * s)
        return cls(fmt, np.ldexp(mag.astype(np.float64), -m).astype(np.float32), "mitchell")

    @classmethod
    def truncated(cls, fmt, k: int) -> "MantissaUnit":
        """The exact significand product P = (1 + x)(1 + y) normalised to [1, 2) (P >= 2: P / 2, the
        factor 2 kept), its fraction cut after ``k`` bits (toward zero: the leading one and the k
        bits below it kept); k >= 2m + 1 is exact.  ``k``: an int in 0..23."""
        fmt = fmt_arg(fmt)
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) <= 23:
            raise ValueError(f"k: expected the fraction bits kept, an int in 0..23, got {k!r}")
        sa, sb, m = _significands(fmt)
        P = sa * sb                                               # (n, n) in [2^2m, 2^(2m+2))
        lead = 2 * m + (P >= (1 << (2 * m + 1)))                  # the leading one's position
        drop = np.maximum(lead - int(k), 0)
        t = np.ldexp(((P >> drop) << drop).astype(np.float64), -2 * m).astype(np.float32)
        return cls(fmt, t, f"truncated:{int(k)}")

    # ------------------------------------------------------------------ user tables
    @classmethod
    def from_function(cls, fmt, fn, name: str | None = None) -> "MantissaUnit":
        """``fn(sig_a, sig_b)`` called once on float64 (2^m, 2^m) grids of the significands
        (sig_a[i, j] = 1 + i/2^m, sig_b[i, j] = 1 + j/2^m); it returns the products, real numbers
        of that shape, rounded to float32 (nearest even) and checked as ``from_table``'s."""
        fmt = fmt_arg(fmt)
        if not callable(fn):
            raise TypeError(f"fn: expected a function fn(sig_a, sig_b) of two float64 arrays, got "
                            f"{type(fn).__name__}")
        sa, sb, m = _significands(fmt)
        shape = _shape(fmt)
        x = np.ascontiguousarray(np.broadcast_to(np.ldexp(sa.astype(np.float64), -m), shape))
        y = np.ascontiguousarray(np.broadcast_to(np.ldexp(sb.astype(np.float64), -m), shape))
        out = np.asarray(fn(x, y))
        if out.shape != shape:
            raise ValueError(f"fn: expected a {shape} array of products for {fmt}, got shape {out.shape}")
        if out.dtype.kind not in "fiu" or out.dtype == np.bool_:
            raise TypeError(f"fn: expected real products, got dtype {out.dtype}")
        with np.errstate(over="ignore", invalid="ignore"):
            t = out.astype(np.float32)
        name = _name_arg(name, getattr(fn, "__name__", "function"))
        try:
            return cls(fmt, t, name)
        except ValueError as e:
            raise ValueError(f"fn: {str(e).removeprefix('table: ')}") from None

    @classmethod
    def from_table(cls, fmt, table, name: str | None = None) -> "MantissaUnit":
        """A float32 (2^m, 2^m) table, entry [ma, mb] (finite, >= 0); copied, read-only."""
        return cls(fmt_arg(fmt), table, _name_arg(name, "custom"))

    # ------------------------------------------------------------------ files
    def save(self, path) -> None:
        """Write ``mant_table.bin`` (float32 LE) and ``mantunit.json`` into directory ``path``
        (created if needed), atomically (lutcore._io.atomic_dir: the old save or the new one)."""
        from lutcore._io import atomic_dir
        meta = {"format": _UNIT_FORMAT, "fmt": self.fmt, "shape": list(self.table.shape), "dtype": "<f4",
                "name": self.name, "digest": self.digest}
        with atomic_dir(path, owned=(TABLE_FILE, UNIT_FILE), last=(UNIT_FILE,)) as tmp:
            with open(os.path.join(tmp, TABLE_FILE), "wb") as f:
                f.write(self.table.astype("<f4").tobytes())
            with open(os.path.join(tmp, UNIT_FILE), "w", encoding="utf-8") as f:
                json.dump(meta, f, indent=1)

    @classmethod
    def load(cls, path, fmt=None) -> "MantissaUnit":
        """Read a unit ``save`` wrote; ``fmt`` (when given) must be the one recorded.  A malformed
        description, a table of another size or one that does not hash to the digest recorded is
        a ValueError naming the file."""
        from lutcore._io import contained, path_arg, saved_dir
        from lutcore.units import _read_json
        path = path_arg(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"path: no such mantissa unit directory: {path!r}")
        want = None if fmt is None else fmt_arg(fmt)
        src = saved_dir(path)
        jf, bf = contained(src, UNIT_FILE), contained(src, TABLE_FILE)
        meta = _meta(jf, _read_json(jf, "the mantissa unit's description"), want)
        table = _read_table(bf, meta["fmt"])
        try:
            u = cls(meta["fmt"], table, meta["name"])
        except ValueError as e:
            raise ValueError(f"{bf}: {e}") from None
        if u.digest != meta["digest"]:
            raise ValueError(f"{bf}: the table hashes to {u.digest[:16]}, but {UNIT_FILE} records "
                             f"{str(meta['digest'])[:16]} (a corrupted or replaced file)")
        return u

    # ------------------------------------------------------------------ use
    def matmul(self, a, b, threads: int | None = None, out=None) -> np.ndarray:
        """float32 (M, N) = a (M, K) @ b (K, N) through this unit: ``lutcore.ops.mantgemm.mant_gemm``."""
        from lutcore.ops.mantgemm import mant_gemm
        return mant_gemm(a, b, self, threads=threads, out=out)

    @property
    def is_exact(self) -> bool:
        """Whether every entry is the exact significand product."""
        return self.digest == MantissaUnit.exact(self.fmt).digest

    def metrics(self) -> dict:
        """{metric: float} against the exact significand product over all 2^2m pairs (the module's
        docstring), and "pairs"."""
        from lutcore.units.metrics import relative_metrics
        sa, sb, m = _significands(self.fmt)
        e = np.ldexp((sa * sb).astype(np.float64), -2 * m)              # (n, n): exact
        out = relative_metrics(self.table.astype(np.float64).ravel(), e.ravel())
        out["pairs"] = float(e.size)
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, MantissaUnit) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"MantissaUnit(name={self.name!r}, {self.fmt}, digest={self.digest[:16]})"


def _meta(jf, meta, want) -> dict:
    """mantunit.json's description checked (a ValueError naming the file)."""
    keys = ("fmt", "shape", "name", "digest")
    if not isinstance(meta, dict) or meta.get("format") != _UNIT_FORMAT or any(k not in meta for k in keys):
        raise ValueError(f"{jf}: expected {{\"format\": \"{_UNIT_FORMAT}\", \"fmt\": \"bf16\", \"shape\": "
                         f"[128, 128], \"name\", \"digest\", ...}}, got {meta!r}"[:400])
    if meta["fmt"] not in MBITS:
        raise ValueError(f"{jf}: fmt: expected one of {', '.join(FORMATS)}, got {meta['fmt']!r}"[:300])
    if want is not None and meta["fmt"] != want:
        raise ValueError(f"{jf}: a {meta['fmt']} unit, but fmt={want} was asked for")
    shape = _shape(meta["fmt"])
    if meta["shape"] != list(shape) or meta.get("dtype", "<f4") != "<f4":
        raise ValueError(f"{jf}: shape {meta['shape']} dtype {meta.get('dtype')!r}, but a {meta['fmt']} unit's "
                         f"table is {list(shape)} '<f4'"[:300])
    if not isinstance(meta["name"], str) or not isinstance(meta["digest"], str):
        raise ValueError(f"{jf}: name and digest must be strings, got {meta['name']!r}, {meta['digest']!r}"[:300])
    return meta


def _read_table(bf, fmt: str) -> np.ndarray:
    """mant_table.bin as a float32 (2^m, 2^m) array (a ValueError naming the file if its size differs)."""
    if not os.path.isfile(bf):
        kind = "a dangling or looping symlink" if os.path.islink(bf) else "missing or not a regular file"
        raise ValueError(f"{bf}: cannot read the table: {kind}")
    shape = _shape(fmt)
    nbytes = 4 * shape[0] * shape[1]
    with open(bf, "rb") as fh:
        raw = fh.read(nbytes + 1)
    if len(raw) != nbytes:
        raise ValueError(f"{bf}: expected {nbytes} bytes ({shape[0]} x {shape[1]} float32, {fmt}), got "
                         f"{len(raw)}{'+' if len(raw) > nbytes else ''}")
    return np.frombuffer(raw, "<f4").astype(np.float32).reshape(shape)


# ---------------------------------------------------------------------- the front ends' units
_SPEC_FORMATS = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"}


def is_spec(spec) -> bool:
    """Whether ``spec`` names mantissa-product units (``bf16[:<multiplier>]`` / ``fp16[:...]``) and
    is not an existing path."""
    if not isinstance(spec, str) or os.path.exists(spec):
        return False
    return spec.strip().lower().split(":", 1)[0] in _SPEC_FORMATS


class MantissaUnits:
    """What a layer computes when its products are bf16 / fp16 operands through a ``MantissaUnit``
    (``lutcore.ops.mantgemm``: both operands rounded to the format, one significand-table product
    each, the float32 sum in k order) -- the front ends' counterpart of ``Units`` / ``MXUnits``
    (lutcore.torch's layers, lutcore's models, ``lutcore eval``, the search).

    Names: ``bf16`` / ``fp16`` (the exact multiplier), ``bf16:mitchell``, ``bf16:truncated:<k>``, or
    ``bf16:<DIR>`` (a ``MantissaUnit.save`` directory).  Backward "ste" or "units" (dX = dY w, dW =
    dY^T x through the unit, as ApproxTrain trains); gradient tables are not defined for them."""

    kind = "mantissa"
    accumulator = None          # the sum is float32 in k order (no integer register)
    plain = False

    def __init__(self, mul: MantissaUnit, name: str | None = None):
        if not isinstance(mul, MantissaUnit):
            raise TypeError(f"mul: expected a MantissaUnit, got {type(mul).__name__}")
        self.mul = mul
        self.name = name if name is not None else (mul.fmt if mul.name == "exact" else f"{mul.fmt}:{mul.name}")
        self.digest = hashlib.sha256(f"lutcore-mantunits/1\n{mul.digest}".encode()).hexdigest()
        self.loaded_from = None
        self.cost, self.published = {}, {}

    @classmethod
    def parse(cls, spec: str) -> "MantissaUnits":
        """The units a name stands for (the class docstring); ValueError naming the spec."""
        s = spec.strip()
        head, _, mul = s.partition(":")
        fmt = _SPEC_FORMATS.get(head.lower())
        if fmt is None:
            raise ValueError(f"units: {spec!r}: expected bf16[:multiplier] or fp16[:multiplier]")
        m = mul.strip()
        if m in ("", "exact", "mitchell"):
            u = getattr(MantissaUnit, m or "exact")(fmt)
        elif m.startswith(("truncated:", "trunc")) and m.rsplit(":", 1)[-1].lstrip("trunc").isdigit():
            u = MantissaUnit.truncated(fmt, int(m.rsplit(":", 1)[-1].lstrip("trunc")))
        elif os.path.isdir(m):
            u = MantissaUnit.load(m, fmt)
        else:
            raise ValueError(f"units: {spec!r}: unknown multiplier {m!r}; expected exact, mitchell, truncated:<k> or a "
                             f"directory MantissaUnit.save wrote")
        out = cls(u)
        out.loaded_from = s
        return out

    @property
    def format(self) -> str:
        return f"{self.mul.fmt} x {self.mul.fmt} (significand table)"

    def matmul(self, a, b, threads: int | None = None) -> np.ndarray:
        return self.mul.matmul(a, b, threads)

    def with_cost(self, *, power_mw=None, area_um2=None, delay_ns=None, source: str | None = None):
        """A copy with hardware cost figures attached, as ``Units.with_cost``."""
        import copy
        from lutcore.units import stated_cost
        out = copy.copy(self)
        out.cost = stated_cost(self.cost, power_mw, area_um2, delay_ns, source)
        return out

    def error_metrics(self) -> dict:
        """``MantissaUnit.metrics`` plus EvoApproxLib's value metrics on the significand products and
        mae_pct / wce_pct in percent of the largest exact one (4)."""
        from lutcore.units.metrics import value_metrics
        sa, sb, m = _significands(self.mul.fmt)
        e = np.ldexp((sa * sb).astype(np.float64), -2 * m).ravel()
        out = self.mul.metrics()
        out.update(value_metrics(self.mul.table.astype(np.float64).ravel(), e))
        out["mae_pct"], out["wce_pct"] = 100.0 * out["mae"] / 4.0, 100.0 * out["wce"] / 4.0
        return out

    @property
    def is_exact(self) -> bool:
        return self.mul.is_exact

    def describe(self) -> str:
        return f"{self.name}: {self.mul.fmt} operands, {self.mul.name} significand products, float32 sums in k order"

    def __eq__(self, other) -> bool:
        return isinstance(other, MantissaUnits) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"MantissaUnits({self.name!r}, digest={self.digest[:16]})"
