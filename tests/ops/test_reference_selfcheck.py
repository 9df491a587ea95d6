"""Self-checks of the numpy oracles in tests/reference/ against tiny brute-force
loops in pure Python (and, where one exists, an independent numpy route).
These never import lutcore."""
import math

import numpy as np
import pytest

from reference.fp16_ref import fp16_decode_ref, fp16_encode_ref, fp16_round_ref
from reference.gemm_ref import lut_gemm_ref
from reference.quant_ref import qmatmul_ref, quantize_ref
from reference.units_ref import (default_relu_lut, default_requant_lut, exact_mul_lut,
                                 relu8_ref, requant_ref)


def _i8(v):
    """Python int -> int8 two's complement value."""
    v &= 0xFF
    return v - 256 if v >= 128 else v


def _i16(v):
    v &= 0xFFFF
    return v - 65536 if v >= 32768 else v


# ---------------------------------------------------------------- tables
def test_exact_mul_lut_bruteforce():
    t = exact_mul_lut()
    assert t.dtype == np.int16 and t.shape == (65536,)
    for a in range(-128, 128, 5):
        for b in list(range(-128, 128, 7)) + [127, -128]:
            assert t[(a & 0xFF) * 256 + (b & 0xFF)] == a * b


def test_default_luts_bruteforce():
    r = default_requant_lut()
    assert r.dtype == np.int8 and r.shape == (65536,)
    for i in range(0, 65536, 13):
        assert r[i] == max(-127, min(127, _i16(i)))
    assert r[0x8000] == -127 and r[0x7FFF] == 127 and r[0xFFFF] == -1
    relu = default_relu_lut()
    assert relu.dtype == np.int8 and relu.shape == (256,)
    for i in range(256):
        assert relu[i] == max(_i8(i), 0)


# ---------------------------------------------------------------- gemm
def _gemm_brute(a, b, mul):
    M, K = a.shape
    N = b.shape[1]
    out = [[0] * N for _ in range(M)]
    for m in range(M):
        for n in range(N):
            s = 0
            for k in range(K):
                s += int(mul[(int(a[m, k]) & 0xFF) * 256 + (int(b[k, n]) & 0xFF)])
            out[m][n] = s
    return np.array(out, dtype=np.int64).reshape(M, N)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 7, 4), (5, 33, 2), (0, 3, 2), (2, 0, 3)])
def test_lut_gemm_ref_bruteforce(shape):
    rng = np.random.default_rng(7)
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    mul = rng.integers(-32767, 32768, 65536).astype(np.int16)
    got = lut_gemm_ref(a, b, mul)
    assert got.dtype == np.int32 and got.shape == (M, N)
    assert np.array_equal(got.astype(np.int64), _gemm_brute(a, b, mul))


