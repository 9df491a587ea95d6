"""lutcore.ops.gelu_tanh / gelu_tanh_backward (the GPT's MLP activation).

Against a separately written float64 reference (numpy's tanh), on a dense grid
and odd lengths.  Error budgets (float32 vs float64):
    GELU_ABS_PER_U   |y - y_ref| <= GELU_ABS_PER_U * |u| + GELU_ULP ulp(y_ref): the
                     native tanh is exact to ~1 ulp *of 1* (all 1 + t needs)
    GELU_ULP
    DGELU_REL        backward, relative to max(1, |dx_ref|): the float32 formula cancels
                     near |u| ~ 5, where 1 + t is ~1e-7 (numpy's float32 gives the same)
The float64 path is checked by central differences.
"""
import numpy as np
import pytest

import lutcore
from lutcore import ops
from reference.asserts import assert_bits_equal

GELU_ABS_PER_U = 2.5e-7
GELU_ULP = 2.0
DGELU_REL = 1e-5
C, A = np.sqrt(2.0 / np.pi), 0.044715


def gelu_ref(u):
    u = np.asarray(u, np.float64)
    return 0.5 * u * (1.0 + np.tanh(C * (u + A * u ** 3)))


def dgelu_ref(u):
    u = np.asarray(u, np.float64)
    t = np.tanh(C * (u + A * u ** 3))
    return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * C * (1.0 + 3.0 * A * u * u)


GRID = np.concatenate([np.linspace(-12, 12, 400_001), -np.logspace(-8, 2, 5001), np.logspace(-8, 2, 5001),
                       [0.0, -0.0, 30.0, -30.0, 1e4, -1e4]]).astype(np.float32)


def test_forward_error_budget():
    y, t = ops.gelu_tanh(GRID)
    want = gelu_ref(GRID)
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(y.astype(np.float64) - want)
    bound = GELU_ABS_PER_U * np.abs(GRID.astype(np.float64)) + GELU_ULP * ulp
    worst = int(np.argmax(err / bound))
    print(f"\ngelu_tanh: worst err {err[worst]:.3e} at u={GRID[worst]!r} (bound {bound[worst]:.3e})")
    assert np.all(err <= bound), (GRID[worst], y[worst], want[worst])
    assert np.all(np.abs(t) <= 1) and t.dtype == np.float32
    np.testing.assert_allclose(t, np.tanh(C * (GRID.astype(np.float64) + A * GRID.astype(np.float64) ** 3)),
                               rtol=0, atol=3e-7)


def test_backward_against_reference():
    rng = np.random.default_rng(0)
    u = GRID[::5]
    dy = rng.standard_normal(u.shape).astype(np.float32)
    _, t = ops.gelu_tanh(u)
    dx = ops.gelu_tanh_backward(dy, u, t)
    want = dy.astype(np.float64) * dgelu_ref(u)
    rel = np.abs(dx - want) / np.maximum(1.0, np.abs(want))
    assert dx.dtype == np.float32 and rel.max() <= DGELU_REL, rel.max()


def test_float64_path_matches_reference_and_finite_differences():
    u = np.random.default_rng(1).uniform(-6, 6, 257)
    y, t = ops.gelu_tanh(u)
    np.testing.assert_allclose(y, gelu_ref(u), rtol=1e-14, atol=1e-15)
    h = 1e-6
    fd = (gelu_ref(u + h) - gelu_ref(u - h)) / (2 * h)
    dx = ops.gelu_tanh_backward(np.ones_like(u), u, t)
    np.testing.assert_allclose(dx, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("n", [0, 1, 7, 33, 16_385])
def test_odd_lengths_threads_and_simd_bits(simd, n):
    rng = np.random.default_rng(n)
    u = (4 * rng.standard_normal(n)).astype(np.float32)
    dy = rng.standard_normal(n).astype(np.float32)
    lutcore.set_simd("generic")
    y0, t0 = ops.gelu_tanh(u, threads=1)
    d0 = ops.gelu_tanh_backward(dy, u, t0, threads=1)
    lutcore.set_simd(simd)
    for threads in (1, 2):
        y1, t1 = ops.gelu_tanh(u, threads=threads)
        assert_bits_equal(f"y generic vs {simd}, {threads} threads", y0, y1)
        assert_bits_equal(f"t generic vs {simd}, {threads} threads", t0, t1)
        assert_bits_equal(f"dx generic vs {simd}, {threads} threads",
                          d0, ops.gelu_tanh_backward(dy, u, t1, threads=threads))


def test_special_values_and_shape():
    u = np.array([[np.inf, -np.inf, np.nan], [0.0, 1.0, -1.0]], np.float32)
    y, t = ops.gelu_tanh(u)
    assert y.shape == u.shape and t.shape == u.shape
    assert y[0, 0] == np.inf and np.isnan(y[0, 2]) and y[1, 0] == 0
    with np.errstate(invalid="ignore"):
        assert np.isnan(y[0, 1]) == np.isnan(gelu_ref(-np.inf))          # -inf * (1 - 1), as the formula
    assert t[0, 0] == 1 and t[0, 1] == -1


def test_bad_input():
    with pytest.raises(TypeError, match="u: expected float32 or float64, got int64"):
        ops.gelu_tanh(np.arange(3))
    u = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="dy: expected float32 \\(4,\\) like u"):
        ops.gelu_tanh_backward(np.zeros(5, np.float32), u, u)
    with pytest.raises(ValueError, match="t: expected float32"):
        ops.gelu_tanh_backward(u, u, np.zeros(4, np.float64))
