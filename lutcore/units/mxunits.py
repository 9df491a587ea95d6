"""MX units: what a layer computes when its products run in an OCP MX block format through a
floating-point multiplier and a declared accumulator -- the MX counterpart of ``Units``.

Design: an ``MXUnits`` is a frozen value: the multiplier (an ``FPUnit``: its two element formats
and table of products), the block size along K (32, as OCP MX v1.0) and the accumulation
("exact", or ``lutcore.ops.mxgemm.Narrow``).  Its one computation is ``matmul(a, b)``: a (M, K)
quantized along K in the multiplier's first format (``lutcore.mx.mx_quantize``, nearest even),
b (K, N) along K in its second, then ``lutcore.ops.mxgemm.mx_gemm`` -- the same bits at any
thread count and SIMD path.  The front ends (``lutcore.torch``'s layers, lutcore's models, the
pipeline, ``lutcore eval``) ask ``isinstance(u, MXUnits)`` and run that product in place of the
int8 one; everything they quantize they quantize per call (an MX block has no static scale).

Names (``parse``; what ``lutcore.units.resolve`` and every ``--units`` flag take):

    mx<elem>[x<elem>][:<multiplier>][@m<mbits>[:promote=<n>][:truncate]][/block=<n>]

    elem        fp8 (E4M3), fp8e5m2, fp6 (E2M3), fp6e3m2, fp4 (E2M1), int8 (MXINT8), or a format
                name (e4m3, e5m2, e2m3, e3m2, e2m1); one elem: both operands; "AxB": a, then b
    multiplier  exact (default), mitchell, lmul, truncated:<k>, or a directory ``FPUnit.save``
                wrote (its formats must be the elems named)
    @m<mbits>   a narrow accumulator of mbits mantissa bits (precision mbits + 1), promoted to
                float32 every n products (``promote=n``; none: only at the end), rounding to
                nearest even, or toward zero with ``truncate``

e.g. ``mxfp8``, ``mxfp4:mitchell``, ``mxfp8:lmul@m13:promote=128``, ``mxint8xfp8``.  ``name`` is
the canonical spelling (it resolves to an equal unit when the multiplier is a built-in).

Gradient tables (``gradients``): the derivative of the table's products with respect to each
operand's decoded value, by differences in value order -- for code i of a, with p and n the
codes of the next smaller and next larger finite values (one-sided at the ends; -0 and +0 are
one value), Ga[i, j] = (T[n, j] - T[p, j]) / (v[n] - v[p]) in float64, rounded to float32; the
same for b.  For the exact multiplier this is exactly the other operand's value (so
``backward="table"`` then is the straight-through gradient at the quantized operands).  Entries
of NaN/inf codes, or where a difference is not finite, are 0.  The tables are laid out for
``lutcore.ops.gradtables.table_pass`` (65536 float32, index code_a * 256 + code_b; codes of
narrower formats leave the rest 0).
"""
from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from lutcore import _check
from lutcore.mx import MX, scale_values as scales_f32
from lutcore.ops.mxgemm import MXProducts, Narrow, mx_gemm
from lutcore.units import fp as _fp
from lutcore.units.fpmul import FPUnit

__all__ = ["MXUnits", "is_mx_spec", "is_mx_dir", "table_grads", "ELEMENT_NAMES"]

ELEMENT_NAMES = {"fp8": "e4m3", "fp8e4m3": "e4m3", "fp8e5m2": "e5m2", "fp6": "e2m3", "fp6e2m3": "e2m3",
                 "fp6e3m2": "e3m2", "fp4": "e2m1", "fp4e2m1": "e2m1", "int8": "int8",
                 "e4m3": "e4m3", "e5m2": "e5m2", "e2m3": "e2m3", "e3m2": "e3m2", "e2m1": "e2m1"}
_CANON = {"e4m3": "fp8", "e5m2": "fp8e5m2", "e2m3": "fp6", "e3m2": "fp6e3m2", "e2m1": "fp4", "int8": "int8"}
MX_FILE, _FILE_FORMAT = "mxunits.json", "lutcore-mxunits/1"
_BUILTINS = ("exact", "mitchell", "lmul")
_ACC = re.compile(r"m(\d+)((?::promote=\d+)|(?::truncate)|(?::nearest))*")
_SPEC = re.compile(r"mx[a-z0-9]+(x[a-z0-9]+)?(:.*)?", re.I)