def test_lut_gemm_ref_exact_matches_matmul_and_chunks(monkeypatch):
    import reference.gemm_ref as g
    rng = np.random.default_rng(8)
    a = rng.integers(-128, 128, (37, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 29)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(lut_gemm_ref(a, b, exact_mul_lut()), want)
    monkeypatch.setattr(g, "_CUBE_ELEMS", 100)  # force many small chunks
    assert np.array_equal(g.lut_gemm_ref(a, b, exact_mul_lut()), want)


# ---------------------------------------------------------------- quant
def _quantize_brute(row, block):
    row = [np.float32(v) for v in row]
    K = len(row)
    Kp = -(-K // block) * block
    row = row + [np.float32(0)] * (Kp - K)
    q, s = [], []
    for b0 in range(0, Kp, block):
        blk = row[b0:b0 + block]
        amax = np.float32(0)
        for v in blk:
            amax = max(amax, np.float32(abs(v)))
        d = np.float32(amax) / np.float32(127)
        s.append(np.float32(d))
        for v in blk:
            if d == 0:
                q.append(0)
            else:
                r = float(np.float32(v) / d)         # float32 division
                q.append(max(-127, min(127, round(r))))  # Python round: half to even
    return q, s


@pytest.mark.parametrize("K,block", [(1, 32), (31, 32), (32, 32), (45, 16), (17, 8), (0, 8)])
def test_quantize_ref_bruteforce(K, block):
    rng = np.random.default_rng(K * 100 + block)
    x = (rng.standard_normal((4, K)) * rng.choice([1e-3, 1.0, 50.0], (4, 1))).astype(np.float32)
    if K:
        x[1] = 0
        x[2, 0] = -np.float32(3.0)
    q, s = quantize_ref(x, block)
    Kp = -(-K // block) * block
    assert q.dtype == np.int8 and q.shape == (4, Kp)
    assert s.dtype == np.float32 and s.shape == (4, Kp // block)
    for m in range(4):
        bq, bs = _quantize_brute(x[m].tolist(), block)
        assert q[m].tolist() == bq
        assert np.array_equal(s[m], np.array(bs, dtype=np.float32))


def test_quantize_ref_ties_half_even():
    # scale = 127/127 = 1 exactly: x/scale is x, so k + 0.5 is an exact tie.
    x = np.array([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5]], dtype=np.float32)
    q, s = quantize_ref(x, 8)
    assert s[0, 0] == 1.0
    assert q[0].tolist() == [127, 0, 2, 2, 0, -2, -2, 126]


def _qmatmul_brute(qa, sa, qb, sb, mul, block):
    M, Kp = qa.shape
    N = qb.shape[1]
    Y = np.zeros((M, N), dtype=np.float32)
    for m in range(M):
        for n in range(N):
            acc = np.float32(0)
            for b in range(Kp // block):
                I = 0
                for k in range(b * block, (b + 1) * block):
                    I += int(mul[(int(qa[m, k]) & 0xFF) * 256 + (int(qb[k, n]) & 0xFF)])
                term = np.float32(np.float32(sa[m, b]) * np.float32(sb[b, n])) * np.float32(I)
                acc = np.float32(acc + np.float32(term))
            Y[m, n] = acc
    return Y


@pytest.mark.parametrize("M,K,N,block", [(3, 40, 2, 16), (2, 8, 3, 8), (1, 70, 1, 32)])
def test_qmatmul_ref_bruteforce(M, K, N, block):
    rng = np.random.default_rng(M + K + N + block)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    qa, sa = quantize_ref(a, block)
    qbt, sbt = quantize_ref(b.T, block)
    qb, sb = qbt.T, sbt.T
    for mul in (exact_mul_lut(), rng.integers(-32767, 32768, 65536).astype(np.int16)):
        got = qmatmul_ref(qa, sa, qb, sb, mul, block)
        want = _qmatmul_brute(qa, sa, qb, sb, mul, block)
        assert got.dtype == np.float32
        assert np.array_equal(got, want)


# ---------------------------------------------------------------- fp16
def _all_finite_fp16_values():
    v = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)  # 0 .. 65504
    return v


def _truncate_via_search(x):
    """Independent round-toward-zero: the largest fp16 magnitude <= |x|."""
    grid = _all_finite_fp16_values()               # ascending, bit pattern i -> value
    out = []
    for v in np.asarray(x, dtype=np.float32).ravel().tolist():
        if math.isnan(v):
            out.append(None)
            continue
        sgn = 0x8000 if math.copysign(1.0, v) < 0 else 0
        a = abs(v)
        if math.isinf(a):
            out.append(sgn | 0x7C00)
            continue
        i = int(np.searchsorted(grid, a, side="right")) - 1
        out.append(sgn | min(i, 0x7BFF))
    return out


def _fp16_probe_values():
    fin = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)  # exact in f32
    vals = np.concatenate([fin, mids, np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(0)),
                           np.array([65519.99, 65520, 65536, 1e5, 3e38, 3e-8, 1e-45,
                                     np.inf, np.nan, 2.0 ** -25, 2.0 ** -26], np.float32)])
    return np.concatenate([vals, -vals]).astype(np.float32)


def test_fp16_truncate_ref_vs_search():
    x = _fp16_probe_values()[::7]  # every 7th keeps the loop quick
    x = np.concatenate([x, np.array([65520, 1e5, 3e-8, -3e-8, np.inf, -np.inf], np.float32)])
    got = fp16_encode_ref(x, "truncate")
    want = _truncate_via_search(x)
    for xi, g, w in zip(x.tolist(), got.tolist(), want):
        if w is None:
            assert (g & 0x7C00) == 0x7C00 and (g & 0x3FF) != 0
        else:
            assert g == w, (xi, hex(g), hex(w))


def test_fp16_truncate_ref_named_cases():
    enc = lambda v: int(fp16_encode_ref(np.array([v], np.float32), "truncate")[0])
    assert enc(3e-8) == 0
    assert enc(-3e-8) == 0x8000
    assert enc(65520.0) == 0x7BFF
    assert enc(1e5) == 0x7BFF and enc(-1e5) == 0xFBFF
    assert enc(np.inf) == 0x7C00 and enc(-np.inf) == 0xFC00
    assert enc(1.0) == 0x3C00
    assert enc(2.0 ** -24) == 0x0001 and enc(2.0 ** -24 * 1.999) == 0x0001
    n = enc(np.nan)
    assert (n & 0x7C00) == 0x7C00 and (n & 0x3FF) != 0


def _decode_brute(h):
    s = -1.0 if h & 0x8000 else 1.0
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        return s * (m / 1024.0) * 2.0 ** -14
    if e == 31:
        return s * math.inf if m == 0 else math.nan
    return s * (1.0 + m / 1024.0) * 2.0 ** (e - 15)


def test_fp16_decode_ref_all_patterns():
    bits = np.arange(65536, dtype=np.uint16)
    got = fp16_decode_ref(bits)
    assert got.dtype == np.float32
    numpy_route = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(numpy_route)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], numpy_route.view(np.uint32)[~nan])
    for h in range(0, 65536, 17):
        w = _decode_brute(h)
        if math.isnan(w):
            assert np.isnan(got[h])
        else:
            assert float(got[h]) == w and math.copysign(1, float(got[h])) == math.copysign(1, w)


