"""lutcore.ops.matmul: deterministic float32 GEMM (own FMA kernel) vs a float64
numpy reference; bits independent of threads, SIMD path, row grouping and
operand layout."""
import numpy as np
import pytest

import lutcore
from lutcore.ops.matmul import matmul, pack_matrix

SHAPES = [(1, 1, 1), (7, 33, 5), (33, 100, 65), (6, 16, 16), (13, 1, 17), (50, 257, 130), (0, 3, 4), (3, 0, 4)]
# float32 accumulation over K terms: error grows ~ sqrt(K) * eps * |a||b|
REL_BUDGET = 1e-5


@pytest.fixture(autouse=True)
def _restore_simd():
    prev = lutcore.get_simd()
    yield
    lutcore.set_simd(prev)


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_vs_float64_reference(M, K, N):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    results = []
    for simd in lutcore.available_simd():
        lutcore.set_simd(simd)
        for t in (1, 2):
            results.append(matmul(a, b, threads=t))
    scale = np.sqrt(max(K, 1)) * (np.abs(ref).max() if ref.size else 1) + 1e-30
    err = np.abs(results[0] - ref).max() if ref.size else 0.0
    print(f"max abs err {err:.3g} (scale {scale:.3g})")
    assert err <= REL_BUDGET * scale
    for r in results[1:]:
        assert np.array_equal(r.view(np.uint32), results[0].view(np.uint32))


def test_layouts_rows_packed_and_batched_agree_bitwise():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((29, 70)).astype(np.float32)
    w = rng.standard_normal((45, 70)).astype(np.float32)         # (N, K) like a Linear weight
    full = matmul(a, w.T)                                          # transposed view read in place
    assert np.array_equal(full, matmul(a, np.ascontiguousarray(w.T)))
    assert np.array_equal(full.T, matmul(w, a.T))
    pw = pack_matrix(w.T)
    assert np.array_equal(full, matmul(a, pw))
    for r in (0, 5, 28):                                           # one row at a time == inside the batch
        assert np.array_equal(matmul(a[r:r + 1], w.T), full[r:r + 1])
        assert np.array_equal(matmul(a[r:r + 1], pw), full[r:r + 1])
    batch = matmul(np.stack([a, a[::-1]]), np.stack([w.T, w.T]))
    assert np.array_equal(batch[0], full) and np.array_equal(batch[1], full[::-1])


def _layout(x, kind):
    """x (..., rows, cols) as a view with the named memory layout, same values."""
    if kind == "rows":
        return np.ascontiguousarray(x)
    if kind == "transposed":                       # a transposed view of a contiguous array
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1] + 1,), np.float32)   # every other column of a wider array
    wide[..., 1::2] = x
    return wide[..., 1::2]


@pytest.mark.parametrize("M,K,N,nb", [(1, 1, 1, 1), (7, 33, 5, 1), (13, 9, 17, 2), (50, 130, 37, 1),
                                      (6, 16, 48, 3), (61, 257, 33, 1)])
@pytest.mark.parametrize("la", ["rows", "transposed", "strided"])
@pytest.mark.parametrize("lb", ["rows", "transposed", "strided"])
def test_operand_layouts_vs_reference(M, K, N, nb, la, lb):
    """Each operand layout takes its own packing path (A read in place, A^T and
    row-major B packed source row by source row, the rest panel by panel): every
    layout gives the contiguous operands' bits, at 1 and 2 threads, with and
    without accumulate, and matches a float64 reference on odd shapes."""
    rng = np.random.default_rng(M * 7 + K * 3 + N + nb)
    a = rng.standard_normal((nb, M, K)).astype(np.float32)
    b = rng.standard_normal((nb, K, N)).astype(np.float32)
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    want = matmul(a, b, threads=1)
    scale = np.sqrt(K) * np.abs(ref).max()
    assert np.abs(want - ref).max() <= REL_BUDGET * scale
    av, bv = _layout(a if nb > 1 else a[0], la), _layout(b if nb > 1 else b[0], lb)
    if nb == 1:
        want = want[0]
    for t in (1, 2):
        got = matmul(av, bv, threads=t)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (la, lb, t)
        acc = np.full(want.shape, 0.25, np.float32)
        matmul(av, bv, out=acc, accumulate=True, threads=t)
        assert np.array_equal(acc.view(np.uint32), (np.float32(0.25) + want).view(np.uint32))


@pytest.mark.parametrize("M,K,N,nb", [(1, 1, 1, 1), (7, 7, 5, 2), (33, 33, 17, 1), (50, 50, 64, 1),
                                      (61, 300, 33, 1), (300, 61, 20, 1), (256, 256, 64, 2)])
