"""LUT GEMM: int8 (M,K) @ int8 (K,N) -> int32 through a multiplier table.

Design: validation and allocation happen here; ``lutcore._native.gemm`` only
computes.  Exact tables take the packed integer SIMD path, any other table
the row-table path (see csrc/gemm/); both equal
``sum_k mul[a[m,k], b[k,n]]`` bit for bit, and ``lutcore.audit`` can re-check
a sample of every call against that definition.

Weights used many times should be packed once with ``pack_b`` — the packed
panel layout is what the exact kernel streams, which matters most for GEMV; the
any-table bodies (VBMI planes, vpermi2w) read a packed B as their staged indices
(csrc/gemm/table_packed.h), so a call does only the A side.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check, _simd, _workspace, audit
from lutcore._native import gemm as _g
from lutcore._threads import resolve_threads
from lutcore.units import Units, resolve as _resolve_units

__all__ = ["lut_gemm", "pack_b", "PackedB"]

INT32_MAX = 2**31 - 1


_NO_FORM = object()


class PackedB:
    """An int8 (K, N) right-hand operand prepared once for repeated products.

    Keeps the plain array and, on first use, the form the kernel reads: an exact
    table's panel packing (and, for the VNNI whole calls, those panels as they read them);
    for any other table, the staged indices of the any-table
    body the SIMD path runs (one form per body, built once; none for the AVX2 and
    generic bodies, which read the plain array).  Immutable: the data is copied.
    """

    def __init__(self, b):
        if isinstance(b, np.ndarray) and b.dtype == np.uint8:       # unsigned codes (an unsigned unit's weights)
            b = _check.array(b, "b", np.uint8, 2)
            self.signed = False
        else:
            b = _check.array(b, "b", np.int8, 2)
            self.signed = True
        self.code_range = (int(b.min()), int(b.max())) if b.size else (0, 0)
        b = b.view(np.int8)
        self.b = np.array(b, copy=True)
        self.b.setflags(write=False)
        self.shape = self.b.shape
        self._panels: dict = {}

    def panels(self, bk: int, bkp: int, threads: int) -> tuple[np.ndarray, int]:
        key = (bk, bkp)
        got = self._panels.get(key)
        if got is None:
            got = pack_panels(self.b, bk, bkp, threads)
            self._panels[key] = got
        return got

    def exact_form(self, isa: int, threads: int):
        """uint8 bytes (64-byte aligned): the exact panels in the form isa's exact whole calls read
        (converted once here, not once per call), or None when that body reads the panels."""
        def build():
            K, N = self.shape
            bp, Kp = self.panels(K, _even(K), threads)
            return _g.exact_bform_size(Kp, N, isa), lambda f: _g.exact_bform(f, bp, Kp, N, isa, threads)
        return self._form(("exact", isa), build)

    def table_form(self, isa: int, threads: int):
        """uint8 bytes (64-byte aligned): B staged for isa's any-table body, or None when that
        body reads the plain B (AVX2, generic)."""
        return self._form(("table", isa), lambda: (_g.table_pack_size(*self.shape, isa),
                                                   lambda f: _g.table_pack_b(f, self.b, isa, threads)))

    def table_staged(self, threads: int) -> bool:
        """Whether the current SIMD path's any-table body reads B staged (``table_form``, built
        here on first use with ``threads``, a count as the other methods take): then a table
        product with this B costs only its A side."""
        return self.table_form(_simd.isa(), threads) is not None

    def _form(self, key, build):
        """The read-only form under key (an isa value fixes the body), made on first use: build()
        gives (bytes, fill); 0 bytes (the body reads no form) is kept as None."""
        got = self._panels.get(key, _NO_FORM)
        if got is _NO_FORM:
            nbytes, fill = build()
            got = None
            if nbytes:
                got = _workspace.empty_aligned(nbytes)
                fill(got)
                got.setflags(write=False)
            self._panels[key] = got
        return got

    def __repr__(self):
        return f"PackedB(shape={self.shape})"


_TABLE16: dict = {}


def table16(units: Units, isa: int) -> np.ndarray:
    """units' table in the form isa's any-table body reads (int16 (65536,)), the last 8 cached."""
    key = (units.digest, _g.body_names(isa)["lut_gemm any table"])
    t = _TABLE16.get(key)
    if t is None:
        if len(_TABLE16) >= 8:
            _TABLE16.pop(next(iter(_TABLE16)))
        t = _workspace.empty_aligned(65536 * 2, np.int16)   # 64-byte aligned: each table row is whole lines
        _g.table_form(t, units.kernel_table, isa)
        t.setflags(write=False)
        _TABLE16[key] = t
    return t


def pack_b(b) -> PackedB:
    """Prepare an int8 (K, N) operand for repeated ``lut_gemm`` calls."""
    return PackedB(b)


def even_depth(n: int) -> int:
    """n rounded up to even: the exact kernel's reduction depth (it takes k in pairs)."""
    return n + (n & 1)


