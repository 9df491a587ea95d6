"""MX units (lutcore.units.mxunits.MXUnits) against their contract: the names (grammar, canonical
spelling, parse(name) == unit, the refusals naming the spec and the bad part), the constructors,
resolve(mx=True) and the integer ops' refusal; matmul bit for bit against the numpy oracle
(tests/reference/mxunits_ref.py: per block the exact sum of the table's products rounded once,
scaled, added in block order in float32; the narrow register with exact rationals) on odd shapes
for the exact / mitchell / lmul / truncated:2 multipliers of FP8, FP6, FP4 and INT8 (and E5M2, a
mixed pair); the same bits at 1 and 2 threads; save / load and a corrupted file; the gradient
tables by value-order differences (the exact multiplier's: the other operand's value).

The operands are quantized with lutcore.mx.mx_quantize (tested on its own, tests/units/test_mx.py)
and the products read from lutcore.units.fpmul.FPUnit's tables (tests/units/test_fpmul.py); the
sums, scalings and gradient differences are the oracle's own."""
import json
import os
import re
import warnings

import numpy as np
import pytest

import lutcore
import lutcore.units as U
from lutcore import _threads
from lutcore.mx import mx_quantize
from lutcore.ops.mxgemm import Narrow
from lutcore.units.fp import fp_format
from lutcore.units.fpmul import FPUnit
from lutcore.units.mxunits import MXUnits, is_mx_dir, is_mx_spec
from reference import mxunits_ref as R
from reference.mx_values import assert_bits, bits  # noqa: F401

ELEMS = {"fp8": "e4m3", "fp6": "e2m3", "fp4": "e2m1", "int8": "int8"}
MULS = ["exact", "mitchell", "lmul", "truncated:2"]
# (M, K, N): M, N in 1, 7, 33; K across the block boundaries (1, 31, 32, 33, 65, 100)
SHAPES = [(1, 1, 1), (7, 31, 33), (33, 32, 7), (1, 33, 33), (7, 65, 1), (33, 100, 7), (7, 100, 33)]


def fpunit(mul, a, b):
    if mul.startswith("truncated:"):
        return FPUnit.truncated(a, b, int(mul.split(":")[1]))
    return getattr(FPUnit, mul)(a, b)


def operands(rng, M, K, N, spread=5):
    """x (M, K), w (K, N): normal values, each element its own power of two in [-spread, spread)
    (so blocks hold tiny values that round to subnormal codes or 0), a zero every 13th element
    and (when there are 3 rows / columns) an all-zero row of x and column of w."""
    a = rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread, (M, K)))
    b = rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread, (K, N)))
    a.reshape(-1)[::13] = 0
    b.reshape(-1)[::13] = 0
    if M >= 3:
        a[2] = 0
    if N >= 3:
        b[:, 2] = 0
    return a.astype(np.float32), b.astype(np.float32)


def reference(u_a, u_b, T, a, b, block=32, accumulate="exact"):
    """The oracle's y of a @ b: a quantized along K (axis 1) in u_a, b along K (axis 0) in u_b."""
    qa = mx_quantize(a, u_a, block, axis=1)
    qb = mx_quantize(b, u_b, block, axis=0)
    K = a.shape[1]
    if accumulate == "exact":
        return R.exact_matmul_ref(qa.codes, qa.scales, qb.codes, qb.scales, T, K, block)
    return R.narrow_matmul_ref(qa.codes, qa.scales, qb.codes, qb.scales, T, K, block,
                               accumulate.mbits, accumulate.promote, accumulate.rounding)


# ------------------------------------------------------------------ the oracle, checked
def test_oracle_round_f32_is_numpys_conversion(rng):
    x = rng.standard_normal(4000) * np.exp2(rng.integers(-160, 130, 4000).astype(np.float64))
    x[:10] = np.ldexp(np.arange(1, 11, dtype=np.float64) + 0.5, -150)          # subnormal ties
    x[10:20] = np.float64(np.finfo(np.float32).max) * (1 + np.arange(10) * 1e-8)  # at and past the top
    for v in x:
        num, den = float(v).as_integer_ratio()
        e = -(den.bit_length() - 1)
        with np.errstate(over="ignore"):
            want = np.float32(v)
        got = R.round_f32(num, e)
        assert bits(np.float32(got)) == bits(want), (v, got, want)


