"""Operand formats: spelling, ranges, tables of every format up to 8 x 8 bits (exact product,
metrics against EvoApproxLib's definitions, gradients), the units directory round trip, and the
symmetric int8 paths refusing another format by name."""
import json
import os

import numpy as np
import pytest

import lutcore
import lutcore.quant
import lutcore.units.assign
from lutcore.units import Format, Units


@pytest.mark.parametrize("text,want", [
    ("8s x 8s -> 16s", (8, True, 8, True, 16, True)),
    ("8u*4u", (8, False, 4, False, 12, False)),
    ("8x4u", (8, False, 4, False, 12, False)),
    ("12s", (12, True, 12, True, 24, True)),
    ("16u x 16u -> 32u", (16, False, 16, False, 32, False)),
    ("8s x 4u", (8, True, 4, False, 12, True)),
    ("mul8x2u_0AB", (8, False, 2, False, 10, False)),
    ("mul12s_2PP", (12, True, 12, True, 24, True)),
])
def test_formats_parse_and_print(text, want):
    f = Format.parse(text)
    assert (f.a_bits, f.a_signed, f.b_bits, f.b_signed, f.p_bits, f.p_signed) == want
    assert Format.parse(str(f)) == f and Format.from_dict(f.to_dict()) == f


@pytest.mark.parametrize("text,msg", [("17u", r"a_bits: an operand has 1 to 16 bits, got 17"),
                                      ("8q", r"expected an operand format"),
                                      ("16u x 16u -> 40u", r"p_bits: the product has 1 to 32 bits, got 40")])
def test_bad_formats_name_the_argument(text, msg):
    with pytest.raises(ValueError, match=r"^format: .*" + msg):
        Format.parse(text)
    with pytest.raises(ValueError, match=msg):
        Units.exact(text)


def test_ranges_codes_and_the_exact_table():
    f = Format.parse("4s x 3u")
    assert f.range("a") == (-8, 7) and f.range("b") == (0, 7) and f.table_shape == (16, 8)
    t = f.exact_table()
    assert t[(-3) & 15, 5] == -15 and t[7, 7] == 49 and f.p_bits == 7 and f.p_signed


def test_unsigned_metrics_follow_evoapproxlib_definitions():
    # a truncated unsigned 8 x 4 unit: MAE% is relative to 2^12, the product's range
    u = Units.from_mul(lambda a, b: (a * b) & ~0x7, format="8u x 4u")
    a, b = np.meshgrid(np.arange(256), np.arange(16), indexing="ij")
    err = ((a * b) & ~0x7) - a * b
    m = u.error_metrics()
    assert m["mae"] == pytest.approx(np.abs(err).mean()) and m["wce"] == 7
    assert m["mae_pct"] == pytest.approx(np.abs(err).mean() / 4096 * 100)
    nz = a * b != 0
    assert m["mre_pct"] == pytest.approx((np.abs(err)[nz] / (a * b)[nz]).mean() * 100)


def test_units_directory_round_trip_keeps_the_format_and_old_directories_load_as_before(tmp_path):
    u = Units.from_mul(lambda a, b: (a * b) | 1, format="7u x 7u").with_gradients(
        *Units.exact("7u x 7u").gradients(2))
    u.save(tmp_path / "u")
    with open(tmp_path / "u" / "format.json") as f:
        assert json.load(f)["a"] == "7u"
    v = Units.load(tmp_path / "u")
    assert v == u and v.format == u.format and v.grad_tables[0].shape == (128, 128)
    Units.exact().save(tmp_path / "s")
    assert not os.path.exists(tmp_path / "s" / "format.json")
    assert Units.load(tmp_path / "s").digest == Units.exact().digest       # the signed 8 x 8 digest is unchanged
    with open(tmp_path / "u" / "format.json", "w") as f:
        f.write('{"format": "lutcore-units-format/1", "a": "12u", "b": "4u", "product": "16u"}')
    with pytest.raises(ValueError, match=r"format\.json: format 12u x 4u -> 16u has an operand wider than 8 bits"):
        Units.load(tmp_path / "u")


def test_gradients_of_an_unsigned_table_are_differences_in_code_order():
    ga, gb = Units.exact("8u x 4u").gradients(1)
    assert ga.shape == (256, 16) and ga[10, 3] == 3 and gb[10, 3] == 10 and gb[10, 15] == 10 and ga[255, 2] == 2


