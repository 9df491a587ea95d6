"""lutcore.ops.silu_backward (the Mamba block's conv-output gate):
dx = (dy + dy2) * s * (1 + x * (1 - s)), s = sigmoid(x).

Checked against a float64 formula written here (error budget DX_REL, relative
to the magnitude of the terms), against finite differences of silu in float64,
bit for bit against the numpy float32 sequence it replaces, on every SIMD path,
at 1 and 2 threads, on odd lengths, and for bad input."""
import numpy as np
import pytest

import lutcore
import lutcore.ops as ops

DX_REL = 1e-6           # |dx - exact| <= DX_REL * (|dy + dy2| * (1 + |x|)), float32 against float64


def _exact(dy, x, dy2=None):
    x = x.astype(np.float64)
    g = dy.astype(np.float64) + (0 if dy2 is None else dy2.astype(np.float64))
    s = 1 / (1 + np.exp(-x))
    return g * s * (1 + x * (1 - s))


def _numpy_sequence(dy, x, dy2=None):
    g = dy + dy2 if dy2 is not None else dy
    s = ops.sigmoid(x)
    d = 1 - s
    d *= x
    d += 1
    d *= s
    d *= g
    return d


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    return x, rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("n", [1, 7, 33, 16384 + 9, 100_003])
@pytest.mark.parametrize("two", [False, True])
def test_close_to_float64_and_equal_to_the_numpy_sequence(n, two):
    x, dy, dy2 = _data(n)
    dy2 = dy2 if two else None
    got = ops.silu_backward(dy, x, dy2=dy2)
    want = _exact(dy, x, dy2)
    scale = np.abs(dy.astype(np.float64) + (0 if dy2 is None else dy2)) * (1 + np.abs(x.astype(np.float64)))
    assert np.all(np.abs(got - want) <= DX_REL * scale + 1e-30)
    assert np.array_equal(got.view(np.uint32), _numpy_sequence(dy, x, dy2).view(np.uint32))


def test_finite_differences_float64():
    x = np.linspace(-12, 12, 97)
    h = 1e-6
    silu = lambda v: v / (1 + np.exp(-v))                                      # noqa: E731
    fd = (silu(x + h) - silu(x - h)) / (2 * h)
    got = ops.silu_backward(np.ones_like(x), x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, fd, rtol=1e-8, atol=1e-9)


def test_simd_paths_and_threads_bit_identical(simd):
    x, dy, dy2 = _data(50_001, seed=3)
    x[:5] = [0.0, -0.0, -90.0, 90.0, np.nan]
    ref = ops.silu_backward(dy, x, dy2=dy2, threads=1)
    lutcore.set_simd("generic")
    gen = ops.silu_backward(dy, x, dy2=dy2, threads=1)
    lutcore.set_simd(simd)
    two = ops.silu_backward(dy, x, dy2=dy2, threads=2)
    for other in (gen, two):
        assert np.array_equal(ref.view(np.uint32), other.view(np.uint32))


def test_bad_input_is_named():
    x, dy, _ = _data(8)
    with pytest.raises(ValueError, match="dy: expected float32 \\(8,\\)"):
        ops.silu_backward(dy[:7], x)
    with pytest.raises(ValueError, match="dy2"):
        ops.silu_backward(dy, x, dy2=dy.astype(np.float64))
    with pytest.raises(TypeError, match="x: expected float32 or float64"):
        ops.silu_backward(dy, np.arange(8))
    with pytest.raises(ValueError, match="out"):
        ops.silu_backward(dy, x, out=np.empty(9, np.float32))
