"""The mantissa-product GEMM's AVX-512 body (csrc/mantgemm/x86/avx512.c) bit for bit against the
generic body (csrc/mantgemm/mantgemm.h) and, on small cases, the numpy oracle
(tests/reference/mantgemm_ref.py): both routes (the float32 tile of up to 6 rows; the table's words
by row permutes for bf16 and gathers for fp16, vscalefps), shapes crossing the tiles (6 rows, 16-lane
vectors, 64-column panels), the table route's k chunks (16) and the row chunks a unit takes (256
rows, split further to feed the threads), rows and panels holding inf/NaN (the scalar row) beside
ones that do not, float32 subnormal and overflowing products, at 1, 2 and 3 threads.

As the other body tests: the AVX-512 body runs through lutcore._native._simde_mantgemm (the same
source compiled against SIMDe's exact emulation, AVX2+FMA flags -- any x86-64 CPU) and natively
where this CPU has AVX-512.
"""
import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import mantgemm as _mt
from lutcore.units import MantissaUnit
from body_runners import IS_X86, runners, twin
from reference.mantgemm_ref import mant_gemm_ref
from test_mantgemm import native, operand, random_table

_simde_mt = twin("_simde_mantgemm")
RUNNERS = runners(_mt, _simde_mt, avx2=False)
IDS = [r[0] for r in RUNNERS]
SHAPES = [(1, 1, 1), (6, 17, 16), (7, 16, 63), (13, 33, 64), (5, 100, 65), (12, 15, 130), (70, 40, 3)]


def _tables(fmt, rng):
    return {"exact": MantissaUnit.exact(fmt).table, "mitchell": MantissaUnit.mitchell(fmt).table,
            "random": random_table(fmt, rng)}


def _routes(name):
    return (_mt.ROUTE_MUL, _mt.ROUTE_TABLE) if name == "exact" else (_mt.ROUTE_TABLE,)


def _same(got, want, what):
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    assert not len(bad), (what, len(bad), [(tuple(i), got[tuple(i)], want[tuple(i)]) for i in bad[:4]])


def _run(mod, isa, a, b, t, fmt, route, nt):
    return native(a, b, t, fmt, route, isa, nt, mod)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_body_matches_generic(runner, shape, fmt, rng):
    _, mod, isa = runner
    M, K, N = shape
    for specials in (False, True):
        a, b = operand(rng, (M, K), fmt, specials), operand(rng, (K, N), fmt, specials)
        for name, t in _tables(fmt, rng).items():
            for route in _routes(name):
                gen = _run(_mt, 0, a, b, t, fmt, route, 1)
                if M * K * N <= 40000:
                    _same(gen, mant_gemm_ref(a, b, t, fmt), (name, route, specials, "reference"))
                for nt in (1, 2, 3):
                    _same(_run(mod, isa, a, b, t, fmt, route, nt), gen, (name, route, specials, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_body_row_chunks_and_special_rows(runner, fmt, rng):
    """300 rows (units of at most 256, split for the threads), two panels, 100 k (two pre-pass
    units of B's rows); one row of A with a NaN and one panel of B with an inf (in B's second
    64 rows) among finite ones."""
    _, mod, isa = runner
    a, b = operand(rng, (300, 100), fmt, False), operand(rng, (100, 100), fmt, False)
    a[150, 20], b[70, 70] = np.nan, np.inf
    for name, t in _tables(fmt, rng).items():
        for route in _routes(name):
            gen = _run(_mt, 0, a, b, t, fmt, route, 1)
            _same(gen[:40], mant_gemm_ref(a[:40], b, t, fmt), (name, route, "reference"))
            _same(gen[140:160], mant_gemm_ref(a[140:160], b, t, fmt), (name, route, "reference"))
            for nt in (1, 2, 3):
                _same(_run(mod, isa, a, b, t, fmt, route, nt), gen, (name, route, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_body_extreme_products(runner, rng):
    """bf16 exponents at both ends: products into float32's subnormals and past its top, through
    tables with float32 subnormal and huge entries."""
    _, mod, isa = runner
    for lo, hi in ((-126, -60), (40, 127), (-126, 127)):
        a = (rng.standard_normal((9, 50)) * np.exp2(rng.integers(lo, hi, (9, 50)))).astype(np.float32)
        b = (rng.standard_normal((50, 40)) * np.exp2(rng.integers(lo, hi, (50, 40)))).astype(np.float32)
        for name, t in _tables("bf16", rng).items():
            for route in _routes(name):
                gen = _run(_mt, 0, a, b, t, "bf16", route, 1)
                _same(gen, mant_gemm_ref(a, b, t, "bf16"), (lo, hi, name, route, "reference"))
                _same(_run(mod, isa, a, b, t, "bf16", route, 2), gen, (lo, hi, name, route))


def test_body_names():
    assert _mt.body_names(0) == {"mant_gemm": "generic"}
    if IS_X86:
        assert _simde_mt.body_names(2)["mant_gemm"].startswith("avx512")
        assert _mt.body_names(1)["mant_gemm"] == "generic"               # no AVX2 body: the generic one
    assert "mant_gemm" in _simd.bodies()
