"""The netlist family's AVX-512 bodies (csrc/netlist/x86/avx512.c: AVX-512 F/BW;
avx512_vpopcnt.c: + VPOPCNTDQ) and its AVX2 body bit for bit against the generic body and the
numpy oracle (tests/reference/netlist_ref.py), gemm and products, on shapes crossing the
64-lane words and the bodies' passes (64 words AVX-512, 32 AVX2, 16 generic), at 1 and 2
threads: exact multipliers, random netlists (random truth tables, constants, repeated inputs),
an approximate one whose P(0, 0) is not 0 (the padded lanes' mask).

As the other body tests: the AVX-512 bodies run through lutcore._native._simde_netlist (the same
sources compiled against SIMDe's exact emulation, AVX2+FMA flags -- any x86-64 CPU) and natively
where this CPU has them; the AVX2 body natively where this CPU has AVX2.
"""
import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import netlist as _nl
from body_runners import IS_X86, twin
from reference.netlist_ref import gemm_ref, products_ref
from test_netlist import approximate_multiplier, array_multiplier, baugh_wooley, random_netlist

_simde_nl = twin("_simde_netlist")
AVX512, VPOPCNT = 2, _simd.VPOPCNT
RUNNERS = ([("avx512-simde", _simde_nl, AVX512), ("avx512vpopcnt-simde", _simde_nl, AVX512 | VPOPCNT)]
           if _simde_nl is not None else []) + \
          ([("avx512-native", _nl, AVX512)] if _simd._features & 2 else []) + \
          ([("avx512vpopcnt-native", _nl, AVX512 | VPOPCNT)] if _simd._features & (2 | VPOPCNT) == 2 | VPOPCNT
           else []) + \
          ([("avx2-native", _nl, 1)] if _simd._features & 1 else [])
IDS = [r[0] for r in RUNNERS]
SHAPES = [(1, 1, 1), (7, 33, 7), (3, 64, 65), (33, 65, 2), (2, 130, 33), (5, 1000, 3), (1, 4200, 1), (65, 7, 130)]


def _gemm(mod, A, B, g, o, a_bits, b_bits, ps, isa, nt):
    out = np.full((A.shape[0], B.shape[1]), -7, np.int64)
    mod.gemm(out, A.astype(np.uint16), B.astype(np.uint16), g, o, a_bits, b_bits, ps, isa, nt)
    return out


def _products(mod, a, b, g, o, a_bits, b_bits, ps, isa, nt):
    out = np.full(a.shape, -7, np.int64)
    mod.products(out, a.astype(np.uint16), b.astype(np.uint16), g, o, a_bits, b_bits, ps, isa, nt)
    return out


def _netlists(rng):
    """(name, gates, outputs, a_bits, b_bits, product_signed, signed codes)"""
    g1, o1 = array_multiplier(11, 9, two_input=True)
    g2, o2 = baugh_wooley(8, 8)
    g3, o3 = random_netlist(rng, 6, 5, 200, 17)
    g4, o4 = approximate_multiplier(5, 5)
    return [("array", g1, o1, 11, 9, False, False), ("baugh-wooley", g2, o2, 8, 8, True, True),
            ("random", g3, o3, 6, 5, True, False), ("approximate", g4, o4, 5, 5, False, False)]


def _codes(rng, bits, signed, shape):
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    return rng.integers(lo, hi, shape) & ((1 << bits) - 1)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_gemm_body_matches_generic_and_reference(runner, shape):
    _, mod, isa = runner
    M, K, N = shape
    rng = np.random.default_rng(M * 100 + K + N)
    for name, g, o, ab, bb, ps, sg in _netlists(rng):
        A, B = _codes(rng, ab, sg, (M, K)), _codes(rng, bb, sg, (K, N))
        gen = _gemm(_nl, A, B, g, o, ab, bb, ps, 0, 1)
        if M * K * N <= 20000:
            assert np.array_equal(gen, gemm_ref(A, B, g, o, a_bits=ab, b_bits=bb, product_signed=ps)), name
        for nt in (1, 2):
            got = _gemm(mod, A, B, g, o, ab, bb, ps, isa, nt)
            assert np.array_equal(got, gen), (name, nt)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", [1, 63, 64, 65, 4095, 4097, 20000, 70001])
def test_products_body_matches_generic_and_reference(runner, n):
    _, mod, isa = runner
    rng = np.random.default_rng(n)
    for name, g, o, ab, bb, ps, sg in _netlists(rng):
        a, b = _codes(rng, ab, sg, n), _codes(rng, bb, sg, n)
        gen = _products(_nl, a, b, g, o, ab, bb, ps, 0, 1)
        assert np.array_equal(gen, products_ref(a, b, g, o, a_bits=ab, b_bits=bb, product_signed=ps)), name
        for nt in (1, 2):
            assert np.array_equal(_products(mod, a, b, g, o, ab, bb, ps, isa, nt), gen), (name, nt)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_every_truth_table(runner):
    """Gate g has tt g % 256 over earlier gates: every case of the AVX-512 switch, every op of
    the generic table, as outputs 32 at a time."""
    _, mod, isa = runner
    rng = np.random.default_rng(9)
    first = 2 + 4 + 4
    rows = np.zeros((512, 4), np.int32)
    for g in range(512):
        rows[g, :3] = rng.integers(2 if g < 16 else first, first + g, 3)
        rows[g, 3] = g % 256
    a, b = rng.integers(0, 16, 3000), rng.integers(0, 16, 3000)
    for start in range(0, 512, 32):
        o = np.arange(first + start, first + start + 32, dtype=np.int32)
        want = products_ref(a, b, rows, o, a_bits=4, b_bits=4, product_signed=False)
        assert np.array_equal(_products(mod, a, b, rows, o, 4, 4, False, isa, 1), want), start


def test_body_names():
    key = "netlist (gate-level multipliers)"
    assert _nl.body_names(0) == {key: "generic"}
    if IS_X86:
        assert _simde_nl.body_names(AVX512)[key] == "avx512"
        assert _simde_nl.body_names(AVX512 | VPOPCNT)[key] == "avx512-vpopcntdq"
        assert _nl.body_names(1)[key] == "avx2"
    assert key in _simd.bodies()
