"""The decode attention kernels (csrc/attn/attn.h) give the bits of lutcore's
sgemm on the same products — what keeps cached decoding equal to a full recompute —
on odd shapes (keys not a multiple of 8, past the sgemm's 256-deep k block, head
dims not a multiple of 8, more query rows than one register group), every SIMD path."""
import numpy as np
import pytest

import lutcore
from lutcore import _simd
from lutcore._native import attn as _d, softmax as _sm
from lutcore._native import models as _m
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


def _softmax_ref(s, T, pos, window):
    """numpy float32, step by step: mask, minus the row max, exp (lutcore's), over the row sum."""
    from lutcore.ops.mathfn import exp
    KV, R, S = s.shape
    out = s.copy()
    qpos = pos + np.arange(R) % T
    k = np.arange(S)
    masked = k[None, :] > qpos[:, None]
    if window:
        masked |= (qpos[:, None] - k[None, :]) >= window
    out[:, masked] = -np.inf
    out -= out.max(axis=-1, keepdims=True)
    exp(out, out=out)
    tot = np.zeros(out.shape[:-1] + (1,), np.float32)
    for j in range(S):                                   # the in-order row sum
        tot[..., 0] += out[..., j]
    return out / tot


@pytest.mark.parametrize("KV, g, T, pos, S, window", [(2, 4, 5, 0, 5, 0), (1, 3, 1, 40, 41, 0),
                                                     (2, 2, 7, 9, 16, 4), (3, 1, 33, 0, 33, 8)])
def test_softmax_causal_rows(rng, simd, KV, g, T, pos, S, window):
    s = (3 * rng.standard_normal((KV, g * T, S))).astype(np.float32)
    lutcore.set_simd(simd)
    want = _softmax_ref(s, T, pos, window)
    for nt in (1, 2):
        got = s.copy()
        _sm.softmax_causal(got, T, pos, window, _simd.isa(), nt)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="T"):
        _sm.softmax_causal(s.copy(), 0, pos, window, _simd.isa(), 1)


def test_rope_rows_equal_numpy_steps(rng):
    T, nh, hd, pos = 6, 3, 10, 4
    x = rng.standard_normal((T, nh, hd)).astype(np.float32)
    ang = rng.standard_normal((pos + T, hd // 2)).astype(np.float32)
    cos, sin = np.cos(ang), np.sin(ang)
    out = np.empty_like(x)
    _m.rope_rows(out, x, cos, sin, pos)
    c, s_ = cos[pos:pos + T, None, :], sin[pos:pos + T, None, :]
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    want = np.concatenate([x1 * c - x2 * s_, x2 * c + x1 * s_], axis=-1)
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="cos"):
        _m.rope_rows(out, x, cos[:3], sin[:3], pos)
