"""Causal conv1d's AVX-512 body (csrc/conv/x86/avx512.c: conv.h's row and chunk loops
compiled with the AVX-512 flags) bit for bit against the generic body, and close
to the float64 numpy oracle, forward and backward, on odd shapes (channels 1, 7,
33, 100: below, across and between 16-lane vectors; lengths past a 16-row work
unit; K 1..5), with and without bias, at 1 and 2 threads.

As tests/bodies/test_x86_bodies.py: the body runs through lutcore._native._simde_conv
(the same source built with the AVX2 flags) and natively where this CPU has
AVX-512.
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import conv as _m
from reference.scan_ref import causal_conv1d_backward_ref, causal_conv1d_ref

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_conv  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_conv = None

AVX512 = 2
RUNNERS = ([("avx512-simde", _simde_conv)] if _simde_conv is not None else []) + \
          ([("avx512-native", _m)] if _simd._features & 2 else [])
IDS = [r[0] for r in RUNNERS]
SHAPES = [(1, 1, 1, 1), (2, 7, 7, 4), (1, 33, 33, 3), (3, 17, 100, 5), (2, 40, 16, 2), (1, 5, 130, 4)]   # B, L, D, K
F32_TOL = 2e-5


def test_body_names():
    assert _m.body_names(AVX512)["conv1d"] == ("avx512" if IS_X86 else "generic")
    assert _m.body_names(0)["conv1d"] == "generic"
    if IS_X86:
        assert _simde_conv.body_names(AVX512)["conv1d"] == "avx512"


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_body(rng, runner, shape, with_bias):
    label, mod = runner
    B, L, D, K = shape
    x = rng.standard_normal((B, L, D)).astype(np.float32)
    w = rng.standard_normal((D, K)).astype(np.float32)
    wt = np.ascontiguousarray(w.T)                       # (K, D), as the kernels take it
    bias = rng.standard_normal(D).astype(np.float32) if with_bias else None
    dy = rng.standard_normal((B, L, D)).astype(np.float32)
    y0 = np.full((B, L, D), np.nan, np.float32)
    _m.conv_fwd(y0, x, wt, bias, 0, 1)
    np.testing.assert_allclose(y0, causal_conv1d_ref(x, w, bias), rtol=F32_TOL, atol=F32_TOL)
    dx0, dw0, db0 = np.full_like(x, np.nan), np.full_like(wt, np.nan), np.full(D, np.nan, np.float32)
    _m.conv_bwd(dx0, dw0, db0, dy, x, wt, 0, 1)
    rdx, rdw, rdb = causal_conv1d_backward_ref(dy, x, w, bias)
    scale = max(1.0, float(np.abs(rdw).max()))
    np.testing.assert_allclose(dx0, rdx, rtol=F32_TOL, atol=F32_TOL)
    np.testing.assert_allclose(dw0.T, rdw, rtol=1e-4, atol=1e-4 * scale)
    np.testing.assert_allclose(db0, rdb, rtol=1e-4, atol=1e-4 * scale)
    for threads in (1, 2):
        y1 = np.full_like(y0, 7.0)
        mod.conv_fwd(y1, x, wt, bias, AVX512, threads)
        assert np.array_equal(y1.view(np.uint32), y0.view(np.uint32)), (label, "y", threads)
        dx1, dw1, db1 = np.full_like(x, 7.0), np.full_like(wt, 7.0), np.full(D, 7.0, np.float32)
        mod.conv_bwd(dx1, dw1, db1, dy, x, wt, AVX512, threads)
        for a, b, what in ((dx1, dx0, "dx"), (dw1, dw0, "dw"), (db1, db0, "db")):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), (label, what, threads)