def is_mx_spec(spec) -> bool:
    """Whether ``spec`` is an MX units name (``mx...``; a string that is not an existing path)."""
    return (isinstance(spec, str) and bool(_SPEC.fullmatch(re.sub(r"/block=\d+$", "", spec.strip()).split("@")[0]))
            and not os.path.exists(spec))


def is_mx_dir(path) -> bool:
    """Whether ``path`` is a directory ``MXUnits.save`` wrote."""
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(os.path.join(os.fspath(path), MX_FILE))


def _element(name: str, spec: str) -> _fp.FloatFormat:
    f = ELEMENT_NAMES.get(name.lower())
    if f is None:
        raise ValueError(f"units: {spec!r}: unknown MX element {name!r}; expected one of "
                         f"{', '.join(sorted(ELEMENT_NAMES))}")
    return _fp.fp_format(f)


def _multiplier(mul, a, b, spec: str) -> FPUnit:
    """The FPUnit a multiplier name or directory stands for, of formats a x b."""
    if isinstance(mul, FPUnit):
        return mul
    if not isinstance(mul, str):
        raise TypeError(f"mul: expected an FPUnit or a multiplier name ({', '.join(_BUILTINS)}, truncated:k) or "
                        f"an FPUnit directory, got {type(mul).__name__}")
    m = mul.strip()
    if m in _BUILTINS:
        return getattr(FPUnit, m)(a, b)
    t = re.fullmatch(r"trunc(?:ated)?:?(\d+)", m)
    if t:
        return FPUnit.truncated(a, b, int(t.group(1)))
    if os.path.isdir(m):
        try:
            return FPUnit.load(m, a, b)
        except ValueError as e:                            # the name is what was wrong: say which
            raise ValueError(f"units: {spec!r}: multiplier {m!r}: {e}") from None
    raise ValueError(f"units: {spec!r}: unknown multiplier {mul!r}; expected one of {', '.join(_BUILTINS)}, "
                     f"truncated:<k> (k fraction bits kept) or a directory FPUnit.save wrote")


def _accumulator(text: str, spec: str) -> Narrow:
    m = _ACC.fullmatch(text.strip())
    if not m:
        raise ValueError(f"units: {spec!r}: the accumulator after '@' must read m<mbits>[:promote=<n>][:truncate] "
                         f"(e.g. m13:promote=128), got {text!r}")
    mbits, promote, rounding = int(m.group(1)), None, "nearest"
    for part in text.split(":")[1:]:
        if part.startswith("promote="):
            promote = int(part[8:])
        elif part == "truncate":
            rounding = "truncate"
    try:
        return Narrow(mbits, promote, rounding)
    except (TypeError, ValueError) as e:
        raise ValueError(f"units: {spec!r}: {e}") from None


