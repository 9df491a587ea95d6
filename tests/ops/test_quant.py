"""lutcore.quantize (Q8 blocks) and lutcore.qmatmul (block-scaled matmul through
the units) against the numpy oracle; bit-exact everywhere."""
import numpy as np
import pytest

import lutcore
from reference.quant_ref import qmatmul_ref, quantize_ref
from test_gemm import TABLES, make_units

# Named error budget: Q8_0 blocks with an exact multiplier vs the float64 product.
QMATMUL_EXACT_MAX_NMSE = 1e-3
# Named error budget: dequantize(quantize(x)) vs x for Gaussian data, block 32.
Q8_ROUNDTRIP_MAX_NMSE = 1e-4

BLOCKS = [32, 16, 8]


def _print_diff(got, want):
    if want.size:
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        print("max |diff| =", float(np.nanmax(d)))


def _eq(got, want, dtype):
    assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    _print_diff(got, want)
    assert np.array_equal(got, want)


def _quant_b_ref(b, block):
    """Reference quantization of b (K, N) along axis 0 -> qb (Kp, N), sb (nb, N)."""
    qbt, sbt = quantize_ref(b.T, block)
    return np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)


def _dequant_ref(q, scale, block, K):
    """q (..., Kp) * scale repeated per block, cut to the unpadded K (float32 multiply)."""
    return (q.astype(np.float32) * np.repeat(scale, block, axis=-1))[..., :K]


def _rand(rng, shape, zero_rows=()):
    x = (rng.standard_normal(shape) * rng.choice([1e-4, 0.1, 1.0, 300.0], (shape[0], 1))).astype(np.float32)
    for r in zero_rows:
        if r < shape[0]:
            x[r] = 0
    return x