def test_the_block_scaled_paths_take_every_format():
    u = Units.exact("8u x 8u")
    a, b = np.ones((2, 32), np.float32), np.ones((32, 2), np.float32)
    y = lutcore.qmatmul(a, b, u)
    assert np.array_equal(y, lutcore.quant.QLinear(b, u)(a)) and np.allclose(y, 32.0, rtol=1e-2)
    assert lutcore.units.assign.resolve_spec(u) is u


def test_repr_and_verify_show_the_format():
    u = Units.from_mul(lambda a, b: a * b + 1, format="8u x 2u")
    assert "format=8u x 2u -> 10u" in repr(u)
    r = u.verify()
    assert r.format == "8u x 2u -> 10u" and "format 8u x 2u -> 10u" in str(r) and r.to_dict()["format"] == r.format


def test_swapped_units_exchange_the_operands_tables_and_netlists(tmp_path):
    import circuits_wide as cw
    u = Units.from_mul(lambda a, b: (a * b) + (b & 1), format="8u x 4u")
    v = u.swapped()
    assert str(v.format) == "4u x 8u -> 12u" and v.swapped() == u
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 256, 500), rng.integers(0, 16, 500)
    assert np.array_equal(v.products(b, a), u.products(a, b))
    path, name = cw.write("12x12s", "trunc", tmp_path, "c")
    w = Units.from_c(path, name)
    ws = w.swapped()
    a, b = rng.integers(-2048, 2048, 2000), rng.integers(-2048, 2048, 2000)
    assert ws.kernel_path == "netlist" and np.array_equal(ws.products(b, a), w.products(a, b))
    assert ws.cost == w.cost and Units.exact().swapped() == Units.exact()


@pytest.mark.parametrize("spec", ["12u x 12u", "12s x 12s", "16u x 16u", "16s x 16s", "11u x 9s", "16u x 4u"])
def test_exact_wide_units_are_netlists_of_the_exact_product(spec):
    u = Units.exact(spec)
    f = u.format
    assert u.kernel_path == "netlist" and u.is_exact
    rng = np.random.default_rng(5)
    a = rng.integers(*f.range("a"), endpoint=True, size=20000)
    b = rng.integers(*f.range("b"), endpoint=True, size=20000)
    lo_a, hi_a = f.range("a")
    lo_b, hi_b = f.range("b")
    a = np.concatenate([a, [lo_a, hi_a, lo_a, hi_a]])
    b = np.concatenate([b, [lo_b, hi_b, hi_b, lo_b]])
    assert np.array_equal(u.products(a, b), a * b)
    A = rng.integers(lo_a, hi_a + 1, size=(5, 37))
    B = rng.integers(lo_b, hi_b + 1, size=(37, 3))
    assert np.array_equal(lutcore.lut_gemm(A, B, u), A @ B)


def test_exact_of_a_format_resolves_by_name():
    from lutcore.units import resolve
    assert resolve("exact:8u").format == Format.parse("8u x 8u") and resolve("exact:8u").is_exact
    assert str(resolve("exact:8u x 4u").format) == "8u x 4u -> 12u"
    assert resolve("exact:16s").kernel_path == "netlist"
    with pytest.raises(ValueError, match=r"^units: expected an operand format"):
        resolve("exact:9q")


def test_a_function_whose_values_leave_the_products_format_is_refused_not_wrapped():
    with pytest.raises(ValueError, match=r"^table_or_fn: the product of a=1, b=5 is 5000, outside the 12-bit "
                                         r"unsigned product of format 8u x 4u -> 12u \[0, 4095\]"):
        Units.from_mul(lambda a, b: a * b * 1000, format="8u x 4u")
    with pytest.raises(ValueError, match=r"the product of a=0, b=0 is -1, outside the 10-bit unsigned product"):
        Units.from_mul(lambda a, b: a * b - 1, format="8u x 2u")


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.booleans(), st.integers(1, 16), st.booleans())
def test_every_format_spells_back_and_its_ranges_hold_its_exact_products(wa, sa, wb, sb):
    f = Format(wa, sa, wb, sb)
    assert Format.parse(str(f)) == f and Format.from_dict(f.to_dict()) == f
    lo_a, hi_a = f.range("a")
    lo_b, hi_b = f.range("b")
    assert hi_a - lo_a + 1 == 1 << wa and hi_b - lo_b + 1 == 1 << wb
    lo, hi = f.p_range
    for a in (lo_a, hi_a):
        for b in (lo_b, hi_b):
            assert lo <= a * b <= hi                        # a + b bits always hold the product
    if f.is_table:
        t = f.exact_table()
        ca, cb = f.codes("a"), f.codes("b")
        assert np.array_equal(t, ca[:, None] * cb[None, :])
        assert np.array_equal(np.sort(ca), np.arange(lo_a, hi_a + 1))
