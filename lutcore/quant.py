"""Block-scaled int8 (Q8 blocks) and the block-scaled matmul.

Contract (docs/DESIGN.md): blocks of ``block`` consecutive values along the
reduction axis; ``scale = max|x| / 127`` (float32, 0 for an all-zero block);
``q = clamp(round_half_even(x / scale), -127, 127)``; a length that is not a
multiple of ``block`` is zero-padded.  ``qmatmul`` computes
``Y[m,n] = sum_b (sa[m,b] * sb[b,n]) * float(I_b[m,n])`` in float32, b
increasing, where ``I_b`` is the LUT GEMM of block b — ggml's Q8_0 dot with
float32 scales, through any multiplier table.

Weights are quantized once (``quantize(w, axis=0)``) and keep their packed
panels inside the ``Q8`` for every later call; activations are quantized per
call into reused scratch memory.

Design: this module owns the operands (``Q8`` checks what it holds when it is made;
activation buffers are scratch or a ``QLinear``'s own) and calls the kernels through
their room, ``lutcore.ops.quant``, by its unchecked fast functions (the buffers are
built here, of the right shapes).
"""
from __future__ import annotations

import os

import numpy as np

from lutcore import _check, _workspace, audit
from lutcore._threads import resolve_threads
from lutcore.ops import accum as _accum, quant as _k
from lutcore.ops.gemm import even_depth as _even, pack_b, pack_panels
from lutcore.units import Units, resolve as _resolve_units

__all__ = ["Q8", "QF", "quantize", "quantize_codes", "qmatmul", "QLinear", "attn_scores", "attn_values",
           "check_attention_units"]


