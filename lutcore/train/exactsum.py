"""Exact, order-independent summation of float32 arrays (element-wise), for the
data-parallel gradient reduction.

Contract (docs/DESIGN.md, "Data-parallel training"):

    S[i] = round_to_float32( sum_k x_k[i] )         (the sum taken exactly, in the reals)

rounded once, to nearest, ties to even.  Because the sum is exact, the result does not
depend on the order of the terms, on how they were partitioned into partial sums, nor
on the order partial sums are merged: any worker count gives the same bits.
Special values are decided explicitly, per element, from flags merged by OR:
a NaN term, or both a +inf and a -inf term -> NaN; else a +inf term -> +inf; a -inf
term -> -inf.  An exact sum that rounds beyond float32's range is +-inf (IEEE overflow).
An exact zero is +0.0 (also when every term was -0.0: the one place this differs from
a float sum).  Denormals are exact terms like any other.

Design: every finite float32 is an integer multiple of 2**-149: x = +-m * 2**s * 2**-149
with m < 2**24 and 0 <= s <= 253.  The accumulator holds that integer per element in
32-bit limbs stored in int64, limb-major (nl, n) (limb j weighs 2**(32 j) units), over a window of limbs
per tensor [lo, lo + nl) that grows to cover what was added (the limb above the highest
one written stays as headroom for carries and the sign).  A term adds +-(m << (s % 32))
(< 2**56) into limb s // 32; limbs are carry-normalised (low limbs in [0, 2**32), top
limb signed) at least every ``_LAZY`` additions, so no int64 overflows.  Merging two
accumulators is integer addition of aligned limbs.  The element passes — adding an array
(decompose + scatter into its limb), carry normalisation and the final rounding — run
natively (``lutcore.ops.exactsum``, csrc/exactsum/exactsum.h, OpenMP over elements: any
thread count, the same bits); ``native=False`` runs the vectorised numpy passes kept here as their reference.
"""
from __future__ import annotations

import numpy as np

from lutcore import _threads

__all__ = ["ExactSum", "exact_sum", "GradSum"]

_LAZY = 64                 # additions of < 2**56 between normalisations (64 * 2**56 < 2**63)
_MASK = np.int64(0xFFFFFFFF)
_POS_INF, _NEG_INF, _NAN = np.uint8(1), np.uint8(2), np.uint8(4)


def _decompose(x: np.ndarray):
    """float32 (n,) -> (signed contribution int64 (n,), limb index int64 (n,), finite mask)."""
    bits = x.view(np.uint32).astype(np.int64)                        # (n,)
    e = (bits >> 23) & 0xFF                                           # (n,) biased exponent
    f = bits & 0x7FFFFF                                               # (n,) fraction
    finite = e != 0xFF
    m = np.where(e == 0, f, f | 0x800000)                             # (n,) < 2**24
    s = np.where(e == 0, 0, e - 1)                                    # (n,) in [0, 253]
    c = m << (s & 31)                                                 # (n,) < 2**56
    c = np.where(bits >> 31 == 1, -c, c)
    c[~finite] = 0
    return c, s >> 5, finite


def _xsum():
    """The native passes' room (lutcore.ops.exactsum, csrc/exactsum): imported on first use."""
    from lutcore.ops import exactsum
    return exactsum


def _normalise(limbs: np.ndarray) -> None:
    """Carry-propagate (nl, n) in place: limbs 0..nl-2 in [0, 2**32), the top one signed."""
    carry = np.empty(limbs.shape[1], np.int64)
    for j in range(limbs.shape[0] - 1):
        np.right_shift(limbs[j], 32, out=carry)                       # arithmetic shift: floor
        limbs[j] &= _MASK
        limbs[j + 1] += carry