def test_oracle_block_sums_both_routes_agree(rng):
    """The float64 route (exactness proven by the span) and the integer route give the same sums;
    a wide-span table takes the integer route and still rounds once (a sum float64 would lose)."""
    P = (rng.standard_normal((50, 70)) * np.exp2(rng.integers(-8, 8, (50, 70)))).astype(np.float32)
    fast = R.block_sums(P, 32)
    slow = np.empty_like(fast)
    for i in range(50):
        for j in range(fast.shape[1]):
            s = 0
            for v in P[i, 32 * j: 32 * (j + 1)].astype(np.float64):
                n, d = float(v).as_integer_ratio()
                s += n * (2 ** 200 // d)
            slow[i, j] = R.round_f32(s, -200)
    assert_bits(fast, slow)
    wide = np.float32([2.0 ** 40, 1.0, 2.0 ** -30, -(2.0 ** 40)] + [0.0] * 28)[None]
    assert R.block_sums(wide, 32)[0, 0] == np.float32(1.0 + 2.0 ** -30)          # rounded once
    tie = np.float32([1.0, 2.0 ** -24, 2.0 ** -60] + [0.0] * 29)[None]            # above the tie: up
    assert R.block_sums(tie, 32)[0, 0] == np.float32(1.0 + 2.0 ** -23)


def test_oracle_gradients_of_a_hand_table():
    """A 4-code format of values (-1, 0, 0.5, 2) (b: two codes of values 1, 3): the differences by hand."""
    va = np.float32([-1, 0, 0.5, 2])
    vb = np.float32([1, 3])
    T = (va[:, None] ** 2 * vb[None, :]).astype(np.float32)                       # T = a^2 b
    Ga, GbT = R.gradient_tables_ref(T, va, vb)
    Ga = Ga.reshape(256, 256)[:4, :2]
    want = np.array([[(0 - 1) / 1, (0 - 3) / 1],                                   # one-sided at the minimum
                     [(0.25 - 1) / 1.5, (0.75 - 3) / 1.5],
                     [(4 - 0) / 2, (12 - 0) / 2],
                     [(4 - 0.25) / 1.5, (12 - 0.75) / 1.5]], np.float32)          # one-sided at the maximum
    assert np.array_equal(Ga, want)
    Gb = GbT.reshape(256, 256)[:2, :4]                                             # [cb, ca]
    assert np.array_equal(Gb, (va ** 2)[None, :].repeat(2, 0))


# ------------------------------------------------------------------ names
NAMES = [  # (spec, a, b, multiplier, block, accumulate, canonical)
    ("mxfp8", "e4m3", "e4m3", "exact", 32, "exact", "mxfp8"),
    ("mxfp8:exact", "e4m3", "e4m3", "exact", 32, "exact", "mxfp8"),
    ("mxe4m3", "e4m3", "e4m3", "exact", 32, "exact", "mxfp8"),
    ("mxfp8e5m2", "e5m2", "e5m2", "exact", 32, "exact", "mxfp8e5m2"),
    ("mxe5m2", "e5m2", "e5m2", "exact", 32, "exact", "mxfp8e5m2"),
    ("mxfp6", "e2m3", "e2m3", "exact", 32, "exact", "mxfp6"),
    ("mxfp6e3m2", "e3m2", "e3m2", "exact", 32, "exact", "mxfp6e3m2"),
    ("mxfp4", "e2m1", "e2m1", "exact", 32, "exact", "mxfp4"),
    ("mxint8", "int8", "int8", "exact", 32, "exact", "mxint8"),
    ("mxint8xfp8", "int8", "e4m3", "exact", 32, "exact", "mxint8xfp8"),
    ("mxe4m3xe5m2", "e4m3", "e5m2", "exact", 32, "exact", "mxfp8xfp8e5m2"),
    ("mxfp4:mitchell", "e2m1", "e2m1", "mitchell", 32, "exact", "mxfp4:mitchell"),
    ("mxfp8:truncated:2", "e4m3", "e4m3", "truncated:2", 32, "exact", "mxfp8:truncated:2"),
    ("mxfp8:lmul@m13:promote=128", "e4m3", "e4m3", "lmul", 32, Narrow(13, 128), "mxfp8:lmul@m13:promote=128"),
    ("mxfp8@m5:truncate", "e4m3", "e4m3", "exact", 32, Narrow(5, None, "truncate"), "mxfp8@m5:truncate"),
    ("mxfp6@m7:promote=16:truncate", "e2m3", "e2m3", "exact", 32, Narrow(7, 16, "truncate"),
     "mxfp6@m7:promote=16:truncate"),
    ("mxfp8/block=16", "e4m3", "e4m3", "exact", 16, "exact", "mxfp8/block=16"),
    ("mxfp4xint8:lmul@m9/block=8", "e2m1", "int8", "lmul", 8, Narrow(9), None),
]


@pytest.mark.parametrize("spec,a,b,mul,block,acc,canon", NAMES, ids=[n[0] for n in NAMES])
def test_names(spec, a, b, mul, block, acc, canon):
    u = MXUnits.parse(spec)
    assert (u.a.name, u.b.name, u.block, u.accumulate) == (a, b, block, acc), u
    assert u.mul == fpunit(mul, a, b), (u.mul, mul)
    if canon is not None:
        assert u.name == canon
    v = MXUnits.parse(u.name)                                    # the canonical name resolves to an equal unit
    assert v == u and hash(v) == hash(u) and v.name == u.name
    assert u.is_exact == (mul == "exact" and acc == "exact")
    assert is_mx_spec(spec) and u.kind == "mx"
    assert U.resolve(spec, mx=True) == u


def test_equality_is_by_digest():
    units = [MXUnits.parse(s) for s in ("mxfp8", "mxfp8:mitchell", "mxfp8@m13", "mxfp8@m13:truncate",
                                        "mxfp8/block=16", "mxfp8e5m2", "mxfp8xfp8e5m2", "mxfp6")]
    for i, u in enumerate(units):
        for j, v in enumerate(units):
            assert (u == v) == (i == j), (u, v)
    assert len({u.digest for u in units}) == len(units)
    assert MXUnits.parse("mxfp8") == MXUnits.parse("mxe4m3xe4m3")


def test_constructors():
    assert MXUnits(FPUnit.mitchell("e4m3", "e4m3")) == MXUnits.parse("mxfp8:mitchell")
    assert MXUnits(FPUnit.mitchell("e4m3", "e4m3")).name == "mxfp8:mitchell"
    assert MXUnits("exact", fmt="e2m1") == MXUnits.parse("mxfp4")
    assert MXUnits("exact", fmt="e2m1").name == "mxfp4"
    u = MXUnits("lmul", fmt=("e4m3", "e5m2"), accumulate=Narrow(13, 128))
    assert u == MXUnits.parse("mxe4m3xe5m2:lmul@m13:promote=128")
    assert (u.a.name, u.b.name, u.mul, u.accumulate) == ("e4m3", "e5m2", FPUnit.lmul("e4m3", "e5m2"), Narrow(13, 128))
    assert MXUnits.parse(u.name) == u
    assert MXUnits("truncated:2", fmt="int8") == MXUnits.parse("mxint8:truncated:2")
    assert MXUnits(FPUnit.exact("e2m3", "e2m3"), fmt="e2m3") == MXUnits.parse("mxfp6")   # a matching fmt is fine
    assert MXUnits("exact", fmt="e4m3", block=16) == MXUnits.parse("mxfp8/block=16")


def test_a_saved_fpunit_directory_as_the_multiplier(tmp_path):
    f = FPUnit.mitchell("e2m1", "e2m1")
    d = str(tmp_path / "fpu")
    f.save(d)
    for spec in (f"mxfp4:{d}", f"mxfp4:{d}@m9"):
        u = MXUnits.parse(spec)
        assert u.mul == f
        assert MXUnits.parse(u.name) == u                        # a built-in's table: its name resolves
    assert MXUnits.parse(f"mxfp4:{d}") == MXUnits(f)
    assert MXUnits(d, fmt="e2m1") == MXUnits(f)
    with pytest.raises(ValueError) as e:                         # its formats must be the elements named
        MXUnits.parse(f"mxfp8:{d}")
    msg = str(e.value)
    assert "fpunit.json" in msg and "e4m3" in msg, msg
    assert repr(f"mxfp8:{d}") in msg, msg                        # a bad name: the spec is named


BAD_NAMES = [  # (spec, what the message must name besides the spec)
    ("mx", r"mx<element>"),
    ("fp8", r"mx<element>"),
    ("mxfp9", r"'fp9'"),
    ("mxe8m0", r"'e8m0'"),
    ("mxfp8x", r"mx<element>x<element>"),
    ("mxfp8xfp4xfp6", r"mx<element>x<element>"),
    ("mxfp8:bogus", r"'bogus'"),
    ("mxfp8:truncated", r"'truncated'"),
    ("mxfp8:truncated:x", r"'truncated:x'"),
    ("mxfp8:truncated:-1", r"'truncated:-1'"),
    ("mxfp8@m", r"'m'"),
    ("mxfp8@x5", r"'x5'"),
    ("mxfp8@m0", r"mbits"),
    ("mxfp8@m24", r"mbits"),
    ("mxfp8@m5:promote=0", r"promote"),
    ("mxfp8@m5:promote=x", r"'m5:promote=x'"),
    ("mxfp8@m5:round", r"'m5:round'"),
    ("mxfp8/block=0", r"block"),
    ("mxfp8/block=x", r"block"),
    ("mxfp8/blk=3", r"blk"),
]


@pytest.mark.parametrize("spec,part", BAD_NAMES, ids=[b[0] for b in BAD_NAMES])
def test_bad_names_are_refused_naming_the_spec_and_the_part(spec, part):
    with pytest.raises(ValueError) as e:
        MXUnits.parse(spec)
    msg = str(e.value)
    assert repr(spec) in msg, msg
    assert re.search(part, msg.replace(repr(spec), "")), msg      # the bad part, besides the spec itself
    with pytest.raises(ValueError):
        U.resolve(spec, mx=True) if spec.startswith("mx") else MXUnits.parse(spec)


def test_constructor_refusals():
    with pytest.raises(ValueError, match=r"fmt: .*needs its element format"):
        MXUnits("exact")
    with pytest.raises(ValueError, match=r"fmt: .*needs its element format"):
        MXUnits("mitchell")
    with pytest.raises(ValueError, match=r"fmt: the multiplier is e4m3 x e4m3, got fmt 'e2m1'"):
        MXUnits(FPUnit.mitchell("e4m3", "e4m3"), fmt="e2m1")
    with pytest.raises(ValueError, match=r"fmt: the multiplier is e4m3 x e5m2"):
        MXUnits(FPUnit.mitchell("e4m3", "e5m2"), fmt="e4m3")
    with pytest.raises(ValueError, match=r"fmt: .*e8m0"):
        MXUnits("exact", fmt="e8m0")
    with pytest.raises(ValueError, match=r"fmt: .*pair"):
        MXUnits("exact", fmt=("e4m3", "e5m2", "e2m1"))
    with pytest.raises(ValueError, match=r"accumulate: .*'narrow'"):
        MXUnits("exact", fmt="e4m3", accumulate="narrow")
    with pytest.raises(ValueError, match=r"block"):
        MXUnits("exact", fmt="e4m3", block=0)
    with pytest.raises(ValueError, match=r"'bogus'"):
        MXUnits("bogus", fmt="e4m3")


def test_resolve_needs_mx_and_the_integer_ops_refuse_mx_units():
    u = MXUnits.parse("mxfp8")
    for spec in ("mxfp8", u, "mxfp4:mitchell"):
        with pytest.raises(TypeError, match=r"are MX units"):
            U.resolve(spec)
    assert U.resolve("mxfp8", mx=True) == u and U.resolve(u, mx=True) is u
    assert U.resolve("exact", mx=True) == U.resolve("exact")              # integer units pass through
    f = np.ones((3, 40), np.float32)
    i8 = np.ones((3, 40), np.int8)
    calls = [lambda s: lutcore.lut_gemm(i8, np.ascontiguousarray(i8.T), units=s),
             lambda s: lutcore.qmatmul(f, np.ascontiguousarray(f.T), units=s),
             lambda s: lutcore.relu8(i8, units=s),
             lambda s: lutcore.requant(np.ones((3, 4), np.int32), 2, units=s)]
    for call in calls:
        for s in ("mxfp8", u):
            with pytest.raises(TypeError, match=r"MX units"):
                call(s)


# ------------------------------------------------------------------ matmul bits
@pytest.mark.parametrize("mul", MULS)
@pytest.mark.parametrize("elem", list(ELEMS))
def test_matmul_bits(rng, elem, mul):
    spec = f"mx{elem}" + ("" if mul == "exact" else f":{mul}")
    u = MXUnits.parse(spec)
    fmt = ELEMS[elem]
    T = fpunit(mul, fmt, fmt).products
    for M, K, N in SHAPES:
        a, b = operands(rng, M, K, N)
        want = reference(fmt, fmt, T, a, b)
        got = u.matmul(a, b)
        assert_bits(got, want, f"{spec} M{M} K{K} N{N}")
    a, b = operands(rng, 7, 65, 7)
    qa, qb = u.quantize(a, 1, "a"), u.quantize(b, 0, "b")           # the same quantization and product
    assert np.array_equal(qa.codes, mx_quantize(a, fmt, 32, axis=1).codes)
    assert_bits(u.matmul_q(qa, qb), reference(fmt, fmt, T, a, b), f"{spec} matmul_q")


@pytest.mark.parametrize("spec,fa,fb,mul", [
    ("mxfp8e5m2", "e5m2", "e5m2", "exact"),                     # exact products span 2^64: integer sums
    ("mxfp8e5m2:mitchell", "e5m2", "e5m2", "mitchell"),
    ("mxfp6e3m2:lmul", "e3m2", "e3m2", "lmul"),
    ("mxe4m3xe5m2:truncated:2", "e4m3", "e5m2", "truncated:2"),
    ("mxint8xfp4", "int8", "e2m1", "exact"),
])
def test_matmul_bits_other_formats(rng, spec, fa, fb, mul):
    u = MXUnits.parse(spec)
    T = fpunit(mul, fa, fb).products
    for M, K, N in [(7, 65, 7), (1, 33, 33), (33, 31, 1)]:
        a, b = operands(rng, M, K, N, spread=9)
        assert_bits(u.matmul(a, b), reference(fa, fb, T, a, b), f"{spec} M{M} K{K} N{N}")


@pytest.mark.parametrize("spec", ["mxfp8@m5:promote=16", "mxfp8:lmul@m4:truncate", "mxfp4@m3:promote=7",
                                  "mxint8:mitchell@m6:promote=40:truncate"])
def test_matmul_bits_narrow_accumulator(rng, spec):
    u = MXUnits.parse(spec)
    T = u.mul.products
    assert u.mul == fpunit(u.mul.name, u.a.name, u.b.name)
    for M, K, N in [(3, 70, 4), (1, 33, 2), (2, 1, 1)]:
        a, b = operands(rng, M, K, N)
        assert_bits(u.matmul(a, b), reference(u.a.name, u.b.name, T, a, b, accumulate=u.accumulate),
                    f"{spec} M{M} K{K} N{N}")


def test_matmul_block_16(rng):
    u = MXUnits.parse("mxfp4:mitchell/block=16")
    T = FPUnit.mitchell("e2m1", "e2m1").products
    a, b = operands(rng, 7, 40, 5)
    assert_bits(u.matmul(a, b), reference("e2m1", "e2m1", T, a, b, block=16), "block 16")


def test_matmul_special_values(rng):
    """An all-zero operand gives +0; a NaN or an infinity in a block gives a NaN scale: NaN where
    that block enters (the canonical quiet NaN); huge and tiny blocks scale exactly."""
    u = MXUnits.parse("mxfp8")
    T = FPUnit.exact("e4m3", "e4m3").products
    a, b = operands(rng, 5, 70, 4)
    z = u.matmul(np.zeros_like(a), b)
    assert np.array_equal(bits(z), np.zeros(z.shape, np.uint32))
    a[1, 40] = np.nan
    a[3, 3] = np.inf
    b[:, 1] *= np.float32(2.0 ** 100)                           # huge, exact powers of two
    b[:, 2] = b[:, 3] * np.float32(2.0 ** -120)                 # tiny
    got = u.matmul(a, b)
    want = R.exact_matmul_ref(*(lambda qa, qb: (qa.codes, qa.scales, qb.codes, qb.scales))(
        mx_quantize(a, "e4m3", 32, axis=1), mx_quantize(b, "e4m3", 32, axis=0)), T, 70, 32)
    assert_bits(got, want, "special")
    assert np.isnan(got[1]).all() and np.isnan(got[3]).all() and not np.isnan(got[[0, 2, 4]]).any()
    assert (bits(got[np.isnan(got)]) == R.QNAN).all()


def test_matmul_same_bits_at_1_and_2_threads(rng):
    for spec in ("mxfp8:mitchell", "mxfp4", "mxint8:lmul@m9:promote=32"):
        u = MXUnits.parse(spec)
        a, b = operands(rng, 67, 130, 45)
        ys = [u.matmul(a, b, threads=n) for n in (1, 2)]
        assert_bits(ys[1], ys[0], spec)
        for n in (1, 2):                                          # threads=None: the enclosing scope
            with _threads.scope(n):
                assert_bits(u.matmul(a, b), ys[0], f"{spec} scope {n}")


def test_matmul_input_errors():
    u = MXUnits.parse("mxfp8")
    with pytest.raises(ValueError):
        u.matmul(np.ones((3, 4), np.float32), np.ones((5, 2), np.float32))        # K mismatch
    with pytest.raises((ValueError, TypeError)):
        u.matmul(np.ones(4, np.float32), np.ones((4, 2), np.float32))             # 1-D a


# ------------------------------------------------------------------ save / load
@pytest.mark.parametrize("spec", ["mxfp8:lmul@m13:promote=128", "mxfp4:mitchell/block=16", "mxint8xfp8"])
def test_save_load_round_trip(tmp_path, rng, spec):
    u = MXUnits.parse(spec)
    d = str(tmp_path / "u")
    u.save(d)
    assert is_mx_dir(d) and not is_mx_dir(str(tmp_path))
    assert {"mxunits.json", "fp_products.bin", "fpunit.json"} <= set(os.listdir(d))
    v = MXUnits.load(d)
    assert v == u and v.digest == u.digest and v.name == u.name and v.accumulate == u.accumulate
    w = U.resolve(d, mx=True)
    assert w == u
    with pytest.raises(TypeError, match="MX units"):
        U.resolve(d)
    a, b = operands(rng, 7, 65, 9)
    assert_bits(v.matmul(a, b), u.matmul(a, b), spec)


def _read(p, mode="rb"):
    with open(p, mode) as f:
        return f.read()


def _write(p, data, mode="wb"):
    with open(p, mode) as f:
        f.write(data)


def test_a_corrupted_save_is_refused_naming_the_file(tmp_path):
    u = MXUnits.parse("mxfp8:mitchell")
    d = str(tmp_path / "u")
    u.save(d)
    p = os.path.join(d, "fp_products.bin")
    raw = bytearray(_read(p))
    raw[4 * (3 * 256 + 5) + 1] ^= 0x40                            # one product's bits
    _write(p, bytes(raw))
    for load in (MXUnits.load, lambda d: U.resolve(d, mx=True)):
        with pytest.raises(ValueError, match="fp_products.bin"):
            load(d)
    _write(p, bytes(raw[:100]))                                   # truncated
    with pytest.raises(ValueError, match="fp_products.bin"):
        MXUnits.load(d)
    os.remove(p)                                                  # missing
    with pytest.raises(ValueError, match="fp_products.bin"):
        MXUnits.load(d)
    # the record's own digest
    d2 = str(tmp_path / "u2")
    u.save(d2)
    j = os.path.join(d2, "mxunits.json")
    rec = json.loads(_read(j, "r"))
    rec["digest"] = "0" * 64
    _write(j, json.dumps(rec), "w")
    with pytest.raises(ValueError, match="mxunits.json"):
        MXUnits.load(d2)
    _write(j, "{bad", "w")
    with pytest.raises(ValueError, match="mxunits.json"):
        MXUnits.load(d2)
    # another multiplier's two files (consistent with each other) under this record
    d3, d4 = str(tmp_path / "u3"), str(tmp_path / "u4")
    u.save(d3)
    MXUnits.parse("mxfp8:lmul").save(d4)
    for f in ("fp_products.bin", "fpunit.json"):
        _write(os.path.join(d3, f), _read(os.path.join(d4, f)))
    with pytest.raises(ValueError, match="mxunits.json"):
        MXUnits.load(d3)
    # a block edited in the record
    d5 = str(tmp_path / "u5")
    u.save(d5)
    j5 = os.path.join(d5, "mxunits.json")
    rec = json.loads(_read(j5, "r"))
    rec["block"] = 16
    _write(j5, json.dumps(rec), "w")
    with pytest.raises(ValueError, match="mxunits.json"):
        MXUnits.load(d5)


# ------------------------------------------------------------------ gradient tables
@pytest.mark.parametrize("spec", ["mxfp8", "mxfp8:mitchell", "mxfp8:lmul", "mxfp8:truncated:2", "mxfp6:mitchell",
                                  "mxfp4:lmul", "mxint8:mitchell", "mxfp8e5m2:mitchell", "mxe4m3xe2m1:lmul",
                                  "mxfp6e3m2"])
def test_gradient_tables(spec):
    u = MXUnits.parse(spec)
    Ga, GbT = u.gradients()
    assert Ga.dtype == np.float32 and GbT.dtype == np.float32 and Ga.shape == GbT.shape == (65536,)
    T = u.mul.products
    wa, wb = R.gradient_tables_ref(T, u.a.values(), u.b.values())
    assert_bits(Ga, wa, spec + " Ga")
    assert_bits(GbT, wb, spec + " GbT")


@pytest.mark.parametrize("spec", ["mxfp8e5m2", "mxfp8e5m2:lmul", "mxfp8xfp8e5m2"])
def test_gradients_do_not_warn(spec):
    """inf codes (E5M2) make inf - inf inside the differences: that is a 0 entry, not a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MXUnits.parse(spec).gradients()


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e2m3", "e2m3"), ("e3m2", "e3m2"),
                                   ("e2m1", "e2m1"), ("int8", "int8"), ("e4m3", "e2m1")])
def test_exact_gradient_tables_are_the_other_operands_value(fa, fb):
    u = MXUnits("exact", fmt=(fa, fb))
    Ga, GbT = (g.reshape(256, 256) for g in u.gradients())
    va, vb = fp_format(fa).values(), fp_format(fb).values()
    fa_, fb_ = np.isfinite(va), np.isfinite(vb)
    na, nb = len(va), len(vb)
    assert np.array_equal(Ga[:na, :nb][np.ix_(fa_, fb_)], np.broadcast_to(vb[fb_], (fa_.sum(), fb_.sum())))
    assert np.array_equal(GbT[:nb, :na][np.ix_(fb_, fa_)], np.broadcast_to(va[fa_], (fb_.sum(), fa_.sum())))
    assert not Ga[:na, :nb][~fa_].any() and not Ga[:na, :nb][:, ~fb_].any()          # NaN / inf codes: 0
    assert not Ga[na:].any() and not Ga[:, nb:].any() and not GbT[nb:].any() and not GbT[:, na:].any()
