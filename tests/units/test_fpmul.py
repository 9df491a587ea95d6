"""Floating-point multipliers as product tables (lutcore.units.fpmul, docs/DESIGN.md
"Floating-point multipliers"): every built-in on every format pair of interest, bit for bit
against the scalar oracle tests/reference/fpmul_ref.py (exact rationals per pair) over the whole
grid; exact() against ml_dtypes' decoding; special pairs; the metrics against a hand computation;
save/load and its refusals; tables and functions and their checks; circuits (a Verilog FP4
multiplier through Yosys, C models of FP8 under the keeper) against exact(), and the width
mismatches they must refuse."""
import dataclasses
import json
import os

import ml_dtypes
import numpy as np
import pytest

from _paths import TESTS
from lutcore.units import FPUnit, fp_metrics, fp_report
from lutcore.units.fpmul import lmul_l
from reference.fpmul_ref import lmul_l_ref, table_ref

CIRCUITS = os.path.join(TESTS, "circuits")
PAIRS = [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e2m1", "e2m1"), ("e3m2", "e2m3"), ("int8", "int8")]
# (builder, its keywords): the defaults, and odd offsets / widths (2^-24 ties to even in float32; 3 * 2^-24 rounds)
VARIANTS = [("exact", {}), ("mitchell", {}), ("lmul", {}), ("lmul", {"offset": 0.0}),
            ("lmul", {"offset": 2 ** -5 + 2 ** -7}), ("lmul", {"offset": 0.75}), ("lmul", {"offset": 2 ** -24}),
            ("lmul", {"offset": 3 * 2 ** -24}), ("truncated", {"k": 0}), ("truncated", {"k": 1}),
            ("truncated", {"k": 3}), ("truncated", {"k": 5}), ("truncated", {"k": 13})]
METRIC_RTOL = 1e-12      # the metrics are float64 sums of a few hundred terms


def bits(p):
    return np.ascontiguousarray(p, np.float32).view(np.uint32)


def build(kind, a, b, **kw):
    return getattr(FPUnit, kind)(a, b, *kw.values())


def assert_same_bits(got, want):
    bad = np.argwhere(bits(got) != bits(want))
    assert not len(bad), [(tuple(map(int, i)), got[tuple(i)], want[tuple(i)]) for i in bad[:4]]


# ------------------------------------------------------------------ built-ins vs the oracle
@pytest.mark.parametrize("a, b", PAIRS)
@pytest.mark.parametrize("kind, kw", VARIANTS, ids=[f"{k}{v}" for k, v in VARIANTS])
def test_builtin_matches_the_reference(a, b, kind, kw):
    u = build(kind, a, b, **kw)
    want = table_ref(kind, a, b, **kw)
    assert u.products.dtype == np.float32 and u.products.shape == want.shape
    assert np.array_equal(np.isnan(u.products), np.isnan(want))
    assert_same_bits(u.products, want)


def ml_values(f):
    if f == "int8":
        return (np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float64) / 64).astype(np.float32)
    t = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e3m2": ml_dtypes.float6_e3m2fn,
         "e2m3": ml_dtypes.float6_e2m3fn, "e2m1": ml_dtypes.float4_e2m1fn}[f]
    n = {"e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6, "e2m1": 4}[f]
    return np.arange(1 << n, dtype=np.uint8).view(t).astype(np.float32)


@pytest.mark.parametrize("a, b", PAIRS + [("e2m1", "e5m2"), ("int8", "e4m3"), ("e2m3", "e3m2")])
def test_exact_is_the_ml_dtypes_product_and_exact_in_float32(a, b):
    va, vb = ml_values(a).astype(np.float64), ml_values(b).astype(np.float64)
    with np.errstate(invalid="ignore"):
        p64 = va[:, None] * vb[None, :]
    p32 = p64.astype(np.float32)
    finite = np.isfinite(p64)
    assert np.array_equal(p32[finite].astype(np.float64), p64[finite])          # every product exact in float32
    p32.view(np.uint32)[np.isnan(p32)] = 0x7FC00000
    u = FPUnit.exact(a, b)
    assert_same_bits(u.products, p32)
    assert u.is_exact and not FPUnit.mitchell(a, b).is_exact


@pytest.mark.parametrize("kind, kw", VARIANTS[:3] + VARIANTS[8:9], ids=["exact", "mitchell", "lmul", "truncated0"])
def test_special_pairs_are_ieee_for_every_builtin(kind, kw):
    u = build(kind, "e5m2", "e5m2", **kw)
    p = u.products
    inf, ninf, nan, two, zero, nzero = 0x7C, 0xFC, 0x7E, 0x40, 0x00, 0x80
    assert np.isnan(p[inf, zero]) and np.isnan(p[zero, ninf])                   # 0 * inf
    assert p[inf, two] == np.inf and p[ninf, two] == -np.inf and p[inf, ninf] == -np.inf
    assert bits(p[nzero, two]) == 0x80000000 and bits(p[nzero, nzero]) == 0    # signed zeros
    assert bits(p[zero, 0xC0]) == 0x80000000                                    # +0 * -2 = -0
    nans = p[np.isnan(p)]
    assert (bits(nans) == 0x7FC00000).all() and np.isnan(p[nan]).all() and np.isnan(p[:, 0xFF]).all()
    q = build(kind, "e4m3", "e4m3", **kw).products
    assert np.isnan(q[0x7F]).all() and np.isnan(q[:, 0xFF]).all() and np.isfinite(q[:0x7F, :0x7F]).all()


# one line per hand-checked product: (builder, kw, a, b, code_a, code_b, value)
HAND = [
    ("mitchell", {}, "e2m1", "e2m1", 0x3, 0x3, 2.0),        # 1.5 * 1.5: x + y = 1 -> 2 (x + y)
    ("mitchell", {}, "e2m1", "e2m1", 0x5, 0x3, 4.0),        # 3 * 1.5 = 2^1 1.5 * 1.5 -> 2^1 * 2
    ("mitchell", {}, "e2m1", "e2m1", 0xD, 0x1, -1.5),       # -3 * 0.5 (a subnormal: 2^-1 * 1.0) = -1.5 exactly
    ("mitchell", {}, "e4m3", "e4m3", 0x3A, 0x39, 1.375),    # 1.25 * 1.125: 1 + 0.25 + 0.125
    ("lmul", {}, "e2m1", "e2m1", 0x3, 0x3, 2.5),            # 1 + 0.5 + 0.5 + 2^-1 (m = 1)
    ("lmul", {}, "e4m3", "e4m3", 0x39, 0x39, 1.375),        # 1 + 0.125 + 0.125 + 2^-3
    ("lmul", {}, "e4m3", "e4m3", 0x3F, 0x3F, 2.875),        # 1 + 0.875 + 0.875 + 0.125: not renormalised
    ("lmul", {}, "int8", "int8", 64, 64, 1.0625),           # 1.0 * 1.0 + 2^-4 (m = 6)
    ("lmul", {}, "int8", "int8", 96, 0xC0, -1.5625),        # 1.5 * -1: -(1 + 0.5 + 0 + 2^-4)
    ("lmul", {}, "int8", "int8", 3, 0x7F, 0.07958984375),   # 3/64 * 127/64: (1 + .5 + .984375 + 2^-4) 2^-5
    ("lmul", {"offset": 2 ** -24}, "e4m3", "e4m3", 0x38, 0x38, 1.0),   # 1 + 2^-24: a tie, to even
    ("truncated", {"k": 0}, "e4m3", "e4m3", 0x3C, 0x3C, 2.0),          # 1.5 * 1.5 = 2.25 = 2 * 1.125 -> 2
    ("truncated", {"k": 3}, "e4m3", "e4m3", 0x3F, 0x3F, 3.5),          # 1.875^2 = 3.515625 = 2 * 1.7578 -> 2 * 1.75
    ("truncated", {"k": 1}, "e5m2", "e5m2", 0xBF, 0x3F, -3.0),         # -1.75 * 1.75 = -2 * 1.53 -> -2 * 1.5
]


@pytest.mark.parametrize("kind, kw, a, b, ca, cb, want", HAND)
def test_hand_values(kind, kw, a, b, ca, cb, want):
    assert build(kind, a, b, **kw).products[ca, cb] == np.float32(want)


def test_lmul_offset_per_format():
    assert [lmul_l(m) for m in range(1, 8)] == [lmul_l_ref(m) for m in range(1, 8)] == [1, 2, 3, 3, 4, 4, 4]
    one = {"e4m3": 0x38, "e5m2": 0x3C, "e3m2": 0x0C, "e2m3": 0x08, "e2m1": 0x2, "int8": 64}
    want = {("e4m3", "e4m3"): 2 ** -3, ("e5m2", "e5m2"): 2 ** -2, ("e4m3", "e5m2"): 2 ** -3, ("e2m1", "e2m1"): 2 ** -1,
            ("e3m2", "e2m3"): 2 ** -3, ("int8", "int8"): 2 ** -4, ("e3m2", "e3m2"): 2 ** -2, ("e2m1", "int8"): 2 ** -4}
    for (a, b), off in want.items():
        u = FPUnit.lmul(a, b)
        assert u.products[one[a], one[b]] == np.float32(1 + off) and f"+2^-{int(-np.log2(off))} " in u.source, (a, b)


def test_mitchell_never_overestimates_and_stays_within_its_bound():
    for a, b in PAIRS:
        m = fp_metrics(FPUnit.mitchell(a, b))
        assert m["bias"] <= 0 and m["max_red"] <= 1 / 9 + 1e-15, (a, b, m)
        assert fp_metrics(FPUnit.truncated(a, b, 3))["bias"] <= 0


# ------------------------------------------------------------------ metrics
def two_errors():
    """exact e2m1 x e2m1 with p(1.5, 1.5) = 2 (rel -1/9, err -0.25) and p(3, 0.5) = 2 (rel +1/3, err +0.5)."""
    t = FPUnit.exact("e2m1", "e2m1").products.copy()
    t[0x3, 0x3] = 2.0
    t[0x5, 0x1] = 2.0
    return FPUnit.from_table("e2m1", "e2m1", t, "two errors")


def test_metrics_against_a_hand_computation():
    m = fp_metrics(two_errors())
    n, n_all = 14 * 14, 16 * 16                  # e2m1: 14 nonzero codes; 16 finite
    want = {"mred": (1 / 9 + 1 / 3) / n, "max_red": 1 / 3, "bias": (-1 / 9 + 1 / 3) / n,
            "msre": (1 / 81 + 1 / 9) / n, "error_rate": 2 / n, "max_abs_err": 0.5, "pairs": n,
            "mae": 0.75 / n_all, "wce": 0.5, "ep_pct": 200 / n_all, "mre_pct": (1 / 9 + 1 / 3) / n * 100,
            "wcre_pct": 100 / 3, "mse": (0.0625 + 0.25) / n_all, "pairs_all": n_all}
    assert m.keys() == want.keys()
    for k, v in want.items():
        assert m[k] == pytest.approx(v, rel=METRIC_RTOL, abs=1e-300), k


def test_weighted_metrics_against_a_hand_computation():
    wa = np.zeros(16)
    wa[0x3], wa[0x5] = 3.0, 1.0                   # a is 1.5 three times as often as 3
    wb = np.zeros(16)
    wb[0x3], wb[0x1], wb[0x0] = 1.0, 1.0, 5.0     # b: 1.5 or 0.5 (zero: outside the set)
    m = fp_metrics(two_errors(), wa, wb)
    # pairs (1.5, 1.5) 3/8 rel -1/9; (1.5, 0.5) 3/8 exact; (3, 1.5) 1/8 exact; (3, 0.5) 1/8 rel 1/3
    assert m["mred"] == pytest.approx(3 / 8 / 9 + 1 / 8 / 3, rel=METRIC_RTOL)
    assert m["bias"] == pytest.approx(-3 / 8 / 9 + 1 / 8 / 3, rel=METRIC_RTOL)
    assert m["error_rate"] == pytest.approx(0.5, rel=METRIC_RTOL)
    assert m["max_red"] == pytest.approx(1 / 3) and m["max_abs_err"] == 0.5
    only = np.zeros(16)
    only[0x3] = 1.0                               # (1.5, 1.5) alone
    m = fp_metrics(two_errors(), only, only)
    assert m["max_red"] == pytest.approx(1 / 9) and m["bias"] == pytest.approx(-1 / 9) and m["error_rate"] == 1.0
    assert fp_metrics(two_errors(), None, None) == fp_metrics(two_errors())


@pytest.mark.parametrize("w, err", [(np.ones(15), ValueError), (-np.ones(16), ValueError), ("x", TypeError),
                                    (np.eye(16)[0], ValueError)])    # only the zero code: nothing to weigh
def test_bad_weights_are_named(w, err):
    with pytest.raises(err, match="weights_a"):
        fp_metrics(two_errors(), w)


def test_report_compares_units_side_by_side():
    us = [FPUnit.exact("e4m3", "e4m3"), FPUnit.mitchell("e4m3", "e4m3"), FPUnit.lmul("e4m3", "e4m3")]
    r = fp_report(us)
    print(r)
    lines = r.splitlines()
    assert "e4m3 x e4m3" in lines[0] and "63,504" in lines[0] and "64,516" in lines[0]
    assert lines[1].split()[-3:] == ["exact", "mitchell", "lmul"]
    mred = next(ln for ln in lines if ln.startswith("mred")).split()
    assert mred[-3] == "0" and float(mred[-2]) == pytest.approx(fp_metrics(us[1])["mred"], rel=1e-3)
    assert us[1].report().splitlines()[1].split()[-1] == "mitchell"
    with pytest.raises(ValueError, match="one pair of formats"):
        fp_report([us[0], FPUnit.exact("e5m2", "e5m2")])


# ------------------------------------------------------------------ tables and functions
def test_from_table_checks_and_copies():
    t = FPUnit.exact("e2m1", "e5m2").products.copy()
    u = FPUnit.from_table("e2m1", "e5m2", t, "mine")
    t[1, 1] = 99.0
    assert u.products[1, 1] != 99.0 and not u.products.flags.writeable
    with pytest.raises(ValueError):
        u.products[0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.name = "other"
    with pytest.raises(TypeError, match="float32.*float64"):
        FPUnit.from_table("e2m1", "e5m2", t.astype(np.float64))
    with pytest.raises(ValueError, match=r"\(16, 256\).*\(256, 16\)"):
        FPUnit.from_table("e2m1", "e5m2", np.ascontiguousarray(t.T))
    with pytest.raises(TypeError, match="table"):
        FPUnit.from_table("e2m1", "e5m2", t.tolist())


def test_a_nonfinite_product_of_finite_operands_is_named_unless_declared():
    t = FPUnit.exact("e4m3", "e4m3").products.copy()
    t[0x7F, 3] = 5.0                             # a NaN operand: anything goes
    t[0x45, 0x3A] = np.inf                       # 3.25 * 1.25
    with pytest.raises(ValueError, match=r"a=0x45 \(e4m3 3\.25\) and b=0x3a \(e4m3 1\.25\) is inf"):
        FPUnit.from_table("e4m3", "e4m3", t)
    u = FPUnit.from_table("e4m3", "e4m3", t, allow_nonfinite=True)
    assert u.products[0x7F, 3] == 5.0 and u.products[0x45, 0x3A] == np.inf
    assert fp_metrics(u)["max_red"] == np.inf


def test_nan_entries_are_stored_canonical():
    t = FPUnit.exact("e2m1", "e2m1").products.copy()
    t.view(np.uint32)[0, 0] = 0xFFC00001         # a NaN with a payload and a sign
    u = FPUnit.from_table("e2m1", "e2m1", t, allow_nonfinite=True)
    assert bits(u.products[0, 0]) == 0x7FC00000


def test_from_function():
    u = FPUnit.from_function("e4m3", "e5m2", lambda x, y: x * y)
    assert u == FPUnit.exact("e4m3", "e5m2") and u.name == "<lambda>"
    v = FPUnit.from_function("e2m1", "e2m1", lambda x, y: 1.0 + x.astype(np.float64) * y + 2 ** -30, name="r")
    assert v.products[0, 0] == 1.0 and v.name == "r"             # float64 rounded to float32
    with pytest.raises(ValueError, match=r"fn: must return a \(16, 16\)"):
        FPUnit.from_function("e2m1", "e2m1", lambda x, y: x[0] * y[0])
    with pytest.raises(ValueError, match=r"fn: the product of a=0x2 \(e2m1 1.0\) and b=0x6 \(e2m1 4.0\) is inf.*104"):
        FPUnit.from_function("e2m1", "e2m1", lambda x, y: x * y * np.float32(1e38))
    with pytest.raises(TypeError, match="fn"):
        FPUnit.from_function("e2m1", "e2m1", None)


@pytest.mark.parametrize("call, err, match", [
    (lambda: FPUnit.exact("e8m0", "e4m3"), ValueError, "a: .*e8m0"),
    (lambda: FPUnit.exact("e4m3", "fp9"), ValueError, "b: expected an element format"),
    (lambda: FPUnit.exact(4, "e4m3"), TypeError, "a: "),
    (lambda: FPUnit.truncated("e4m3", "e4m3", 24), ValueError, "k: "),
    (lambda: FPUnit.truncated("e4m3", "e4m3", True), ValueError, "k: "),
    (lambda: FPUnit.lmul("e4m3", "e4m3", 0.1), ValueError, "offset: .*2\\^-24"),
    (lambda: FPUnit.lmul("e4m3", "e4m3", -0.5), ValueError, "offset: "),
    (lambda: FPUnit.lmul("e4m3", "e4m3", "1/8"), TypeError, "offset: "),
])
def test_bad_arguments_are_named(call, err, match):
    with pytest.raises(err, match=match):
        call()


# ------------------------------------------------------------------ save / load
@pytest.mark.parametrize("unit", [lambda: FPUnit.mitchell("e4m3", "e5m2"), lambda: FPUnit.lmul("e2m1", "e3m2"),
                                  lambda: two_errors()])
def test_save_load_round_trip(unit, tmp_path):
    u = unit()
    u.save(tmp_path / "u")
    assert sorted(os.listdir(tmp_path / "u")) == ["fp_products.bin", "fpunit.json"]
    assert os.path.getsize(tmp_path / "u" / "fp_products.bin") == 4 * u.products.size
    v = FPUnit.load(tmp_path / "u")
    assert v == u and (v.a, v.b, v.name, v.source) == (u.a, u.b, u.name, u.source)
    assert_same_bits(v.products, u.products)
    assert FPUnit.load(tmp_path / "u", a=u.a.name, b=u.b) == u
    raw = np.fromfile(tmp_path / "u" / "fp_products.bin", "<f4").reshape(u.products.shape)
    assert_same_bits(raw, u.products)                                         # little-endian, row-major
    u.save(tmp_path / "u")                                                    # over an earlier save
    assert FPUnit.load(tmp_path / "u") == u


def saved(tmp_path, unit=None):
    d = tmp_path / "u"
    (unit or FPUnit.lmul("e4m3", "e4m3")).save(d)
    return d, json.loads((d / "fpunit.json").read_text())


def rewrite(d, **meta):
    m = json.loads((d / "fpunit.json").read_text())
    m.update(meta)
    (d / "fpunit.json").write_text(json.dumps(m))


def test_a_corrupted_table_is_refused(tmp_path):
    d, _ = saved(tmp_path)
    raw = bytearray((d / "fp_products.bin").read_bytes())
    raw[4 * 0x123 + 1] ^= 0x10
    (d / "fp_products.bin").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="fp_products.bin: the table hashes to .* records"):
        FPUnit.load(d)


def test_a_short_or_long_table_is_refused(tmp_path):
    d, _ = saved(tmp_path)
    full = (d / "fp_products.bin").read_bytes()
    for data in (full[:-4], full + b"\0"):
        (d / "fp_products.bin").write_bytes(data)
        with pytest.raises(ValueError, match="expected 262144 bytes"):
            FPUnit.load(d)


def test_wrong_formats_are_never_read_silently(tmp_path):
    d, meta = saved(tmp_path)
    with pytest.raises(ValueError, match="e4m3 x e4m3, but a=e5m2 was asked"):
        FPUnit.load(d, a="e5m2")
    rewrite(d, a="e5m2")                          # same width, other format: the digest says no
    with pytest.raises(ValueError, match="hashes to"):
        FPUnit.load(d)
    rewrite(d, a="e2m1")                          # other width: the shape says no
    with pytest.raises(ValueError, match=r"shape \[256, 256\].*\[16, 256\]"):
        FPUnit.load(d)
    rewrite(d, a="e8m0", shape=[256, 256])
    with pytest.raises(ValueError, match="fpunit.json: a: .*e8m0"):
        FPUnit.load(d)
    rewrite(d, a="e4m3", format="lutcore-fpunit/9")
    with pytest.raises(ValueError, match="fpunit.json: expected"):
        FPUnit.load(d)
    (d / "fpunit.json").write_text("{not json")
    with pytest.raises(ValueError, match="fpunit.json: cannot read"):
        FPUnit.load(d)


def test_missing_and_escaping_files_are_refused(tmp_path):
    d, _ = saved(tmp_path)
    outside = tmp_path / "elsewhere.bin"
    os.replace(d / "fp_products.bin", outside)
    with pytest.raises(ValueError, match="fp_products.bin: cannot read"):
        FPUnit.load(d)
    os.symlink(outside, d / "fp_products.bin")
    with pytest.raises(ValueError, match="outside the directory"):
        FPUnit.load(d)
    with pytest.raises(FileNotFoundError):
        FPUnit.load(tmp_path / "nothing")


# ------------------------------------------------------------------ circuits
def test_verilog_fp4_multiplier_is_exact():
    u = FPUnit.from_verilog(os.path.join(CIRCUITS, "fp4_mul_fp32.v"), "e2m1", "e2m1")
    assert_same_bits(u.products, FPUnit.exact("e2m1", "e2m1").products)
    assert u.is_exact and u.name == "fp4_mul_fp32" and "module fp4_mul_fp32" in u.source


def test_verilog_widths_must_match_the_formats(tmp_path):
    v = os.path.join(CIRCUITS, "fp4_mul_fp32.v")
    with pytest.raises(ValueError, match=r"output y \(32 bits\).*out=bf16 need 4, 4 and 16"):
        FPUnit.from_verilog(v, "e2m1", "e2m1", out="bf16")
    with pytest.raises(ValueError, match=r"inputs a \(4 bits\), b \(4 bits\).*a=e3m2, b=e2m1"):
        FPUnit.from_verilog(v, "e3m2", "e2m1")
    wide = tmp_path / "wide.v"
    wide.write_text("module wide(input [7:0] a, input [8:0] b, output [31:0] y); assign y = a * b; endmodule\n")
    with pytest.raises(ValueError, match="inputs of 8 and 9 bits"):
        FPUnit.from_verilog(wide, "e4m3", "e4m3")


def test_c_e4m3_multiplier_is_exact():
    u = FPUnit.from_c(os.path.join(CIRCUITS, "e4m3_mul_fp32.c"), "e4m3", "e4m3", out="fp32")
    assert_same_bits(u.products, FPUnit.exact("e4m3", "e4m3").products)
    assert u.name == "e4m3_mul" and "32-bit unsigned return" in u.source


# C bodies of e2m1 x e2m1 models: p is the exact product (float), then the output pattern
E2M1_C = """#include <math.h>
#include <stdint.h>
#include <string.h>
static float v4(unsigned c) { static const float m[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
                              return (c & 8) ? -m[c & 7] : m[c & 7]; }
static uint32_t f32(float p) { uint32_t u; memcpy(&u, &p, 4); return u; }
%s
"""
E2M1_OUT = {
    "fp32": "int32_t mul(uint8_t a, uint8_t b) { return (int32_t)f32(v4(a) * v4(b)); }",   # a signed return
    "bf16": "uint16_t mul(uint8_t a, uint8_t b) { return (uint16_t)(f32(v4(a) * v4(b)) >> 16); }",
    "fp16": """uint64_t mul(uint8_t a, uint8_t b) { float p = v4(a) * v4(b); int e; float m = frexpf(fabsf(p), &e);
                 uint64_t s = signbit(p) ? 0x8000u : 0;
                 return p == 0 ? s : s | (uint64_t)(e - 1 + 15) << 10 | (uint64_t)((2 * m - 1) * 1024); }""",
    "e4m3": """uint8_t mul(uint8_t a, uint8_t b) { float p = v4(a) * v4(b);      /* every product is an e4m3 value */
                 for (unsigned c = 0; c < 256; ++c) { int e = (c >> 3) & 15, m = c & 7;
                     float v = e ? ldexpf(1 + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
                     if ((c & 0x80 ? -v : v) == p && !signbit(p) == !(c & 0x80)) return (uint8_t)c; }
                 return 0x7f; }""",
}


@pytest.mark.parametrize("out", E2M1_OUT)
def test_c_outputs_in_every_format(out, tmp_path):
    f = tmp_path / f"fp4_{out}.c"
    f.write_text(E2M1_C % E2M1_OUT[out])
    u = FPUnit.from_c(f, "e2m1", "e2m1", out=out)
    assert_same_bits(u.products, FPUnit.exact("e2m1", "e2m1").products)


def test_c_output_width_must_hold_the_format(tmp_path):
    f = tmp_path / "narrow.c"
    f.write_text(E2M1_C % "uint16_t mul(uint8_t a, uint8_t b) { return (uint16_t)(f32(v4(a) * v4(b)) >> 16); }")
    with pytest.raises(ValueError, match="returns a 16-bit integer, but out=fp32 is a 32-bit pattern"):
        FPUnit.from_c(f, "e2m1", "e2m1", out="fp32")
    f = tmp_path / "wide.c"
    f.write_text(E2M1_C % "uint64_t mul(uint8_t a, uint8_t b) { return f32(v4(a) * v4(b)) | (a == 3 ? 1ull << 40 : 0); "
                           "}")
    with pytest.raises(ValueError, match="for a=0x3, b=0x0: bits above the 32-bit fp32 pattern"):
        FPUnit.from_c(f, "e2m1", "e2m1", out="fp32")


def test_c_overflow_by_design_is_declared(tmp_path):
    f = tmp_path / "ovf.c"
    f.write_text(E2M1_C % "uint32_t mul(uint8_t a, uint8_t b) { return a == 7 && b == 7 ? 0x7f800000u : "
                           "f32(v4(a) * v4(b)); }")
    with pytest.raises(ValueError, match=r"ovf.c: the product of a=0x7 \(e2m1 6.0\) and b=0x7 \(e2m1 6.0\) is inf"):
        FPUnit.from_c(f, "e2m1", "e2m1")
    u = FPUnit.from_c(f, "e2m1", "e2m1", allow_nonfinite=True)
    assert u.products[7, 7] == np.inf and u.allow_nonfinite
    with pytest.raises(ValueError, match="out: expected one of fp32"):
        FPUnit.from_c(f, "e2m1", "e2m1", out="fp24")
