"""lutcore.requant and lutcore.relu8 against the numpy oracle, default and
random tables, shifts 0..31, full-range int32 accumulators."""
import numpy as np
import pytest

import lutcore
from reference.units_ref import default_relu_lut, default_requant_lut, exact_mul_lut, relu8_ref, requant_ref

SHIFTS = [0, 1, 7, 15, 31]
EDGES = np.array([-2 ** 31, -2 ** 31 + 1, 2 ** 31 - 1, 2 ** 31 - 2, 0, 1, -1, 2, -2, 3, -3,
                  127, 128, -127, -128, 32767, 32768, -32768, -32769, 65535, 65536,
                  2 ** 30, -2 ** 30, 2 ** 30 - 1, -(2 ** 30) - 1], dtype=np.int64)


@pytest.fixture(scope="module")
def random_tables_units(tmp_path_factory):
    r = np.random.default_rng(99)
    rq = r.integers(-128, 128, 65536).astype(np.int8)
    rl = r.integers(-128, 128, 256).astype(np.int8)
    d = tmp_path_factory.mktemp("units_random")
    (d / "mul_lut.bin").write_bytes(exact_mul_lut().astype("<i2").tobytes())   # a units dir needs mul_lut.bin
    (d / "requant_lut.bin").write_bytes(rq.tobytes())
    (d / "relu_lut.bin").write_bytes(rl.tobytes())
    u = lutcore.Units.load(d)
    assert np.array_equal(u.requant_lut, rq) and np.array_equal(u.relu_lut, rl)
    return u


def _acc(rng):
    edges = []
    for s in range(0, 32):                       # values around each rounding boundary
        for base in (1 << s, -(1 << s)):
            edges += [base - 1, base, base + 1, base // 2, base // 2 - 1]
    e = np.concatenate([EDGES, np.array(edges, np.int64)])
    e = e[(e >= -2 ** 31) & (e < 2 ** 31)]
    r = rng.integers(-2 ** 31, 2 ** 31, 5000)
    small = rng.integers(-70000, 70000, 3000)
    return np.concatenate([e, r, small]).astype(np.int32)


@pytest.mark.parametrize("table", ["default", "random"])
@pytest.mark.parametrize("shift", SHIFTS)
def test_requant(simd, rng, random_tables_units, shift, table):
    acc = _acc(rng)
    if table == "default":
        u, lut = None, default_requant_lut()
    else:
        u, lut = random_tables_units, random_tables_units.requant_lut
    want = requant_ref(acc, shift, lut)
    got = lutcore.requant(acc, shift, units=u)
    assert got.dtype == np.int8 and got.shape == acc.shape
    bad = got != want
    print("mismatches:", int(bad.sum()), [(int(acc[i]), int(got[i]), int(want[i])) for i in np.flatnonzero(bad)[:8]])
    assert np.array_equal(got, want)
    if table == "default":
        assert np.array_equal(lutcore.requant(acc, shift, units=lutcore.Units.exact()), want)


def test_requant_named(simd):
    acc = np.array([100, 200, -200, 40000, -3, 3, 2 ** 31 - 1, -2 ** 31], np.int32)
    assert lutcore.requant(acc, 0).tolist() == [100, 127, -127, 127, -3, 3, 127, -127]
    # (-3 + 1) >> 1 = -1, (3 + 1) >> 1 = 2; the int32 maximum must not wrap on the add
    assert lutcore.requant(acc, 1).tolist() == [50, 100, -100, 127, -1, 2, 127, -127]
    # shift 31: (2^31 - 1 + 2^30) >> 31 = 1; (-2^31 + 2^30) >> 31 = -1
    assert lutcore.requant(acc, 31).tolist() == [0, 0, 0, 0, 0, 0, 1, -1]


def test_requant_shapes(rng):
    acc = rng.integers(-2 ** 20, 2 ** 20, (7, 9)).astype(np.int32)
    got = lutcore.requant(acc, 7)
    assert got.shape == (7, 9)
    assert np.array_equal(got, requant_ref(acc, 7, default_requant_lut()))
    s = acc[:, ::2]                                  # strided
    assert np.array_equal(lutcore.requant(s, 7), requant_ref(s, 7, default_requant_lut()))
    assert lutcore.requant(np.zeros((0,), np.int32), 3).shape == (0,)


@pytest.mark.parametrize("table", ["default", "random"])
def test_relu8(simd, rng, random_tables_units, table):
    x = np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, 5000)]).astype(np.int8)
    if table == "default":
        u, lut = None, default_relu_lut()
    else:
        u, lut = random_tables_units, random_tables_units.relu_lut
    got = lutcore.relu8(x, units=u)
    want = relu8_ref(x, lut)
    assert got.dtype == np.int8 and got.shape == x.shape
    print("mismatches:", int((got != want).sum()))
    assert np.array_equal(got, want)
    if table == "default":
        assert np.array_equal(got, np.maximum(x, 0))
    xs = x[::3]                                      # strided
    assert np.array_equal(lutcore.relu8(xs, units=u), relu8_ref(xs, lut))
