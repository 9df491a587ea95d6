"""The norms' SIMD bodies (csrc/norm/x86/: AVX2 8 rows a vector, AVX-512 16; one source,
csrc/norm/x86/body.h) against a numpy oracle written from the contract
(tests/reference/norm_ref.py: in-order float32 chains), bit for bit, and so against
the generic body: RMSNorm and LayerNorm, forward and backward (dx, and dw/db
accumulated over 64-row chunks), odd shapes (rows and columns 1, 7, 15, 17, 33, not
multiples of 8 or 16, more than one chunk), at 1 and 2 threads.  The oracle's
backward is checked by float64 finite differences.

    runner          module          isa
    generic         decode          0
    avx2-native     decode          1, when the CPU has AVX2
    avx512-simde    _simde_norm   2 (the AVX-512 source against SIMDe: any x86-64 CPU)
    avx512-native   decode          2, when the CPU has AVX-512
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import norm as _d
from tests.reference import gradcheck, norm_ref

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_norm  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_norm = None

RUNNERS = [("generic", _d, 0)]
if _simd._features & 1:
    RUNNERS.append(("avx2-native", _d, 1))
if _simde_norm is not None:
    RUNNERS.append(("avx512-simde", _simde_norm, 2))
if _simd._features & 2:
    RUNNERS.append(("avx512-native", _d, 2))
IDS = [r[0] for r in RUNNERS]
SHAPES = [(1, 1), (1, 33), (7, 15), (15, 7), (17, 17), (33, 16), (16, 100), (70, 33), (130, 47), (9, 768)]
EPS = 1e-5


def same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def data(R, C, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((R, C)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((R, C)).astype(np.float32)
    w = rng.standard_normal(C).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    acc = rng.standard_normal(C).astype(np.float32)       # dw/db accumulate into what they hold
    return x, dy, w, b, acc


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("R, C", SHAPES)
def test_rmsnorm_bits(runner, R, C):
    _, mod, isa = runner
    x, dy, w, _, acc = data(R, C, R * 31 + C)
    y_ref, r_ref = norm_ref.rmsnorm_fwd32(x, w, EPS)
    dx_ref, dw_ref = norm_ref.rmsnorm_bwd32(dy, x, w, r_ref, acc)
    for nt in (1, 2):
        y, rstd = np.empty_like(x), np.empty(R, np.float32)
        mod.rmsnorm_rows(y, x, w, EPS, rstd, isa, nt)
        y2 = np.empty_like(x)
        mod.rmsnorm_rows(y2, x, w, EPS, None, isa, nt)        # without rstd
        dx, dw = np.empty_like(x), acc.copy()
        mod.rmsnorm_rows_backward(dx, dw, dy, x, w, rstd, isa, nt)
        print(R, C, nt, np.abs(y - y_ref).max(), np.abs(dx - dx_ref).max(), np.abs(dw - dw_ref).max())
        assert same(y, y_ref) and same(y2, y_ref) and same(rstd, r_ref)
        assert same(dx, dx_ref) and same(dw, dw_ref)
    np.testing.assert_allclose(y, norm_ref.rmsnorm64(x.astype(np.float64), w, EPS), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("R, C", SHAPES)
def test_layernorm_bits(runner, R, C):
    _, mod, isa = runner
    x, dy, w, b, acc = data(R, C, R * 37 + C)
    y_ref, xh_ref, r_ref = norm_ref.layernorm_fwd32(x, w, b, EPS)
    dx_ref, dw_ref, db_ref = norm_ref.layernorm_bwd32(dy, xh_ref, w, r_ref, acc, -acc)
    for nt in (1, 2):
        y, xh, rstd = np.empty_like(x), np.empty_like(x), np.empty(R, np.float32)
        mod.layernorm_rows(y, xh, rstd, x, w, b, EPS, isa, nt)
        dx, dw, db = np.empty_like(x), acc.copy(), -acc
        mod.layernorm_rows_backward(dx, dw, db, dy, xh, w, rstd, isa, nt)
        print(R, C, nt, np.abs(y - y_ref).max(), np.abs(dx - dx_ref).max(), np.abs(dw - dw_ref).max())
        assert same(y, y_ref) and same(xh, xh_ref) and same(rstd, r_ref)
        assert same(dx, dx_ref) and same(dw, dw_ref) and same(db, db_ref)
    np.testing.assert_allclose(y, norm_ref.layernorm64(x.astype(np.float64), w, b, EPS), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_special_values_keep_generic_bits(runner):
    """Zero rows (r = 1/sqrt(eps)), huge and tiny values, an inf and a NaN in a row: each
    output the generic body's bits (NaN where it has NaN)."""
    _, mod, isa = runner
    R, C = 19, 21
    x, dy, w, b, acc = data(R, C, 5)
    x[0] = 0
    x[1] *= 1e19
    x[2] *= 1e-30
    x[3, 4] = np.inf
    x[4, 20] = np.nan
    for fwd in ("rms", "ln"):
        outs = []
        for m, i in ((_d, 0), (mod, isa)):
            y, xh, rstd = np.empty_like(x), np.empty_like(x), np.empty(R, np.float32)
            if fwd == "rms":
                m.rmsnorm_rows(y, x, w, EPS, rstd, i, 2)
            else:
                m.layernorm_rows(y, xh, rstd, x, w, b, EPS, i, 2)
            outs.append((y, rstd))
        for a, c in zip(*outs):
            assert np.array_equal(np.isnan(a), np.isnan(c))
            assert same(np.where(np.isnan(a), 0, a), np.where(np.isnan(c), 0, c))


@pytest.mark.parametrize("R, C", [(3, 7), (2, 17)])
def test_oracle_backward_matches_finite_differences(R, C):
    """The oracle's backward formulas (run in float64) against 4th-order central differences
    of the float64 forward, every gradient (dx, dw, db)."""
    rng = np.random.default_rng(R * 100 + C)
    x, dy = rng.standard_normal((R, C)), rng.standard_normal((R, C))
    w, b = rng.standard_normal(C), rng.standard_normal(C)
    arrays = {"x": x, "w": w, "b": b}
    z = np.zeros(C)
    # RMSNorm
    _, r = norm_ref.rmsnorm_fwd32(x, w, EPS)
    dx, dw = norm_ref.rmsnorm_bwd32(dy, x, w, r, z)
    res = gradcheck.check_elements(arrays, {"x": dx, "w": dw}, lambda: float(np.sum(norm_ref.rmsnorm64(x, w, EPS) * dy)),
                                   {"x": range(R * C), "w": range(C)})
    # LayerNorm
    _, xh, r = norm_ref.layernorm_fwd32(x, w, b, EPS)
    dx, dw, db = norm_ref.layernorm_bwd32(dy, xh, w, r, z, z)
    res += gradcheck.check_elements(arrays, {"x": dx, "w": dw, "b": db},
                                    lambda: float(np.sum(norm_ref.layernorm64(x, w, b, EPS) * dy)),
                                    {"x": range(R * C), "w": range(C), "b": range(C)})
    bad = [t for t in res if not t[-1]]
    assert not bad, bad[:5]


def test_bodies_named():
    assert _d.body_names(0)["norms (RMSNorm, LayerNorm)"] == "generic"
    if IS_X86:
        assert _simde_norm.body_names(2)["norms (RMSNorm, LayerNorm)"].startswith("avx512")
        assert _d.body_names(1)["norms (RMSNorm, LayerNorm)"].startswith("avx2")
    assert _simd.bodies("generic")["norms (RMSNorm, LayerNorm)"] == "generic"