class ExactSum:
    """The exact running sum of float32 arrays of one shape (see the module docstring).

    ``add(x)`` adds an array; ``merge(other)`` adds another accumulator; ``result()``
    rounds once to float32.  ``to_wire()`` / ``from_wire()``: a compact picklable form
    (normalised limbs as uint32 and the top limb as int64) for sending between processes."""

    def __init__(self, shape, threads=None, native=True):
        self.threads = _threads.resolve_threads(threads)             # the native passes' team size
        self.native = bool(native)                                    # False: the numpy passes (the reference)
        self.shape = tuple(int(d) for d in shape)
        self.n = int(np.prod(self.shape, dtype=np.int64))
        self.lo = 0
        self.limbs = np.zeros((0, self.n), np.int64)                  # (nl, n): each limb contiguous
        self.flags = None                                             # (n,) uint8 or None
        self._pending = 0

    # ---------------------------------------------------------------- window
    def _cover(self, lo: int, hi: int) -> None:
        """Grow the window to include limbs [lo, hi] plus one headroom limb above hi."""
        nl = self.limbs.shape[0]
        if nl == 0:
            self.lo, self.limbs = lo, np.zeros((hi - lo + 2, self.n), np.int64)
            return
        new_lo, new_hi = min(lo, self.lo), max(hi + 1, self.lo + nl - 1)
        if new_lo == self.lo and new_hi == self.lo + nl - 1:
            return
        grown = np.zeros((new_hi - new_lo + 1, self.n), np.int64)
        grown[self.lo - new_lo:self.lo - new_lo + nl] = self.limbs
        self.lo, self.limbs = new_lo, grown

    def _flag(self, mask, bits):
        if self.flags is None:
            self.flags = np.zeros(self.n, np.uint8)
        self.flags[mask] |= bits

    # ---------------------------------------------------------------- in
    def add(self, x) -> "ExactSum":
        if not isinstance(x, np.ndarray) or x.dtype != np.float32:
            raise TypeError(f"x: expected a float32 numpy array, got {getattr(x, 'dtype', type(x).__name__)}")
        if x.shape != self.shape:
            raise ValueError(f"x: expected shape {self.shape}, got {x.shape}")
        x = np.ascontiguousarray(x).reshape(-1)                       # (n,)
        if self.native:
            return self._add_native(x)
        c, q, finite = _decompose(x)
        if not finite.all():
            bad = x[~finite]
            idx = np.flatnonzero(~finite)
            self._flag(idx[np.isnan(bad)], _NAN)
            self._flag(idx[bad == np.inf], _POS_INF)
            self._flag(idx[bad == -np.inf], _NEG_INF)
        nz = c != 0
        if not nz.any():
            return self
        qn = q[nz]
        qmin, qmax = int(qn.min()), int(qn.max())                    # a zero adds 0 to any limb
        self._cover(qmin, qmax)
        for t in range(max(qmin, self.lo), qmax + 1):                 # each element into its one limb
            self.limbs[t - self.lo] += np.where(q == t, c, 0)
        return self._added()

    def _add_native(self, x: np.ndarray) -> "ExactSum":
        """add() through csrc/exactsum (the same limbs, flags and window as the numpy passes)."""
        xs = _xsum()
        qmin, qmax, nonfinite = xs.limb_range(x, self.threads)
        if nonfinite:
            self._flag(slice(0, 0), 0)                                # allocate the flags
        if qmax < 0:                                                  # nothing finite and nonzero
            if nonfinite:
                xs.add(np.zeros((0, self.n), np.int64), 0, x, self.flags, self.threads)
            return self
        self._cover(qmin, qmax)
        xs.add(self.limbs, self.lo, x, self.flags if nonfinite else None, self.threads)
        return self._added()

    def _added(self) -> "ExactSum":
        self._pending += 1
        if self._pending >= _LAZY:
            self.normalise()
        return self

    def normalise(self) -> None:
        if self.limbs.shape[0] and self._pending:
            norm = _xsum().normalise if self.native else (lambda L, t: _normalise(L))
            norm(self.limbs, self.threads)
            top = self.limbs[-1]
            if np.abs(top).max(initial=0) >= (1 << 40):                # keep the top limb small
                self._cover(self.lo, self.lo + self.limbs.shape[0] - 1)
                norm(self.limbs, self.threads)
        self._pending = 0

    def merge(self, other: "ExactSum") -> "ExactSum":
        if not isinstance(other, ExactSum) or other.shape != self.shape:
            raise ValueError(f"other: expected an ExactSum of shape {self.shape}, got "
                             f"{getattr(other, 'shape', type(other).__name__)}")
        onl = other.limbs.shape[0]
        if onl:
            other.normalise()           # its limbs then < 2**40 in magnitude: one addition's worth
        return self._add_normalised(other.flags, other.lo, onl, other.limbs)

    def merge_wire(self, w) -> "ExactSum":
        """merge(from_wire(w)) without building the int64 copy: the wire's uint32 limbs and int64
        top limb are added straight into this accumulator's limbs (the same integers)."""
        shape, lo, low, top, flags = w
        if tuple(shape) != self.shape:
            raise ValueError(f"w: expected an accumulator of shape {self.shape}, got {tuple(shape)}")
        # a normalised accumulator: limbs < 2**40, one addition's worth
        onl = 0 if top is None else low.shape[0] + 1
        return self._add_normalised(flags, int(lo), onl, [*low, top] if onl else ())

    def _add_normalised(self, flags, lo: int, onl: int, limbs) -> "ExactSum":
        """OR in another accumulator's flags and add its ``onl`` normalised limb rows
        (``limbs[j]`` is the row of weight 2**(32*(lo + j)))."""
        if flags is not None:
            self._flag(slice(None), 0)
            self.flags |= np.asarray(flags, np.uint8)
        if not onl:
            return self
        self._cover(lo, lo + onl - 1)
        off = lo - self.lo
        for j in range(onl):
            self.limbs[off + j] += limbs[j]
        return self._added()

    # ---------------------------------------------------------------- out
    def result(self) -> np.ndarray:
        """The exact sum rounded once to float32 (nearest, ties to even), with the flags applied."""
        out = np.zeros(self.n, np.float32)
        if self.limbs.shape[0]:
            out = self._round()
        if self.flags is not None and self.flags.any():
            fl = self.flags
            pos, neg, nan = (fl & _POS_INF) != 0, (fl & _NEG_INF) != 0, (fl & _NAN) != 0
            out[pos] = np.inf
            out[neg] = -np.inf
            out[nan | (pos & neg)] = np.nan
        return out.reshape(self.shape)

    def _round(self) -> np.ndarray:
        nl = self.limbs.shape[0]
        if self.native and nl <= _xsum().MAX_LIMBS:
            return _xsum().round_f32(self.limbs, self.lo, self.threads)
        L = np.zeros((nl + 2, self.n), np.int64)                      # (nl+2, n): a zero below, one above
        L[1:-1] = self.limbs
        _normalise(L)
        neg = L[-1] < 0
        if neg.any():
            np.negative(L, out=L, where=neg[None, :])
            _normalise(L)                                              # now a magnitude: every limb >= 0
        # the highest nonzero limb h (>= 1), the limb below it, and whether any limb under those is nonzero
        h = np.ones(self.n, np.int64)
        top, below = L[1].copy(), L[0].copy()
        sticky = np.zeros(self.n, bool)
        under = np.zeros(self.n, bool)                                 # any nonzero in limbs < j - 1
        for j in range(2, nl + 2):
            under |= L[j - 2] != 0
            nzj = L[j] != 0
            h[nzj] = j
            np.copyto(top, L[j], where=nzj)
            np.copyto(below, L[j - 1], where=nzj)
            np.copyto(sticky, under, where=nzj)
        zero = top == 0
        top, below = top.astype(np.uint64), below.astype(np.uint64)
        W = (top << np.uint64(32)) | below                             # (n,) uint64
        b = np.frexp(top.astype(np.float64))[1].astype(np.int64)      # bit length of the top limb
        sh = (b + 8).astype(np.uint64)                                 # bits dropped to keep 24
        mant = W >> sh
        rem = W & ((np.uint64(1) << sh) - np.uint64(1))
        half = np.uint64(1) << (sh - np.uint64(1))
        up = (rem > half) | ((rem == half) & (sticky | ((mant & np.uint64(1)) == 1)))
        mant = mant + up.astype(np.uint64)
        e = sh.astype(np.int64) + 32 * (self.lo + h - 2) - 149         # value = mant * 2**e
        with np.errstate(over="ignore"):
            v = np.ldexp(mant.astype(np.float64), e).astype(np.float32)  # exact, or overflow to inf
        v[zero] = 0.0
        return np.where(neg, -v, v)

    def nbytes_wire(self) -> int:
        nl = self.limbs.shape[0]
        return self.n * (4 * max(nl - 1, 0) + (8 if nl else 0)) + (0 if self.flags is None else self.n)

    def to_wire(self):
        self.normalise()
        low = self.limbs[:-1].astype(np.uint32) if self.limbs.shape[0] else None
        top = self.limbs[-1].copy() if self.limbs.shape[0] else None
        return (self.shape, self.lo, low, top, self.flags)

    @classmethod
    def from_wire(cls, w) -> "ExactSum":
        shape, lo, low, top, flags = w
        s = cls(shape)
        if top is not None:
            s.lo = int(lo)
            s.limbs = np.empty((low.shape[0] + 1, s.n), np.int64)
            s.limbs[:-1] = low
            s.limbs[-1] = top
        s.flags = None if flags is None else np.array(flags, np.uint8)
        return s


