"""Floating-point multipliers as product tables: an ``FPUnit`` is what one multiplier of two
element formats gives on every pair of codes.

Design: a unit is a frozen value -- its two operand formats (``lutcore.units.fp``), a read-only
float32 table of products and a digest -- built here once, in vectorised numpy over the code
grid (at most 256 x 256).  An MX GEMM reads ``products[code_a, code_b]`` and knows nothing of how
the table was made; the metrics below compare it with the exact product.  Circuits are read
through ``lutcore.units.hdl`` (Yosys for Verilog; the C compiler and the model under its keeper,
never in this process); only the decoding of their output bit pattern is this module's.
Nothing here imports ``lutcore.mx`` or the ops.

    products   float32 (2^a.bits, 2^b.bits), read-only; entry [code_a, code_b]
    digest     sha256 of "lutcore-fpunit:<a> x <b>\\n" + the table as float32 little-endian

Operands: the element formats e4m3, e5m2, e3m2, e2m3, e2m1 and int8 (MXINT8, value code/64);
e8m0 is a scale and is refused (2^127 * 2^127 leaves float32).  Every finite nonzero operand is
read as ``v = (-1)^s * 2^E * (1 + x)``, x in [0, 1) with at most M fraction bits (M = the format's
``mbits``; int8: 6) -- a subnormal (and an int8 value) is normalised first, its leading one found
exactly.  Each built-in approximates only the magnitude ``(1 + x)(1 + y) * 2^(Ea + Eb)``; the sign
is sa XOR sb.  Special pairs, the same for every built-in: where an operand is zero, infinite
(e5m2) or NaN the entry is the IEEE product of the decoded values -- 0 * finite = +-0 (sign XOR),
inf * nonzero = +-inf, 0 * inf = NaN, NaN * anything = NaN.  Every NaN entry is stored as the
quiet NaN 0x7fc00000.  Products are not rounded to any element format: the table holds the
unit's value in float32, and every built-in's value is exact in float32 (checked when built:
at most 2M + 2 significant bits, exponents within 2^-32 .. 2^32 for these formats).

    exact        (1 + x)(1 + y) * 2^(Ea+Eb)                      the IEEE product, exact in float32
    mitchell     x + y < 1:  (1 + x + y) * 2^(Ea+Eb)             J. N. Mitchell, "Computer multiplication
                 x + y >= 1: 2 (x + y) * 2^(Ea+Eb)               and division using binary logarithms",
                                                                 IRE Trans. Electronic Computers, 1962:
                 log2(1 + x) ~ x both ways; the antilog's carry into the exponent is the second line
    lmul         (1 + x + y + 2^-l(m)) * 2^(Ea+Eb)               H. Luo, W. Sun, "Addition is All You
                 l(m) = m (m <= 3), 3 (m = 4), 4 (m > 4)         Need for Energy-efficient Language
                 m = max(Ma, Mb): e4m3 3 -> 2^-3, e5m2 2 ->      Models", arXiv:2410.00907, 2024, eq. (3)
                 2^-2, e2m3 3, e3m2 2, e2m1 1 -> 2^-1, int8 6 -> 2^-4; e4m3 x e5m2 and e3m2 x e2m3: 2^-3.
                 The significand 1 + x + y + 2^-l lies in [1, 3 + 2^-l): it is not renormalised
                 (the paper's equation; its integer-adder realisation carries into the exponent,
                 which gives 2 (x + y + 2^-l) instead once x + y + 2^-l >= 1).  No exponent overflow
                 or underflow: Ea + Eb is kept exactly (float32 holds every result here).
    truncated k  P = (1 + x)(1 + y) exact, normalised to [1, 2) (P >= 2: P / 2, exponent + 1), its
                 fraction cut after k bits (toward zero: the leading one and the k bits below it
                 kept, the rest dropped); k >= Ma + Mb + 1 is exact

Zeros never reach the approximation (a hardware zero-detect); NaN/inf as above.

Circuits (``from_verilog``, ``from_c``) take the operand CODES (the first Verilog input or C
parameter is a: the table's row) and give the bit pattern of a declared output format ``out``:
"fp32", "bf16", "fp16" (IEEE binary16) or an element format ("e4m3", "e5m2", ...), decoded to
float32.  Verilog: the inputs must be exactly a.bits and b.bits wide and the output exactly out's
width.  C: the parameters are C integers (8 bits or more, so any code fits; passed as the
unsigned code), the return an integer type at least out's width -- a narrower one is a ValueError,
a wider one must hold zeros above the pattern (checked on every pair); a signed return exactly as
wide is read as its bits.  A float C return is refused by the signature check: return the bits
(``memcpy`` into a uint32_t).

Tables (``from_table``, ``from_function``, circuits): entries of a NaN operand are not checked
(anything goes); every pair of finite operands must give a finite product unless the unit
declares ``allow_nonfinite=True`` (an e4m3-output circuit overflows to NaN by design) -- else a
ValueError naming the first such entry (both codes and values).

Metrics (``fp_metrics``; ``lutcore.units.metrics`` holds the formulas): against the exact
product e, err = p - e, rel = err / e (> 0: |p| > |e|), over the pairs of finite nonzero operands
(so e is finite and nonzero) -- optionally weighted by independent operand distributions
w_a[code_a] * w_b[code_b] (renormalised over those pairs): mred = mean |rel|, max_red = max |rel|, bias = mean
rel, msre = mean rel^2, error_rate = share with p != e, max_abs_err = max |err|; and EvoApproxLib's
integer-style metrics on the product values over all pairs of finite operands, unweighted (zeros
included; mre and wcre over e != 0): mae, wce, ep_pct, mre_pct, wcre_pct, mse.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import os

import numpy as np

from lutcore.units.fp import MX_ELEMENTS, FloatFormat, element_arg, fp_format

__all__ = ["FPUnit", "fp_metrics", "fp_report", "lmul_l", "OPERAND_FORMATS", "OUT_FORMATS"]

OPERAND_FORMATS = MX_ELEMENTS
OUT_FORMATS = ("fp32", "bf16", "fp16")           # and any element format name
_OUT_ALIASES = {"fp32": "fp32", "float32": "fp32", "f32": "fp32", "bf16": "bf16", "bfloat16": "bf16",
                "fp16": "fp16", "float16": "fp16", "f16": "fp16", "half": "fp16"}
PRODUCTS_FILE, UNIT_FILE = "fp_products.bin", "fpunit.json"
_UNIT_FORMAT = "lutcore-fpunit/1"
_QNAN = np.uint32(0x7FC00000)


# ---------------------------------------------------------------------- arguments
def _operand(fmt, name: str) -> FloatFormat:
    """An operand element format (a name or FloatFormat), else TypeError/ValueError naming ``name``."""
    return element_arg(fmt, name, "an element format", "the MX scale: its products leave float32's range")


def _name_arg(name, default: str) -> str:
    if name is None:
        return default
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str or None, got {type(name).__name__}")
    return name


def lmul_l(m: int) -> int:
    """L-Mul's offset exponent l(m) for m mantissa bits (Luo & Sun 2024, eq. (3)): m for m <= 3,
    3 for m = 4, 4 for m > 4; the offset added to the significand sum is 2^-l(m)."""
    m = int(m)
    return m if m <= 3 else (3 if m == 4 else 4)


def _out_format(out):
    """-> (canonical name, bits, decode: int64 patterns -> float32) of a circuit's output format."""
    if isinstance(out, FloatFormat):
        f = out
    elif isinstance(out, str):
        key = out.strip().lower().replace("-", "_")
        if key in _OUT_ALIASES:
            name = _OUT_ALIASES[key]
            if name == "fp32":
                return name, 32, lambda r: (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
            if name == "bf16":
                return name, 16, lambda r: ((r & 0xFFFF) << 16).astype(np.uint32).view(np.float32)
            return name, 16, lambda r: (r & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
        try:
            f = fp_format(out)
        except ValueError:
            f = None
        if f is None:
            raise ValueError(f"out: expected one of {', '.join(OUT_FORMATS)} or an element format name (e4m3, e5m2, "
                             f"e3m2, e2m3, e2m1, e8m0, int8), got {out!r}")
    else:
        raise TypeError(f"out: expected a format name such as 'fp32', 'bf16', 'fp16' or 'e4m3', got "
                        f"{type(out).__name__}")
    return f.name, f.bits, lambda r: f.decode((r & ((1 << f.bits) - 1)).astype(np.uint8))


# ---------------------------------------------------------------------- the grid
def _canonical(p: np.ndarray) -> np.ndarray:
    """float32 ``p`` with every NaN as 0x7fc00000 (a copy)."""
    p = np.array(p, dtype=np.float32, copy=True)
    p.view(np.uint32)[np.isnan(p)] = _QNAN
    return p


def _operands(f: FloatFormat):
    """Every code's decoded value and its parts: (v float64 (n,), normal bool (n,): finite and
    nonzero, S int64 (n,): the significand 2^M (1 + x) in [2^M, 2^(M+1)), E int64 (n,): the
    exponent), v = S * 2^(E - M) where normal."""
    v = f.values().astype(np.float64)                                    # (n,)
    normal = np.isfinite(v) & (v != 0)
    frac, e = np.frexp(np.where(normal, np.abs(v), 1.0))                  # |v| = frac 2^e, frac in [0.5, 1)
    S = np.ldexp(frac, f.mbits + 1)                                      # 2^M (1 + x)
    if not np.array_equal(S, np.floor(S)):                               # M fraction bits hold every value
        raise AssertionError(f"{f.name}: a value with more than {f.mbits} fraction bits")
    return v, normal, S.astype(np.int64), (e - 1).astype(np.int64)


def _grid(a: FloatFormat, b: FloatFormat):
    """The pair grid: (va (na,1), vb (1,nb), normal (na,nb): both finite nonzero,
    (Sa, Ea) (na,1), (Sb, Eb) (1,nb), neg (na,nb): the product's sign)."""
    va, na_, Sa, Ea = _operands(a)
    vb, nb_, Sb, Eb = _operands(b)
    normal = na_[:, None] & nb_[None, :]                                 # (na, nb)
    neg = np.signbit(va)[:, None] ^ np.signbit(vb)[None, :]              # (na, nb)
    return va[:, None], vb[None, :], normal, (Sa[:, None], Ea[:, None]), (Sb[None, :], Eb[None, :]), neg


def _assemble(a, b, mag_int, exp, what: str, *, exact: bool = True) -> np.ndarray:
    """The table: on normal pairs +-mag_int * 2^exp (float64, exact), elsewhere the IEEE product;
    rounded to float32 (``exact``: checked to be exact), NaNs canonical."""
    va, vb, normal, _, _, neg = _grid(a, b)
    with np.errstate(invalid="ignore"):
        ieee = va * vb                                                   # (na, nb) float64: +-0, +-inf, NaN
    mag = np.ldexp(np.where(normal, mag_int, 0).astype(np.float64), np.where(normal, exp, 0))
    p64 = np.where(normal, np.where(neg, -mag, mag), ieee)               # (na, nb)
    p32 = p64.astype(np.float32)
    if exact:
        back = p32.astype(np.float64)
        same = (back == p64) | (np.isnan(back) & np.isnan(p64))
        same &= np.signbit(back) == np.signbit(p64)
        if not same.all():
            i, j = (int(t[0]) for t in np.nonzero(~same))
            raise AssertionError(f"{what}: the product of a={a.name}:{i:#x}, b={b.name}:{j:#x} is {p64[i, j]!r}, "
                                 f"not exact in float32")
    return _canonical(p32)


# ---------------------------------------------------------------------- the unit
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FPUnit:
    """A floating-point multiplier of element formats ``a`` x ``b`` as its table of products (the
    module's docstring: shapes, NaN/inf rules, each built-in's formula).  Build one with
    ``exact``, ``mitchell``, ``lmul``, ``truncated``, ``from_function``, ``from_table``,
    ``from_verilog``, ``from_c`` or ``load``; ``FPUnit(a, b, products, ...)`` is ``from_table``."""
    a: FloatFormat
    b: FloatFormat
    products: np.ndarray        # float32 (2^a.bits, 2^b.bits), read-only: [code_a, code_b]
    name: str = "custom"
    source: str = ""            # where the table came from (a built-in's formula, a circuit, a file)
    allow_nonfinite: bool = False   # finite x finite may give inf/NaN (declared)
    digest: str = dataclasses.field(init=False)

    def __post_init__(self):
        a, b = _operand(self.a, "a"), _operand(self.b, "b")
        if not isinstance(self.name, str):
            raise TypeError(f"name: expected a str, got {type(self.name).__name__}")
        if not isinstance(self.source, str):
            raise TypeError(f"source: expected a str, got {type(self.source).__name__}")
        if not isinstance(self.allow_nonfinite, (bool, np.bool_)):
            raise TypeError(f"allow_nonfinite: expected a bool, got {type(self.allow_nonfinite).__name__}")
        p = _checked_table(self.products, a, b, bool(self.allow_nonfinite))
        p.setflags(write=False)
        h = hashlib.sha256(f"lutcore-fpunit:{a.name} x {b.name}\n".encode())
        h.update(p.astype("<f4").tobytes())
        for k, v in (("a", a), ("b", b), ("products", p), ("allow_nonfinite", bool(self.allow_nonfinite)),
                     ("digest", h.hexdigest())):
            object.__setattr__(self, k, v)

    # ------------------------------------------------------------------ built-ins
    @classmethod
    def exact(cls, a, b) -> "FPUnit":
        """The exact (IEEE) product of the decoded operands: every product of these formats is
        exact in float32 (checked)."""
        a, b = _operand(a, "a"), _operand(b, "b")
        va, vb, _, (Sa, Ea), (Sb, Eb), _ = _grid(a, b)
        p = _assemble(a, b, Sa * Sb, Ea + Eb - a.mbits - b.mbits, "exact")     # checked exact in float32
        with np.errstate(invalid="ignore"):
            if not np.array_equal(p.astype(np.float64), va * vb, equal_nan=True):
                raise AssertionError("exact: the significand product disagrees with the float64 product")
        return cls(a, b, p, "exact", f"exact: the IEEE product of the decoded {a.name} x {b.name} values")

    @classmethod
    def mitchell(cls, a, b) -> "FPUnit":
        """Mitchell's logarithmic multiplier (1962) on the significands: log2(1 + x) ~ x, so
        (1 + x)(1 + y) ~ 1 + x + y when x + y < 1, and 2 (x + y) (the antilog after the carry into
        the exponent) when x + y >= 1; exponents add exactly.  Never above the exact product;
        at most 11.1 % below (x = y = 1/2).  Zeros, inf, NaN: the module's docstring."""
        a, b = _operand(a, "a"), _operand(b, "b")
        _, _, _, (Sa, Ea), (Sb, Eb), _ = _grid(a, b)
        F = max(a.mbits, b.mbits)                                        # x, y in units of 2^-F
        x, y = (Sa << (F - a.mbits)) - (1 << F), (Sb << (F - b.mbits)) - (1 << F)
        s = x + y                                                        # (na, nb)
        mag = np.where(s < (1 << F), (1 << F) + s, 2 * s)
        p = _assemble(a, b, mag, Ea + Eb - F, "mitchell")
        return cls(a, b, p, "mitchell", f"mitchell: Mitchell (1962) on the significands of {a.name} x {b.name}: "
                                        f"1+x+y (x+y<1), 2(x+y) (x+y>=1), exponents added")

    @classmethod
    def lmul(cls, a, b, offset=None) -> "FPUnit":
        """L-Mul (Luo & Sun 2024, arXiv:2410.00907, eq. (3)): (1 + x)(1 + y) ~ 1 + x + y + 2^-l(m),
        l(m) = m (m <= 3), 3 (m = 4), 4 (m > 4), m = max(a.mbits, b.mbits) (``lmul_l``); the
        exponents add exactly and the significand sum is not renormalised (the module's docstring).
        ``offset``: the added term instead of 2^-l(m), a number in [0, 2) that is a multiple of
        2^-24 (e.g. 0, 2**-5); the result is then rounded once to float32 (nearest, ties to even:
        exact unless the significand needs more than 24 bits)."""
        a, b = _operand(a, "a"), _operand(b, "b")
        F = max(a.mbits, b.mbits)
        if offset is None:
            G, off, label = F, 1 << (F - lmul_l(F)), f"2^-{lmul_l(F)}"
        else:
            if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, numbers.Real):
                raise TypeError(f"offset: expected a number (the term added to 1 + x + y), got {type(offset).__name__}")
            o = float(offset)
            if not (math.isfinite(o) and 0 <= o < 2 and (o * 2.0 ** 24).is_integer()):
                raise ValueError(f"offset: expected a multiple of 2^-24 in [0, 2) (e.g. 0.125 = 2^-3), got {offset!r}")
            G, off, label = 24, int(o * 2.0 ** 24), f"{o:g}"
        _, _, _, (Sa, Ea), (Sb, Eb), _ = _grid(a, b)
        x, y = (Sa << (G - a.mbits)) - (1 << G), (Sb << (G - b.mbits)) - (1 << G)      # units of 2^-G
        mag = (1 << G) + x + y + off
        name = "lmul" if offset is None else f"lmul:{label}"
        p = _assemble(a, b, mag, Ea + Eb - G, name, exact=offset is None)
        return cls(a, b, p, name, f"lmul: L-Mul (Luo & Sun 2024) on {a.name} x {b.name}: 1+x+y+{label} "
                                  f"(m = {F}), exponents added")

    @classmethod
    def truncated(cls, a, b, k: int) -> "FPUnit":
        """The exact significand product (1 + x)(1 + y), normalised to [1, 2), truncated to ``k``
        fraction bits (round toward zero: the leading one and the k bits below it kept);
        k >= a.mbits + b.mbits + 1 is exact.  ``k``: an int in 0..23."""
        a, b = _operand(a, "a"), _operand(b, "b")
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) <= 23:
            raise ValueError(f"k: expected the fraction bits kept, an int in 0..23, got {k!r}")
        k = int(k)
        _, _, _, (Sa, Ea), (Sb, Eb), _ = _grid(a, b)
        M = a.mbits + b.mbits
        P = Sa * Sb                                                      # (na, nb) in [2^M, 2^(M+2))
        lead = M + (P >= (1 << (M + 1)))                                 # the leading one's position
        drop = np.maximum(lead - k, 0)
        p = _assemble(a, b, (P >> drop) << drop, Ea + Eb - M, f"truncated:{k}")
        return cls(a, b, p, f"truncated:{k}", f"truncated: the exact {a.name} x {b.name} significand product "
                                               f"normalised to [1, 2), cut to {k} fraction bits (toward zero)")

    # ------------------------------------------------------------------ user tables
    @classmethod
    def from_function(cls, a, b, fn, name: str | None = None, *, allow_nonfinite: bool = False) -> "FPUnit":
        """``fn(x, y)`` called once on the whole grid: x, y float32 (2^a.bits, 2^b.bits) holding
        every pair of decoded operands (x[i, j] = a's code i, y[i, j] = b's code j; NaN codes NaN,
        e5m2's inf inf; called with numpy's invalid and overflow warnings off); it returns the
        products, an array of that shape of real numbers, rounded to float32 (nearest) -- checked
        as ``from_table``'s."""
        a, b = _operand(a, "a"), _operand(b, "b")
        if not callable(fn):
            raise TypeError(f"fn: expected a function fn(x, y) of two float32 arrays, got {type(fn).__name__}")
        shape = (1 << a.bits, 1 << b.bits)
        x = np.ascontiguousarray(np.broadcast_to(a.values()[:, None], shape))
        y = np.ascontiguousarray(np.broadcast_to(b.values()[None, :], shape))
        with np.errstate(invalid="ignore", over="ignore"):      # the grid holds NaN (and inf) operands
            out = np.asarray(fn(x, y))
        if out.shape != shape:
            raise ValueError(f"fn: must return a {shape} array for {shape} inputs ({a.name} x {b.name}), got shape "
                             f"{out.shape}")
        if out.dtype.kind not in "fiu":
            raise TypeError(f"fn: must return real numbers, got dtype {out.dtype}")
        with np.errstate(over="ignore"):
            p = out.astype(np.float32)
        name = _name_arg(name, getattr(fn, "__name__", "function"))
        try:
            return cls(a, b, p, name, f"from_function: {getattr(fn, '__qualname__', repr(fn))}", allow_nonfinite)
        except ValueError as e:
            raise ValueError(f"fn: {str(e).removeprefix('table: ')}") from None

    @classmethod
    def from_table(cls, a, b, table, name: str | None = None, *, allow_nonfinite: bool = False) -> "FPUnit":
        """A float32 table of shape (2^a.bits, 2^b.bits), entry [code_a, code_b] (the module's
        docstring: NaN-operand entries unchecked; finite x finite finite unless
        ``allow_nonfinite``).  Copied; NaNs stored as 0x7fc00000."""
        return cls(_operand(a, "a"), _operand(b, "b"), table, _name_arg(name, "custom"), "from_table",
                   allow_nonfinite)

    # ------------------------------------------------------------------ circuits
    @classmethod
    def from_verilog(cls, path, a, b, out="fp32", top: str | None = None, *, timeout: float = 120,
                     allow_nonfinite: bool = False, progress: bool = True) -> "FPUnit":
        """A combinational Verilog multiplier, mapped to gates by Yosys (``lutcore.units.hdl``:
        its flow, time limit and port rules) and evaluated on every pair of codes: inputs a
        (a.bits wide, the first declared) and b (b.bits), one output of ``out``'s width holding
        the product's bit pattern in ``out`` ("fp32", "bf16", "fp16" or an element format)."""
        from lutcore.units import hdl
        a, b = _operand(a, "a"), _operand(b, "b")
        oname, obits, decode = _out_format(out)
        path = hdl._check_file(path, (".v", ".sv"), "Verilog")
        timeout = hdl._timeout_arg(timeout)
        top = hdl.top_arg(top)
        mod, module, _ = hdl._synthesise(path, top, progress=progress, timeout=timeout)
        try:
            raw, info = hdl.eval_netlist(module, path)
        except hdl.WideCircuit as w:
            raise ValueError(f"{path}: module {mod}: inputs of {w.a_bits} and {w.b_bits} bits, but {a.name} x "
                             f"{b.name} codes have {a.bits} and {b.bits}") from None
        got = (info["a_bits"], info["b_bits"], info["width"])
        if got != (a.bits, b.bits, obits):
            raise ValueError(f"{path}: module {mod}: inputs {info['a']} ({got[0]} bits), {info['b']} ({got[1]} bits) "
                             f"and output {info['out']} ({got[2]} bits), but a={a.name}, b={b.name} and out={oname} "
                             f"need {a.bits}, {b.bits} and {obits} bits")
        p = decode(raw).reshape(1 << a.bits, 1 << b.bits)
        src = (f"{os.path.basename(path)}: module {mod}, inputs {info['a']} (a, {a.name} codes) and {info['b']} "
               f"(b, {b.name}), output {info['out']} ({oname} bits), through Yosys")
        return cls._circuit(a, b, p, mod, src, allow_nonfinite, path)

    @classmethod
    def from_c(cls, path, a, b, out="fp32", function: str | None = None, *, timeout: float = 60,
               allow_nonfinite: bool = False) -> "FPUnit":
        """A C model ``function(code_a, code_b)`` returning the product's bit pattern in ``out``
        as an integer (``uint32_t f(uint8_t a, uint8_t b)`` for fp32), compiled and tabulated in a
        child process under lutcore's keeper (``lutcore.units.hdl.from_c``: limits, errors; user
        code never runs here).  The return type must be at least out's width; bits above it must
        be zero."""
        from lutcore.units import hdl
        a, b = _operand(a, "a"), _operand(b, "b")
        oname, obits, decode = _out_format(out)
        path, source, function, declared, timeout = hdl.c_function(path, function, timeout)
        raw, bits, signed, cc = hdl.c_tabulate(path, source, function, declared, a.bits, b.bits, False, False,
                                               timeout)
        if bits < obits:
            raise ValueError(f"{path}: function {function} returns a {bits}-bit integer, but out={oname} is a "
                             f"{obits}-bit pattern: return it in an integer type of at least {obits} bits")
        if bits > obits:
            hi = raw >> obits
            bad = np.flatnonzero(hi != 0)
            if bad.size:
                i = int(bad[0])
                ca, cb = i >> b.bits, i & ((1 << b.bits) - 1)
                raise ValueError(f"{path}: function {function} returns {int(raw[i]):#x} for a={ca:#x}, b={cb:#x}: "
                                 f"bits above the {obits}-bit {oname} pattern are set ({bad.size} pairs); out={oname} "
                                 f"must be the whole result")
        p = decode(raw).reshape(1 << a.bits, 1 << b.bits)
        src = (f"{os.path.basename(path)}: function {function}, compiled with {os.path.basename(cc[0])}, a {bits}-bit "
               f"{'signed' if signed else 'unsigned'} return read as {oname} bits; operands {a.name} x {b.name} codes")
        return cls._circuit(a, b, p, function, src, allow_nonfinite, path)

    @classmethod
    def _circuit(cls, a, b, p, name, source, allow_nonfinite, path):
        try:
            return cls(a, b, p, name, source, allow_nonfinite)
        except ValueError as e:
            raise ValueError(f"{path}: {str(e).removeprefix('table: ')}") from None

    # ------------------------------------------------------------------ files
    def save(self, path) -> None:
        """Write ``fp_products.bin`` (float32 little-endian, 2^a.bits * 2^b.bits, row-major) and
        ``fpunit.json`` (formats, shape, name, source, digest) into directory ``path`` (created if
        needed), crash-safe as every lutcore save (``lutcore._io.atomic_dir``)."""
        from lutcore._io import atomic_dir
        with atomic_dir(path, owned=(PRODUCTS_FILE, UNIT_FILE), last=(UNIT_FILE,)) as tmp:
            self.write_files(tmp)

    def write_files(self, d) -> None:
        """Write ``save``'s two files into directory ``d`` as they are (a save's temporary directory)."""
        meta = {"format": _UNIT_FORMAT, "a": self.a.name, "b": self.b.name, "shape": list(self.products.shape),
                "dtype": "<f4", "name": self.name, "source": self.source,
                "allow_nonfinite": self.allow_nonfinite, "digest": self.digest}
        with open(os.path.join(d, PRODUCTS_FILE), "wb") as f:
            f.write(self.products.astype("<f4").tobytes())
        with open(os.path.join(d, UNIT_FILE), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)

    @classmethod
    def load(cls, path, a=None, b=None) -> "FPUnit":
        """Read a unit ``save`` wrote.  Checked: fpunit.json names known operand formats (and
        ``a`` / ``b`` when given: a unit is never read with other formats than the caller
        expects), the table has exactly 4 * 2^a.bits * 2^b.bits bytes and hashes to the digest
        recorded; anything else is a ValueError naming the file."""
        from lutcore._io import contained, path_arg, saved_dir
        from lutcore.units import _read_json
        path = path_arg(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"path: no such FP unit directory: {path!r}")
        want = tuple(None if f is None else _operand(f, n) for f, n in ((a, "a"), (b, "b")))
        src = saved_dir(path)
        jf, bf = contained(src, UNIT_FILE), contained(src, PRODUCTS_FILE)
        meta = _read_json(jf, "the FP unit's description")
        keys = ("a", "b", "shape", "name", "digest")
        if not isinstance(meta, dict) or meta.get("format") != _UNIT_FORMAT or any(k not in meta for k in keys):
            raise ValueError(f"{jf}: expected {{\"format\": \"{_UNIT_FORMAT}\", \"a\": \"e4m3\", \"b\": \"e4m3\", "
                             f"\"shape\": [256, 256], \"name\", \"digest\", ...}}, got {meta!r}"[:400])
        try:
            fa, fb = _operand(meta["a"], "a"), _operand(meta["b"], "b")
        except (TypeError, ValueError) as e:
            raise ValueError(f"{jf}: {e}") from None
        for f, w, n in ((fa, want[0], "a"), (fb, want[1], "b")):
            if w is not None and f != w:
                raise ValueError(f"{jf}: a unit of {fa.name} x {fb.name}, but {n}={w.name} was asked for")
        shape = (1 << fa.bits, 1 << fb.bits)
        if meta["shape"] != list(shape) or meta.get("dtype", "<f4") != "<f4":
            raise ValueError(f"{jf}: shape {meta['shape']} dtype {meta.get('dtype')!r}, but a {fa.name} x {fb.name} "
                             f"unit's table is {list(shape)} '<f4'")
        if not os.path.isfile(bf):
            kind = "a dangling or looping symlink" if os.path.islink(bf) else "missing or not a regular file"
            raise ValueError(f"{bf}: cannot read the products: {kind}")
        nbytes = 4 * shape[0] * shape[1]
        with open(bf, "rb") as fh:
            raw = fh.read(nbytes + 1)
        if len(raw) != nbytes:
            raise ValueError(f"{bf}: expected {nbytes} bytes ({shape[0]} x {shape[1]} float32, {fa.name} x {fb.name}), "
                             f"got {len(raw)}{'+' if len(raw) > nbytes else ''}")
        table = np.frombuffer(raw, "<f4").astype(np.float32).reshape(shape)
        name, source = meta["name"], meta.get("source", "")
        if not isinstance(name, str) or not isinstance(source, str):
            raise ValueError(f"{jf}: name and source must be strings, got {name!r}, {source!r}"[:300])
        try:
            u = cls(fa, fb, table, name, source, bool(meta.get("allow_nonfinite", False)))
        except ValueError as e:
            raise ValueError(f"{bf}: {e}") from None
        if u.digest != meta["digest"]:
            raise ValueError(f"{bf}: the table hashes to {u.digest[:16]}, but {UNIT_FILE} records "
                             f"{str(meta['digest'])[:16]} (a corrupted or replaced file)")
        return u

    # ------------------------------------------------------------------ inspection
    @property
    def is_exact(self) -> bool:
        """Whether every entry has the exact product's bits."""
        return self.digest == FPUnit.exact(self.a, self.b).digest

    def metrics(self, weights_a=None, weights_b=None) -> dict:
        """``fp_metrics(self, weights_a, weights_b)``."""
        return fp_metrics(self, weights_a, weights_b)

    def report(self, weights_a=None, weights_b=None) -> str:
        """``fp_report([self], ...)``: the metrics as a small table."""
        return fp_report([self], weights_a, weights_b)

    def __eq__(self, other) -> bool:
        return isinstance(other, FPUnit) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"FPUnit(name={self.name!r}, {self.a.name} x {self.b.name}, digest={self.digest[:16]})"