class MXUnits:
    """Products in an MX block format through a floating-point multiplier (the module docstring).

    ``mul``: an ``FPUnit``, or a multiplier name (exact, mitchell, lmul, truncated:k) / an FPUnit
    directory with ``fmt`` naming the element format(s) (one name, or (a, b)); ``block``: the
    block size along K (32); ``accumulate``: "exact" or a ``Narrow``; ``name``: defaults to the
    canonical spelling."""

    kind = "mx"
    accumulator = None       # no integer register to log overflows of (a Narrow one rounds, never wraps)
    plain = False            # not the signed 8 x 8 int8 contract (what integer-only paths ask)

    @property
    def format(self) -> str:
        """The operands, as a label ("e4m3 x e4m3 MX blocks of 32")."""
        return f"{self.a.name} x {self.b.name} MX blocks of {self.block}"

    def __init__(self, mul="exact", fmt=None, block: int = 32, accumulate="exact", name: str | None = None):
        if isinstance(mul, FPUnit):
            if fmt is not None:
                want = _fmt_pair(fmt)
                if want != (mul.a, mul.b):
                    raise ValueError(f"fmt: the multiplier is {mul.a.name} x {mul.b.name}, got fmt {fmt!r}")
        else:
            if fmt is None:
                raise ValueError("fmt: a multiplier given by name needs its element format(s): fmt='e4m3' or "
                                 "('e4m3', 'e5m2')")
            a, b = _fmt_pair(fmt)
            mul = _multiplier(mul, a, b, str(mul))
        self.mul = mul
        self.a, self.b = mul.a, mul.b
        self.block = _check.int_arg(block, "block", lo=1)
        if isinstance(accumulate, str) and accumulate == "exact":
            self.accumulate = "exact"
        elif isinstance(accumulate, Narrow):
            self.accumulate = accumulate
        else:
            raise ValueError(f"accumulate: expected \"exact\" or a Narrow(mbits, promote, rounding), got {accumulate!r}")
        MXProducts(mul.products, mul.a, mul.b).route(self.block)     # a table no route sums exactly: refused now
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a str, got {type(name).__name__}")
        self.name = name if name is not None else self._canonical()
        h = hashlib.sha256(f"lutcore-mxunits/1\n{mul.digest}\n{self.block}\n{self._acc_text()}".encode())
        self.digest = h.hexdigest()
        self.loaded_from = None          # the spec it was resolved from (lutcore.units.assign saves it by name)
        self._products = None
        self._grads = None
        self.published = {}              # no EvoApproxLib record (what Units certify at load)
        self.cost = {}                   # hardware figures (power_mw, area_um2, delay_ns, source): with_cost

    def with_cost(self, *, power_mw=None, area_um2=None, delay_ns=None, source: str | None = None) -> "MXUnits":
        """A copy with hardware cost figures attached, as ``Units.with_cost`` (the search's energy
        reads ``power_mw``: the multiplier's power per product)."""
        import copy
        from lutcore.units import stated_cost
        out = copy.copy(self)
        out.cost = stated_cost(self.cost, power_mw, area_um2, delay_ns, source)
        return out

    # ------------------------------------------------------------------ names
    @classmethod
    def parse(cls, spec: str) -> "MXUnits":
        """The MXUnits a name stands for (the module docstring's grammar); ValueError naming the
        spec and the part that is wrong."""
        if not isinstance(spec, str):
            raise TypeError(f"units: expected an MX units name such as 'mxfp8', got {type(spec).__name__}")
        s = spec.strip()
        blk = re.search(r"/block=([^/@:]*)$", s)
        if blk and not (re.fullmatch(r"[0-9]+", blk.group(1)) and int(blk.group(1)) >= 1):
            raise ValueError(f"units: {spec!r}: the block after '/block=' must be an int >= 1, got {blk.group(1)!r}")
        body = s[:blk.start()] if blk else s
        head, _, acc = body.partition("@")
        fmts, _, mul = head.partition(":")
        if not fmts.lower().startswith("mx") or len(fmts) < 3:
            raise ValueError(f"units: {spec!r}: an MX units name starts with mx<element> (e.g. mxfp8, mxfp4:mitchell)")
        parts = fmts[2:].split("x")
        if len(parts) > 2 or not all(parts):
            raise ValueError(f"units: {spec!r}: expected mx<element> or mx<element>x<element>, got {fmts!r}")
        a = _element(parts[0], spec)
        b = _element(parts[-1], spec)
        u = cls(_multiplier(mul or "exact", a, b, spec), block=int(blk.group(1)) if blk else 32,
                accumulate=_accumulator(acc, spec) if acc else "exact")
        u.loaded_from = s
        return u

    def _acc_text(self) -> str:
        acc = self.accumulate
        if acc == "exact":
            return ""
        return (f"@m{acc.mbits}" + (f":promote={acc.promote}" if acc.promote else "")
                + (":truncate" if acc.rounding == "truncate" else ""))

    def _canonical(self) -> str:
        a, b = _CANON[self.a.name], _CANON[self.b.name]
        fm = a if a == b else f"{a}x{b}"
        mul = self.mul.name
        mul = "" if mul == "exact" else f":{mul}"
        blk = "" if self.block == 32 else f"/block={self.block}"
        return f"mx{fm}{mul}{self._acc_text()}{blk}"

    # ------------------------------------------------------------------ files
    def save(self, path) -> None:
        """Write the multiplier's files (``FPUnit.save``'s) and ``mxunits.json`` (block, accumulation,
        name, digest) into directory ``path``, crash-safe as every lutcore save."""
        import json
        from lutcore._io import atomic_dir
        from lutcore.units.fpmul import PRODUCTS_FILE, UNIT_FILE
        meta = {"format": _FILE_FORMAT, "block": self.block, "accumulate": self._acc_text(), "name": self.name,
                "digest": self.digest, "cost": self.cost}
        with atomic_dir(path, owned=(PRODUCTS_FILE, UNIT_FILE, MX_FILE), last=(MX_FILE,)) as tmp:
            self.mul.write_files(tmp)
            with open(os.path.join(tmp, MX_FILE), "w", encoding="utf-8") as f:
                json.dump(meta, f, indent=1)

    @classmethod
    def load(cls, path) -> "MXUnits":
        """Read what ``save`` wrote; the digest recorded is checked (ValueError naming the file)."""
        from lutcore._io import contained, path_arg, saved_dir
        from lutcore.units import _read_json
        path = path_arg(path)
        jf = contained(saved_dir(path), MX_FILE)
        meta = _read_json(jf, "the MX units' description")
        keys = ("block", "accumulate", "name", "digest")
        if not isinstance(meta, dict) or meta.get("format") != _FILE_FORMAT or any(k not in meta for k in keys):
            raise ValueError(f"{jf}: expected {{\"format\": \"{_FILE_FORMAT}\", \"block\", \"accumulate\", \"name\", "
                             f"\"digest\"}}, got {meta!r}"[:400])
        try:
            acc = _accumulator(meta["accumulate"][1:], MX_FILE) if meta["accumulate"] else "exact"
            u = cls(FPUnit.load(path), block=meta["block"], accumulate=acc, name=meta["name"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"{jf}: {e}") from None
        if u.digest != meta["digest"]:
            raise ValueError(f"{jf}: the units hash to {u.digest[:16]}, but the file records "
                             f"{str(meta['digest'])[:16]} (a corrupted or replaced file)")
        cost = meta.get("cost") or {}
        if cost:
            try:
                u = u.with_cost(**{k: cost[k] for k in ("power_mw", "area_um2", "delay_ns") if k in cost},
                                source=cost.get("source"))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{jf}: cost: {e}") from None
        u.loaded_from = os.path.abspath(path)
        return u

    # ------------------------------------------------------------------ computing
    def products(self) -> MXProducts:
        """The multiplier's table prepared for ``mx_gemm`` (made once)."""
        if self._products is None:
            self._products = MXProducts(self.mul.products, self.a, self.b)
        return self._products

    def quantize(self, x, axis: int, operand: str = "a"):
        """``x`` as MX blocks along ``axis`` in the format of ``operand`` ("a" or "b")."""
        from lutcore.mx import mx_quantize
        return mx_quantize(x, self.a if operand == "a" else self.b, self.block, axis)

    def matmul(self, a, b, threads: int | None = None) -> np.ndarray:
        """float32 (M, N) = a (M, K) @ b (K, N) through the unit: a quantized along K in the first
        format, b along K in the second, products and sums as declared."""
        a = _fp.as_float32(a, "a")
        b = _fp.as_float32(b, "b")
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"a, b: expected (M, K) and (K, N) arrays, got {a.shape} and {b.shape}")
        return self.matmul_q(self.quantize(a, 1, "a"), self.quantize(b, 0, "b"), threads)

    def matmul_q(self, qa, qb, threads: int | None = None) -> np.ndarray:
        """The product of operands already quantized (``quantize``: a along axis 1, b along 0)."""
        return mx_gemm(qa, qb, self.products(), self.accumulate, threads)

    def gradients(self) -> tuple:
        """(Ga, GbT): float32 (65536,) gradient tables for ``lutcore.ops.gradtables.table_pass``
        (the module docstring), Ga indexed [code_a * 256 + code_b], GbT [code_b * 256 + code_a]."""
        if self._grads is None:
            T = self.mul.products.astype(np.float64)
            ga = _difference(T, self.a.values().astype(np.float64), axis=0)
            gb = _difference(T, self.b.values().astype(np.float64), axis=1)
            Ga = np.zeros((256, 256), np.float32)
            GbT = np.zeros((256, 256), np.float32)
            Ga[:ga.shape[0], :ga.shape[1]] = ga
            GbT[:gb.shape[1], :gb.shape[0]] = gb.T
            for t in (Ga, GbT):
                t.setflags(write=False)
            self._grads = (Ga.reshape(-1), GbT.reshape(-1))
        return self._grads

    def error_metrics(self) -> dict:
        """The multiplier's metrics (``lutcore.units.fpmul.fp_metrics``: relative errors of the decoded
        products, EvoApproxLib's value metrics) plus mae_pct / wce_pct: mae and wce in percent of the
        largest exact finite product magnitude (EvoApproxLib divides by the output range)."""
        from lutcore.units.fpmul import fp_metrics
        m = fp_metrics(self.mul)
        va, vb = self.a.values().astype(np.float64), self.b.values().astype(np.float64)
        fa, fb = va[np.isfinite(va)], vb[np.isfinite(vb)]
        top = float(np.abs(fa).max() * np.abs(fb).max()) or 1.0
        m["mae_pct"] = 100.0 * m["mae"] / top
        m["wce_pct"] = 100.0 * m["wce"] / top
        return m

    # ------------------------------------------------------------------ attention's p v
    def values(self, p, v, threads: int | None = None) -> np.ndarray:
        """Attention's p (R, S) @ v (S, D) through the unit, causal: each position's values in
        blocks of ``block`` along D in the second format (as an MX KV cache holds them), their
        power-of-two scales folded into the probabilities, p'_j[r, s] = p[r, s] * sv[s, j]
        (float32), each p'_j quantized per row in blocks along S (aligned to position 0) in the
        first format; then per D-block j, y[:, j] = the MX product of p'_j and v's codes of block j
        (block scale 1 along S).  A row's result reads its visible positions alone (a masked p is
        0, code 0, and adds nothing): a token decoded with a KV cache has the bits of a full
        recompute."""
        out, _, _ = self._values(p, v, threads)
        return out

    def _values(self, p, v, threads):
        """(y, [(qa_j, qb_j)] per D-block, sv) -- what the table backward re-reads."""
        blk = self.block
        (R, S), D = p.shape, v.shape[1]
        qv = self.quantize(v, 1, "b")                               # codes (S, Dp), scales (S, nbD)
        sv = scales_f32(qv.scales)
        nbs = -(-S // blk)
        ones = np.full((nbs, blk), 127, np.uint8)                   # 2^0 along S
        y = np.empty((R, D), np.float32)
        parts = []
        for j in range(qv.scales.shape[1]):
            c0, c1 = j * blk, min(D, (j + 1) * blk)
            qa = self.quantize((p * sv[:, j][None, :]).astype(np.float32), 1, "a")
            cb = np.zeros((nbs * blk, blk), np.uint8)
            cb[:S] = qv.codes[:, c0:c0 + blk]
            qb = MX._made(cb, ones, self.b, blk, 0, (S, blk))
            y[:, c0:c1] = self.matmul_q(qa, qb, threads)[:, :c1 - c0]
            parts.append((qa, qb))
        return y, parts, sv

    def values_table_grads(self, dy, p, v, threads: int | None = None) -> tuple:
        """(dP (R, S), dV (S, D)) of ``values`` through the gradient tables, the quantization passed
        straight through: per D-block j (ascending), with ca_j, sa_j p'_j's codes and scales and cv
        v's codes, dP += sv[s, j] * sum_{c in j} dY[r, c] Ga[ca_j[r, s], cv[s, c]], and
        dV[s, c] = (sum_r dY[r, c] sa_j[r, b(s)] Gb[ca_j[r, s], cv[s, c]]) / sv[s, j]; each sum in
        index order (``table_grads``)."""
        _, parts, sv = self._values(p, v, threads)
        (R, S), D, blk = p.shape, v.shape[1], self.block
        dP = np.zeros((R, S), np.float32)
        dV = np.empty((S, D), np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            for j, (qa, qb) in enumerate(parts):
                c0, c1 = j * blk, min(D, (j + 1) * blk)
                w = np.ascontiguousarray(qb.codes[:, :c1 - c0].T)    # (c, Sp): v's codes as weight rows
                dy_j = np.zeros((R, c1 - c0), np.float32) + dy[:, c0:c1]
                dwj, dxj = table_grads(self, dy_j, qa.codes, qa.scales, w, np.full((c1 - c0, qa.scales.shape[1]), 127,
                                                                                  np.uint8), S, True, threads)
                dP += (dxj * sv[:, j][None, :]).astype(np.float32)
                dV[:, c0:c1] = (dwj.T / sv[:, j][:, None]).astype(np.float32)
        return dP, dV

    # ------------------------------------------------------------------ identity
    @property
    def is_exact(self) -> bool:
        return self.mul.is_exact and self.accumulate == "exact"

    def __eq__(self, other) -> bool:
        return isinstance(other, MXUnits) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"MXUnits({self.name!r}, {self.a.name} x {self.b.name}, block={self.block})"

    def describe(self) -> str:
        acc = ("exact block sums, blocks added in float32" if self.accumulate == "exact" else
               f"{self.accumulate.mbits + 1}-bit accumulator"
               + (f", promoted every {self.accumulate.promote}" if self.accumulate.promote else ""))
        return f"{self.name}: {self.a.name} x {self.b.name} blocks of {self.block}, {self.mul.name} products, {acc}"


def table_grads(u: MXUnits, dy, ca, sa, cw, sw, K: int, need_dx: bool = True, threads=None) -> tuple:
    """(dW (N, K), dX (M, K) or None) of y = x @ w.T through ``u``'s gradient tables, from the
    operands' MX codes and E8M0 scales: x's rows ca (M, Kp) / sa (M, nb), w's rows cw (N, Kp) /
    sw (N, nb), dy (M, N) float32: per block of K, dX[m, k] = sum_n dy[m, n] sw[n, b] Ga[ca, cw]
    and dW[n, k] = sum_m dy[m, n] sa[m, b] Gb[ca, cw] (``lutcore.ops.gradtables.table_pass``: each
    sum in index order)."""
    from lutcore.ops.gradtables import table_pass
    blk = u.block
    M, N = dy.shape
    fa, fw = scales_f32(sa), scales_f32(sw)
    ca, cw = ca.view(np.int8), cw.view(np.int8)
    ga, gbt = u.gradients()
    dw = np.empty((N, K), np.float32)
    dx = np.empty((M, K), np.float32) if need_dx else None
    with np.errstate(invalid="ignore"):
        for bi, k0 in enumerate(range(0, K, blk)):
            k1 = min(K, k0 + blk)
            a = np.ascontiguousarray(ca[:, k0:k1])
            b = np.ascontiguousarray(cw[:, k0:k1])
            if need_dx:
                dx[:, k0:k1] = table_pass(0, a, b, np.ascontiguousarray(dy * fw[:, bi][None, :]), ga, threads)
            dw[:, k0:k1] = table_pass(1, a, b, np.ascontiguousarray(dy * fa[:, bi][:, None]), gbt, threads)
    return dw, dx


def _fmt_pair(fmt) -> tuple:
    if isinstance(fmt, (tuple, list)):
        if len(fmt) != 2:
            raise ValueError(f"fmt: expected one element format or a pair (a, b), got {fmt!r}")
        return tuple(_fp.element_arg(f, "fmt", "an MX element format", "a scale format") for f in fmt)
    f = _fp.element_arg(fmt, "fmt", "an MX element format", "a scale format")
    return f, f


def _difference(T: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    """d T / d(operand on ``axis``) by differences in value order (the module docstring), float32."""
    n = v.size
    fin = np.flatnonzero(np.isfinite(v))
    vals = np.unique(v[fin])                               # ascending, -0 == +0 once
    pos = np.searchsorted(vals, v[fin])                    # each finite code's rank
    lo = np.maximum(pos - 1, 0)
    hi = np.minimum(pos + 1, vals.size - 1)
    rep = {}                                               # a code of each value (T rows of -0 / +0 agree
    for c in fin:                                          # in magnitude; the +0 code is taken when there)
        rep.setdefault(v[c], c)
        if v[c] == 0 and not np.signbit(v[c]):
            rep[0.0] = c
    codes = np.array([rep[x] for x in vals])
    Tm = np.moveaxis(T, axis, 0)                           # (n, other)
    den = (vals[hi] - vals[lo])[:, None]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):   # inf - inf (E5M2): 0 below
        num = Tm[codes[hi]] - Tm[codes[lo]]                # (nfin, other)
        g = num / den
    g[~np.isfinite(g)] = 0
    out = np.zeros((n,) + Tm.shape[1:], np.float64)
    out[fin] = g
    return np.moveaxis(out, 0, axis).astype(np.float32)
