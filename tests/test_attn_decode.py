"""The decode attention kernels (include/lutcore/attn.h) give the bits of lutcore's
sgemm on the same products — what keeps cached decoding equal to a full recompute —
on odd shapes (keys not a multiple of 8, past the sgemm's 256-deep k block, head
dims not a multiple of 8, more query rows than one register group), every SIMD path."""
import numpy as np
import pytest

import lutcore
from lutcore import _simd
from lutcore._native import decode as _d
from lutcore.ops import matmul

SHAPES = [(1, 1, 8), (4, 7, 64), (3, 33, 12), (9, 300, 72), (4, 513, 64), (2, 17, 130)]   # (R, S, hd)


@pytest.mark.parametrize("R, S, hd", SHAPES)
def test_scores_and_values_equal_sgemm_bits(rng, simd, R, S, hd):
    q = rng.standard_normal((R, hd), dtype=np.float32)
    K = rng.standard_normal((S, hd), dtype=np.float32)
    V = rng.standard_normal((S, hd), dtype=np.float32)
    p = rng.random((R, S), dtype=np.float32)
    lutcore.set_simd(simd)
    isa = _simd.isa()
    want_s = matmul(q, K.T)
    want_v = matmul(p, V)
    got_s = _d.attn_scores(q, K, isa)
    got_v = _d.attn_values(p, V, isa)
    assert np.array_equal(got_s.view(np.uint32), want_s.view(np.uint32))
    assert np.array_equal(got_v.view(np.uint32), want_v.view(np.uint32))
    # and a float64 reference, loosely: the products are the products
    np.testing.assert_allclose(got_s, q.astype(np.float64) @ K.T.astype(np.float64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_v, p.astype(np.float64) @ V.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_bad_shapes_named():
    with pytest.raises(ValueError, match="K"):
        _d.attn_scores(np.zeros((2, 8), np.float32), np.zeros((3, 4), np.float32), 0)
    with pytest.raises(ValueError, match="V"):
        _d.attn_values(np.zeros((2, 5), np.float32), np.zeros((3, 4), np.float32), 0)