def table_arg(table, name: str, shape: tuple, unit: str, cells: str) -> None:
    """``table`` is a float32 ndarray of ``shape``, else a TypeError/ValueError naming ``name``, the
    expected (``unit``: "an e4m3 x e4m3"; ``cells``: what its axes index) and the received."""
    if not isinstance(table, np.ndarray):
        raise TypeError(f"{name}: expected a float32 numpy array of shape {shape}, got {type(table).__name__}")
    if table.dtype != np.float32:
        raise TypeError(f"{name}: expected float32 products ({unit} table), got dtype {table.dtype} "
                        f"(convert with .astype(np.float32) if that rounding is meant)")
    if table.shape != shape:
        raise ValueError(f"{name}: {unit} unit's table has shape {shape} ({cells}), got {table.shape}")


def _checked_table(table, a: FloatFormat, b: FloatFormat, allow_nonfinite: bool) -> np.ndarray:
    """``table`` as a canonical float32 copy of shape (2^a.bits, 2^b.bits), or TypeError/ValueError
    naming it (``table``): wrong type, dtype or shape; a non-finite product of finite operands."""
    table_arg(table, "table", (1 << a.bits, 1 << b.bits), f"an {a.name} x {b.name}", f"2^{a.bits} x 2^{b.bits} codes")
    p = _canonical(table)
    if not allow_nonfinite:
        va, vb = a.values(), b.values()
        finite = np.isfinite(va)[:, None] & np.isfinite(vb)[None, :]
        bad = finite & ~np.isfinite(p)
        if bad.any():
            i, j = (int(t[0]) for t in np.nonzero(bad))
            raise ValueError(f"table: the product of a={i:#x} ({a.name} {float(va[i])!r}) and b={j:#x} ({b.name} "
                             f"{float(vb[j])!r}) is {float(p[i, j])!r}, but finite operands need a finite product "
                             f"({int(bad.sum())} such entries; declare allow_nonfinite=True for a unit that "
                             f"overflows by design)")
    return p


