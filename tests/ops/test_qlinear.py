"""QLinear (weights quantized and packed once) computes exactly qmatmul's bits."""
import numpy as np
import pytest

import lutcore
from lutcore.quant import QLinear, qmatmul, quantize
from lutcore.units import approx


@pytest.mark.parametrize("units", [None, approx.mitchell(), approx.truncated(4)], ids=["exact", "mitchell", "trunc4"])
@pytest.mark.parametrize("block", [32, 8, 7])
def test_qlinear_equals_qmatmul(units, block):
    rng = np.random.default_rng(block)
    w = rng.standard_normal((70, 45)).astype(np.float32)
    ql = QLinear(w, units, block)
    assert ql.shape == (70, 45)
    for M in (1, 6, 7, 33, 1):                    # grows and reuses its buffers
        x = rng.standard_normal((M, 70)).astype(np.float32)
        want = qmatmul(x, quantize(w, block, axis=0), units, block)
        for t in (1, 2):
            got = ql(x) if t == 1 else QLinear(w, units, block, threads=2)(x)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_qlinear_bad_input():
    ql = QLinear(np.ones((8, 3), np.float32))
    with pytest.raises(ValueError):
        ql(np.ones((2, 9), np.float32))
    with pytest.raises(ValueError):
        ql(np.full((1, 8), np.nan, np.float32))
    with pytest.raises(ValueError):
        QLinear(lutcore.quantize(np.ones((8, 3), np.float32), 32, axis=-1))


@pytest.mark.parametrize("block", [32, 7, 2])
@pytest.mark.parametrize("K, N", [(70, 45), (512, 40), (33, 17)])
def test_one_row_equals_its_row_in_a_batch(simd, block, K, N):
    """Decoding's one-row product (its own GEMV body) gives the bits of that row
    inside a batched product (the tiled kernels), on every SIMD path."""
    rng = np.random.default_rng(K * N + block)
    w = rng.standard_normal((K, N)).astype(np.float32)
    x = rng.standard_normal((13, K)).astype(np.float32)
    lutcore.set_simd(simd)
    ql = QLinear(w, None, block)
    full = ql(x).copy()
    for r in (0, 5, 12):
        assert np.array_equal(ql(x[r:r + 1]).view(np.uint32), full[r:r + 1].view(np.uint32))