def test_fp16_round_ref_roundtrip():
    x = _fp16_probe_values()
    for mode in ("nearest", "truncate"):
        r = fp16_round_ref(x, mode)
        fin = ~np.isnan(x)
        # every result is itself an fp16 value (encode is idempotent on it)
        assert np.array_equal(fp16_encode_ref(r[fin], mode), fp16_encode_ref(x[fin], mode))


# ---------------------------------------------------------------- requant / relu
def test_requant_ref_bruteforce():
    rng = np.random.default_rng(3)
    acc = np.concatenate([rng.integers(-2 ** 31, 2 ** 31, 300),
                          [-2 ** 31, 2 ** 31 - 1, 0, 1, -1, 2, -2, 3, -3, 255, 256, -255]]).astype(np.int32)
    lut = rng.integers(-128, 128, 65536).astype(np.int8)
    for shift in (0, 1, 7, 15, 31):
        for table in (default_requant_lut(), lut):
            got = requant_ref(acc, shift, table)
            assert got.dtype == np.int8
            for v, g in zip(acc.tolist(), got.tolist()):
                t = v if shift == 0 else (v + (1 << (shift - 1))) >> shift  # Python: floor shift
                t = max(-32768, min(32767, t))
                assert g == table[t & 0xFFFF]


def test_requant_ref_named_cases():
    lut = default_requant_lut()
    acc = np.array([100, 200, -200, 40000, -3, 3, 2 ** 31 - 1], np.int32)
    assert requant_ref(acc, 0, lut).tolist() == [100, 127, -127, 127, -3, 3, 127]
    # shift 1: (-3 + 1) >> 1 = -1; (3 + 1) >> 1 = 2; int32 max must not wrap
    assert requant_ref(acc, 1, lut).tolist() == [50, 100, -100, 127, -1, 2, 127]


def test_relu8_ref_all():
    x = np.arange(-128, 128).astype(np.int8)
    assert relu8_ref(x, default_relu_lut()).tolist() == [max(v, 0) for v in range(-128, 128)]