# ---------------------------------------------------------------------- metrics
def _weights(w, f: FloatFormat, name: str):
    if w is None:
        return None
    arr = np.asarray(w)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name}: expected real weights, one per {f.name} code, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.shape != (1 << f.bits,):
        raise ValueError(f"{name}: expected one weight per {f.name} code, shape ({1 << f.bits},), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(f"{name}: expected finite weights >= 0")
    v = f.values()
    if not (arr * (np.isfinite(v) & (v != 0))).sum() > 0:
        raise ValueError(f"{name}: the weights of the finite nonzero {f.name} codes sum to 0")
    return arr


def fp_metrics(unit: FPUnit, weights_a=None, weights_b=None) -> dict:
    """{metric: float} of ``unit`` against the exact product (the module's docstring): mred,
    max_red, bias, msre, error_rate, max_abs_err over the pairs of finite nonzero operands
    ("pairs": how many), weighted by ``weights_a[code_a] * weights_b[code_b]`` when given (each
    (2^bits,) >= 0; None: uniform); EvoApproxLib's mae, wce, ep_pct, mre_pct, wcre_pct, mse over
    all pairs of finite operands ("pairs_all"), unweighted."""
    from lutcore.units.metrics import relative_metrics, value_metrics
    if not isinstance(unit, FPUnit):
        raise TypeError(f"unit: expected an FPUnit, got {type(unit).__name__}")
    a, b = unit.a, unit.b
    wa, wb = _weights(weights_a, a, "weights_a"), _weights(weights_b, b, "weights_b")
    va, vb = a.values().astype(np.float64), b.values().astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = va[:, None] * vb[None, :]                                    # (na, nb) exact in float64
    p = unit.products.astype(np.float64)                                 # (na, nb)
    finite = np.isfinite(va)[:, None] & np.isfinite(vb)[None, :]
    nz = finite & (e != 0)
    w = None
    if wa is not None or wb is not None:
        w = (np.ones_like(va) if wa is None else wa)[:, None] * (np.ones_like(vb) if wb is None else wb)[None, :]
        w = w[nz]
    out = relative_metrics(p[nz], e[nz], w)
    out["pairs"] = float(np.count_nonzero(nz))
    out.update(value_metrics(p[finite], e[finite]))
    out["pairs_all"] = float(np.count_nonzero(finite))
    return out


_REPORT_ROWS = (("mred", "mean |rel err|"), ("max_red", "max |rel err|"), ("bias", "mean rel err"),
                ("msre", "mean rel err^2"), ("error_rate", "share p != exact"), ("max_abs_err", "max |err|"),
                ("mae", "EvoApprox MAE"), ("wce", "EvoApprox WCE"), ("ep_pct", "EvoApprox EP %"),
                ("mre_pct", "EvoApprox MRED %"), ("mse", "EvoApprox MSE"))


def fp_report(units, weights_a=None, weights_b=None) -> str:
    """A table comparing ``units`` (FPUnits of one pair of formats), a column each: the
    metrics of ``fp_metrics`` with the same weights."""
    if isinstance(units, FPUnit):
        units = [units]
    units = list(units)
    if not units or not all(isinstance(u, FPUnit) for u in units):
        raise TypeError("units: expected one FPUnit or a non-empty list of them")
    a, b = units[0].a, units[0].b
    if any((u.a, u.b) != (a, b) for u in units):
        raise ValueError(f"units: expected units of one pair of formats, got "
                         f"{', '.join(f'{u.name} ({u.a.name} x {u.b.name})' for u in units)}")
    ms = [fp_metrics(u, weights_a, weights_b) for u in units]
    rows = [("metric", "") + tuple(u.name for u in units)]
    rows += [(k, what) + tuple(f"{m[k]:.4g}" for m in ms) for k, what in _REPORT_ROWS]
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    weighted = "weighted by the operand distributions given" if weights_a is not None or weights_b is not None \
        else "uniform over codes"
    lines = [f"FP multipliers {a.name} x {b.name}: relative errors over the {int(ms[0]['pairs']):,} pairs of finite "
             f"nonzero operands ({weighted}); EvoApproxLib's over all {int(ms[0]['pairs_all']):,} pairs of finite "
             f"operands"]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(width[j]) if j < 2 else c.rjust(width[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * x for x in width))
    for u in units:
        lines.append(f"{u.name}: {u.digest[:16]}  {u.source}")
    return "\n".join(lines)