def exact_sum(arrays) -> np.ndarray:
    """The element-wise exact sum of same-shape float32 arrays, rounded once (see the contract)."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("arrays: expected at least one float32 array, got none")
    acc = ExactSum(np.shape(arrays[0]))
    for a in arrays:
        acc.add(a)
    return acc.result()


class GradSum:
    """{name: ExactSum}: a gradient dict's exact running sum (names in sorted order)."""

    def __init__(self, threads=None, native=True):
        self.threads, self.native = _threads.resolve_threads(threads), bool(native)
        self.sums: dict[str, ExactSum] = {}

    def add(self, grads: dict) -> "GradSum":
        for k in sorted(grads):
            g = grads[k]
            if k not in self.sums:
                self.sums[k] = ExactSum(g.shape, self.threads, self.native)
            self.sums[k].add(np.ascontiguousarray(g, np.float32))
        return self

    def merge(self, other: "GradSum") -> "GradSum":
        for k in sorted(other.sums):
            if k not in self.sums:
                self.sums[k] = ExactSum(other.sums[k].shape, self.threads, self.native)
            self.sums[k].merge(other.sums[k])
        return self

    def merge_wire(self, w: dict) -> "GradSum":
        """merge(GradSum.from_wire(w)), adding the wire's limbs in place (ExactSum.merge_wire)."""
        for k in sorted(w):
            if k not in self.sums:
                self.sums[k] = ExactSum(w[k][0], self.threads, self.native)
            self.sums[k].merge_wire(w[k])
        return self

    @staticmethod
    def wire_nbytes(w: dict) -> int:
        """The bytes of a to_wire() form's arrays (what a worker sends)."""
        return int(sum(sum(a.nbytes for a in e[2:] if a is not None) for e in w.values()))

    def result(self) -> dict:
        return {k: self.sums[k].result() for k in sorted(self.sums)}

    def nbytes_wire(self) -> int:
        return sum(s.nbytes_wire() for s in self.sums.values())

    def to_wire(self):
        return {k: s.to_wire() for k, s in self.sums.items()}

    @classmethod
    def from_wire(cls, w) -> "GradSum":
        g = cls()
        g.sums = {k: ExactSum.from_wire(v) for k, v in w.items()}
        return g
