"""The MX quantizer (lutcore.mx.mx_quantize, rounding="nearest": lutcore.ops.mxquant natively) beside
lutcore's numpy body of the same contract and torchao's MX quantization, on the same float32 input:
256 x 1024 and 1024 x 1024, e4m3 and e2m1, blocks of 32 (dims /8 under LUTCORE_BENCH_SMALL=1).

    group                            impl                                      what one call does
    mx_quantize MxK <fmt>            lutcore, rows (axis -1)                   mx_quantize(x, fmt, 32): E8M0
                                                                               scales + codes, native
                                     lutcore, columns (axis 0)                 mx_quantize(x, fmt, 32, axis=0):
                                                                               the same array as a GEMM's
                                                                               right operand
                                     lutcore numpy body (peer)                 mx_quantize_numpy(x, fmt, 32)
                                     torchao to_mx (peer)                      MXTensor.to_mx(x, dtype, 32,
                                                                               ScaleCalculationMode.FLOOR):
                                                                               torch ops (fp4 packed two a byte)

``bytes`` = x read (4 per element) + codes and scales written.  lutcore runs once per SIMD path,
the peers once.  Validation before timing: lutcore's codes and scales equal the numpy body's,
both axes, and torchao's (on this data -- normal values, no all-zero or non-finite block -- its
FLOOR mode gives the same bits; DESIGN.md lists where it differs).  bench/ab_mxquant.py alternates
the same cases in one process (the numbers reported).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from lutbench import THREADS, dim, grouped, requires_torch_nn, torch
from lutcore.mx import mx_quantize, mx_quantize_numpy

SHAPES = [(dim(256), dim(1024)), (dim(1024), dim(1024))]
FORMATS = ["e4m3", "e2m1"]
BLOCK = 32


def nbytes(M, K) -> int:
    return 4 * M * K + M * K + M * K // BLOCK


def case(cases, shape):
    return cases(("mxq", shape), lambda rng: rng.standard_normal(shape).astype(np.float32))


def torchao_quantizer():
    """(to_mx(x, fmt) -> (scales uint8, codes uint8 unpacked), the call timed) of torchao's FLOOR mode."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode
    dtypes = {"e4m3": torch.float8_e4m3fn, "e2m1": torch.float4_e2m1fn_x2}

    def call(t, fmt):
        return MXTensor.to_mx(t, dtypes[fmt], BLOCK, ScaleCalculationMode.FLOOR)

    def bits(t, fmt):
        m = call(t, fmt)
        s, d = m.scale.view(torch.uint8).numpy(), m.qdata.view(torch.uint8).numpy()
        if fmt == "e2m1":                          # two fp4 a byte, the first in the low nibble
            d = np.stack([d & 0xF, d >> 4], axis=-1).reshape(d.shape[:-1] + (2 * d.shape[-1],))
        return s.reshape(t.shape[0], -1), d
    return bits, call


def check(x, fmt):
    """lutcore's native result against its numpy body, rows and columns."""
    for axis in (-1, 0):
        m, want = mx_quantize(x, fmt, BLOCK, axis), mx_quantize_numpy(x, fmt, BLOCK, axis)
        assert np.array_equal(m.codes, want.codes) and np.array_equal(m.scales, want.scales), (fmt, axis)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", grouped("mx_quantize", SHAPES, "MxK"))
def test_mx_quantize_rows_lutcore(benchmark, record, cases, simd, shape, fmt):
    x = case(cases, shape)
    check(x, fmt)
    record("mx_quantize", shape, f"lutcore {fmt}, rows", bytes=nbytes(*shape), fmt=fmt,
           call=f"mx_quantize(x, '{fmt}', 32)")
    benchmark(mx_quantize, x, fmt, BLOCK)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", grouped("mx_quantize", SHAPES, "MxK"))
def test_mx_quantize_cols_lutcore(benchmark, record, cases, simd, shape, fmt):
    x = case(cases, shape)
    record("mx_quantize", shape, f"lutcore {fmt}, columns (axis 0)", bytes=nbytes(*shape), fmt=fmt,
           call=f"mx_quantize(x, '{fmt}', 32, axis=0)")
    benchmark(mx_quantize, x, fmt, BLOCK, 0)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", grouped("mx_quantize", SHAPES, "MxK"))
def test_mx_quantize_numpy_peer(benchmark, record, cases, shape, fmt):
    x = case(cases, shape)
    record("mx_quantize", shape, f"lutcore numpy body {fmt} (mx_quantize_numpy)", threads=1,
           bytes=nbytes(*shape), fmt=fmt, call=f"mx_quantize_numpy(x, '{fmt}', 32)")
    benchmark(mx_quantize_numpy, x, fmt, BLOCK)


@requires_torch_nn
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", grouped("mx_quantize", SHAPES, "MxK"))
def test_torchao_to_mx_peer(benchmark, record, cases, shape, fmt):
    x = case(cases, shape)
    bits, call = torchao_quantizer()
    t = torch.from_numpy(x)
    s, d = bits(t, fmt)
    m = mx_quantize(x, fmt, BLOCK)
    assert np.array_equal(s, m.scales) and np.array_equal(d, m.codes)
    record("mx_quantize", shape, f"torchao to_mx {fmt} (FLOOR)", threads=THREADS, bytes=nbytes(*shape), fmt=fmt,
           call="MXTensor.to_mx(x, dtype, 32, ScaleCalculationMode.FLOOR)")
    benchmark(call, t, fmt)
