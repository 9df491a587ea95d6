"""lut_gemm, GEMV and qmatmul beside torch._int_mm and numpy.

One group per kernel and shape (dims /8 under LUTCORE_BENCH_SMALL=1); lutcore
runs once per SIMD path, peers once; every implementation checks its output
(np.array_equal against a reference or the other implementation) before it is
timed.  lutcore writes into a preallocated ``out=`` and so do the peers where
they can: page faults on fresh output memory are not what is measured.

    group                              lutcore                   peers
    lut_gemm[exact] MxKxN              lut_gemm(a, pack_b(b))    torch._int_mm(a, b)
    lut_gemm[exact] GEMV 1xKxN         same, M=1                 torch._int_mm at M=17; numpy int32 matmul
    lut_gemm[mitchell] MxKxN           lut_gemm(a, b, mitchell)  numpy fancy indexing (64-row slice at 1024)
    qmatmul[exact] MxKxN               qmatmul(a, quantize(w,0)) numpy float32 a @ w
    lut_gemm[exact] audit MxKxN        audit off                 the same call with set_audit(0.01)

ops = 2*M*N*K of what one call computes (a table lookup + add counts as 2).
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lutcore
from lutbench import dim, grouped, requires_torch, torch
from lutcore.units import approx

# The numpy oracles of the test-suite (written from the contract, never calling lutcore).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.quant_ref import qmatmul_ref, quantize_ref  # noqa: E402

EXACT_SHAPES = [(dim(1024), dim(1024), dim(1024)), (dim(256), dim(2048), dim(2048))]
GEMV_SHAPES = [(1, dim(4096), dim(4096))]
TORCH_MIN_M = 17                      # torch._int_mm wants M > 16
APPROX_SHAPES = [(dim(256), dim(1024), dim(256)), (dim(1024), dim(1024), dim(1024))]
APPROX_PEER_ROWS = dim(64)            # the numpy peer's row slice when M is larger
APPROX_FULL_PEER_MAX_M = dim(256)     # up to this M the numpy peer computes every row
QMATMUL_SHAPES = [(dim(1024), dim(1024), dim(1024))]
AUDIT_SHAPES = [(dim(1024), dim(1024), dim(1024))]
AUDIT_RATE = 0.01
QBLOCK = 32


def ops(M, K, N) -> int:
    return 2 * M * N * K


def exact_case(cases, shape):
    """int8 a (M, K), b (K, N), b packed once, and the exact int32 product."""
    def build(rng):
        M, K, N = shape
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        # float64 BLAS is exact here (|C| <= K * 2**14 < 2**53), and fast enough to run once.
        ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int32)
        return SimpleNamespace(a=a, b=b, bp=lutcore.pack_b(b), ref=ref, out=np.empty((M, N), np.int32))
    return cases(("exact", shape), build)


def run_checked(fn, out, want, rows=slice(None)):
    """Call once into a poisoned ``out`` and require the exact reference before timing."""
    out.fill(-1)
    got = fn()
    assert np.array_equal(got[rows], want), f"output differs from the reference ({np.sum(got[rows] != want)} entries)"
    return got


# ---------------------------------------------------------------- lut_gemm, exact table

@pytest.mark.parametrize("shape", grouped("lut_gemm[exact]", EXACT_SHAPES, "MxKxN"))
def test_lut_gemm_exact_lutcore(benchmark, record, cases, simd, shape):
    c = exact_case(cases, shape)
    run_checked(lambda: lutcore.lut_gemm(c.a, c.bp, out=c.out), c.out, c.ref)
    record("lut_gemm[exact]", shape, "lutcore", ops=ops(*shape), call="lut_gemm(a, pack_b(b), out=)")
    benchmark(lutcore.lut_gemm, c.a, c.bp, out=c.out)


@requires_torch
@pytest.mark.parametrize("shape", grouped("lut_gemm[exact]", EXACT_SHAPES, "MxKxN"))
def test_lut_gemm_exact_torch(benchmark, record, cases, shape):
    c = exact_case(cases, shape)
    M, K, N = shape
    ta, tb = torch.from_numpy(c.a), torch.from_numpy(c.b)
    to = torch.empty((M, N), dtype=torch.int32)
    run_checked(lambda: torch._int_mm(ta, tb, out=to).numpy(), to.numpy(), c.ref)
    record("lut_gemm[exact]", shape, "torch", threads=torch.get_num_threads(), ops=ops(*shape),
           call="torch._int_mm(a, b, out=)")
    benchmark(torch._int_mm, ta, tb, out=to)


# ---------------------------------------------------------------- GEMV (M = 1), exact table
#
# torch._int_mm refuses M <= 16, so the torch peer multiplies 17 rows (row 0 is
# the GEMV's row) with B transposed-contiguous (column-major, the layout its
# GEMV-like path streams).  Its per-call time is compared with lutcore's
# 1-row call anyway: that is what a caller with one row pays.  Its `ops` count
# the useful row only (so the ratio is a per-call time ratio); `rows_computed`
# records the 17.

def gemv_case(cases, shape):
    def build(rng):
        _, K, N = shape
        c = exact_case(cases, shape)
        extra = rng.integers(-128, 128, (TORCH_MIN_M - 1, K), dtype=np.int8)
        a17 = np.ascontiguousarray(np.vstack([c.a, extra]))
        return SimpleNamespace(c=c, a17=a17, out17=np.empty((TORCH_MIN_M, N), np.int32))
    return cases(("gemv", shape), build)


@pytest.mark.parametrize("shape", grouped("lut_gemm[exact] GEMV", GEMV_SHAPES, "MxKxN"))
def test_gemv_lutcore(benchmark, record, cases, simd, shape):
    c = exact_case(cases, shape)
    run_checked(lambda: lutcore.lut_gemm(c.a, c.bp, out=c.out), c.out, c.ref)
    record("lut_gemm[exact] GEMV", shape, "lutcore", ops=ops(*shape), call="lut_gemm(a, pack_b(b), out=), M=1")
    benchmark(lutcore.lut_gemm, c.a, c.bp, out=c.out)


@requires_torch
@pytest.mark.parametrize("shape", grouped("lut_gemm[exact] GEMV", GEMV_SHAPES, "MxKxN"))
def test_gemv_torch(benchmark, record, cases, shape):
    g = gemv_case(cases, shape)
    ta = torch.from_numpy(g.a17)
    bt = torch.from_numpy(g.c.b).t().contiguous().t()        # (K, N) view, column-major storage
    to = torch.from_numpy(g.out17)
    run_checked(lambda: torch._int_mm(ta, bt, out=to).numpy(), g.out17, g.c.ref, rows=slice(0, 1))
    record("lut_gemm[exact] GEMV", shape, "torch", threads=torch.get_num_threads(), ops=ops(*shape),
           rows_computed=TORCH_MIN_M, call="torch._int_mm(a17, b.t().contiguous().t(), out=)",
           note=f"torch._int_mm needs M > 16: it ran {TORCH_MIN_M} rows (B column-major); "
                f"compared per call with lutcore's 1 row")
    benchmark(torch._int_mm, ta, bt, out=to)


@pytest.mark.parametrize("shape", grouped("lut_gemm[exact] GEMV", GEMV_SHAPES, "MxKxN"))
def test_gemv_numpy(benchmark, record, cases, shape):
    c = exact_case(cases, shape)
    # numpy's integer matmul is its own single-threaded loop (no BLAS), whose inner
    # loop runs over K: B stored N x K (int32, made once) gives it unit strides.
    a32 = c.a.astype(np.int32)
    b32 = np.ascontiguousarray(c.b.T, dtype=np.int32).T    # (K, N) view of N x K storage
    o32 = np.empty_like(c.ref)
    run_checked(lambda: np.matmul(a32, b32, out=o32), o32, c.ref)
    record("lut_gemm[exact] GEMV", shape, "numpy", threads=1, ops=ops(*shape),
           call="np.matmul(a_int32, b_int32 (N x K storage), out=)")
    benchmark(np.matmul, a32, b32, out=o32)


# ---------------------------------------------------------------- lut_gemm, approximate table

def lut_gemm_numpy(a, b, mul, out, budget=1 << 28):
    """The contract in numpy: ``out = mul[(a & 0xff)[:, :, None]*256 + (b & 0xff)[None]].sum(1)``,
    chunked over rows so the (rows, K, N) index and gather cubes stay under ``budget``
    bytes each (< 2 GB in all).  ``mul`` is the int32 copy of the 65536-entry table."""
    M, K = a.shape
    N = b.shape[1]
    ia = a.view(np.uint8).astype(np.intp) * 256              # (M, K)  (a & 0xff) * 256
    ib = b.view(np.uint8).astype(np.intp)                    # (K, N)  (b & 0xff)
    rows = max(1, budget // (K * N * np.dtype(np.intp).itemsize))
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        mul[ia[r0:r1, :, None] + ib[None]].sum(axis=1, out=out[r0:r1])  # |sum| <= K*2**14: int32
    return out


def approx_case(cases, shape):
    """Mitchell's multiplier; the numpy peer's rows (all, or a 64-row slice) and its output."""
    def build(rng):
        M, K, N = shape
        units = approx.mitchell()
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        R = M if M <= APPROX_FULL_PEER_MAX_M else APPROX_PEER_ROWS
        mul32 = units.mul.astype(np.int32)
        ref = lut_gemm_numpy(a[:R], b, mul32, np.empty((R, N), np.int32))
        return SimpleNamespace(units=units, a=a, b=b, R=R, mul32=mul32, ref=ref,
                               out=np.empty((M, N), np.int32), peer_out=np.empty((R, N), np.int32))
    return cases(("approx", shape), build)


@pytest.mark.parametrize("shape", grouped("lut_gemm[mitchell]", APPROX_SHAPES, "MxKxN"))
def test_lut_gemm_approx_lutcore(benchmark, record, cases, simd, shape):
    c = approx_case(cases, shape)
    call = lambda: lutcore.lut_gemm(c.a, c.b, units=c.units, out=c.out)  # noqa: E731
    run_checked(call, c.out, c.ref, rows=slice(0, c.R))
    if c.R < shape[0]:  # rows beyond the peer's slice: sampled rows and columns vs the table definition
        lutcore.set_audit(AUDIT_RATE)
        try:
            call()
        finally:
            lutcore.set_audit(0)
    record("lut_gemm[mitchell]", shape, "lutcore", ops=ops(*shape), call="lut_gemm(a, b, units=mitchell(), out=)")
    benchmark(call)


@pytest.mark.parametrize("shape", grouped("lut_gemm[mitchell]", APPROX_SHAPES, "MxKxN"))
def test_lut_gemm_approx_numpy(benchmark, record, cases, shape):
    M, K, N = shape
    c = approx_case(cases, shape)
    want = lutcore.lut_gemm(c.a[:c.R], c.b, units=c.units)
    call = lambda: lut_gemm_numpy(c.a[:c.R], c.b, c.mul32, c.peer_out)  # noqa: E731
    run_checked(call, c.peer_out, want)
    # At M > 256 numpy times a 64-row slice (seconds per call otherwise); its ops
    # count those rows, so the report compares throughput (GOP/s), not time.
    extra = {} if c.R == M else {"rows_computed": c.R,
                                 "note": f"numpy timed on a {c.R}-row slice of the {M} rows; "
                                         f"compare throughput"}
    record("lut_gemm[mitchell]", shape, "numpy", threads=1, ops=ops(c.R, K, N),
           call="mul[(a&0xff)[:,:,None]*256 + (b&0xff)[None]].sum(1), row-chunked", **extra)
    benchmark(call)


# ---------------------------------------------------------------- qmatmul (block-scaled, exact table)

def qmatmul_case(cases, shape):
    def build(rng):
        M, K, N = shape
        a = rng.standard_normal((M, K), dtype=np.float32)
        w = (rng.standard_normal((K, N), dtype=np.float32) * np.float32(0.05)).astype(np.float32)
        wq = lutcore.quantize(w, block=QBLOCK, axis=0)          # weights: quantized once
        float_ref = a.astype(np.float64) @ w.astype(np.float64)
        return SimpleNamespace(a=a, w=w, wq=wq, float_ref=float_ref, out=np.empty((M, N), np.float32))
    return cases(("qmatmul", shape), build)


@pytest.mark.parametrize("shape", grouped("qmatmul[exact]", QMATMUL_SHAPES, "MxKxN"))
def test_qmatmul_lutcore(benchmark, record, cases, rng, simd, shape):
    c = qmatmul_case(cases, shape)
    call = lambda: lutcore.qmatmul(c.a, c.wq, block=QBLOCK, out=c.out)  # noqa: E731
    c.out.fill(np.nan)
    y = call()
    # Bit-exact against the test-suite's oracle on sampled rows (all columns).
    rows = np.sort(rng.choice(shape[0], size=min(8, shape[0]), replace=False))
    qa, sa = quantize_ref(c.a[rows], QBLOCK)
    qbt, sbt = quantize_ref(np.ascontiguousarray(c.w.T), QBLOCK)
    assert np.array_equal(c.wq.q, qbt.T) and np.array_equal(c.wq.scale, sbt.T)
    want = qmatmul_ref(qa, sa, qbt.T, sbt.T, lutcore.Units.exact().mul, QBLOCK)
    assert np.array_equal(y[rows], want)
    # ... and close to the float product it approximates.
    rel = float(np.linalg.norm(y - c.float_ref) / np.linalg.norm(c.float_ref))
    assert rel < 0.05, rel
    record("qmatmul[exact]", shape, "lutcore", ops=ops(*shape), rel_err_vs_float32=round(rel, 5),
           call=f"qmatmul(a_f32, quantize(w, axis=0), block={QBLOCK}, out=)")
    benchmark(call)


@pytest.mark.parametrize("shape", grouped("qmatmul[exact]", QMATMUL_SHAPES, "MxKxN"))
def test_qmatmul_numpy(benchmark, record, cases, shape):
    c = qmatmul_case(cases, shape)
    o = np.empty_like(c.out)
    o.fill(np.nan)
    np.matmul(c.a, c.w, out=o)
    # float32 BLAS has its own rounding: checked against the float64 product.
    assert np.allclose(o, c.float_ref, rtol=1e-4, atol=1e-4 * float(np.abs(c.float_ref).max()))
    record("qmatmul[exact]", shape, "numpy", ops=ops(*shape), call="np.matmul(a_f32, w_f32, out=) (OpenBLAS)",
           note="peer is the float32 product (no quantization)")
    benchmark(np.matmul, c.a, c.w, out=o)


# ---------------------------------------------------------------- the audit's cost

@pytest.mark.parametrize("shape", grouped("lut_gemm[exact] audit", AUDIT_SHAPES, "MxKxN"))
def test_audit_off(benchmark, record, cases, shape):
    c = exact_case(cases, shape)
    assert lutcore.get_audit() == 0
    run_checked(lambda: lutcore.lut_gemm(c.a, c.bp, out=c.out), c.out, c.ref)
    record("lut_gemm[exact] audit", shape, "lutcore", ops=ops(*shape), call="lut_gemm(a, pack_b(b), out=)")
    benchmark(lutcore.lut_gemm, c.a, c.bp, out=c.out)


@pytest.mark.parametrize("shape", grouped("lut_gemm[exact] audit", AUDIT_SHAPES, "MxKxN"))
def test_audit_on(benchmark, record, cases, shape):
    c = exact_case(cases, shape)
    lutcore.set_audit(AUDIT_RATE)
    try:
        run_checked(lambda: lutcore.lut_gemm(c.a, c.bp, out=c.out), c.out, c.ref)
        record("lut_gemm[exact] audit", shape, f"lutcore+audit({AUDIT_RATE})", ops=ops(*shape),
               call=f"set_audit({AUDIT_RATE}); lut_gemm(a, pack_b(b), out=)",
               note="the 'peer' is lutcore with the audit on: ratio = the audit's cost factor")
        benchmark(lutcore.lut_gemm, c.a, c.bp, out=c.out)
    finally:
        lutcore.set_audit(0)
