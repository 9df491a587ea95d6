"""Gradient tables (issue 27): Units.gradients / with_gradients / units directories, and
backward="table" in lutcore.torch against a separately written numpy reference."""
import os
import warnings

import numpy as np
import pytest

from lutcore.units import Units, approx


def _ref_diff(mul, h):
    """Plain loops over int8 values: Ga[a, b] = (f(min(a+h,127), b) - f(max(a-h,-128), b)) / (hi - lo)."""
    f = lambda a, b: float(mul[(a & 0xff) * 256 + (b & 0xff)])     # noqa: E731
    ga = np.zeros((256, 256), np.float64)
    gb = np.zeros((256, 256), np.float64)
    vals = range(-128, 128)
    for a in vals:
        hi, lo = min(a + h, 127), max(a - h, -128)
        for b in vals:
            ga[a & 0xff, b & 0xff] = (f(hi, b) - f(lo, b)) / (hi - lo)
    for b in vals:
        hi, lo = min(b + h, 127), max(b - h, -128)
        for a in vals:
            gb[a & 0xff, b & 0xff] = (f(a, hi) - f(a, lo)) / (hi - lo)
    return ga.astype(np.float32), gb.astype(np.float32)


@pytest.mark.parametrize("h", [1, 3])
def test_gradients_match_reference(h):
    rng = np.random.default_rng(5)
    u = Units.from_mul(rng.integers(-3000, 3000, 65536))                 # asymmetric, jagged
    Ga, Gb = u.gradients(h)
    assert Ga.dtype == np.float32 and Ga.shape == (256, 256) and Gb.shape == (256, 256)
    ra, rb = _ref_diff(u.mul, h)
    assert np.array_equal(Ga, ra) and np.array_equal(Gb, rb)


def test_gradients_of_exact_table():
    Ga, Gb = Units.exact().gradients()
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.float32)
    assert np.array_equal(Ga, np.broadcast_to(v[None, :], (256, 256)))    # df/da = b
    assert np.array_equal(Gb, np.broadcast_to(v[:, None], (256, 256)))    # df/db = a


@pytest.mark.parametrize("h", [0, 128, -1])
def test_gradients_bad_h(h):
    with pytest.raises(ValueError, match="h: .*1..127"):
        Units.exact().gradients(h)
    with pytest.raises(TypeError, match="h: expected an int"):
        Units.exact().gradients(1.5)


def test_with_gradients_checks():
    u = Units.exact()
    good = np.zeros((256, 256), np.float32)
    with pytest.raises(ValueError, match=r"Ga: expected shape \(256, 256\) or \(65536,\), got \(256, 255\)"):
        u.with_gradients(np.zeros((256, 255), np.float32), good)
    with pytest.raises(TypeError, match="Gb: expected a float array.*int64"):
        u.with_gradients(good, np.zeros((256, 256), np.int64))
    bad = good.copy()
    bad[3, 255] = np.nan
    with pytest.raises(ValueError, match=r"Gb: expected finite.*\[3, 255\] \(a=3, b=-1\)"):
        u.with_gradients(good, bad)
    with pytest.raises(ValueError, match="Ga: expected finite"):
        u.with_gradients(np.full(65536, 1e39), good)                       # inf in float32
    with pytest.raises(TypeError, match="Gb: expected a .* got None"):
        u.with_gradients(good, None)


def test_with_gradients_copy_and_round_trip(tmp_path):
    m = approx.by_name("mitchell").with_cost(power_mw=0.5)
    rng = np.random.default_rng(1)
    Ga, Gb = rng.normal(size=(256, 256)), rng.normal(size=65536)
    v = m.with_gradients(Ga, Gb)
    assert m.grad_tables is None and v.digest == m.digest and v.cost == m.cost
    assert np.array_equal(v.grad_tables[0], Ga.astype(np.float32))
    assert np.array_equal(v.grad_tables[1], Gb.astype(np.float32).reshape(256, 256))
    assert not v.grad_tables[0].flags.writeable
    d = tmp_path / "u"
    v.save(d)
    assert sorted(os.listdir(d)) == ["cost.json", "grad_a.bin", "grad_b.bin", "mul_lut.bin", "relu_lut.bin",
                                     "requant_lut.bin"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                    # no "unknown file" warning
        w = Units.load(d)
    assert w == v and np.array_equal(w.grad_tables[0], v.grad_tables[0])
    assert np.array_equal(w.grad_tables[1], v.grad_tables[1]) and w.cost["power_mw"] == 0.5
    v.with_gradients(None, None).save(d)                                  # dropped: the files go
    assert "grad_a.bin" not in os.listdir(d) and Units.load(d).grad_tables is None


def test_load_bad_gradient_files(tmp_path):
    d = tmp_path / "u"
    Units.exact().with_gradients(*Units.exact().gradients()).save(d)
    os.remove(d / "grad_b.bin")
    with pytest.raises(ValueError, match="grad_b.bin: missing.*grad_a.bin is there"):
        Units.load(d)
    (d / "grad_b.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=r"grad_b.bin: expected 262144 bytes"):
        Units.load(d)
    t = np.zeros(65536, "<f4")
    t[7] = np.inf
    (d / "grad_b.bin").write_bytes(t.tobytes())
    with pytest.raises(ValueError, match="grad_b.bin: 1 non-finite"):
        Units.load(d)
