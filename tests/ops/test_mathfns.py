"""lutcore.ops.exp / exp2 / softplus / silu: measured error on a dense grid against
float64 numpy, special values, SIMD-path and tail determinism.

Error budgets (named, STYLE habit 10), float32 against float64 numpy:
    EXP_ULP         exp, exp2: relative, in float32 ulps of the true result, for results
                    >= FLT_MIN (x >= -87.3; exp2: x >= -126)
    EXP_FLUSH_ABS   exp: below FLT_MIN the result may flush: absolute error bound
    ACT_ULP         softplus, silu: relative, in float32 ulps ...
    ACT_TINY_ABS    ... or absolute error <= this for tiny results
    F64_ULP         float64 path: relative, in float64 ulps
The ulp of a true value v is the spacing of float32 at float32(|v|).
"""
import numpy as np
import pytest

import lutcore
import lutcore.ops as ops
from reference.scan_ref import silu_ref, softplus_ref

EXP_ULP = 2.0
EXP_FLUSH_ABS = 1.2e-38
ACT_ULP = 4.0
ACT_TINY_ABS = 1e-37
F64_ULP = 4.0

FLT_MIN = float(np.finfo(np.float32).tiny)      # smallest normal float32
FLT_MAX = float(np.finfo(np.float32).max)
GRID_POINTS = 2_000_001

def _exp_ref(x):
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, np.float64))


def _exp2_ref(x):
    with np.errstate(over="ignore"):
        return np.exp2(np.asarray(x, np.float64))


REF = {"exp": _exp_ref, "exp2": _exp2_ref, "softplus": softplus_ref, "silu": silu_ref}   # float64 numpy
FNS = list(REF)


def _grid():
    g = np.linspace(-100.0, 100.0, GRID_POINTS).astype(np.float32)
    extra = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, 1e-7, -1e-7, 0.5, -0.5, 1.0, -1.0,
                      np.log(2.0), 15.0, 19.99, 20.0, 20.01, 25.0,
                      -87.33, -87.3365, -87.34, -88.0, -88.72, -89.0, -103.0, -104.0, -150.0,
                      88.0, 88.37, 88.5, 88.7, 88.72, 88.7228, 88.72283, 88.723, 88.8],
                     dtype=np.float32)
    # every float32 in a few narrow windows (exp overflow edge, softplus threshold)
    win = [np.arange(np.float32(a).view(np.int32), np.float32(a).view(np.int32) + 4096,
                     dtype=np.int32).view(np.float32) for a in (88.7, 19.99, 0.25)]
    return np.concatenate([g, extra] + win)


GRID = _grid()


def _ulp32(v):
    """Spacing of float32 at float32(|v|) as float64 (v finite, within float32 range)."""
    return np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)


def _measure(name, x, got):
    """Return (max ulp error over the relative region, max abs error over the tiny region,
    boolean mask of failures) for float32 results."""
    ref = REF[name](x.astype(np.float64))
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - ref)
        if name in ("exp", "exp2"):
            rel_region = (ref >= FLT_MIN) & (ref <= FLT_MAX)
            tiny_region = ref < FLT_MIN
            den = np.where(rel_region, _ulp32(np.minimum(ref, FLT_MAX)), 1.0)
            ulp = np.where(rel_region, err / den, 0)
            ok_rel = ulp <= EXP_ULP
            ok_tiny = (err <= EXP_FLUSH_ABS) & (g >= 0)
            # beyond FLT_MAX: the float32 result rounds to inf (or is within budget of FLT_MAX)
            near_max = np.abs(g - FLT_MAX) <= EXP_ULP * _ulp32(np.full_like(g, FLT_MAX))
            ok_over = np.isposinf(g) | near_max
            ok_over &= np.isposinf(g) | (ref <= FLT_MAX * (1 + 2.0 ** -24))
            ok = np.where(rel_region, ok_rel, np.where(tiny_region, ok_tiny, ok_over))
            tiny_abs = float(np.max(np.where(tiny_region, err, 0)))
        else:
            fin = np.isfinite(ref) & (np.abs(ref) <= FLT_MAX)
            ulp = np.where(fin & (ref != 0), err / np.where(fin & (ref != 0), _ulp32(ref), 1), 0)
            ulp = np.where(fin & (ref == 0), np.where(g == 0, 0, np.inf), ulp)
            ok = fin & ((ulp <= ACT_ULP) | (err <= ACT_TINY_ABS))
            tiny_abs = float(np.max(np.where(fin & (ulp > ACT_ULP), err, 0)))
            rel_region = fin & (err > ACT_TINY_ABS)
    max_ulp = float(np.max(np.where(rel_region, ulp, 0)))
    return max_ulp, tiny_abs, ~ok