@pytest.mark.parametrize("tri", ["a_lower", "a_upper", "out_lower"])
@pytest.mark.parametrize("la", ["rows", "transposed"])
def test_triangular_structures_equal_the_full_product(M, K, N, nb, tri, la):
    """Declared zeros are skipped (causal attention): the result equals the full
    product (every bit, once exact zeros' signs are made equal), at 1 and 2
    threads, with and without accumulate; "out_lower" returns the wanted lower
    triangle and zeros or the full values above it."""
    rng = np.random.default_rng(M + 3 * K + 7 * N + nb)
    a = rng.standard_normal((nb, M, K)).astype(np.float32)
    if tri == "a_lower":
        a = np.tril(a)
    elif tri == "a_upper":
        a = np.triu(a)
    b = rng.standard_normal((nb, K, N)).astype(np.float32)
    if tri == "out_lower":
        b = rng.standard_normal((nb, K, M)).astype(np.float32)    # square output
    full = matmul(a, b, threads=1) + np.float32(0)                 # + 0: -0 -> +0
    av = _layout(a, la)
    for simd, t in [(s, t) for s in lutcore.available_simd() for t in (1, 2)]:
        lutcore.set_simd(simd)
        got = matmul(av, b, threads=t, tri=tri) + np.float32(0)
        if tri == "out_lower":
            low = np.tril(np.ones(full.shape[-2:], bool))
            assert np.array_equal(got[:, low].view(np.uint32), full[:, low].view(np.uint32))
            up = got[:, ~low]
            assert np.all((up == 0) | (up == full[:, ~low]))
            acc = np.full(full.shape, -1.5, np.float32)
            matmul(av, b, out=acc, accumulate=True, threads=t, tri=tri)
            want = np.float32(-1.5) + full
            assert np.array_equal(acc[:, low].view(np.uint32), want[:, low].view(np.uint32))
            assert np.all((acc[:, ~low] == -1.5) | (acc[:, ~low] == want[:, ~low]))
            continue
        assert np.array_equal(got.view(np.uint32), full.view(np.uint32)), (tri, la, t)
        acc = np.full(full.shape, -1.5, np.float32)
        matmul(av, b, out=acc, accumulate=True, threads=t, tri=tri)
        assert np.array_equal(acc.view(np.uint32), (np.float32(-1.5) + full).view(np.uint32))
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    assert np.abs(full - ref).max() <= REL_BUDGET * np.sqrt(K) * np.abs(ref).max()


def test_triangular_bad_input():
    a = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="tri"):
        matmul(a, a, tri="lower")
    with pytest.raises(ValueError, match="tri"):
        matmul(a, a, tri=["a_lower"])
    with pytest.raises(ValueError, match="tri"):
        matmul(a, pack_matrix(a), tri="a_lower")


def test_accumulate_and_float64_fallback():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 9)).astype(np.float32)
    b = rng.standard_normal((9, 4)).astype(np.float32)
    out = np.ones((5, 4), np.float32)
    matmul(a, b, out=out, accumulate=True)
    assert np.array_equal(out, np.float32(1) + matmul(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(matmul(a64, b64), a64 @ b64)          # float64 is numpy's matmul itself


def test_bad_input():
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="do not multiply"):
        matmul(a, np.zeros((5, 2), np.float32))
    with pytest.raises(TypeError):
        matmul(a.astype(np.int32), np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError):
        matmul(a, np.zeros((4, 2), np.float32), out=np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="do not multiply"):
        matmul(a, pack_matrix(np.zeros((5, 2), np.float32)))


@pytest.mark.parametrize("K, N", [(1, 1), (300, 200), (70, 64), (513, 37)])
def test_packed_row_gemv_equals_tiles_bitwise(simd, K, N):
    """One row against packed panels takes the GEMV path (four panels at a time): the
    same bits as that row inside a tiled product, with and without accumulate."""
    rng = np.random.default_rng(K + N)
    a = rng.standard_normal((7, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    lutcore.set_simd(simd)
    full = matmul(a, w.T)
    pw = pack_matrix(w.T)
    for r in (0, 6):
        assert np.array_equal(matmul(a[r:r + 1], pw).view(np.uint32), full[r:r + 1].view(np.uint32))
        acc = np.full((1, N), 0.5, np.float32)
        matmul(a[r:r + 1], pw, out=acc, accumulate=True)
        assert np.array_equal(acc.view(np.uint32), (np.float32(0.5) + full[r:r + 1]).view(np.uint32))
