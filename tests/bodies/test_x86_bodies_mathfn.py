"""The math functions' AVX-512 body (csrc/mathfn/x86/avx512.c: exp, exp2, softplus, silu,
sigmoid, GELU and its backward, SiLU's backward) against the generic body, bit for
bit, on a dense grid with the range edges and special values, odd lengths (every
tail below a vector, several OpenMP chunks), at 1 and 2 threads.

As tests/bodies/test_x86_bodies.py: the body runs through lutcore._native._simde_mathfn
(the same source compiled against SIMDe's exact emulation, AVX2+FMA flags — any
x86-64 CPU) and natively where this CPU has AVX-512.  The body is the AVX2 one at
16 lanes, so it also equals the AVX2 body bit for bit, NaN payloads included;
against the generic body a NaN only has to be a NaN (as tests/ops/test_mathfns.py).
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import mathfn as _m

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_mathfn  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_mathfn = None

AVX512 = 2
FNS = {"exp": 0, "softplus": 1, "silu": 2, "sigmoid": 3, "exp2": 4}
RUNNERS = ([("avx512-simde", _simde_mathfn)] if _simde_mathfn is not None else []) + \
          ([("avx512-native", _m)] if _simd._features & 2 else [])
IDS = [r[0] for r in RUNNERS]
LENGTHS = [1, 7, 15, 16, 17, 33, 100, 3 * 16384 + 5]


def grid():
    g = np.linspace(-130.0, 130.0, 200_001).astype(np.float32)
    edges = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, 0.5, -0.5, 19.99, 20.0, 20.01, -79.99, -80.0,
                      -80.01, -87.3, -87.31, -87.33, -87.34, -88.0, -88.72, -103.0, -104.0, -150.0, -200.0,
                      -201.0, 87.3, 87.31, 88.72, 88.7228, 88.723, 125.99, 126.0, 126.01, 127.0, 128.0,
                      -125.99, -126.0, -126.01, -149.0, -150.0, 3e38, -3e38, np.inf, -np.inf, np.nan],
                     np.float32)
    nan_payload = np.array([0x7FC00001, 0xFFC12345, 0x7F800001], np.uint32).view(np.float32)
    return np.concatenate([edges, nan_payload, g])


GRID = grid()


def same_bits(a, b, nan_any=False):
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    diff = ua != ub
    if nan_any:
        diff &= ~(np.isnan(a) & np.isnan(b))
    return not diff.any(), np.flatnonzero(diff)[:5]


def test_simde_extension_present_on_x86():
    if not IS_X86:
        pytest.skip("SIMDe copies are built for x86-64 only (no AVX-512 elsewhere)")
    assert _simde_mathfn.body_names(AVX512)["math functions (exp, silu, gelu, ...)"] == "avx512"
    assert _m.body_names(1)["math functions (exp, silu, gelu, ...)"] == "avx2"
    assert _m.body_names(0)["math functions (exp, silu, gelu, ...)"] == "generic"


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("name", list(FNS))
def test_mathfn_body_on_the_grid(runner, name):
    label, mod = runner
    fn = FNS[name]
    want, avx2 = np.empty_like(GRID), np.empty_like(GRID)
    _m.mathfn(want, GRID, fn, 0, 1)
    _m.mathfn(avx2, GRID, fn, 1, 1)
    for threads in (1, 2):
        got = np.full_like(GRID, 7.0)
        mod.mathfn(got, GRID, fn, AVX512, threads)
        ok, at = same_bits(got, want, nan_any=True)
        assert ok, (label, name, threads, GRID[at], got[at], want[at])
        ok, at = same_bits(got, avx2)
        assert ok, (label, name, threads, "vs avx2", GRID[at])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
def test_bodies_on_odd_lengths(rng, runner, n):
    label, mod = runner
    x = rng.uniform(-100, 100, n).astype(np.float32)
    x[::5] = rng.standard_normal(x[::5].size).astype(np.float32)
    x[: min(n, 3)] = np.array([-85.0, 90.0, -0.0], np.float32)[: min(n, 3)]
    dy, dy2 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for threads in (1, 2):
        for fn in FNS.values():
            want, got = np.empty_like(x), np.full_like(x, 7.0)
            _m.mathfn(want, x, fn, 0, 1)
            mod.mathfn(got, x, fn, AVX512, threads)
            assert same_bits(got, want)[0], (label, fn, threads)
        y0, t0, y1, t1 = (np.full_like(x, 7.0) for _ in range(4))
        _m.gelu(y0, t0, x, 0, 1)
        mod.gelu(y1, t1, x, AVX512, threads)
        assert same_bits(y1, y0)[0] and same_bits(t1, t0)[0], (label, "gelu", threads)
        d0, d1 = np.full_like(x, 7.0), np.full_like(x, 7.0)
        _m.gelu_bwd(d0, dy, x, t0, 0, 1)
        mod.gelu_bwd(d1, dy, x, t0, AVX512, threads)
        assert same_bits(d1, d0)[0], (label, "gelu_bwd", threads)
        for second in (None, dy2):
            d0, d1 = np.full_like(x, 7.0), np.full_like(x, 7.0)
            _m.silu_bwd(d0, dy, second, x, 0, 1)
            mod.silu_bwd(d1, dy, second, x, AVX512, threads)
            assert same_bits(d1, d0)[0], (label, "silu_bwd", second is None, threads)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_gelu_and_silu_backward_on_the_grid(runner):
    label, mod = runner
    x = GRID[np.isfinite(GRID)].copy()
    dy = np.linspace(-2, 2, x.size).astype(np.float32)
    y0, t0, y1, t1 = (np.empty_like(x) for _ in range(4))
    _m.gelu(y0, t0, x, 0, 1)
    mod.gelu(y1, t1, x, AVX512, 2)
    assert same_bits(y1, y0, nan_any=True)[0] and same_bits(t1, t0, nan_any=True)[0], label
    d0, d1 = np.empty_like(x), np.empty_like(x)
    _m.gelu_bwd(d0, dy, x, t0, 0, 1)
    mod.gelu_bwd(d1, dy, x, t0, AVX512, 2)
    assert same_bits(d1, d0, nan_any=True)[0], label
    _m.silu_bwd(d0, dy, None, x, 0, 1)
    mod.silu_bwd(d1, dy, None, x, AVX512, 2)
    assert same_bits(d1, d0, nan_any=True)[0], label
