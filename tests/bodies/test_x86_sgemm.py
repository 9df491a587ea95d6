"""sgemm's AVX-512 body (csrc/sgemm/x86/avx512.c, the 6-row x 2-panel zmm tile)
bit for bit against the generic body (isa 0) and close to a float64 numpy oracle:
odd shapes, batched, transposed and strided operands, prepacked B, accumulate, the
tri= structures, at 1 and 2 threads.

Run twice where it can: through lutcore._native._simde_sgemm (the same source
against SIMDe's exact emulation, AVX2+FMA flags — any x86-64 CPU, so CI checks it
whatever its CPU), and natively (lutcore._native.sgemm) where the CPU has AVX-512.

    runner          module          isa
    avx512-simde    _simde_sgemm    2 (LC_ISA_AVX512)
    avx512-native   sgemm           2, when cpu_features() has AVX-512
    avx2-native     sgemm           1, when the CPU has AVX2 (the peer the zmm tile replaces)
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import sgemm as _s

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_sgemm  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_sgemm = None

AVX2, AVX512 = 1, 2


def runners():
    out = []
    if _simde_sgemm is not None:
        out.append(("avx512-simde", _simde_sgemm, AVX512))
    if _simd._features & AVX512:
        out.append(("avx512-native", _s, AVX512))
    if _simd._features & AVX2:
        out.append(("avx2-native", _s, AVX2))
    return out


RUNNERS = runners()
IDS = [r[0] for r in RUNNERS]
# M: 1, < a 6-row tile, not a multiple of 6, > a 48-row unit; N: 1, odd panel counts, > a 128-column unit;
# K: 1, odd, > the 256 k block (chains continued across blocks)
SHAPES = [(1, 1, 1), (7, 33, 5), (1, 7, 33), (13, 2, 17), (33, 300, 65), (50, 37, 129), (6, 257, 32),
          (49, 16, 48), (5, 513, 160)]
TRI = {"a_lower": 1, "a_upper": 2, "out_lower": 3}


def run(mod, isa, a, b, threads, tri=0, accumulate=False, c0=None, prepack=False):
    """C = a @ b (a (nb, M, K), b (nb, K, N), any strides) through the module's sgemm."""
    nb, M, K = a.shape
    N = b.shape[2]
    c = np.zeros((nb, M, N), np.float32) if c0 is None else c0.copy()
    sa = [s // 4 for s in a.strides]
    sb = [s // 4 for s in b.strides]
    work = np.zeros(max(mod.work_size(M, N, K) * nb, 1), np.float32)
    bpre = None
    if prepack:
        assert nb == 1
        bpre = np.zeros(max(-(-N // mod.NR) * mod.NR * K, 1), np.float32)
        mod.pack_b(bpre, b[0], K, N, sb[1], sb[2])
    mod.sgemm(c, M * N, N, a, sa[0], sa[1], sa[2], b, sb[0], sb[1], sb[2], nb, M, N, K, accumulate, work, bpre,
              isa, threads, tri)
    return c


def operands(M, K, N, nb, la, lb, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((nb, M, K)).astype(np.float32)
    b = rng.standard_normal((nb, K, N)).astype(np.float32)
    if la == "transposed":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    elif la == "strided":
        a = np.repeat(a, 2, axis=2)[:, :, ::2]
    if lb == "transposed":
        b = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    elif lb == "strided":
        b = np.repeat(b, 3, axis=2)[:, :, ::3]
    return a, b


def same_bits(x, y):
    return np.array_equal(x.view(np.uint32), y.view(np.uint32))


def test_simde_sgemm_present_and_named():
    if not IS_X86:
        pytest.skip("SIMDe copies are built for x86-64 only")
    assert _simde_sgemm.body_name(AVX512).startswith("avx512")
    assert _s.body_name(AVX2) == "avx2" and _s.body_name(0) == "generic"
    assert _simd.bodies("avx512")["sgemm (ops.matmul)"].startswith("avx512")   # show_config's line
    assert _simd.bodies("generic")["sgemm (ops.matmul)"] == "generic"


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", [("rows", "rows"), ("transposed", "transposed"), ("strided", "rows")])
def test_tile_bits_equal_generic(runner, shape, layout):
    _, mod, isa = runner
    M, K, N = shape
    a, b = operands(M, K, N, 1, *layout, seed=M * 7 + K * 3 + N)
    want = run(_s, 0, a, b, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(want - ref).max() <= 1e-5 * np.sqrt(K) * np.abs(ref).max() + 1e-30
    for t in (1, 2):
        assert same_bits(run(mod, isa, a, b, t), want), t
    c0 = np.random.default_rng(1).standard_normal(want.shape).astype(np.float32)
    acc = run(_s, 0, a, b, 1, accumulate=True, c0=c0)
    assert same_bits(acc, c0 + want)
    assert same_bits(run(mod, isa, a, b, 2, accumulate=True, c0=c0), acc)
    if layout[0] == "rows":          # a prepacked right operand (weights)
        assert same_bits(run(mod, isa, a, b, 2, prepack=True), want)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("M,K,N,nb", [(7, 7, 33, 3), (13, 40, 17, 2), (50, 9, 130, 2)])
def test_batched_bits_equal_generic(runner, M, K, N, nb):
    _, mod, isa = runner
    a, b = operands(M, K, N, nb, "rows", "transposed", seed=nb)
    want = run(_s, 0, a, b, 1)
    for t in (1, 2):
        assert same_bits(run(mod, isa, a, b, t), want), t


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("tri", sorted(TRI))
@pytest.mark.parametrize("M,N", [(1, 1), (7, 7), (33, 33), (50, 50), (61, 160), (37, 70)])
def test_tri_bits_equal_generic(runner, tri, M, N):
    """Square M = K; the out_lower diagonal cuts two-panel column steps in half (the
    whole output is compared, so the body computes and zeroes the generic's tiles)."""
    _, mod, isa = runner
    a, b = operands(M, M, N, 2, "rows", "rows", seed=M + N)
    if tri == "a_lower":
        a = np.tril(a)
    elif tri == "a_upper":
        a = np.triu(a)
    want = run(_s, 0, a, b, 1, tri=TRI[tri])
    full = run(_s, 0, a, b, 1)
    if tri == "out_lower":
        low = np.tril(np.ones((M, N), bool))
        assert same_bits(want[:, low] + np.float32(0), full[:, low] + np.float32(0))
        assert not want[:, :6, 16:].any()     # tiles wholly above the diagonal read as zeros
    else:
        assert same_bits(want + np.float32(0), full + np.float32(0))
    c0 = np.full(want.shape, 0.25, np.float32)
    acc = run(_s, 0, a, b, 1, tri=TRI[tri], accumulate=True, c0=c0)
    for t in (1, 2):
        assert same_bits(run(mod, isa, a, b, t, tri=TRI[tri]), want), t
        assert same_bits(run(mod, isa, a, b, t, tri=TRI[tri], accumulate=True, c0=c0), acc), t


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("K,N", [(1, 1), (7, 15), (33, 17), (300, 205), (64, 16 * 8 * 2 + 7), (17, 16 * 21),
                                 (5, 16 * 4)])
def test_gemv_prepacked_bits_equal_generic(runner, K, N):
    """M = 1 against prepacked panels: the GEMV (lc_sgemv_panels; the zmm body streams 8
    panels, then 4, then 1: 205 columns are 13 panels = 8 + 4 + 1), = and +=."""
    _, mod, isa = runner
    a, b = operands(1, K, N, 1, "rows", "rows", seed=K + N)
    want = run(_s, 0, a, b, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(want - ref).max() <= 1e-5 * np.sqrt(K) * np.abs(ref).max() + 1e-30
    c0 = np.random.default_rng(3).standard_normal(want.shape).astype(np.float32)
    for t in (1, 2):
        assert same_bits(run(mod, isa, a, b, t, prepack=True), want), t
        assert same_bits(run(mod, isa, a, b, t, prepack=True, accumulate=True, c0=c0), c0 + want), t
    assert same_bits(run(_s, 0, a, b, 1, prepack=True), want)


def test_gemv_body_named():
    from lutcore._native import sgemm as _d
    key = "sgemv (decode, ops.matmul M = 1)"
    assert _d.body_names(0)[key] == "generic"
    if _simd._features & AVX512:
        assert _simd.bodies("avx512")[key].startswith("avx512")
        assert "GEMV avx512" in _simd.bodies("avx512")["decode layer"]
    if _simd._features & AVX2:
        assert _simd.bodies("avx2")[key] == "avx2"
