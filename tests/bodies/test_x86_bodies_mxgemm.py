"""The MX GEMM's x86 bodies (csrc/mxgemm/x86/avx512.c, avx2.c) bit for bit against the generic
body (csrc/mxgemm/mxgemm.h) and, on small cases, the integer oracle (tests/reference/mxgemm_ref.py):
every route (the FMA tile; row tables with one part and two, HI32 and F32 words, rows reduced up to
sign and exponent or by the sign bit or not at all — the used-group masks, vectorised for chunks
of 32 (avx512) or 8 (avx2) and scalar below), shapes crossing the tiles (avx512: 6 and 4/3 rows,
32 columns; avx2: 3 rows, strips of 16 of a unit of 32, strips past N skipped) and the chunks
(blocks of 16, 32, 48, 300: the row tables' chunks — avx2's sized by the table's rows — and the
FMA tile's 256), specials, at 1, 2 and 3 threads; narrow mode (the register stepped lane for lane
on the same row tables) with both roundings, promotions, overflow and subnormal registers.

    runner          module           isa
    avx512-simde    _simde_mxgemm    2  (avx512.c against SIMDe, AVX2+FMA flags: x86-64 with AVX2)
    avx512-native   mxgemm           2  where this CPU has AVX-512
    avx2-native     mxgemm           1  where this CPU has AVX2 + FMA
    avx2-simde      _simde_mxgemm    1  (avx2.c against SIMDe, baseline flags: any x86-64)
"""
import numpy as np
import pytest

from lutcore import _simd, _workspace
from lutcore._native import mxgemm as _mx
from lutcore.mx import MX, mx_quantize
from lutcore.ops.mxgemm import MXProducts
from body_runners import IS_X86, runners, twin
from reference.mxgemm_ref import mx_gemm_exact_ref
from test_mxgemm import cleared, exact_table, factor, grid

_simde_mx = twin("_simde_mxgemm")
RUNNERS = runners(_mx, _simde_mx, avx2=True, avx2_twin=True)
IDS = [r[0] for r in RUNNERS]
SHAPES = [(1, 1, 1), (7, 33, 31), (6, 65, 32), (13, 64, 33), (5, 100, 65), (33, 7, 97), (70, 40, 3)]


def _tables(fa, fb, rng):
    t = exact_table(fa, fb)
    out = {"exact": t, "cleared": cleared(t), "factor": factor(t, rng), "grid": grid(t, rng)}
    sym = cleared(t).copy()                      # sign-symmetric but not exponent-separable: 128 rows, masks
    half = sym.shape[0] // 2
    sym[:half] *= (1.0 + np.arange(half, dtype=np.float32) / 256)[:, None]     # distinct rows: no exponent reduction
    sym[half:] = -sym[:half]
    out["sym"] = sym
    return out


def _run(mod, isa, a, b, plan, nt, narrow=None):
    M, K = a.shape
    N = b.shape[1]
    y = np.full((M, N), 7.0, np.float32)
    ws = mod.work_size(M, N, K, a.block, plan, narrow is not None, isa, nt)
    work = _workspace.empty_aligned(ws)
    if narrow is None:
        mod.exact(y, a.codes, a.scales, b.codes, b.scales, K, a.block, plan, work, isa, nt)
    else:
        mod.narrow(y, a.codes, a.scales, b.codes, b.scales, K, a.block, plan, narrow[0], narrow[1], narrow[2], work,
                   isa, nt)
    return y


def _operands(rng, M, K, N, fa, fb, block):
    x = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-8, 8, (M, K)))).astype(np.float32)
    w = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-8, 8, (K, N)))).astype(np.float32)
    return mx_quantize(x, fa, block), mx_quantize(w, fb, block, axis=0)


