"""The mantissa-product GEMM (lutcore.ops.mantgemm) beside torch's float32 matmul, on the same
shape: 256 x 1024 x 256 float32 N(0, 1) operands (dims /8 under LUTCORE_BENCH_SMALL=1).

    group                      impl                                   what one call does
    mant_gemm MxKxN (MxKxN)    lutcore bf16 exact                     round both to bf16 (the pre-pass), the
                                                                      mul route: float32 tile, k in order
                               lutcore bf16 mitchell                  the table route: T's row by permutes,
                                                                      vscalefps, k in order
                               lutcore fp16 exact                     the mul route on fp16-rounded operands
                               lutcore fp16 mitchell                  the table route: gathers (4 MB table)
                               torch matmul, bf16-rounded (peer)      torch.matmul(a.bfloat16().float(),
                                                                      b.bfloat16().float()): float32 sgemm
                               torch matmul, float32 (peer)           torch.matmul(a, b): float32 sgemm

ops = 2*M*N*K.  lutcore runs once per SIMD path, the peers once.  Validation before timing: the exact
units against a float64 sum of the exact products (a float32 sum of K terms: SEQ_F32 per k, relative
to sum |p|); the approximate ones against the numpy oracle (tests/reference/mantgemm_ref.py) bit for
bit on a slice of rows; torch's bf16-rounded matmul within the same budget of the float64 sum.
bench/ab_mantgemm.py alternates the same cases in one process (the numbers reported).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from lutbench import THREADS, dim, grouped, requires_torch_nn, torch
from lutcore.ops.mantgemm import mant_gemm, mant_round
from lutcore.units import MantissaUnit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.mantgemm_ref import mant_gemm_ref  # noqa: E402

SHAPES = [(dim(256), dim(1024), dim(256))]
CHECK_ROWS = 2                      # rows of the approximate units checked against the oracle
SEQ_F32 = 2.0 ** -24                # a float32 sum of K terms: per k, relative to sum |p|
UNITS = {"bf16 exact": lambda: MantissaUnit.exact("bf16"), "bf16 mitchell": lambda: MantissaUnit.mitchell("bf16"),
         "fp16 exact": lambda: MantissaUnit.exact("fp16"), "fp16 mitchell": lambda: MantissaUnit.mitchell("fp16")}


def ops(M, K, N) -> int:
    return 2 * M * N * K


def operands(shape):
    M, K, N = shape
    rng = np.random.default_rng(11)
    return rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)


def _within_f32_budget(y, ar, br):
    """y against the float64 sum of the rounded operands' exact products."""
    ref = ar.astype(np.float64) @ br.astype(np.float64)
    mag = np.abs(ar).astype(np.float64) @ np.abs(br).astype(np.float64)
    err = np.abs(np.asarray(y, np.float64) - ref)
    assert (err <= ar.shape[1] * SEQ_F32 * mag).all(), float((err / mag).max())


def check(a, b, unit, y):
    """An exact unit within the float32 budget of the float64 sum; else the oracle's bits on a few rows."""
    if unit.is_exact:
        _within_f32_budget(y, mant_round(a, unit.fmt), mant_round(b, unit.fmt))
    else:
        r = slice(0, CHECK_ROWS)
        want = mant_gemm_ref(a[r], b, unit.table, unit.fmt)
        assert np.array_equal(y[r].view(np.uint32), want.view(np.uint32))


def torch_peers(a, b) -> dict:
    """{name: callable} of torch's matmuls on the same operands, each checked first."""
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    ra, rb = ta.to(torch.bfloat16).float(), tb.to(torch.bfloat16).float()
    _within_f32_budget(torch.matmul(ra, rb).numpy(), ra.numpy(), rb.numpy())
    return {"torch matmul, bf16-rounded (peer)": lambda: torch.matmul(ra, rb),
            "torch matmul, float32 (peer)": lambda: torch.matmul(ta, tb)}


def mant_case(cases, shape):
    return cases(("mant", shape), lambda rng: operands(shape))


@pytest.mark.parametrize("unit", list(UNITS))
@pytest.mark.parametrize("shape", grouped("mant_gemm", SHAPES, "MxKxN"))
def test_mant_gemm_lutcore(benchmark, record, cases, simd, shape, unit):
    a, b = mant_case(cases, shape)
    u = UNITS[unit]()
    out = np.full((shape[0], shape[2]), np.nan, np.float32)
    check(a, b, u, mant_gemm(a, b, u, out=out))
    record("mant_gemm", shape, f"lutcore {unit}", ops=ops(*shape), call=f"mant_gemm(a, b, MantissaUnit.{unit.split()[1]}"
           f"('{unit.split()[0]}'), out=)")
    benchmark(mant_gemm, a, b, u, out=out)


@requires_torch_nn
@pytest.mark.parametrize("peer", ["torch matmul, bf16-rounded (peer)", "torch matmul, float32 (peer)"])
@pytest.mark.parametrize("shape", grouped("mant_gemm", SHAPES, "MxKxN"))
def test_torch_peer(benchmark, record, cases, shape, peer):
    a, b = mant_case(cases, shape)
    fn = torch_peers(a, b)[peer]
    record("mant_gemm", shape, peer, threads=THREADS, ops=ops(*shape), call=peer)
    benchmark(fn)
