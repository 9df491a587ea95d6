"""Decode attention's AVX-512 bodies (csrc/attn/x86/avx512.c: lc_attn_scores, 16 keys a
transposed block; lc_attn_values, 16 dims a vector) bit for bit against the generic
body (the scalar fmaf chain) and the AVX2 body, and so the sgemm's bits (what keeps
cached decoding equal to a full recompute), close to a float64 numpy product: odd
shapes (keys 1, 7, 15, 17, 33, past 16-key blocks and the sgemm's 256-deep k block;
head dims not multiples of 16 or 8; query rows past one 8-row register group).

    runner          module          isa
    avx512-simde    _simde_attn   2 (the source against SIMDe: any x86-64 CPU)
    avx512-native   decode          2, when the CPU has AVX-512
    avx2-native     decode          1 (the body these replace)
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import attn as _d
from lutcore.ops import matmul

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_attn  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_attn = None

RUNNERS = ([("avx512-simde", _simde_attn, 2)] if _simde_attn is not None else []) + \
          ([("avx512-native", _d, 2)] if _simd._features & 2 else []) + \
          ([("avx2-native", _d, 1)] if _simd._features & 1 else [])
IDS = [r[0] for r in RUNNERS]
# (R, S, hd): hd 8 / 12 / 17 / 24 / 72 / 130 / 200 / 264 cover every vector step of the values
# (128-, 64-, 16-, 8-dim and scalar) and the transpose's scalar tail
SHAPES = [(1, 1, 8), (1, 7, 17), (4, 15, 64), (3, 17, 12), (9, 33, 72), (2, 300, 130), (4, 513, 24),
          (8, 40, 128), (11, 20, 200), (1, 16, 264)]


def same(a, b):
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("R, S, hd", SHAPES)
def test_scores_and_values_bits(runner, R, S, hd):
    _, mod, isa = runner
    rng = np.random.default_rng(R * 1000 + S * 10 + hd)
    q = rng.standard_normal((R, hd), dtype=np.float32)
    K = rng.standard_normal((S, hd), dtype=np.float32)
    V = rng.standard_normal((S, hd), dtype=np.float32)
    p = rng.random((R, S), dtype=np.float32)
    want_s, want_v = _d.attn_scores(q, K, 0), _d.attn_values(p, V, 0)
    got_s, got_v = mod.attn_scores(q, K, isa), mod.attn_values(p, V, isa)
    print(R, S, hd, np.abs(got_s - want_s).max(), np.abs(got_v - want_v).max())
    assert same(got_s, want_s) and same(got_v, want_v)
    assert same(got_s, matmul(q, K.T)) and same(got_v, matmul(p, V))     # the sgemm's chains
    np.testing.assert_allclose(got_s, q.astype(np.float64) @ K.T.astype(np.float64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_v, p.astype(np.float64) @ V.astype(np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_special_values(runner):
    """inf, NaN and signed zeros travel through the chains as in the generic body."""
    _, mod, isa = runner
    rng = np.random.default_rng(9)
    R, S, hd = 3, 21, 40
    q = rng.standard_normal((R, hd), dtype=np.float32)
    K = rng.standard_normal((S, hd), dtype=np.float32)
    V = rng.standard_normal((S, hd), dtype=np.float32)
    p = rng.random((R, S), dtype=np.float32)
    K[3, 5], K[17, 0], V[2, 33], V[20, 1], q[1] = np.inf, np.nan, -np.inf, np.nan, -0.0
    p[2] = 0.0
    for got, want in ((mod.attn_scores(q, K, isa), _d.attn_scores(q, K, 0)),
                      (mod.attn_values(p, V, isa), _d.attn_values(p, V, 0))):
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert same(np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want))


def test_bodies_named():
    assert _d.body_names(0)["attention (decode)"] == "generic"
    if IS_X86:
        assert _simde_attn.body_names(2)["attention (decode)"] == "avx512"
        assert _d.body_names(1)["attention (decode)"] == "avx2"
    if _simd._features & 2:
        assert _simd.bodies("avx512")["attention (decode)"] == "avx512"