def _same(got, want, what):
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    assert not len(bad), (what, [(tuple(i), got[tuple(i)], want[tuple(i)]) for i in bad[:4]])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("int8", "int8"), ("e2m1", "e2m3")])
def test_exact_body_matches_generic(runner, shape, fa, fb, rng):
    _, mod, isa = runner
    M, K, N = shape
    a, b = _operands(rng, M, K, N, fa, fb, 32)
    for name, t in _tables(fa, fb, rng).items():
        plan = MXProducts(t, fa, fb)._plan(32)
        gen = _run(_mx, 0, a, b, plan, 1)
        if M * K * N <= 8000:
            _same(gen, mx_gemm_exact_ref(a.codes, a.scales, b.codes, b.scales, t, K, 32), (name, "reference"))
        for nt in (1, 2, 3):
            _same(_run(mod, isa, a, b, plan, nt), gen, (name, plan.description, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("block,K", [(16, 70), (48, 100), (300, 333), (1, 9), (5, 23)])
def test_exact_body_chunks(runner, block, K, rng):
    _, mod, isa = runner
    for fa, fb in (("e4m3", "e4m3"), ("e5m2", "e5m2")):
        a, b = _operands(rng, 9, K, 37, fa, fb, block)
        for name, t in _tables(fa, fb, rng).items():
            p = MXProducts(t, fa, fb)
            plan = p._plan(block)
            gen = _run(_mx, 0, a, b, plan, 1)
            for nt in (1, 2):
                _same(_run(mod, isa, a, b, plan, nt), gen, (fa, name, block, plan.description, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_exact_body_specials(runner, rng):
    _, mod, isa = runner
    a, b = _operands(rng, 11, 70, 40, "e5m2", "e5m2", 32)
    ac, bc, sa, sb = a.codes.copy(), b.codes.copy(), a.scales.copy(), b.scales.copy()
    ac[0, 3], ac[2, 50] = 0x7D, 0xFC                                 # NaN, -inf
    bc[5, 4], bc[6, 4], bc[40, 9] = 0x7C, 0xFC, 0x7E                # +inf and -inf in one block, NaN
    sa[4, 1], sb[2, 7] = 0xFF, 0xFF
    sa[5], sb[:, 30] = 0, 254                                       # zeros and overflow
    a = MX(ac, sa, "e5m2", 32, 1, a.shape)
    b = MX(bc, sb, "e5m2", 32, 0, b.shape)
    for name, t in _tables("e5m2", "e5m2", rng).items():
        plan = MXProducts(t, "e5m2", "e5m2")._plan(32)
        gen = _run(_mx, 0, a, b, plan, 1)
        _same(gen, mx_gemm_exact_ref(a.codes, a.scales, b.codes, b.scales, t, 70, 32), (name, "reference"))
        for nt in (1, 2):
            _same(_run(mod, isa, a, b, plan, nt), gen, (name, nt))


NARROWS = [(13, 128, False), (13, 0, True), (3, 5, False), (1, 1, True), (23, 7, False), (23, 0, True)]


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e2m1"), ("int8", "e4m3")])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 65, 33), (3, 40, 70), (5, 100, 3)], ids=str)
def test_narrow_body_matches_generic(runner, fa, fb, shape, rng):
    _, mod, isa = runner
    M, K, N = shape
    a, b = _operands(rng, M, K, N, fa, fb, 32)
    for name, t in _tables(fa, fb, rng).items():
        plan = MXProducts(t, fa, fb)._plan(32)
        for nar in NARROWS:
            gen = _run(_mx, 0, a, b, plan, 1, nar)
            for nt in (1, 2):
                _same(_run(mod, isa, a, b, plan, nt, nar), gen, (name, nar, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_narrow_body_extremes(runner, rng):
    """Scales putting the register near float32's top (overflow: inf or the maximum) and bottom
    (its subnormal quantum), blocks of 16 and 48, specials."""
    _, mod, isa = runner
    for block, lo, hi in ((16, 0, 60), (48, 200, 254), (32, 90, 140)):
        a, b = _operands(rng, 5, 100, 37, "e5m2", "e4m3", block)
        sa = rng.integers(lo, hi + 1, a.scales.shape).astype(np.uint8)
        sb = rng.integers(lo, hi + 1, b.scales.shape).astype(np.uint8)
        ac, bc = a.codes.copy(), b.codes.copy()
        ac[0, 5], bc[7, 3], sa[2, 1] = 0x7C, 0x7F, 0xFF                      # inf, NaN, a NaN scale
        a = MX(ac, sa, "e5m2", block, 1, a.shape)
        b = MX(bc, sb, "e4m3", block, 0, b.shape)
        for name, t in _tables("e5m2", "e4m3", rng).items():
            plan = MXProducts(t, "e5m2", "e4m3")._plan(block)
            for nar in NARROWS:
                gen = _run(_mx, 0, a, b, plan, 1, nar)
                _same(_run(mod, isa, a, b, plan, 2, nar), gen, (block, name, nar))


def test_body_names():
    assert _mx.body_names(0) == {"mx_gemm exact": "generic", "mx_gemm narrow": "generic"}
    if IS_X86:
        assert _simde_mx.body_names(2)["mx_gemm exact"].startswith("avx512")
        assert _simde_mx.body_names(2)["mx_gemm narrow"].startswith("avx512")
        for mod in (_mx, _simde_mx):
            assert mod.body_names(1)["mx_gemm exact"].startswith("avx2")
            assert mod.body_names(1)["mx_gemm narrow"].startswith("avx2")
    assert "mx_gemm exact" in _simd.bodies()