class Q8:
    """A block-quantized 2-D float32 array.

    ``q`` int8 and ``scale`` float32 with the quantized axis padded to a
    multiple of ``block``: for ``axis=-1`` and x (R, K): q (R, Kq), scale
    (R, Kq // block); for ``axis=0`` and x (K, N): q (Kq, N), scale
    (Kq // block, N).  ``shape`` is the original (unpadded) shape.
    """

    __slots__ = ("q", "scale", "block", "axis", "shape", "_cache")

    def __init__(self, q, scale, block: int, axis: int, shape):
        # built by hand too: everything the kernels index by is checked here
        block = _block(block)
        axis = _check.int_arg(axis, "axis", lo=-1, hi=1)
        axis = 1 if axis == -1 else axis
        if (not isinstance(shape, (tuple, list)) or len(shape) != 2
                or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise ValueError(f"shape: expected the original (rows, cols) as two non-negative ints, got {shape!r}")
        shape = (int(shape[0]), int(shape[1]))
        q = _check.array(q, "q", np.int8, 2)
        scale = _check.array(scale, "scale", np.float32, 2)
        L = shape[axis]
        nblk = -(-L // block)
        if axis == 1:
            want_q, want_s = (shape[0], nblk * block), (shape[0], nblk)
        else:
            want_q, want_s = (nblk * block, shape[1]), (nblk, shape[1])
        if q.shape != want_q:
            raise ValueError(f"q: a Q8 of shape {shape} in blocks of {block} along axis {axis} holds int8 codes of "
                             f"shape {want_q}, got {q.shape}")
        if scale.shape != want_s:
            raise ValueError(f"scale: a Q8 of shape {shape} in blocks of {block} along axis {axis} holds float32 "
                             f"scales of shape {want_s}, got {scale.shape}")
        if scale.size and not np.isfinite(scale).all():
            raise ValueError("scale: holds NaN or Inf")
        if q.size and q.min() < -127:
            raise ValueError("q: codes must lie in [-127, 127], got -128")
        self._set(q, scale, block, axis, shape)

    def _set(self, q, scale, block, axis, shape):
        self.q, self.scale, self.block, self.axis, self.shape = q, scale, block, axis, shape
        self._cache = {}
        q.setflags(write=False)
        scale.setflags(write=False)

    @classmethod
    def _made(cls, q, scale, block: int, axis: int, shape) -> "Q8":
        """A Q8 from ``quantize``'s own buffers (already of the right shapes and values)."""
        obj = cls.__new__(cls)
        obj._set(q, scale, block, axis, tuple(shape))
        return obj

    @property
    def nblocks(self) -> int:
        return self.scale.shape[1] if self.axis == 1 else self.scale.shape[0]

    def dequantize(self) -> np.ndarray:
        """float32 of the original shape: q * scale per block."""
        nb = self.nblocks                  # explicit: a -1 in reshape fails on an empty array
        if self.axis == 1:
            R, Kq = self.q.shape
            x = (self.q.reshape(R, nb, self.block).astype(np.float32) * self.scale[:, :, None]).reshape(R, Kq)
            return x[:, : self.shape[1]]
        Kq, N = self.q.shape
        x = (self.q.reshape(nb, self.block, N).astype(np.float32) * self.scale[:, None, :]).reshape(Kq, N)
        return x[: self.shape[0]]

    def exact_panels(self, threads=None):
        """(panels, scales) of this right operand (axis 0) as the exact kernel streams them:
        packed once, on the first call, and kept (read-only use)."""
        return _exact_panels(self, resolve_threads(threads))

    def __repr__(self):
        return f"Q8(shape={self.shape}, block={self.block}, axis={self.axis})"


def _transposed_view(x) -> bool:
    """x is a float32 2-D array whose transpose is C-contiguous (and it is not)."""
    return (isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype == np.float32 and not x.flags.c_contiguous
            and x.T.flags.c_contiguous)


MAX_BLOCK = 1 << 20


def _block(block) -> int:
    return _check.int_arg(block, "block", lo=1, hi=MAX_BLOCK)


def effective_block(block: int, L: int) -> int:
    """For operands quantized inside one call: a block longer than the reduction axis is
    that axis — one block either way, so the same codes and scales, and (when the
    table's mul[0, 0] is 0, so the padding adds nothing) the same products, with
    memory sized by the data rather than by ``block``.  A ``Q8`` keeps its padded layout."""
    return min(block, max(L, 1))


def _phys_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def _fits(nbytes: int, name: str, block: int, rows: int, L: int) -> None:
    """Refuse up front a quantization whose padded codes would not fit in this machine's
    memory (rather than fail, or page for minutes, after the work began)."""
    if nbytes > _phys_bytes():
        raise ValueError(f"{name}: block={block} pads each of its {rows} rows of {L} values to "
                         f"{-(-L // block) * block} codes: this needs {nbytes / 2**30:.1f} GiB, more than this "
                         f"machine's {_phys_bytes() / 2**30:.1f} GiB of memory (use a block no longer than the "
                         f"axis, {max(L, 1)})")


def quantize(x, block: int = 32, axis: int = -1, threads: int | None = None, *, name: str = "x") -> Q8:
    """Quantize a 2-D float32 array in blocks of ``block`` along ``axis`` (-1/1 or 0).

    Non-float32 float input is cast; NaN/Inf raise ValueError (they have no
    int8 code).  Non-contiguous input is copied.  ``name``: what errors call ``x``.
    """
    block = _block(block)
    axis = _check.int_arg(axis, "axis", lo=-1, hi=1)
    ax = 1 if axis in (-1, 1) else 0
    nt = resolve_threads(threads)
    if _transposed_view(x):
        # a transposed view (a gradient's dY^T): quantize its contiguous transpose along the
        # other axis — the same blocks, so the same codes — and transpose the int8 result,
        # a quarter of the bytes of a float copy
        t = quantize(x.T, block, axis=1 - ax, threads=nt, name=name)
        return Q8._made(np.ascontiguousarray(t.q.T), np.ascontiguousarray(t.scale.T), t.block, ax, x.shape)
    x = _check.array(x, name, np.float32, 2, kind="f")
    L = x.shape[ax]
    nblk = -(-L // block)
    _fits(x.shape[1 - ax] * nblk * (block + 4), name, block, x.shape[1 - ax], L)
    if ax == 1:
        R = x.shape[0]
        q = np.empty((R, nblk * block), np.int8)
        s = np.empty((R, nblk), np.float32)
        bad = _k._quantize_rows(q, s, x, block, nt)
    else:
        N = x.shape[1]
        q = np.empty((nblk * block, N), np.int8)
        s = np.empty((nblk, N), np.float32)
        bad = _k._quantize_cols(q, s, x, block, nt)
    if bad:
        raise ValueError(f"{name}: {bad} non-finite value(s) (NaN, Inf, or beyond the float32 range) cannot be "
                         f"quantized")
    return Q8._made(q, s, block, ax, x.shape)


def _quantize_scratch(x: np.ndarray, block: int, nt: int):
    """Row quantization of activations into reused scratch (no Q8 object)."""
    R, K = x.shape
    nblk = -(-K // block)
    _fits(R * nblk * (block + 4), "a", block, R, K)
    q = _workspace.scratch("qa", R * nblk * block, np.int8).reshape(R, nblk * block)
    s = _workspace.scratch("sa", R * nblk, np.float32).reshape(R, nblk)
    bad = _k._quantize_rows(q, s, x, block, nt)
    if bad:
        raise ValueError(f"a: {bad} non-finite value(s) (NaN, Inf, or beyond the float32 range) cannot be quantized")
    return q, s


# ------------------------------------------------------------------ units of other formats
def quantize_codes(v, bits: int, signed: bool, axis=None):
    """(q int64, s float32, zp int64) of float32 ``v`` in a ``bits``-bit operand format: one scale
    and zero point for the whole array (``axis`` None) or one per slice along ``axis`` (reduced
    over it, kept as a length-1 axis).  Signed: symmetric, ``qmax = 2^(bits-1) - 1``, ``s =
    max|v| / qmax``, zp 0, ``q = clamp(round_half_even(v / s), -qmax, qmax)``; unsigned: ``lo =
    min(min v, 0)``, ``hi = max(max v, 0)``, ``s = (hi - lo) / (2^bits - 1)``, ``zp =
    clamp(round_half_even(-lo / s), 0, 2^bits - 1)``, ``q = clamp(round_half_even(v / s) + zp, 0,
    2^bits - 1)``; float32, true divisions; s = 0 gives q = zp = 0 (docs/DESIGN.md, "Zero-point
    quantization")."""
    v = np.asarray(v, np.float32)
    red = {} if axis is None else dict(axis=axis, keepdims=True)
    empty = v.size == 0
    if signed:
        qmax = (1 << (bits - 1)) - 1
        amax = np.float32(0) if empty else np.abs(v).max(**red)
        s = (np.asarray(amax, np.float32) / np.float32(max(qmax, 1))).astype(np.float32)
        zp = np.zeros(np.shape(s), np.int64)
        lo_q, hi_q = -qmax, qmax
    else:
        qmax = (1 << bits) - 1
        lo = np.float32(0) if empty else np.minimum(v.min(**red), np.float32(0))
        hi = np.float32(0) if empty else np.maximum(v.max(**red), np.float32(0))
        s = ((np.asarray(hi, np.float32) - np.asarray(lo, np.float32)) / np.float32(qmax)).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(s > 0, np.rint(np.divide(-np.asarray(lo, np.float32), s, dtype=np.float32)), 0)
        zp = np.clip(z, 0, qmax).astype(np.int64)
        lo_q, hi_q = 0, qmax
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s > 0, np.rint(np.divide(v, s, dtype=np.float32)), 0).astype(np.float64)
    q = np.clip(r + zp, lo_q, hi_q).astype(np.int64)
    return q, s, zp


class QF:
    """A right operand (K, N) quantized in blocks of ``block`` along K in a unit's weight format:
    ``q`` int64 (K, N) codes, ``scale`` float32 and ``zero`` int64 (nblk, N) per block and column
    (the last block may be shorter: nothing is padded).  ``QLinear`` keeps one per weight."""

    __slots__ = ("q", "scale", "zero", "block", "shape", "fmt", "packed", "sums")

    def __init__(self, b, fmt, block: int):
        b = np.asarray(b, np.float32)
        K, N = b.shape
        nblk = -(-K // block) if K else 0
        bp = np.zeros((nblk * block, N), np.float32)
        bp[:K] = b                                          # zeros change no block's range or scale
        q, s, zp = quantize_codes(bp.reshape(nblk, block, N), fmt.b_bits, fmt.b_signed, axis=1)
        self.q = np.ascontiguousarray(q.reshape(nblk * block, N)[:K])
        self.scale, self.zero = s.reshape(nblk, N), zp.reshape(nblk, N)
        self.block, self.shape, self.fmt = block, (K, N), fmt
        # per block: the codes as the table GEMM takes them, packed once (its staged form), and
        # their column sums (the zero-point terms); a wide format's netlist reads the codes
        blocks = [self.q[b * block:min(K, (b + 1) * block)] for b in range(nblk)]
        self.packed = ([pack_b(q.astype(np.int8 if fmt.b_signed else np.uint8)) for q in blocks]
                       if fmt.is_table else None)
        self.sums = [q.sum(axis=0) for q in blocks]


def _qmm_formats(a, qf: QF, units, nt) -> np.ndarray:
    """The block-scaled product of float32 a (M, K) and a QF through units of another format:
    ``Y = sum_b (sa[m, b] * sb[b, n]) * float32(I_b)``, b increasing, in float32, with
    ``I_b = sum_{k in b} T[qa, qb] - zb[b, n] sum_k qa - za[m, b] sum_k qb + |b| za zb`` exact."""
    from lutcore.ops.gemm import lut_gemm
    fmt, block = units.format, qf.block
    M, K = a.shape
    N = qf.shape[1]
    nblk = qf.scale.shape[0]
    ap = np.zeros((M, nblk * block), np.float32)
    ap[:, :K] = a
    qa, sa, za = quantize_codes(ap.reshape(M, nblk, block), fmt.a_bits, fmt.a_signed, axis=2)
    qa, sa, za = qa.reshape(M, nblk * block), sa.reshape(M, nblk), za.reshape(M, nblk)
    y = np.zeros((M, N), np.float32)
    for bi in range(nblk):
        k0, k1 = bi * block, min(K, (bi + 1) * block)
        A = np.ascontiguousarray(qa[:, k0:k1])
        if qf.packed is not None:
            I = lut_gemm(A.astype(np.int8 if fmt.a_signed else np.uint8), qf.packed[bi], units,
                         threads=nt).astype(np.int64)
        else:
            I = lut_gemm(A, np.ascontiguousarray(qf.q[k0:k1]), units, threads=nt)
        zb, zab = qf.zero[bi], za[:, bi]
        if zb.any():
            I -= A.sum(axis=1)[:, None] * zb[None, :]
        if zab.any():
            I -= zab[:, None] * qf.sums[bi][None, :]
            I += (k1 - k0) * zab[:, None] * zb[None, :]
        y = y + (sa[:, bi, None] * qf.scale[None, bi, :]) * I.astype(np.float32)
    return y


def qmatmul(a, b, units: Units | None = None, block: int = 32, threads: int | None = None,
            out=None) -> np.ndarray:
    """Block-scaled int8 matmul: float32 (M, K) @ float32 (K, N) -> float32 (M, N).

    ``a`` is quantized along K per row, ``b`` along K per column (axis 0).
    Either may be given pre-quantized as a ``Q8`` (``quantize(a)`` /
    ``quantize(b, axis=0)``) with the same ``block``.
    """
    if not isinstance(units, Units):            # a resolved Units passes through without a call
        units = _resolve_units(units)
    if not units.plain:
        return _qmatmul_formats(a, b, units, block, threads, out)
    block = _block(block)
    nt = resolve_threads(threads)
    # ---- operands
    if _transposed_view(a):                     # a gradient's dY^T: no float copy (see quantize)
        a = quantize(a, block, threads=nt, name="a")
    if isinstance(a, Q8):
        if a.axis != 1:
            raise ValueError("a: a pre-quantized left operand must be quantized along axis -1")
        if a.block != block:
            raise ValueError(f"a: quantized with block={a.block}, but block={block} was asked")
        qa, sa, (M, Ka) = a.q, a.scale, a.shape
    else:
        a = _check.array(a, "a", np.float32, 2, kind="f")
        M, Ka = a.shape
        qa = sa = None
    if isinstance(b, Q8):
        if b.axis != 0:
            raise ValueError("b: a pre-quantized right operand must be quantized along axis 0 "
                             "(quantize(b, axis=0))")
        if b.block != block:
            raise ValueError(f"b: quantized with block={b.block}, but block={block} was asked")
        qb_obj = b
        Kb, N = b.shape
    else:
        b = _check.array(b, "b", np.float32, 2, kind="f")
        Kb, N = b.shape
        qb_obj = None
    if Ka != Kb:
        raise ValueError(f"a, b: inner dimensions differ: a is {(M, Ka)}, b is {(Kb, N)}")
    K = Ka
    if qa is None and qb_obj is None and units.mul[0] == 0:
        # both quantized here, and the padding's products mul[0, 0] are 0: memory sized by K
        block = effective_block(block, K)
    if block * units.max_abs_product > 2**31 - 1:
        raise ValueError(f"block: {block} is too long for int32 block sums with this table")
    # the kernel reads only the operands' quantized codes, taken before it writes:
    # out may be a or b itself
    y, ld, _ = _check.out_rows(out, "out", (M, N), np.float32)
    if M == 0 or N == 0 or K == 0:
        y.fill(0)
        return _check.out_done(out, y)
    if qa is None:
        qa, sa = _quantize_scratch(a, block, nt)
    if qb_obj is None:
        qb_obj = quantize(b, block, axis=0, threads=nt, name="b")
    return _check.out_done(out, _qmm_quantized(y, qa, sa, qb_obj, units, block, nt, ld=ld))


def _qmatmul_formats(a, b, units, block, threads, out):
    """qmatmul through units of another format (zero points, narrow or wide codes): float a and
    b (or a QF of b) only — a Q8 holds signed 8-bit codes."""
    block = _block(block)
    nt = resolve_threads(threads)
    for name, x in (("a", a), ("b", b)):
        if isinstance(x, Q8):
            raise TypeError(f"{name}: a Q8 holds signed 8-bit codes; units {units.name!r} ({units.format}) "
                            f"quantize their operands in their own formats: pass the float array")
    a = _check.array(a, "a", np.float32, 2, kind="f")
    if isinstance(b, QF):
        if b.fmt != units.format or b.block != block:
            raise ValueError(f"b: quantized for {b.fmt} in blocks of {b.block}, not {units.format} in blocks of {block}")
        qf = b
    else:
        b = _check.array(b, "b", np.float32, 2, kind="f")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise ValueError("a, b: non-finite value(s) (NaN or Inf) cannot be quantized")
        qf = None
    K, N = (qf.shape if qf is not None else b.shape)
    if a.shape[1] != K:
        raise ValueError(f"a, b: inner dimensions differ: a is {a.shape}, b is {(K, N)}")
    if not np.isfinite(a).all():
        raise ValueError("a: non-finite value(s) (NaN or Inf) cannot be quantized")
    if qf is None:
        qf = QF(b, units.format, block)
    y, ld, _ = _check.out_rows(out, "out", (a.shape[0], N), np.float32)
    if a.shape[0] and N:
        y[...] = _qmm_formats(a, qf, units, nt)
    else:
        y.fill(0)
    return _check.out_done(out, y)


def _exact_panels(qb_obj: Q8, nt: int):
    """The exact kernel's panels of a right operand, packed once and kept in the Q8."""
    bkp = _even(qb_obj.block)
    key = ("exact", bkp)
    cached = qb_obj._cache.get(key)
    if cached is None:
        bp, _ = pack_panels(qb_obj.q, qb_obj.block, bkp, nt)
        cached = (bp, _k.pack_scales(qb_obj.scale))
        qb_obj._cache[key] = cached
    return cached


def _qmm_quantized(y, qa, sa, qb_obj: Q8, units, block, nt, ap=None, ld=-1):
    """y = the block-scaled product of quantized activations (qa, sa) and a Q8
    right operand: the one place both ``qmatmul`` and ``QLinear`` run the kernels
    (and the audit).  ``ap``: a caller-owned int16 buffer for the packed rows;
    ``ld``: y's row stride in elements (-1: its width)."""
    qb, sb = qb_obj.q, qb_obj.scale
    if units.kernel_path == "exact":
        bp, sbp = _exact_panels(qb_obj, nt)
        _k._qmatmul_exact(y, qa, sa, bp, sbp, block, nt, ap=ap, ld=ld)
    else:
        _k._qmatmul_table(y, qa, sa, qb, sb, units.kernel_table, block, nt, ld=ld)
    if audit._rate > 0:
        audit.check_qmatmul(y, qa, sa, qb, sb, block, units)
    return y


class QLinear:
    """A weight quantized and packed once, applied as ``x @ W`` through the units
    with as little per-call work as possible (decoding calls it with one row).

    ``QLinear(w_kn, units, block)`` with ``w_kn`` float32 (K, N) (or a ``Q8``
    quantized along axis 0); ``__call__(x, out=None)`` computes exactly what
    ``qmatmul(x, w_q8, units, block)`` computes, bit for bit.  Units of another format
    than signed 8 x 8 read the weight as the Q8 holds it: ``qmatmul(x, w_q8.dequantize(),
    units, block)`` (a ``QF`` of it, made when the units are set) — so a QLinear built with
    such units and one switched to them later (``.units = ...``, a stage's ``set_units``) give
    the same bits.  MX units read the weight's MX blocks, made from the float weight when it is
    given with MX units of that element format and block, or with such units in ``keep_mx`` (MX
    units whose blocks to make as well, for a switch to them later), else from the Q8's values
    when the units are set.  Activation buffers belong to the instance (not thread-safe across
    Python threads).
    """

    def __init__(self, w, units=None, block: int = 32, threads=None, *, keep_mx=()):
        self.block = _block(block)
        resolve_threads(threads)                 # checked now, not at the first call
        self.threads = threads
        self.q8 = w if isinstance(w, Q8) else quantize(w, self.block, axis=0, threads=threads, name="w")
        if self.q8.axis != 0 or self.q8.block != self.block:
            raise ValueError("w: expected a Q8 quantized along axis 0 with the same block")
        self.K, self.N = self.q8.shape
        self.nblk = self.q8.scale.shape[0]
        self.bkp = _even(self.block)
        self.qf = None                           # units of another format: the weight in their own codes
        self.mx = None                           # MX units: the weight as MX blocks along K (axis 0)
        self._mx_float = {}                      # (element format, block) -> MX blocks of the float weight
        self.label = None                        # the layer's name, for the overflow log (lutcore.ops.accum)
        u = _mx_units(units) if not isinstance(units, (str, Units)) else None
        if u is None and isinstance(units, str) and units.strip().lower().startswith("mx"):
            from lutcore.units import resolve as _any
            u = _any(units, mx=True)
        if not isinstance(w, Q8):                # quantized from the float weight, not from its Q8
            for v in ([u] if u is not None else []) + list(_mx_list(keep_mx, "keep_mx")):
                if (v.b.name, v.block) not in self._mx_float:
                    self._mx_float[v.b.name, v.block] = v.quantize(np.ascontiguousarray(w, np.float32), 0, "b")
            if u is not None:
                self.mx = self._mx_float[u.b.name, u.block]
        self.units = units
        self._rows = 0
        self.rows_seen = None        # an int while counting (count_rows): rows of x over calls

    @property
    def units(self) -> Units:
        return self._units

    @units.setter
    def units(self, units):
        """Switch the multiplier: the Q8 stays; a unit of another format gets the weight's codes
        in its format (made once per format), the exact table its packed panels; MX units the
        weight's MX blocks in their second format (from the float weight when the QLinear was built
        with MX units of that format and block, or with such units in ``keep_mx`` -- those blocks
        are kept, so switching to another format and back restores them -- else from the Q8's
        values)."""
        from lutcore.units import resolve as _any
        u = _any(units, mx=True) if isinstance(units, str) else units if _mx_units(units) else \
            units if getattr(units, "kind", None) == "mantissa" else _resolve_units(units)
        if getattr(u, "kind", None) == "mantissa":
            raise ValueError(f"units: {u.name!r} (bf16/fp16 through a significand table) run in lutcore.torch and "
                             f"lutcore's models; a quantized weight (QLinear, a pipeline stage) takes integer or MX units")
        if _mx_units(u) is not None:
            if self.mx is None or self.mx.fmt != u.b or self.mx.block != u.block:
                f = self._mx_float.get((u.b.name, u.block))
                self.mx = f if f is not None else u.quantize(self.q8.dequantize(), 0, "b")
            self.qf = None
            self._units = u
            return
        if u.plain:
            self.qf = None
            if u.kernel_path == "exact":
                _exact_panels(self.q8, resolve_threads(self.threads))       # pack now, not on the first call
        elif self.qf is None or self.qf.fmt != u.format:
            self.qf = QF(self.q8.dequantize(), u.format, self.block)
        self._units = u

    def columns(self, lo: int, hi: int) -> "QLinear":
        """A QLinear of columns lo..hi-1 of this weight with the same units (its Q8 and MX blocks
        sliced: every column is its own block-scaled sum, so the bits are the whole's)."""
        q8 = self.q8
        sub = Q8._made(np.ascontiguousarray(q8.q[:, lo:hi]), np.ascontiguousarray(q8.scale[:, lo:hi]),
                       q8.block, 0, (q8.shape[0], hi - lo))
        out = QLinear(sub, None, self.block, threads=self.threads)

        def cut(m):
            from lutcore.mx import MX
            return MX._made(np.ascontiguousarray(m.codes[:, lo:hi]), np.ascontiguousarray(m.scales[:, lo:hi]),
                            m.fmt, m.block, 0, (m.shape[0], hi - lo))
        out._mx_float = {k: cut(m) for k, m in self._mx_float.items()}
        if self.mx is not None:
            same = [k for k, m in self._mx_float.items() if m is self.mx]
            out.mx = out._mx_float[same[0]] if same else cut(self.mx)
        out.units = self.units
        return out

    def count_rows(self, on: bool = True):
        """Start (``on``) or stop counting the rows this instance multiplies: while on,
        ``rows_seen`` adds each call's M (a dry run's product count is rows x K x N).
        Per instance: other QLinears and other threads' instances are untouched."""
        self.rows_seen = 0 if on else None

    @property
    def shape(self):
        return (self.K, self.N)

    def decode_operands(self, threads=None):
        """What a fused one-row kernel (the pipeline's decode layer) reads of this weight for
        ``threads``: ``(path, buffers, block, bkp)`` — path 1, the exact kernel (``buffers``: the
        packed panels ``bp``/``sbp`` and the row buffers ``qa``, ``sa``, ``ap``), or path 2, the
        table kernel (codes ``qb``, scales ``sb``, the table ``T32``, its work buffer ``twork``).
        The buffers belong to this QLinear (``units.kernel_path`` chose the path)."""
        nt = resolve_threads(threads)
        self._buffers(1)
        common = {"qa": self._qa[:1], "sa": self._sa[:1]}
        if self.units.kernel_path == "exact":
            bp, sbp = _exact_panels(self.q8, nt)
            return 1, dict(common, bp=bp, sbp=sbp, ap=self._ap[:_k.MR]), self.block, self.bkp
        twork = _k.table_work(self.N, nt)
        return 2, dict(common, qb=np.ascontiguousarray(self.q8.q), sb=self.q8.scale,
                       T32=self.units.kernel_table, twork=twork), self.block, 0

    def _buffers(self, M):
        if M > self._rows:
            R = max(M, 1)
            self._qa = np.empty((R, self.nblk * self.block), np.int8)
            self._sa = np.empty((R, self.nblk), np.float32)
            Mp = _k.padded_rows(R)
            self._ap = np.empty((Mp, self.nblk * self.bkp), np.int16)
            self._rows = R

    def __call__(self, x, out=None):
        if not (isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 2 and x.flags.c_contiguous):
            x = _check.array(x, "x", np.float32, 2, kind="f")
        M, K = x.shape
        if K != self.K:
            raise ValueError(f"x: expected (M, {self.K}), got {x.shape}")
        if self.rows_seen is not None:
            self.rows_seen += M
        y, ld, _ = _check.out_rows(out, "out", (M, self.N), np.float32)
        if M == 0 or self.K == 0:
            y.fill(0)                      # K = 0: every sum is empty
            return _check.out_done(out, y)
        nt = resolve_threads(self.threads)
        if _mx_units(self.units) is not None:
            with _accum.labelled(self.label):
                y[...] = self.units.matmul_q(self.units.quantize(x, 1, "a"), self.mx, nt)
            return _check.out_done(out, y)
        if self.qf is not None:
            if not np.isfinite(x).all():
                raise ValueError("x: non-finite value(s) (NaN or Inf) cannot be quantized")
            with _accum.labelled(self.label):
                y[...] = _qmm_formats(x, self.qf, self.units, nt)
            return _check.out_done(out, y)
        self._buffers(M)
        qa, sa = self._qa[:M], self._sa[:M]
        if _k._quantize_rows(qa, sa, x, self.block, nt):
            raise ValueError("x: non-finite value(s) (NaN or Inf) cannot be quantized")
        ap = self._ap[:_k.padded_rows(M)] if self.units.kernel_path == "exact" else None
        return _check.out_done(out, _qmm_quantized(y, qa, sa, self.q8, self.units, self.block, nt, ap=ap, ld=ld))


# ------------------------------------------------------------------ attention's own products
def check_attention_units(units, where: str = "units") -> Units:
    """``units`` resolved, after checking that attention's products can run through them: the
    probabilities enter as the first operand and a masked position has probability 0 -- its
    code 0 -- so the multiplier must give 0 for a zero first operand (T[0, b] = 0 for every b), and
    a declared register's adder must leave it unchanged when 0 is added; otherwise a masked (or
    not yet decoded) position would count, and a token decoded with the cache would not have the
    bits of a full recompute.  A ValueError naming ``where`` otherwise."""
    if getattr(units, "kind", None) == "mantissa" or (isinstance(units, str) and
                                                      units.strip().lower().split(":")[0] in ("bf16", "fp16")):
        raise ValueError(f"{where}: units {getattr(units, 'name', units)!r} (bf16/fp16 through a significand table) run "
                         f"the weight matmuls; attention's products take integer or MX units")
    if type(units).__name__ == "MXUnits" or (isinstance(units, str) and units.strip().lower().startswith("mx")):
        from lutcore.units import resolve as _any
        u = _any(units, mx=True)
        return _check_mx_attention(u, where)
    u = units if isinstance(units, Units) else _resolve_units(units)
    fmt = u.format
    for which, bits, signed in (("first", fmt.a_bits, fmt.a_signed), ("second", fmt.b_bits, fmt.b_signed)):
        if signed and bits < 2:
            raise ValueError(f"{where}: units {u.name!r} ({fmt}) have a signed 1-bit {which} operand, which holds only "
                             f"0 in symmetric codes: attention's operands need at least 2 bits")
    if u.mul is not None:
        row0 = u.table()[0]
    else:
        b = fmt.codes("b")
        row0 = u.products(np.zeros_like(b), b)
    if np.any(row0 != 0):
        bad = int(np.flatnonzero(row0 != 0)[0])
        raise ValueError(f"{where}: units {u.name!r} give {int(row0[bad])} for 0 x code {int(fmt.codes('b')[bad])}: "
                         f"attention's products need 0 x b = 0 (a masked position's probability is the code 0)")
    acc = u.accumulator
    if acc is not None and acc.adder is not None:
        lo, hi = acc.range
        r = np.arange(lo, hi + 1, dtype=np.int64) if hi - lo < (1 << 20) else \
            np.random.default_rng(0).integers(lo, hi + 1, 1 << 20)
        got = acc.adder.add(r, np.zeros_like(r))
        if not np.array_equal(got, r):
            i = int(np.flatnonzero(got != r)[0])
            raise ValueError(f"{where}: the accumulator's adder {acc.adder.name} gives {int(got[i])} for "
                             f"{int(r[i])} + 0: attention's masked positions (probability 0) would change the sum")
    return u


def _mx_values(p, v, u, threads) -> np.ndarray:
    """p (R, S) @ v (S, D) through MX units, causal (``MXUnits.values``: each position's values in
    blocks along D, their scales folded into p, p's rows in blocks along S)."""
    v = _check.array(v, "v", np.float32, 2, kind="f")
    if v.shape[0] != p.shape[1]:
        raise ValueError(f"p, v: positions differ: p is {p.shape}, v is {v.shape}")
    _finite(p, "p")
    _finite(v, "v")
    if p.size and float(p.min()) < 0:
        raise ValueError(f"p: probabilities are >= 0, got {float(p.min())}")
    R, S = p.shape
    D = v.shape[1]
    if R == 0 or D == 0 or S == 0:
        return np.zeros((R, D), np.float32)
    return u.values(p, v, _team(threads, R * S * D))


def _check_mx_attention(u, where: str):
    """MX units for attention's products: a zero probability (code 0 of the first format) times any
    finite value must be 0, as for integer units."""
    t = u.mul.products
    fin = np.isfinite(u.b.values())
    if np.any(t[0, fin] != 0):
        bad = int(np.flatnonzero((t[0] != 0) & fin)[0])
        raise ValueError(f"{where}: MX units {u.name!r} give {float(t[0, bad])!r} for 0 x {u.b.name} code {bad}: "
                         f"attention's products need 0 x b = 0 (a masked position's probability is 0)")
    return u


def _mx_units(units):
    """The MXUnits ``units`` is, or None (integer units)."""
    return units if type(units).__name__ == "MXUnits" else None


def _mx_list(specs, what: str) -> tuple:
    """MX units from one spec or MXUnits, or an iterable of them (``_mx_arg`` each)."""
    if isinstance(specs, (str, os.PathLike)) or _mx_units(specs) is not None:
        specs = (specs,)
    return tuple(_mx_arg(s, what) for s in specs)


def _mx_arg(spec, what: str):
    """MX units from an MXUnits or an MX spec; a TypeError naming ``what`` for other units."""
    from lutcore.units import resolve as _any
    u = _any(spec, mx=True)
    if _mx_units(u) is None:
        raise TypeError(f"{what}: expected MX units (an MXUnits or an mx... name), got {getattr(u, 'name', spec)!r}")
    return u


def attn_scores(q, k, units, block: int = 32, threads=None) -> np.ndarray:
    """Attention scores through ``units``: ``q`` (R, D) float32 rows (queries, already scaled), ``k``
    (S, D) float32 keys -> float32 (R, S) = the block-scaled product of q and k^T (``qmatmul``:
    q quantized per row, each key per position, in blocks of ``block`` along D), so a score depends
    on its query and its key alone (a cached key gives the bits of a recomputed one)."""
    q = _check.array(q, "q", np.float32, 2, kind="f")
    k = _check.array(k, "k", np.float32, 2, kind="f")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q, k: head dims differ: q is {q.shape}, k is {k.shape}")
    _finite(q, "q")
    _finite(k, "k")
    if _mx_units(units) is not None:             # q's rows and k's rows each in blocks along D
        return units.matmul(q, np.ascontiguousarray(k.T), _team(threads, q.shape[0] * k.shape[0] * q.shape[1]))
    return qmatmul(q, np.ascontiguousarray(k.T), units, block, _team(threads, q.shape[0] * k.shape[0] * q.shape[1]))


ATTN_SERIAL_MACS = 1 << 20        # attention products smaller than this run on one thread (same bits)


def _team(threads, macs: int) -> int:
    """The thread count for an attention product of ``macs`` products: one below ATTN_SERIAL_MACS
    (a decode step's products are too small to pay for a team's wake-up), else ``threads``."""
    nt = resolve_threads(threads)
    return 1 if macs < ATTN_SERIAL_MACS else nt


def _finite(x, name):
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: {int(np.count_nonzero(~np.isfinite(x)))} non-finite value(s) (NaN or Inf) "
                         f"cannot be quantized")


def attn_values(p, v, units, block: int = 32, threads=None) -> np.ndarray:
    """Attention output through ``units``: probabilities ``p`` (R, S) float32 (>= 0; 0 where
    masked) times values ``v`` (S, D) float32 -> float32 (R, D).  Each value row (position) is
    quantized on its own in the unit's second-operand format over D (``quantize_codes``: scale
    s_v[s], zero point z_v[s]); its scale goes into the probabilities, ``p'[r, s] = p[r, s] *
    s_v[s]`` (float32), which are quantized per row in blocks of ``block`` along S in the first
    operand's format (p' >= 0: unsigned codes have zero point 0, signed ones use 0..qmax); then
    ``Y[r, c] = sum_b float32(s_p[r, b]) * float32(I_b[r, c])`` in float32, b increasing, with
    ``I_b = sum_{s in b} T[qp[r, s], qv[s, c]] - sum_{s in b} qp[r, s] z_v[s]`` (the products
    through the unit and its register, the zero-point term exact).  Blocks are aligned to
    position 0, so a row's result depends on its visible positions alone: masked ones have p = 0,
    code 0, and add nothing (``check_attention_units``)."""
    from lutcore.ops.gemm import lut_gemm
    p = _check.array(p, "p", np.float32, 2, kind="f")
    if _mx_units(units) is not None:
        return _mx_values(p, v, units, threads)
    u = units if isinstance(units, Units) else _resolve_units(units)
    v = _check.array(v, "v", np.float32, 2, kind="f")
    R, S = p.shape
    if v.shape[0] != S:
        raise ValueError(f"p, v: positions differ: p is {p.shape}, v is {v.shape}")
    block = _block(block)
    _finite(p, "p")
    _finite(v, "v")
    if p.size and float(p.min()) < 0:
        raise ValueError(f"p: probabilities are >= 0, got {float(p.min())}")
    fmt = u.format
    D = v.shape[1]
    nt = _team(threads, R * S * D)
    y = np.zeros((R, D), np.float32)
    if R == 0 or D == 0 or S == 0:
        return y
    qv, sv, zv = quantize_codes(v, fmt.b_bits, fmt.b_signed, axis=1)          # (S, D), (S, 1), (S, 1)
    pp = (p * sv.reshape(1, S)).astype(np.float32)
    nblk = -(-S // block)
    if u.plain:               # signed 8 x 8, exact sums: the native block-scaled kernel, value scales 1
        qb = np.zeros((nblk * block, D), np.int8)
        qb[:S] = qv
        vb = Q8(qb, np.ones((nblk, D), np.float32), block, 0, (S, D))
        return qmatmul(quantize(pp, block, threads=nt, name="p"), vb, u, block, nt)
    ppad = np.zeros((R, nblk * block), np.float32)
    ppad[:, :S] = pp
    qp, sp, _ = quantize_codes(ppad.reshape(R, nblk, block), fmt.a_bits, fmt.a_signed, axis=2)   # zp 0: p' >= 0
    qp, sp = qp.reshape(R, nblk * block), sp.reshape(R, nblk)
    zv = zv.reshape(S)
    for bi in range(nblk):
        s0, s1 = bi * block, min(S, (bi + 1) * block)
        A, B = np.ascontiguousarray(qp[:, s0:s1]), np.ascontiguousarray(qv[s0:s1])
        if fmt.is_table:
            A = A.astype(np.int8 if fmt.a_signed else np.uint8)
            B = B.astype(np.int8 if fmt.b_signed else np.uint8)
        I = lut_gemm(A, B, u, threads=nt).astype(np.int64)
        if zv[s0:s1].any():
            I -= A.astype(np.int64) @ zv[s0:s1][:, None]
        y = y + sp[:, bi, None] * I.astype(np.float32)
    return y
