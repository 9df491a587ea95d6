"""Units of other formats than signed 8 x 8: the table GEMM of unsigned codes beside the signed
one, and a torch Linear through an unsigned unit (zero points) beside the signed unit's layer and
torch's float layer, on the same inputs.

    group                                       lutcore                          peers
    format gemm 256x1024x256                    lut_gemm, 8u x 8u table          lut_gemm, signed 8x8 table
                                                (products beyond int16:          (the same approximation); numpy
                                                one offset per table)            int64 matmul of the codes
    format torch linear 64x768x768              ApproxLinear through 8u x 8u     the same layer through the signed
                                                (zero points, lutcore.torch.      unit (the int8 path); torch float
                                                _formats)                        F.linear

``ops`` = 2 M K N.  Validation first: each lutcore result against its definition.
"""
from __future__ import annotations

import numpy as np
import pytest

import lutcore
from lutbench import THREADS, dim, requires_torch_nn, torch
from lutcore.units import Units

M, K, N = dim(256), dim(1024), dim(256)
GEMM = pytest.mark.benchmark(group=f"format gemm {M}x{K}x{N} (M x K x N)")
LM, LK, LN = dim(64), dim(768), dim(768)
LIN = pytest.mark.benchmark(group=f"format torch linear {LM}x{LK}x{LN} (M x K x N)")


def _approx(fmt=None):
    return Units.from_mul(lambda a, b: (a * b) - ((a * b) & 0x3F), format=fmt)


@pytest.fixture(scope="module")
def codes():
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (M, K)).astype(np.uint8), rng.integers(0, 256, (K, N)).astype(np.uint8),
            rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8))


@GEMM
def test_gemm_unsigned_8x8(benchmark, record, codes):
    a, b, _, _ = codes
    u = _approx("8u x 8u")
    want = u.table().astype(np.int64)[a[:, :, None], b[None, :, :]].sum(axis=1) if M * K * N <= 1 << 22 else None
    got = lutcore.lut_gemm(a, b, u, threads=THREADS)
    if want is not None:
        assert np.array_equal(got, want)
    benchmark(lutcore.lut_gemm, a, b, u, threads=THREADS)
    record("format gemm", (M, K, N), "lutcore 8u x 8u", ops=2 * M * K * N)


@GEMM
def test_gemm_signed_8x8_peer(benchmark, record, codes):
    _, _, a, b = codes
    u = _approx()
    benchmark(lutcore.lut_gemm, a, b, u, threads=THREADS)
    record("format gemm", (M, K, N), "lutcore signed 8x8 (peer)", ops=2 * M * K * N)


@GEMM
def test_gemm_numpy_codes_peer(benchmark, record, codes):
    a, b, _, _ = codes
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    benchmark(np.matmul, a64, b64)
    record("format gemm", (M, K, N), "numpy int64 matmul (exact products)", threads=1, ops=2 * M * K * N)


@pytest.fixture(scope="module")
def linear_case():
    torch.manual_seed(0)
    lin = torch.nn.Linear(LK, LN)
    x = torch.randn(LM, LK)
    return lin, x


@requires_torch_nn
@LIN
@pytest.mark.parametrize("fmt", ["8u x 8u", None], ids=["unsigned-zero-points", "signed-int8-path"])
def test_torch_linear(benchmark, record, linear_case, fmt):
    import lutcore.torch as lt
    lin, x = linear_case
    layer = lt.approximate(torch.nn.Sequential(lin), _approx(fmt), threads=THREADS)
    with torch.no_grad():
        y = layer(x)
        assert torch.isfinite(y).all() and float((y - lin(x)).abs().max()) < 1.0
        benchmark(layer, x)
    record("format torch linear", (LM, LK, LN), f"lutcore {fmt or '8s x 8s'}", ops=2 * LM * LK * LN)


@requires_torch_nn
@LIN
def test_torch_linear_float_peer(benchmark, record, linear_case):
    lin, x = linear_case
    with torch.no_grad():
        benchmark(lin, x)
    record("format torch linear", (LM, LK, LN), "torch float", ops=2 * LM * LK * LN)
