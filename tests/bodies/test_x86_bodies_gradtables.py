"""The gradient-table pass's x86 bodies (csrc/gradtables/x86/avx2.c, avx512.c) bit for bit
against the generic body and a float32 numpy reference of the contract
(csrc/gradtables/gradtables.h: each sum in index order from 0, the product rounded
before its add), on odd shapes (1, 7, 33, non-multiples of 8/16/32: every tail of the
32-, 16- and 8-lane blocks), both passes (dx and s), at 1 and 2 threads.

As tests/bodies/test_x86_bodies_optim.py: the AVX-512 body runs through
lutcore._native._simde_gt (the same source compiled against SIMDe's exact emulation,
AVX2+FMA flags -- any x86-64 CPU) and natively where this CPU has AVX-512; the AVX2
body natively where this CPU has AVX2.
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import gradtables as _gt

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_gt  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_gt = None

RUNNERS = ([("avx512-simde", _simde_gt, 2)] if _simde_gt is not None else []) + \
          ([("avx512-native", _gt, 2)] if _simd._features & 2 else []) + \
          ([("avx2-native", _gt, 1)] if _simd._features & 1 else [])
IDS = [r[0] for r in RUNNERS]
# (M, K, O): K covers < 8, 8..15, 16..31, 32 + every tail; M and O odd and 1
SHAPES = [(1, 1, 1), (7, 7, 3), (3, 33, 7), (5, 9, 1), (1, 47, 13), (9, 63, 5), (2, 100, 33), (33, 17, 2)]


def _ref(which, qx, qw, w, table):
    """The contract in float32, the sums in index order (plain loops over the inner index)."""
    M, K = qx.shape
    O = qw.shape[0]
    t = table.reshape(256, 256)
    a = qx.view(np.uint8).astype(np.int64)
    b = qw.astype(np.int64)
    if which == 0:
        out = np.zeros((M, K), np.float32)
        for o in range(O):
            out = out + w[:, o:o + 1] * t[a, b[o][None, :]]        # (M, K) += g[m, o] Ga[a[m, k], b[o, k]]
    else:
        out = np.zeros((O, K), np.float32)
        for m in range(M):
            out = out + w[m][:, None] * t[b, a[m][None, :]]        # (O, K) += dy[m, o] GbT[b[o, k], a[m, k]]
    return out


def _case(rng, M, K, O):
    qx = rng.integers(-128, 128, (M, K)).astype(np.int8)
    qw = rng.integers(0, 256, (O, K)).astype(np.uint8)
    qx[0, 0], qw[0, -1] = -128, 255                                # the table's corners
    w = (rng.standard_normal((M, O)) * 3).astype(np.float32)
    table = (rng.standard_normal(65536) * 100).astype(np.float32)   # asymmetric
    return qx, qw, w, table


def _run(mod, which, qx, qw, w, table, isa, nt):
    M, K = qx.shape
    O = qw.shape[0]
    out = np.full(((O if which else M), K), np.nan, np.float32)
    mod.table_pass(which, out, qx, qw, w, table, isa, nt)
    return out


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{o}" for m, k, o in SHAPES])
def test_body_matches_generic_and_reference(runner, shape):
    _, mod, isa = runner
    rng = np.random.default_rng(sum(shape) * 7 + 1)
    qx, qw, w, table = _case(rng, *shape)
    for which in (0, 1):
        ref = _ref(which, qx, qw, w, table)
        gen = _run(_gt, which, qx, qw, w, table, 0, 1)
        assert np.array_equal(gen.view(np.uint32), ref.view(np.uint32)), (which, shape)
        for nt in (1, 2):
            got = _run(mod, which, qx, qw, w, table, isa, nt)
            assert np.array_equal(got.view(np.uint32), gen.view(np.uint32)), (which, shape, nt)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_threaded_shape_same_bits(runner):
    """Above the threading threshold (M K O > 2^15): 1 and 2 threads, the generic body's bits."""
    _, mod, isa = runner
    rng = np.random.default_rng(3)
    qx, qw, w, table = _case(rng, 37, 71, 29)
    for which in (0, 1):
        gen = _run(_gt, which, qx, qw, w, table, 0, 1)
        assert np.array_equal(_run(_gt, which, qx, qw, w, table, 0, 2).view(np.uint32), gen.view(np.uint32))
        for nt in (1, 2):
            got = _run(mod, which, qx, qw, w, table, isa, nt)
            assert np.array_equal(got.view(np.uint32), gen.view(np.uint32)), (which, nt)


def test_body_names():
    assert _gt.body_names(0) == {"gradient tables (backward='table')": "generic"}
    if IS_X86:
        assert _simde_gt.body_names(2)["gradient tables (backward='table')"] == "avx512"
        assert _gt.body_names(1)["gradient tables (backward='table')"] == "avx2"
    assert "gradient tables (backward='table')" in _simd.bodies()