_even = even_depth


def pack_panels(b: np.ndarray, bk: int, bkp: int, threads: int, out=None) -> tuple[np.ndarray, int]:
    """int8 panels (Np/16, Kp/2, 16, 2) flat, and Kp, for the exact kernel."""
    K, N = b.shape
    nblk = -(-K // bk) if K else 0
    Kp = nblk * bkp
    Np = -(-N // _g.NR) * _g.NR
    size = Np * Kp
    bp = np.empty(size, np.int8) if out is None else out[:size]
    _g.pack_b(bp, b, bk, bkp, Kp, threads)
    return bp, Kp


def pack_a16(a: np.ndarray, bk: int, bkp: int, threads: int) -> np.ndarray:
    """int16 (Mp, Kp) rows for the exact kernel, in reusable scratch memory."""
    M, K = a.shape
    nblk = -(-K // bk) if K else 0
    Kp = nblk * bkp
    Mp = -(-M // _g.MR) * _g.MR
    ap = _workspace.scratch("a16", Mp * Kp, np.int16).reshape(Mp, Kp)
    _g.pack_a16(ap, a, bk, bkp, threads)
    return ap


def lut_gemm(a, b, units: Units | None = None, threads: int | None = None, out=None) -> np.ndarray:
    """int8 (M, K) @ int8 (K, N) -> int32 (M, N) through ``units``' multiplier.

    ``C[m, n] = sum_k mul[a[m, k], b[k, n]]`` exactly, for every table.  A unit of another
    format (``units.format``: unsigned, narrow) takes its codes — uint8 or any integer array
    holding values in the format's range (a: the first operand's, b: the second's); a unit
    wider than a table (a gate netlist: 11, 12, 16 bits) runs bit-sliced (``lutcore.ops.netlist``)
    and returns int64.
    ``b`` may be a ``PackedB``.  Non-contiguous inputs are copied.  ``out``
    (int32, (M, N)) receives the result and is returned: written in place when
    its rows have unit stride (a view such as ``big[:, j:j + N]`` included) and
    it shares no memory with ``a`` or ``b``, else through a copy, as numpy does.
    Raises ValueError when K is so long that int32 could overflow.
    """
    if not isinstance(units, Units):         # a resolved Units passes through without a call
        units = _resolve_units(units)
    if units.accumulator is not None:        # a declared register: the accumulator kernels
        return _accumulated(a, b, units, threads, out)
    fmt = units.format
    if units.mul is None:                    # a unit wider than a table: its netlist, bit-sliced (int64 sums)
        if isinstance(b, PackedB):
            raise TypeError("b: a gate-netlist unit takes its weights as an integer array of codes, not a PackedB")
        if out is not None:
            raise TypeError("out: a gate-netlist unit's product is int64 and returned new (out= is for int32 tables)")
        from lutcore.ops import netlist as _net
        n = units.netlist
        return _net.gemm(a, b, n.gates, n.outputs, a_bits=fmt.a_bits, b_bits=fmt.b_bits, a_signed=fmt.a_signed,
                         b_signed=fmt.b_signed, product_signed=fmt.p_signed, threads=threads)
    a = _codes(a, "a", fmt, "a")
    packed = b if isinstance(b, PackedB) else None
    if packed is not None:
        if not fmt.legacy:
            _packed_codes(packed, fmt)
        b = packed.b
    else:
        b = _codes(b, "b", fmt, "b")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a, b: inner dimensions differ: a is {a.shape}, b is {b.shape} "
                         f"(expected a (M, K) and b (K, N))")
    M, K = a.shape
    N = b.shape[1]
    if K * max(units.max_abs_product, 32768 if units.kernel_offset else 0) > INT32_MAX:
        kmax = INT32_MAX // max(units.max_abs_product, 32768 if units.kernel_offset else 1)
        raise ValueError(f"a, b: K={K} with products up to {units.max_abs_product} can overflow int32 "
                         f"(K must be <= {kmax})")
    nt = resolve_threads(threads)
    c, ldc, _ = _check.out_rows(out, "out", (M, N), np.int32, a, b)
    if M == 0 or N == 0 or K == 0:
        c.fill(0)
        return _check.out_done(out, c)
    isa = _simd.isa()
    if units.kernel_path == "exact":
        bk = K
        bkp = _even(K)
        Mp = -(-M // _g.MR) * _g.MR            # the dispatcher widens A here unless its body reads int8 rows
        a16 = _workspace.scratch("a16", Mp * bkp, np.int16)
        if packed is not None:
            bp, Kp = packed.panels(bk, bkp, nt)
            _g.gemm_exact(c, a, bp, Kp, a16, isa, nt, ldc, packed.exact_form(isa, nt))
        else:                                  # B's rows as they are (a whole-call body reads them itself)
            Np = -(-N // _g.NR) * _g.NR
            _g.gemm_exact_rows(c, a, b, _workspace.scratch("bpan", Np * bkp, np.int8), a16, isa, nt, ldc)
    elif packed is not None and packed.table_form(isa, nt) is not None:
        # B staged once (table_packed.h): the product as it is, rows = a's rows
        _g.gemm_table_packed(c, a, packed.table_form(isa, nt), table16(units, isa), isa, nt, ldc)
    else:
        work = _workspace.scratch("table", _g.table_auto_work_size(M, N, K, 0, nt, False), np.int32)
        _g.gemm_table_auto(c, a, b, units.kernel_table, work, isa, nt, ldc)
    if units.kernel_offset:
        c += np.int32(units.kernel_offset * K)        # the kernels summed products - kernel_offset
    if audit._rate > 0:
        audit.check_gemm(c, a, b, units)
    return _check.out_done(out, c)


def _accumulated(a, b, units, threads, out):
    """lut_gemm through a unit with a declared accumulator (``lutcore.ops.accum``): int32 when the
    register's values fit it, else int64 (then ``out`` is refused)."""
    from lutcore.ops import accum
    if isinstance(b, PackedB):
        if not units.format.legacy:
            _packed_codes(b, units.format)
        b = b.b if b.signed else b.b.view(np.uint8)
    acc = units.accumulator
    K = np.shape(a)[1] if np.ndim(a) == 2 else 0
    if accum.plain_sums_suffice(units, acc, K):          # the table kernels' sums, wrapped if need be
        c = lut_gemm(a, b, units.without_accumulator(), threads=threads).astype(np.int64)
        acc.check_products(*units.product_range, f"units {units.name!r}")
        c = acc.wrap(c) if acc.exact_wrap else c
    else:
        c = accum.gemm(a, b, units, acc, threads=threads)
    lo, hi = acc.range
    if lo < -2**31 or hi > INT32_MAX:
        if out is not None:
            raise TypeError(f"out: a {units.accumulator} accumulator's sums leave int32: the product is int64 and "
                            f"returned new")
        return c
    c = c.astype(np.int32)
    if out is None:
        return c
    _check.out_checked(out, "out", c.shape, np.int32)
    out[...] = c
    return out


def _codes(x, name, fmt, which) -> np.ndarray:
    """``x`` (M, K) as the int8 bytes the kernels index by (``Format.kernel_bytes``)."""
    return fmt.kernel_bytes(x, which, name)


def _packed_codes(packed, fmt) -> None:
    """A PackedB's codes must be the format's weight codes (their signedness as packed)."""
    lo, hi = fmt.range("b")
    plo, phi = packed.code_range
    if plo < lo or phi > hi:
        raise ValueError(f"b: the packed weights hold {'int8' if packed.signed else 'uint8'} codes {plo}..{phi}, "
                         f"outside the unit's weight codes [{lo}, {hi}] (format {fmt})")