# ---------------------------------------------------------------- quantize
QK = [1, 7, 8, 16, 31, 32, 33, 40, 64, 100, 129]


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("K", QK)
def test_quantize_last_axis(simd, rng, K, block):
    x = _rand(rng, (6, K), zero_rows=(2,))
    qx = lutcore.quantize(x, block=block, axis=-1)
    q, s = quantize_ref(x, block)
    _eq(qx.q, q, np.int8)
    _eq(qx.scale, s, np.float32)
    assert qx.block == block and qx.axis % 2 == 1
    deq = qx.dequantize()
    _eq(deq, _dequant_ref(q, s, block, K), np.float32)
    assert deq.shape == x.shape


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("K", [1, 31, 32, 45, 100])
@pytest.mark.parametrize("N", [5, 8, 13, 33, 270])        # the SIMD body takes 8 columns, chunks 256
def test_quantize_axis0(simd, rng, K, N, block):
    x = _rand(rng, (K, N))
    x[:, 3] = 0                                 # an all-zero column
    qx = lutcore.quantize(x, block=block, axis=0)
    q, s = _quant_b_ref(x, block)
    Kp = -(-K // block) * block
    assert qx.q.shape == (Kp, N) and qx.scale.shape == (Kp // block, N)
    _eq(qx.q, q, np.int8)
    _eq(qx.scale, s, np.float32)
    assert qx.block == block and qx.axis % 2 == 0
    deq = qx.dequantize()
    _eq(deq, _dequant_ref(q.T, s.T, block, K).T, np.float32)


def test_quantize_default_block(rng):
    x = _rand(rng, (3, 70))
    qx = lutcore.quantize(x)
    q, s = quantize_ref(x, 32)
    assert qx.block == 32
    _eq(qx.q, q, np.int8)
    _eq(qx.scale, s, np.float32)


def test_quantize_all_zero_blocks(simd):
    x = np.zeros((3, 64), np.float32)
    x[1, 40] = 2.5                              # row 1: block 0 zero, block 1 not
    x[2, :32] = -0.0                            # negative zeros are zeros
    qx = lutcore.quantize(x, block=32)
    assert qx.scale.tolist()[0] == [0.0, 0.0] and qx.scale.tolist()[2] == [0.0, 0.0]
    assert qx.scale[1, 0] == 0 and qx.scale[1, 1] == np.float32(2.5) / np.float32(127)
    assert not qx.q[0].any() and not qx.q[2].any() and not qx.q[1, :32].any()
    assert qx.q[1, 40] == 127
    assert np.all(np.isfinite(qx.dequantize()))
    _eq(qx.q, quantize_ref(x, 32)[0], np.int8)


def test_quantize_max_values(simd, rng):
    x = _rand(rng, (8, 96))
    for r in range(8):                          # plant a +max or -max per block
        for blk in range(3):
            j = blk * 32 + (r * 5 + blk * 7) % 32
            x[r, blk * 32:(blk + 1) * 32] = np.clip(x[r, blk * 32:(blk + 1) * 32], -1, 1)
            x[r, j] = np.float32(3.75 * (r + 1)) * (1 if (r + blk) % 2 else -1)
    x[0, :32] = np.float32(-7.0)                # all equal to -max
    qx = lutcore.quantize(x, block=32)
    amax_pos = np.argmax(np.abs(x.reshape(8, 3, 32)), axis=-1)
    for r in range(8):
        for blk in range(3):
            j = blk * 32 + amax_pos[r, blk]
            assert qx.q[r, j] == (127 if x[r, j] > 0 else -127)
    assert np.all(qx.q[0, :32] == -127)
    assert np.all(np.abs(qx.q.astype(np.int32)) <= 127)   # -128 never produced
    _eq(qx.q, quantize_ref(x, 32)[0], np.int8)


@pytest.mark.parametrize("amax,scale", [(127.0, 1.0), (254.0, 2.0), (63.5, 0.5), (31.75, 0.25)])
def test_quantize_rounding_ties_half_even(simd, amax, scale):
    # amax / 127 == scale exactly, a power of two, so x = (k + 0.5) * scale is an
    # exact tie in float32: half-to-even gives the even neighbour.
    s = np.float32(scale)
    assert np.float32(amax) / np.float32(127) == s
    ks = [0.5, 1.5, 2.5, 3.5, 10.5, 125.5, 126.5, -0.5, -1.5, -2.5, -3.5, -126.5]
    want = [0, 2, 2, 4, 10, 126, 126, 0, -2, -2, -4, -126]
    row = [amax] + [k * scale for k in ks]
    row += [0.0] * (16 - len(row))
    x = np.array([row], np.float32)
    qx = lutcore.quantize(x, block=16)
    assert qx.scale[0, 0] == s
    assert qx.q[0, 0] == 127
    assert qx.q[0, 1:1 + len(ks)].tolist() == want
    _eq(qx.q, quantize_ref(x, 16)[0], np.int8)
    cols = np.repeat(x.T, 9, axis=1)           # the same values down 9 columns (axis 0)
    qc = lutcore.quantize(cols, block=16, axis=0)
    assert np.all(qc.scale == s) and np.all(qc.q[0] == 127)
    assert np.all(qc.q[1:1 + len(ks)] == np.array(want)[:, None])
    qt = lutcore.quantize(cols.T, block=16)     # a transposed view, along its rows
    assert np.array_equal(qt.q, qc.q.T) and np.array_equal(qt.scale, qc.scale.T)


def test_quantize_padding(simd, rng):
    K = 40                                      # block 32 -> Kp 64, 24 pad values
    x = _rand(rng, (4, K))
    qx = lutcore.quantize(x, block=32)
    assert qx.q.shape == (4, 64) and qx.scale.shape == (4, 2)
    assert not qx.q[:, K:].any()
    want_s1 = (np.max(np.abs(x[:, 32:]), axis=1) / np.float32(127)).astype(np.float32)
    _eq(qx.scale[:, 1], want_s1, np.float32)
    assert qx.dequantize().shape == (4, K)


def test_quantize_roundtrip_quality(rng):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    d = lutcore.quantize(x, block=32).dequantize().astype(np.float64)
    nmse = np.sum((d - x) ** 2) / np.sum(x.astype(np.float64) ** 2)
    print("Q8 roundtrip NMSE", nmse)
    assert nmse < Q8_ROUNDTRIP_MAX_NMSE


def test_quantize_non_contiguous(rng):
    big = _rand(rng, (6, 130))
    x = big[:, ::2]                              # (6, 65) strided
    a = lutcore.quantize(x, block=16)
    b = lutcore.quantize(np.ascontiguousarray(x), block=16)
    _eq(a.q, b.q, np.int8)
    _eq(a.scale, b.scale, np.float32)
    _eq(a.q, quantize_ref(np.ascontiguousarray(x), 16)[0], np.int8)


# ---------------------------------------------------------------- qmatmul
QSHAPES = [(1, 1, 1), (7, 33, 5), (33, 100, 65), (2, 64, 3), (5, 1, 9), (3, 37, 11),
           (16, 96, 24), (0, 5, 3), (3, 0, 4), (3, 5, 0),
           (52, 70, 130)]                       # N > M >= 48: the table kernels run it transposed


def _qmatmul_want(a, b, u, block):
    qa, sa = quantize_ref(a, block)
    qb, sb = _quant_b_ref(b, block)
    return qmatmul_ref(qa, sa, qb, sb, u.mul, block)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("shape", QSHAPES, ids=lambda s: "x".join(map(str, s)))
def test_qmatmul_grid(simd, rng, shape, table, block):
    M, K, N = shape
    a = _rand(rng, (M, K), zero_rows=(1,))
    b = _rand(rng, (N, K)).T.copy() if N else np.zeros((K, 0), np.float32)
    if K > 2 and N > 0:
        b[:, 0] = 0                             # an all-zero column of b
    u = make_units(table)
    want = _qmatmul_want(a, b, u, block)
    y1 = lutcore.qmatmul(a, b, units=u, block=block, threads=1)
    y2 = lutcore.qmatmul(a, b, units=u, block=block, threads=2)
    _eq(y1, want, np.float32)
    _eq(y2, want, np.float32)
    assert np.array_equal(y1, y2)
    if M > 1 and N:
        assert np.all(y1[1] == 0)               # all-zero row of a
    if K == 0:
        assert not y1.any()


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("table", ["exact", "random"])
def test_qmatmul_prequantized(simd, rng, table, block):
    M, K, N = 9, 70, 13
    a = _rand(rng, (M, K), zero_rows=(4,))
    b = _rand(rng, (N, K)).T.copy()
    u = make_units(table)
    want = _qmatmul_want(a, b, u, block)
    qb = lutcore.quantize(b, block, axis=0)
    qa = lutcore.quantize(a, block, axis=-1)
    for t in (1, 2):
        _eq(lutcore.qmatmul(a, qb, units=u, block=block, threads=t), want, np.float32)
        _eq(lutcore.qmatmul(qa, b, units=u, block=block, threads=t), want, np.float32)
        _eq(lutcore.qmatmul(qa, qb, units=u, block=block, threads=t), want, np.float32)


def test_qmatmul_defaults(rng):
    a = _rand(rng, (4, 50))
    b = _rand(rng, (6, 50)).T.copy()
    want = _qmatmul_want(a, b, lutcore.Units.exact(), 32)
    _eq(lutcore.qmatmul(a, b), want, np.float32)


def test_qmatmul_quality_exact(rng):
    a = rng.standard_normal((32, 256)).astype(np.float32)
    b = rng.standard_normal((256, 40)).astype(np.float32)
    y = lutcore.qmatmul(a, b, block=32).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    nmse = np.sum((y - ref) ** 2) / np.sum(ref ** 2)
    print("qmatmul NMSE", nmse)
    assert nmse < QMATMUL_EXACT_MAX_NMSE


def test_qmatmul_non_contiguous(rng):
    u = make_units("mitchell")
    big_a = _rand(rng, (8, 80))
    big_b = _rand(rng, (80, 12))
    a = big_a[:, ::2]                           # (8, 40)
    b = big_b[::2, ::3]                         # (40, 4)
    want = _qmatmul_want(np.ascontiguousarray(a), np.ascontiguousarray(b), u, 16)
    _eq(lutcore.qmatmul(a, b, units=u, block=16), want, np.float32)
    _eq(lutcore.qmatmul(np.asfortranarray(a), np.asfortranarray(b), units=u, block=16), want, np.float32)
