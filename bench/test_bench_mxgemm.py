"""The MX GEMM (lutcore.ops.mxgemm) beside lutcore's int8 any-table GEMM and torchao's MX emulation,
on the same shape: 256 x 1024 x 256, blocks of 32 (dims /8 under LUTCORE_BENCH_SMALL=1).

    group                        impl                                     what one call does
    mx_gemm MxKxN (MxKxN)        lutcore MXFP8 e4m3, exact table          the FMA route: decoded values,
                                                                          float64 FMA per block (exact)
                                 lutcore MXFP8 e4m3, approximate table    row tables, one float64 part
                                 (products keeping 2 mantissa bits)        (rows reduced up to sign and
                                                                          exponent: 11 rows)
                                 lutcore MXFP8 e4m3, two-part table       row tables, two float64 parts
                                 (a random factor per product)            (256 rows)
                                 lutcore int8 any table (peer)            lut_gemm(a, b, units=mitchell)
                                 torchao MX emulation (peer)              dequantize both (its MXTensor),
                                                                          float32 matmul (torch)

ops = 2*M*N*K.  lutcore runs once per SIMD path, the peers once.  Validation before timing: the
exact table against float64 dequantize @ dequantize (each block's exact sum rounded once, then
scaled and added in float32: a named budget); the approximate tables against the integer oracle
(tests/reference/mxgemm_ref.py) on a slice of rows; torchao's emulation within its float32
rounding of ours; lut_gemm against numpy's table lookups on a slice of rows.  bench/ab_mxgemm.py
alternates the same cases in one process (the numbers reported).
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lutcore
from lutbench import THREADS, dim, grouped, requires_torch_nn, torch
from lutcore.mx import mx_quantize
from lutcore.ops.mxgemm import MXProducts, mx_gemm
from lutcore.units import approx, fp_format

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.mxgemm_ref import mx_gemm_exact_ref  # noqa: E402

SHAPES = [(dim(256), dim(1024), dim(256))]
BLOCK = 32
CHECK_ROWS = 2                      # rows of the approximate tables checked against the integer oracle
EXACT_VS_F64 = 2.0 ** -22           # per block, relative to sum |a| |b| (tests/ops/test_mxgemm.py)
TAO_PER_K = 2.0 ** -23              # torchao's float32 partial sums, per k


def ops(M, K, N) -> int:
    return 2 * M * N * K


def tables():
    """(exact, approximate one-part, two-part) e4m3 x e4m3 tables as MXProducts."""
    va = fp_format("e4m3").values()
    with np.errstate(all="ignore"):
        t = np.multiply.outer(va, va)
    u = t.view(np.uint32) & np.uint32(0xFFFC0000)                       # 2 mantissa bits kept
    cleared = np.where(np.isfinite(t), u.view(np.float32), t).astype(np.float32)
    r = np.random.default_rng(7).uniform(0.5, 2.0, t.shape)
    with np.errstate(all="ignore"):
        factor = np.where(np.isfinite(t), (t * r).astype(np.float32), t).astype(np.float32)
    return {"exact": t, "approx": cleared, "twopart": factor}


def mx_case(cases, shape):
    def build(rng):
        M, K, N = shape
        x = rng.standard_normal((M, K)).astype(np.float32)
        w = rng.standard_normal((K, N)).astype(np.float32)
        a, b = mx_quantize(x, "e4m3", BLOCK), mx_quantize(w, "e4m3", BLOCK, axis=0)
        tabs = tables()
        prods = {k: MXProducts(v, "e4m3", "e4m3") for k, v in tabs.items()}
        ad, bd = a.dequantize().astype(np.float64), b.dequantize().astype(np.float64)
        return SimpleNamespace(x=x, w=w, a=a, b=b, tabs=tabs, prods=prods, ref64=ad @ bd,
                               mag=np.abs(ad) @ np.abs(bd), out=np.empty((M, N), np.float32))
    return cases(("mx", shape), build)


def _check(c, name, y):
    if name == "exact":
        err = np.abs(y - c.ref64) / np.maximum(c.mag, 1e-30)
        assert err.max() <= EXACT_VS_F64 * c.a.nblocks, err.max()
    else:
        r = slice(0, CHECK_ROWS)
        want = mx_gemm_exact_ref(c.a.codes[r], c.a.scales[r], c.b.codes, c.b.scales, c.tabs[name], c.a.shape[1],
                                 BLOCK)
        assert np.array_equal(y[r].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("table", ["exact", "approx", "twopart"])
@pytest.mark.parametrize("shape", grouped("mx_gemm", SHAPES, "MxKxN"))
def test_mx_gemm_lutcore(benchmark, record, cases, simd, shape, table):
    c = mx_case(cases, shape)
    p = c.prods[table]
    c.out.fill(np.nan)
    _check(c, table, mx_gemm(c.a, c.b, p, out=c.out))
    record("mx_gemm", shape, f"lutcore MXFP8 e4m3, {table} table", ops=ops(*shape), route=p.route(BLOCK),
           call="mx_gemm(a, b, MXProducts(T, 'e4m3', 'e4m3'), out=)")
    benchmark(mx_gemm, c.a, c.b, p, out=c.out)


@pytest.mark.parametrize("shape", grouped("mx_gemm", SHAPES, "MxKxN"))
def test_int8_any_table_peer(benchmark, record, cases, shape):
    M, K, N = shape
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    u, out = approx.mitchell(), np.empty((M, N), np.int32)
    got = lutcore.lut_gemm(a, b, units=u, out=out)
    t = u.table().astype(np.int64).reshape(256, 256)
    r = slice(0, CHECK_ROWS)
    assert np.array_equal(got[r], t[a[r].view(np.uint8)[:, :, None], b.view(np.uint8)[None, :, :]].sum(axis=1))
    record("mx_gemm", shape, "lutcore int8 any table (lut_gemm, mitchell)", ops=ops(*shape),
           call="lut_gemm(a, b, units=mitchell, out=)")
    benchmark(lutcore.lut_gemm, a, b, units=u, out=out)


@requires_torch_nn
@pytest.mark.parametrize("shape", grouped("mx_gemm", SHAPES, "MxKxN"))
def test_torchao_emulation_peer(benchmark, record, cases, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode
    c = mx_case(cases, shape)
    ta = MXTensor.to_mx(torch.from_numpy(c.x), torch.float8_e4m3fn, BLOCK, ScaleCalculationMode.FLOOR)
    tb = MXTensor.to_mx(torch.from_numpy(np.ascontiguousarray(c.w.T)), torch.float8_e4m3fn, BLOCK,
                        ScaleCalculationMode.FLOOR)

    def emulate():              # torchao's emulated MX matmul: dequantize both, matmul (float32)
        return ta.dequantize(torch.float32) @ tb.dequantize(torch.float32).t()

    y = emulate().numpy()
    ours = mx_gemm(c.a, c.b, c.prods["exact"])
    err = np.abs(y.astype(np.float64) - ours) / np.maximum(c.mag, 1e-30)
    assert err.max() <= TAO_PER_K * shape[1], err.max()
    record("mx_gemm", shape, "torchao MX emulation (dequantize + float32 matmul)", threads=THREADS,
           ops=ops(*shape), call="MXTensor.dequantize(float32) @ MXTensor.dequantize(float32).t()")
    benchmark(emulate)
