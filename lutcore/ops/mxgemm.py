"""The MX GEMM: block-scaled FP8/FP6/FP4/INT8 operands (``lutcore.mx.MX``) through ANY product
table, with a declared accumulation (docs/DESIGN.md, "MX GEMM"; csrc/mxgemm/mxgemm.h).

    a         MX of an (M, K) array, quantized along its last axis (codes (M, Kp), scales (M, nblk))
    b         MX of a (K, N) array, quantized along axis 0       (codes (Kp, N), scales (nblk, N))
    products  float32 (2^bits_a, 2^bits_b): T[ca, cb] = the unit's product of the decoded codes;
              or an MXProducts (prepared once), or an object with .products, .a, .b (FloatFormats)
    -> Y      float32 (M, N)

* ``accumulate="exact"``: per block b the exact sum S_b of its products; y = 0; for b ascending
  y = fl32(y + fl32(fl32(S_b) * 2^(xa + xb))) (xa, xb the blocks' E8M0 exponents): fl32(S_b)
  rounds the exact sum once, nearest even; the scaling is a correctly rounded ldexp (subnormals
  nearest even, overflow inf).  A NaN scale (0xFF), a NaN or an infinite product give NaN/inf
  per IEEE.
* ``accumulate=Narrow(mbits, promote=None, rounding="nearest")``: a register of mbits + 1
  significant bits with float32's exponent range, as an FP8 tensor core's (DeepSeek-V3: about
  14 bits kept, partial sums promoted to FP32 every 128 products): acc = 0, y = 0; for k = 0 ..
  K-1: p = T[A[m,k], B[k,n]] * 2^(xa + xb) exactly (a power-of-two scaling; p may lie beyond
  float32's range: only the register's rounding brings it in); acc = round(acc + p), the exact
  sum rounded once — to nearest even, or toward zero ("truncate"); a result beyond (2 - 2^-mbits)
  * 2^127 overflows to +-inf (nearest) or stays at that maximum (truncate); below 2^-126 the
  register's quantum stays 2^(-126 - mbits) (its subnormals); if (k + 1) % promote == 0 or k ==
  K - 1: y = fl32(y + acc), acc = 0 (promote None: only at the end).

K is the operands' own length: the zero padding of the last block (codes 0, decoding to 0) adds
nothing — its products are not formed at all, so a table whose T[0, 0] is not 0 changes nothing
there either, and running k over the padded Kp gives the same y.  Every NaN output is the
canonical quiet NaN 0x7fc00000; zeros are +0.  The same bits at any thread count and on every SIMD
body.

How the exact sums are exact (MXProducts, checked once per table and block size): every finite
entry is a multiple of 2^e0 (its lowest set bit); if block * max|T| <= 2^(53 + e0), float64
additions of the products are exact ("one part"); else each product is split at a fixed 2^c
into hi + lo with both parts' block sums exact in float64 ("two parts"), fl32(hi + lo) by
TwoSum rounded to odd.  The exact table of the decoded values (np.multiply.outer of the two
formats' values) with one part takes the FMA route: decoded values, float64 FMA, no lookups
(e4m3, e2m3, e3m2, e2m1, int8 and their mixes with one part; e5m2's exact products span 2^-32
.. 2^31.6 and take two parts).  A table with a non-finite entry for finite operands is a
ValueError naming the entry; a table whose finite entries span too many bits for two parts is a
ValueError saying so — never a wrong sum.

Design: the room of the ``mxgemm`` family: everything a caller can get wrong is checked here (MX
objects, axes, blocks, formats against the table's shape, the table's analysis); C trusts its
inputs.  ``MXProducts`` holds a table's forms for the kernels (made once; for a bare table
``mx_gemm`` keeps the last few, reused while the same array holds the same bits).
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from lutcore import _check, _simd, _workspace
from lutcore._native import mxgemm as _mx
from lutcore._threads import resolve_threads
from lutcore.mx import MX
from lutcore.units import fp as _fp

__all__ = ["mx_gemm", "Narrow", "MXProducts"]

ROUNDINGS = ("nearest", "truncate")


@dataclasses.dataclass(frozen=True)
class Narrow:
    """A narrow accumulator: ``mbits`` mantissa bits (precision mbits + 1, 1 <= mbits <= 23),
    float32's exponent range, ``rounding`` "nearest" (ties to even) or "truncate" (toward zero),
    partial sums promoted to float32 every ``promote`` products (None: never, only at the end)."""
    mbits: int
    promote: int | None = None
    rounding: str = "nearest"

    def __post_init__(self):
        _check.int_arg(self.mbits, "mbits", lo=1, hi=23)
        if self.promote is not None:
            _check.int_arg(self.promote, "promote", lo=1)
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"rounding: expected one of {ROUNDINGS}, got {self.rounding!r}")


def _format(f, name):
    if isinstance(f, _fp.FloatFormat):
        return f
    if isinstance(f, str):
        return _fp.fp_format(f)
    raise TypeError(f"{name}: expected a FloatFormat or a format name, got {type(f).__name__}")


def _scale_values() -> np.ndarray:
    """(256,) float64: E8M0 code s -> 2^(s - 127); 0xFF -> NaN."""
    s = np.ldexp(1.0, np.arange(256) - 127)
    s[255] = np.nan
    return s


_SCALES = _scale_values()
_SCALES.setflags(write=False)


class _Plan:
    """The forms C reads for one block size (lutcore/_native/mxgemm.pyx ``_fill``)."""
    __slots__ = ("tab", "tt", "rep", "afac", "va", "vb", "scale", "ba", "bb", "expand", "route", "nparts",
                 "rep_mask", "split", "description")


class MXProducts:
    """A product table prepared for ``mx_gemm``: checked and analysed once.

    ``products``: float32 (2^a.bits, 2^b.bits), T[ca, cb] the product of the decoded codes (any
    real dtype is converted to float32; it must be exactly float32 then).  ``a``, ``b``: the
    operands' element formats (FloatFormat or names).  A non-finite entry is allowed only where
    an operand code is a NaN or an infinity of its format (ValueError naming the first other).
    ``route(block)`` describes how a block of that size is summed exactly (ValueError when no
    route can)."""

    def __init__(self, products, a, b):
        self.a, self.b = _format(a, "a"), _format(b, "b")
        want = (1 << self.a.bits, 1 << self.b.bits)
        t = np.asarray(products)
        if t.dtype.kind not in "fiu" or t.dtype == np.bool_:
            raise TypeError(f"products: expected a float32 table, got dtype {t.dtype}")
        if t.shape != want:
            raise ValueError(f"products: a {self.a.name} x {self.b.name} product table has shape {want}, "
                             f"got {t.shape}")
        t32 = np.ascontiguousarray(t, dtype=np.float32)
        if t.dtype != np.float32:
            same = (t32.astype(t.dtype) == t) | (np.isnan(t32) & np.isnan(t.astype(np.float64)))
            if not same.all():
                i, j = np.argwhere(~same)[0]
                raise ValueError(f"products: entry [{i}, {j}] = {t[i, j].item()!r} is not a float32 value")
        self.products = t32.copy()
        self.products.setflags(write=False)
        va, vb = self.a.values(), self.b.values()
        fin = np.isfinite(va)[:, None] & np.isfinite(vb)[None, :]       # (NA, NB) finite operands
        bad = fin & ~np.isfinite(self.products)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ValueError(f"products: entry [{i}, {j}] = {self.products[i, j]} is not finite, for finite operands "
                             f"({self.a.name} code {i:#04x} = {va[i]!r}, {self.b.name} code {j:#04x} = {vb[j]!r})")
        self._analyse(va, vb)
        self._plans: dict = {}

    # ------------------------------------------------------------------ analysis
    def _analyse(self, va, vb):
        t = self.products
        u = t.view(np.uint32)
        fin = np.isfinite(t) & (t != 0)
        e = ((u >> 23) & 0xFF).astype(np.int64)
        sig = (u & 0x7FFFFF).astype(np.int64) | np.where(e > 0, 1 << 23, 0)
        low = np.where(e > 0, e - 150, -149) + _ctz(np.where(fin, sig, 1))    # exponent of the lowest set bit
        self.e0 = int(low[fin].min()) if fin.any() else 0
        self.amax = Fraction(float(np.abs(t[fin]).max())) if fin.any() else Fraction(0)
        with np.errstate(invalid="ignore", over="ignore"):
            exact = np.multiply.outer(va, vb)                                 # float32: exact products
        same = (exact == t) | (np.isnan(exact) & np.isnan(t))
        self.exact_table = bool(same.all())
        self._va, self._vb = va.astype(np.float64), vb.astype(np.float64)
        canon = np.where(np.isnan(t), np.float32(np.nan), t).astype(np.float32)     # NaN: one quiet NaN
        d = canon.astype(np.float64).view(np.uint64)
        self._hi32 = bool(((d & np.uint64(0xFFFFFFFF)) == 0).all())
        self._words = ((d >> np.uint64(32)).astype(np.uint32) if self._hi32 else canon.view(np.uint32)).copy()
        self._reduce(t, canon, self._hi32)

    def _reduce(self, t, canon, hi32):
        """The row bodies' reduction T[a] = afac[a] * T'[rep[a]] (afac a signed power of two): rows
        equal up to sign and exponent share one reduced row (FP multipliers whose product is the
        mantissas' times 2^(ea + eb)) when that leaves at most 32 rows (the bodies then build every
        row); else the sign of sign-magnitude codes, or none (rep = a & rep_mask: the bodies build
        only the 16-row groups a unit's rows use)."""
        NA = t.shape[0]
        t64 = canon.astype(np.float64)                                        # (NA, NB)
        nz = np.isfinite(t64) & (t64 != 0)
        lead = t64[np.arange(NA), nz.argmax(axis=1)]                          # (NA,) first finite nonzero
        _, ex = np.frexp(np.where(nz.any(axis=1), lead, 1.0))
        f = np.where(nz.any(axis=1), np.copysign(np.ldexp(1.0, ex - 1), lead), 1.0)   # (NA,) +-2^d
        rows = t64 / f[:, None]                                               # exact: powers of two
        keys, rep_e, reduced = {}, np.zeros(NA, np.int64), []
        for a in range(NA):
            k = rows[a].tobytes()
            if k not in keys:
                keys[k] = len(reduced)
                reduced.append(rows[a])
            rep_e[a] = keys[k]
        ok_e = hi32 or bool((rows[np.isfinite(rows)].astype(np.float32).astype(np.float64)
                             == rows[np.isfinite(rows)]).all())               # F32 words: float32 values
        sbit = 1 << (self.a.bits - 1)
        sym = self.a.kind == "float"
        if sym:
            lo, hi = t[:sbit], t[sbit:]
            with np.errstate(invalid="ignore"):
                sym = bool(((-lo == hi) | (np.isnan(lo) & np.isnan(hi))).all())
        R_m = sbit if sym else NA
        if ok_e and len(reduced) < R_m and len(reduced) <= 32:            # few rows: every group built
            self.rep_mask, self._rep, self._afac = -1, rep_e.astype(np.uint8), f
            red = np.array(reduced)
            self._rwords = ((red.view(np.uint64) >> np.uint64(32)).astype(np.uint32) if hi32
                            else red.astype(np.float32).view(np.uint32))
        else:
            self.rep_mask = R_m - 1
            self._rep = (np.arange(NA) & self.rep_mask).astype(np.uint8)
            self._afac = np.where(np.arange(NA) >= R_m, -1.0, 1.0)
            self._rwords = self._words[:R_m]
        self.reduced_rows = len(self._rwords)

    def _parts(self, block):
        """(nparts, c) for sums of ``block`` products, or a ValueError saying why none works."""
        e0, amax = self.e0, self.amax
        if block == 1 or block * amax <= Fraction(2) ** (53 + e0):      # one product: its own float64
            return 1, 0
        c = e0 + 1
        two = Fraction(2)
        while not (block * (amax + two ** (c - 1)) <= two ** (53 + c) and amax <= two ** (51 + c)):
            c += 1
        if block * Fraction(2) ** (c - 1) <= Fraction(2) ** (53 + e0):
            return 2, c
        top = amax.numerator.bit_length() - amax.denominator.bit_length() + 1
        raise ValueError(f"products: cannot be summed exactly in blocks of {block}: its finite entries are multiples "
                         f"of 2^{e0} up to {float(amax)!r} (about {top - e0} bits), but exact float64 sums of {block} "
                         f"products hold at most {53 - (block - 1).bit_length()} bits in one part and about "
                         f"{2 * (53 - (block - 1).bit_length())} in two (the routes implemented)")

    def route(self, block: int = 32) -> str:
        """How blocks of ``block`` products are summed exactly (a ValueError if they cannot be)."""
        return self._plan(_check.int_arg(block, "block", lo=1)).description

    def _plan(self, block) -> _Plan:
        got = self._plans.get(block)
        if got is not None:
            return got
        nparts, c = self._parts(block)
        p = _Plan()
        p.ba, p.bb = self.a.bits, self.b.bits
        p.tab = self._words
        p.expand = _mx.HI32 if self._hi32 else _mx.F32
        p.nparts, p.split = nparts, (1.5 * 2.0 ** (52 + c) if nparts == 2 else 0.0)
        p.rep_mask, p.rep, p.afac = self.rep_mask, self._rep, self._afac
        R = self.reduced_rows
        tt = np.zeros((1 << p.bb, -(-R // 16) * 16), np.uint32)
        tt[:, :R] = self._rwords.T
        p.tt, p.scale = tt, _SCALES
        fma = self.exact_table and nparts == 1
        p.route = _mx.ROUTE_FMA if fma else _mx.ROUTE_TABLE
        p.va, p.vb = (self._va, self._vb) if fma else (None, None)
        if fma:
            p.description = (f"fma: the exact table of the decoded values, one float64 part (multiples of 2^{self.e0}, "
                             f"|T| <= {float(self.amax)!r}): float64 FMA of the decoded operands, no lookups")
        elif nparts == 1:
            p.description = (f"table: lookups, one float64 part (multiples of 2^{self.e0}, |T| <= "
                             f"{float(self.amax)!r}), {'hi32' if self._hi32 else 'f32'} words, {R} reduced rows")
        else:
            p.description = (f"table: lookups, two float64 parts split at 2^{c} (multiples of 2^{self.e0}, |T| <= "
                             f"{float(self.amax)!r}), {'hi32' if self._hi32 else 'f32'} words, {R} reduced rows")
        self._plans[block] = p
        return p

    def __repr__(self):
        return f"MXProducts({self.a.name} x {self.b.name}, exact table: {self.exact_table})"


def _ctz(x: np.ndarray) -> np.ndarray:
    """Trailing zeros of positive int64s."""
    return np.log2((x & -x).astype(np.float64)).astype(np.int64)


_PREPARED: dict = {}      # (id(table), a, b) -> MXProducts of the last few bare tables (checked on use)
_PREPARED_MAX = 8


def _prepared(table, fa, fb) -> MXProducts:
    """MXProducts(table, fa, fb), reused while the same float32 array holds the same bits (a
    bare table's analysis costs milliseconds; the check, microseconds)."""
    key = (id(table), fa.name, fb.name)
    p = _PREPARED.get(key)
    if (p is not None and isinstance(table, np.ndarray) and table.dtype == np.float32
            and table.shape == p.products.shape
            and np.array_equal(table.view(np.uint32), p.products.view(np.uint32))):
        return p
    p = MXProducts(table, fa, fb)
    if isinstance(table, np.ndarray):
        while len(_PREPARED) >= _PREPARED_MAX:
            _PREPARED.pop(next(iter(_PREPARED)))
        _PREPARED[key] = p
    return p


def _products(products, fa, fb) -> MXProducts:
    if isinstance(products, MXProducts):
        p = products
    elif hasattr(products, "products") and hasattr(products, "a") and hasattr(products, "b"):
        pa, pb = _format(products.a, "products.a"), _format(products.b, "products.b")
        for name, got, want, op in (("products.a", pa, fa, "a"), ("products.b", pb, fb, "b")):
            if got != want:
                raise ValueError(f"{name}: the table is for {got.name} operands, but {op} holds {want.name} codes")
        return _prepared(products.products, pa, pb)
    else:
        return _prepared(products, fa, fb)
    for name, got, want, op in (("products.a", p.a, fa, "a"), ("products.b", p.b, fb, "b")):
        if got != want:
            raise ValueError(f"{name}: the table is for {got.name} operands, but {op} holds {want.name} codes")
    return p


def _operands(a, b):
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, MX):
            raise TypeError(f"{name}: expected an MX (lutcore.mx_quantize), got {type(x).__name__}")
    if len(a.shape) != 2 or a.axis != 1:
        raise ValueError(f"a: expected an MX of an (M, K) array quantized along its last axis (axis=-1), got shape "
                         f"{a.shape}, axis {a.axis}")
    if len(b.shape) != 2 or b.axis != 0:
        raise ValueError(f"b: expected an MX of a (K, N) array quantized along axis 0, got shape {b.shape}, "
                         f"axis {b.axis}")
    if a.block != b.block:
        raise ValueError(f"a, b: blocks differ: a in blocks of {a.block}, b in blocks of {b.block}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: inner dimensions differ: a is {a.shape}, b is {b.shape} "
                         f"(expected (M, K) and (K, N))")


def mx_gemm(a: MX, b: MX, products, accumulate="exact", threads: int | None = None, out=None) -> np.ndarray:
    """Y float32 (M, N) = a @ b through ``products`` (the module docstring has the contract).

    ``a``: MX of (M, K) along its last axis; ``b``: MX of (K, N) along axis 0, the same block;
    ``products``: a float32 table of shape (2^a.fmt.bits, 2^b.fmt.bits), an ``MXProducts``, or an
    object with ``.products``, ``.a``, ``.b`` (its formats must be a's and b's).  ``accumulate``:
    "exact" or a ``Narrow``.  ``out``: float32 (M, N), written in place when C-contiguous (else
    through a copy) and returned.  ``threads``: None reads the enclosing scope."""
    _operands(a, b)
    p = _products(products, a.fmt, b.fmt)
    if isinstance(accumulate, str):
        if accumulate != "exact":
            raise ValueError(f"accumulate: expected \"exact\" or a Narrow(mbits, promote, rounding), "
                             f"got {accumulate!r}")
        narrow = None
    elif isinstance(accumulate, Narrow):
        narrow = accumulate
    else:
        raise TypeError(f"accumulate: expected \"exact\" or a Narrow, got {type(accumulate).__name__}")
    (M, K), N, bk = a.shape, b.shape[1], a.block
    plan = p._plan(bk)
    nt = resolve_threads(threads)
    y = _check.out_flat(out, "out", (M, N), np.float32, a.codes, b.codes)
    isa = _simd.isa()
    work = _workspace.scratch("mxgemm", _mx.work_size(M, N, K, bk, plan, narrow is not None, isa, nt), np.uint8)
    if narrow is None:
        _mx.exact(y, a.codes, a.scales, b.codes, b.scales, K, bk, plan, work, isa, nt)
    else:
        _mx.narrow(y, a.codes, a.scales, b.codes, b.scales, K, bk, plan, narrow.mbits, narrow.promote or 0,
                   narrow.rounding == "truncate", work, isa, nt)
    return _check.out_done(out, y)