@pytest.mark.parametrize("name", FNS)
def test_float32_error_budget(name):
    fn = getattr(ops, name)
    x = GRID.copy()
    got = fn(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(x, GRID)                       # input untouched
    max_ulp, tiny_abs, bad = _measure(name, x, got)
    budget = EXP_ULP if name in ("exp", "exp2") else ACT_ULP
    print(f"{name} float32: max ulp = {max_ulp:.3f} (budget {budget}),"
          f" max abs err in tiny region = {tiny_abs:.3e}")
    if np.any(bad):
        idx = np.flatnonzero(bad)[:8]
        ref = REF[name](x[idx].astype(np.float64))
        detail = ", ".join(f"x={x[i]!r}: got {got[i]!r}, want {r!r}" for i, r in zip(idx, ref))
        raise AssertionError(f"{name}: {bad.sum()} points over budget; first: {detail}")


@pytest.mark.parametrize("name", FNS)
def test_float64_close_to_numpy(name):
    fn = getattr(ops, name)
    x = np.linspace(-100.0, 100.0, 200_001)
    x = np.concatenate([x, [0.0, 1e-300, -1e-300, 19.999999, 20.0, 20.000001, -700.0, 700.0]])
    got = fn(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    ref = REF[name](x)
    nz = ref != 0
    ulp = np.abs(got - ref)[nz] / np.spacing(np.abs(ref[nz]))
    print(f"{name} float64: max ulp = {np.max(ulp):.3f} (budget {F64_ULP})")
    assert np.max(ulp) <= F64_ULP
    np.testing.assert_array_equal(got[~nz], ref[~nz])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    nan, inf = np.nan, np.inf
    x = np.array([nan, -nan, inf, -inf, 0.0], dtype)
    e = ops.exp(x)
    assert np.isnan(e[0]) and np.isnan(e[1])
    assert e[2] == inf and e[3] == 0.0 and e[4] == 1.0
    if dtype == np.float32:
        big = ops.exp(np.array([89.0, 100.0, 1000.0, 3e38], dtype))
        assert np.all(np.isposinf(big)), big
        small = ops.exp(np.array([-104.0, -1000.0, -3e38], dtype))
        assert np.all((small >= 0) & (small <= EXP_FLUSH_ABS)), small
    e2 = ops.exp2(x)
    assert np.isnan(e2[0]) and np.isnan(e2[1])
    assert e2[2] == inf and e2[3] == 0.0 and e2[4] == 1.0
    if dtype == np.float32:
        assert np.all(np.isposinf(ops.exp2(np.array([128.0, 200.0, 3e38], dtype))))
        edge = ops.exp2(np.array([127.0, 127.5, -126.0, -126.5, -149.0, -150.5, -1000.0], dtype))
        assert edge[0] == 2.0 ** 127 and edge[2] == 2.0 ** -126 and edge[4] == 2.0 ** -149
        assert 0 < edge[3] < 2.0 ** -126 and edge[5] == 0.0 and edge[6] == 0.0
        assert abs(float(edge[1]) - 2.0 ** 127.5) <= 2 * float(np.spacing(np.float32(2.0 ** 127.5)))
    sp = ops.softplus(x)
    assert np.isnan(sp[0]) and np.isnan(sp[1])
    assert sp[2] == inf and sp[3] == 0.0
    assert abs(float(sp[4]) - np.log(2.0)) <= 4 * np.spacing(dtype(np.log(2.0)))
    si = ops.silu(x)
    assert np.isnan(si[0]) and np.isnan(si[1])
    assert si[2] == inf and si[4] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", FNS)
def test_shapes_and_empty(name, dtype):
    fn = getattr(ops, name)
    x = np.linspace(-5, 5, 35, dtype=dtype).reshape(5, 7)
    got = fn(x)
    assert got.shape == (5, 7) and got.dtype == dtype
    flat = fn(np.ascontiguousarray(x.ravel()))
    np.testing.assert_array_equal(got.ravel(), flat)
    e = fn(np.zeros((0,), dtype))
    assert e.shape == (0,) and e.dtype == dtype
    # a strided view: computed correctly or refused, never wrong
    try:
        s = fn(x[:, ::2])
    except (ValueError, TypeError) as err:
        print("refused strided input:", err)
    else:
        np.testing.assert_array_equal(s, fn(np.ascontiguousarray(x[:, ::2])))


@pytest.mark.parametrize("name", FNS)
def test_elementwise_deterministic_any_offset_length(name):
    """Bulk SIMD body and scalar tail give the same bits for the same element."""
    fn = getattr(ops, name)
    rng = np.random.default_rng(11)
    x = rng.uniform(-90, 90, 203).astype(np.float32)
    full = fn(x)
    for start in range(0, 17):
        for n in (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 100):
            part = fn(np.ascontiguousarray(x[start:start + n]))
            np.testing.assert_array_equal(part.view(np.uint32),
                                          full[start:start + n].view(np.uint32))


@pytest.mark.parametrize("name", FNS)
def test_simd_paths_bit_identical_f32(simd, name):
    fn = getattr(ops, name)
    x = GRID[::7].copy()
    lutcore.set_simd("generic")
    a = fn(x)
    lutcore.set_simd(simd)
    b = fn(x)
    diff = a.view(np.uint32) != b.view(np.uint32)
    if np.any(diff & ~(np.isnan(a) & np.isnan(b))):
        i = np.flatnonzero(diff)[0]
        raise AssertionError(f"{name}: generic vs {simd} differ at x={x[i]!r}: "
                             f"{a[i]!r} vs {b[i]!r}")
