"""Mantissa-product units (lutcore.units.mantissa, docs/DESIGN.md "Mantissa-product units (bf16 /
fp16)"): every built-in on both formats against per-pair exact rationals (fractions.Fraction), the
exact table in [1, 4) and exact in float32, Mitchell's bound; tables and functions and their checks
(shape, dtype, non-finite or negative entries, unknown formats: each naming the argument); the digest;
save/load and its refusals; the metrics against a hand computation; matmul through the room."""
import json
import os
from fractions import Fraction

import numpy as np
import pytest

from lutcore.ops import mantgemm as room
from lutcore.units import MantissaUnit
from lutcore.units.mantissa import FORMATS, MBITS

FMTS = ["bf16", "fp16"]
METRIC_RTOL = 1e-12          # float64 sums over at most 2^20 pairs


def bits(t):
    return np.ascontiguousarray(t, np.float32).view(np.uint32)


def sample_pairs(fmt, rng, n=400):
    """Index pairs: the corners, the diagonal's middle, random ones."""
    top = (1 << MBITS[fmt]) - 1
    fixed = [(0, 0), (0, top), (top, 0), (top, top), (top // 2 + 1, top // 2 + 1), (1, top - 1)]
    return fixed + [tuple(int(v) for v in rng.integers(0, top + 1, 2)) for _ in range(n)]


def sig(i, fmt):
    return 1 + Fraction(i, 1 << MBITS[fmt])


def truncated_ref(i, j, fmt, k):
    P = sig(i, fmt) * sig(j, fmt)
    scale = 2 if P >= 2 else 1
    q = P / scale * 2 ** k                                         # the fraction's k bits above the point
    return Fraction(q.numerator // q.denominator, 2 ** k) * scale


def mitchell_ref(i, j, fmt):
    x, y = sig(i, fmt) - 1, sig(j, fmt) - 1
    return 1 + x + y if x + y < 1 else 2 * (x + y)


@pytest.mark.parametrize("fmt", FMTS)
def test_exact_is_the_significand_product_in_float32(fmt):
    u = MantissaUnit.exact(fmt)
    m = MBITS[fmt]
    s = 1.0 + np.arange(1 << m) / 2.0 ** m
    want = np.multiply.outer(s, s)                                 # float64: exact (2m + 2 bits)
    assert u.table.shape == (1 << m, 1 << m) and u.table.dtype == np.float32
    assert np.array_equal(u.table.astype(np.float64), want)
    assert u.table.min() == 1.0 and u.table.max() < 4.0
    assert u.is_exact and u.name == "exact" and u.kind == "mantissa" and u.fmt == fmt and u.mbits == m


@pytest.mark.parametrize("fmt", FMTS)
def test_mitchell_and_truncated_against_exact_rationals(fmt, rng):
    mit = MantissaUnit.mitchell(fmt)
    tr = {k: MantissaUnit.truncated(fmt, k) for k in (0, 1, 3, 7, 2 * MBITS[fmt], 2 * MBITS[fmt] + 1, 23)}
    for i, j in sample_pairs(fmt, rng):
        assert Fraction(float(mit.table[i, j])) == mitchell_ref(i, j, fmt), (i, j)
        for k, u in tr.items():
            assert Fraction(float(u.table[i, j])) == truncated_ref(i, j, fmt, k), (i, j, k)
    for k in (2 * MBITS[fmt] + 1, 23):
        assert tr[k] == MantissaUnit.exact(fmt) and tr[k].is_exact
    assert not tr[2 * MBITS[fmt]].is_exact and tr[3].name == "truncated:3"


@pytest.mark.parametrize("fmt", FMTS)
def test_mitchell_never_overestimates_and_stays_within_its_bound(fmt):
    e = MantissaUnit.exact(fmt).table.astype(np.float64)
    m = MantissaUnit.mitchell(fmt).table.astype(np.float64)
    rel = (m - e) / e
    assert (m <= e).all()
    assert rel.min() == pytest.approx(-1 / 9, rel=1e-12)         # x = y = 1/2: 2 against 9/4
    half = 1 << (MBITS[fmt] - 1)
    assert m[half, half] == 2.0 and e[half, half] == 2.25


@pytest.mark.parametrize("fmt", FMTS)
def test_metrics_against_a_hand_computation(fmt):
    e = MantissaUnit.exact(fmt).table.astype(np.float64)
    assert MantissaUnit.exact(fmt).metrics()["mred"] == 0.0
    t = MantissaUnit.mitchell(fmt)
    rel = (t.table.astype(np.float64) - e) / e
    got = t.metrics()
    assert got["pairs"] == e.size
    assert got["mred"] == pytest.approx(np.abs(rel).mean(), rel=METRIC_RTOL)
    assert got["bias"] == pytest.approx(rel.mean(), rel=METRIC_RTOL)
    assert got["max_red"] == pytest.approx(1 / 9, rel=1e-12)
    assert got["msre"] == pytest.approx((rel * rel).mean(), rel=METRIC_RTOL)
    assert got["error_rate"] == pytest.approx((rel != 0).mean(), rel=METRIC_RTOL)
    assert got["max_abs_err"] == pytest.approx(np.abs(t.table - e).max(), rel=METRIC_RTOL)


@pytest.mark.parametrize("fmt", FMTS)
def test_from_function_rounds_to_float32_and_sees_the_significands(fmt):
    seen = {}

    def fn(x, y):
        seen["x"], seen["y"] = x, y
        return x * y * (1 + 2.0 ** -30)                             # rounds back to the exact product

    u = MantissaUnit.from_function(fmt, fn)
    assert u == MantissaUnit.exact(fmt) and u.name == "fn"
    n = 1 << MBITS[fmt]
    assert seen["x"].dtype == np.float64 and seen["x"].shape == (n, n)
    assert seen["x"][5, 0] == 1 + 5 / n and seen["y"][0, 7] == 1 + 7 / n
    assert MantissaUnit.from_function(fmt, lambda x, y: x + y, name="sum").name == "sum"


def test_from_table_checks_copies_and_canonicalises(rng):
    t = MantissaUnit.mitchell("bf16").table.copy()
    t[3, 4] = -0.0
    u = MantissaUnit.from_table("bf16", t, name="mine")
    assert bits(u.table)[3, 4] == 0 and not u.table.flags.writeable
    t[0, 0] = 7.0
    assert u.table[0, 0] == 1.0                                    # copied
    assert MantissaUnit("bf16", t).name == "custom"
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        u.table[0, 0] = 2.0


BAD = [
    (lambda: MantissaUnit.from_table("bf16", np.ones((128, 128))), TypeError,
     r"^table: expected float32 products \(a bf16 table\), got dtype float64"),
    (lambda: MantissaUnit.from_table("bf16", [[1.0]]), TypeError, r"^table: expected a float32 numpy array"),
    (lambda: MantissaUnit.from_table("bf16", np.ones((1024, 1024), np.float32)), ValueError,
     r"^table: a bf16 unit's table has shape \(128, 128\) .*got \(1024, 1024\)"),
    (lambda: MantissaUnit.from_table("fp16", np.ones((128, 128), np.float32)), ValueError,
     r"^table: a fp16 unit's table has shape \(1024, 1024\)"),
    (lambda: MantissaUnit.from_table("bf16", _with(5, 6, np.nan)), ValueError,
     r"^table: expected finite entries >= 0, got T\[5, 6\] = nan \(1 such entries\)"),
    (lambda: MantissaUnit.from_table("bf16", _with(0, 1, np.inf)), ValueError, r"T\[0, 1\] = inf"),
    (lambda: MantissaUnit.from_table("bf16", _with(2, 2, -0.5)), ValueError, r"T\[2, 2\] = -0.5"),
    (lambda: MantissaUnit.exact("fp8"), ValueError, r"^fmt: expected one of bf16, fp16, got 'fp8'"),
    (lambda: MantissaUnit.exact(16), TypeError, r"^fmt: expected a format name, one of bf16, fp16, got int"),
    (lambda: MantissaUnit.truncated("bf16", 24), ValueError, r"^k: expected the fraction bits kept"),
    (lambda: MantissaUnit.truncated("bf16", 2.0), ValueError, r"^k: "),
    (lambda: MantissaUnit.from_function("bf16", 3), TypeError, r"^fn: expected a function"),
    (lambda: MantissaUnit.from_function("bf16", lambda x, y: x[:5]), ValueError,
     r"^fn: expected a \(128, 128\) array of products for bf16, got shape \(5, 128\)"),
    (lambda: MantissaUnit.from_function("bf16", lambda x, y: x - y), ValueError,
     r"^fn: expected finite entries >= 0, got T\[0, 1\]"),
    (lambda: MantissaUnit.from_function("bf16", lambda x, y: x * 1e39), ValueError, r"^fn: .*= inf"),
    (lambda: MantissaUnit.from_function("bf16", lambda x, y: x.astype(str)), TypeError,
     r"^fn: expected real products"),
    (lambda: MantissaUnit.from_table("bf16", np.ones((128, 128), np.float32), name=3), TypeError, r"^name: "),
]


def _with(i, j, v):
    t = np.ones((128, 128), np.float32)
    t[i, j] = v
    return t


@pytest.mark.parametrize("call,err,match", BAD, ids=range(len(BAD)))
def test_bad_arguments_are_named(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_digest_follows_format_and_every_bit():
    a, b = MantissaUnit.exact("bf16"), MantissaUnit.exact("bf16")
    assert a == b and hash(a) == hash(b) and a.digest == b.digest and len(a.digest) == 64
    t = a.table.copy()
    t.view(np.uint32)[7, 9] ^= 1
    assert MantissaUnit.from_table("bf16", t) != a
    assert MantissaUnit.exact("fp16").digest != a.digest
    assert repr(a).startswith("MantissaUnit(name='exact', bf16, digest=")
    assert set(FORMATS) == set(room.FORMATS) and all(room.FORMATS[f][1] == MBITS[f] for f in FORMATS)


@pytest.mark.parametrize("unit", [lambda: MantissaUnit.mitchell("bf16"), lambda: MantissaUnit.truncated("fp16", 4)])
def test_save_load_round_trip(unit, tmp_path):
    u = unit()
    u.save(tmp_path / "u")
    assert sorted(os.listdir(tmp_path / "u")) == ["mant_table.bin", "mantunit.json"]    # no temporary left
    v = MantissaUnit.load(tmp_path / "u")
    assert v == u and (v.fmt, v.name) == (u.fmt, u.name) and np.array_equal(bits(v.table), bits(u.table))
    assert MantissaUnit.load(tmp_path / "u", fmt=u.fmt) == u
    raw = np.fromfile(tmp_path / "u" / "mant_table.bin", "<f4").reshape(u.table.shape)
    assert np.array_equal(bits(raw), bits(u.table))                                      # little-endian, row-major
    meta = json.loads((tmp_path / "u" / "mantunit.json").read_text())
    assert meta == {"format": "lutcore-mantunit/1", "fmt": u.fmt, "shape": list(u.table.shape), "dtype": "<f4",
                    "name": u.name, "digest": u.digest}
    MantissaUnit.exact(u.fmt).save(tmp_path / "u")                                       # over an earlier save
    assert MantissaUnit.load(tmp_path / "u").is_exact


def _saved(tmp_path):
    d = tmp_path / "u"
    MantissaUnit.mitchell("bf16").save(d)
    return d


def _rewrite(d, **meta):
    m = json.loads((d / "mantunit.json").read_text())
    m.update(meta)
    (d / "mantunit.json").write_text(json.dumps(m))


def test_load_refuses_what_it_cannot_trust(tmp_path):
    d = _saved(tmp_path)
    with pytest.raises(ValueError, match="a bf16 unit, but fmt=fp16 was asked for"):
        MantissaUnit.load(d, fmt="fp16")
    raw = bytearray((d / "mant_table.bin").read_bytes())
    raw[4 * 100 + 1] ^= 0x10
    (d / "mant_table.bin").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="mant_table.bin: the table hashes to .* records"):
        MantissaUnit.load(d)
    for data in (bytes(raw[:-4]), bytes(raw) + b"\0"):
        (d / "mant_table.bin").write_bytes(data)
        with pytest.raises(ValueError, match=r"mant_table.bin: expected 65536 bytes \(128 x 128 float32, bf16\)"):
            MantissaUnit.load(d)


@pytest.mark.parametrize("meta,match", [
    ({"fmt": "fp8"}, r"fmt: expected one of bf16, fp16, got 'fp8'"),
    ({"shape": [64, 64]}, r"shape \[64, 64\] .* table is \[128, 128\]"),
    ({"format": "other/1"}, r"mantunit.json: expected \{\"format\": \"lutcore-mantunit/1\""),
    ({"digest": 5}, r"name and digest must be strings"),
])
def test_load_refuses_a_malformed_description(tmp_path, meta, match):
    d = _saved(tmp_path)
    _rewrite(d, **meta)
    with pytest.raises(ValueError, match=match):
        MantissaUnit.load(d)


def test_load_refuses_missing_and_negative_tables(tmp_path):
    d = _saved(tmp_path)
    t = np.fromfile(d / "mant_table.bin", "<f4")
    t[0] = -1.0
    t.astype("<f4").tofile(d / "mant_table.bin")
    with pytest.raises(ValueError, match=r"mant_table.bin: table: expected finite entries >= 0"):
        MantissaUnit.load(d)
    os.remove(d / "mant_table.bin")
    with pytest.raises(ValueError, match="mant_table.bin: cannot read the table"):
        MantissaUnit.load(d)
    with pytest.raises(FileNotFoundError, match="no such mantissa unit directory"):
        MantissaUnit.load(tmp_path / "nothing")


@pytest.mark.parametrize("fmt", FMTS)
def test_matmul_is_the_room(fmt, rng):
    a = rng.standard_normal((5, 19)).astype(np.float32)
    b = rng.standard_normal((19, 7)).astype(np.float32)
    u = MantissaUnit.mitchell(fmt)
    y = u.matmul(a, b, threads=2)
    assert y.shape == (5, 7) and y.dtype == np.float32
    assert np.array_equal(bits(y), bits(room.mant_gemm(a, b, u, threads=1)))
    out = np.empty((5, 7), np.float32)
    assert u.matmul(a, b, out=out) is out and np.array_equal(bits(out), bits(y))
