"""requant and fp16_round over 16M elements beside numpy (and a plain copy).

Memory-bound kernels: each records ``bytes`` = the bytes the contract reads
plus writes per call (the same for every implementation in a group, so GB/s
is effective throughput), to be judged against the machine's bandwidth
(DESIGN.md, Performance: ~46 GB/s plain stores on 2 cores).  Outputs go to
preallocated arrays (``out=``) that were touched before timing, except the
"numpy astype" peer, which is the expression as usually written (it allocates).

    group                   lutcore                   peers
    requant(shift=8) RxC    requant(acc, 8, out=o)    numpy, same contract, reused scratch
    fp16_round RxC          fp16_round(x, out=o)      x.astype(f16).astype(f32); the same via
                                                      copyto into reused arrays; np.copyto(o, x)
                                                      (bandwidth yardstick, 1 thread); torch
                                                      copy_ (the yardstick at 2 threads)
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lutcore
from lutbench import dim, grouped, requires_torch, torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.units_ref import requant_ref  # noqa: E402

SHAPES = [(dim(4096), dim(4096))]        # 16M elements (256K under LUTCORE_BENCH_SMALL=1)
SHIFT = 8
ORACLE_SLICE = 1 << 16                   # elements also checked against the test-suite oracle


def _n(shape) -> int:
    return int(np.prod(shape))


AXES = f"{_n(SHAPES[0]) / 2**20:g}M elements"


# ---------------------------------------------------------------- requant

def requant_numpy(acc, shift, lut, out, t, u):
    """requant's contract in numpy, in reused int32 scratch ``t``, ``u``:
    ``t = (acc + 2**(shift-1)) >> shift`` (computed as ``(acc >> shift) +
    ((acc >> (shift-1)) & 1)``, which cannot overflow int32), saturated to
    int16, then ``out = lut[t & 0xffff]``."""
    if shift == 0:
        np.copyto(t, acc)
    else:
        np.right_shift(acc, shift - 1, out=u)
        np.bitwise_and(u, 1, out=u)
        np.right_shift(acc, shift, out=t)
        np.add(t, u, out=t)
    np.clip(t, -32768, 32767, out=t)
    np.bitwise_and(t, 0xFFFF, out=t)
    np.take(lut, t, out=out, mode="wrap")    # indices are in range; "wrap" avoids take's buffering
    return out


def requant_case(cases, shape):
    def build(rng):
        acc = rng.integers(-(1 << 17), 1 << 17, shape, dtype=np.int32)       # typical accumulators
        flat = acc.reshape(-1)
        flat[::97] = rng.integers(-2**31, 2**31, flat[::97].size, dtype=np.int64)  # saturating tail
        lut = lutcore.Units.exact().requant_lut
        want = requant_ref(flat[:ORACLE_SLICE], SHIFT, lut)
        return SimpleNamespace(acc=acc, lut=lut, want_head=want, out=np.empty(shape, np.int8))
    return cases(("requant", shape), build)


@pytest.mark.parametrize("shape", grouped(f"requant(shift={SHIFT})", SHAPES, AXES))
def test_requant_lutcore(benchmark, record, cases, simd, shape):
    c = requant_case(cases, shape)
    c.out.fill(-1)
    got = lutcore.requant(c.acc, SHIFT, out=c.out)
    assert np.array_equal(got.reshape(-1)[:ORACLE_SLICE], c.want_head)
    t, u = np.empty_like(c.acc), np.empty_like(c.acc)
    assert np.array_equal(got, requant_numpy(c.acc, SHIFT, c.lut, np.empty_like(c.out), t, u))
    record(f"requant(shift={SHIFT})", shape, "lutcore", bytes=5 * _n(shape), call=f"requant(acc, {SHIFT}, out=)")
    benchmark(lutcore.requant, c.acc, SHIFT, out=c.out)


@pytest.mark.parametrize("shape", grouped(f"requant(shift={SHIFT})", SHAPES, AXES))
def test_requant_numpy(benchmark, record, cases, shape):
    c = requant_case(cases, shape)
    o = np.full(shape, -1, np.int8)
    t, u = np.empty_like(c.acc), np.empty_like(c.acc)
    got = requant_numpy(c.acc, SHIFT, c.lut, o, t, u)
    assert np.array_equal(got.reshape(-1)[:ORACLE_SLICE], c.want_head)
    assert np.array_equal(got, lutcore.requant(c.acc, SHIFT))
    record(f"requant(shift={SHIFT})", shape, "numpy", threads=1, bytes=5 * _n(shape),
           call="shifts, clip, & 0xffff, take(lut) into reused int32 scratch")
    benchmark(requant_numpy, c.acc, SHIFT, c.lut, o, t, u)


# ---------------------------------------------------------------- fp16_round

def fp16_case(cases, shape):
    def build(rng):
        x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(100)).astype(np.float32)
        x.reshape(-1)[::1009] *= np.float32(1e-9)      # some subnormal / zero results
        want = x.astype(np.float16).astype(np.float32)  # the contract: 'nearest' == numpy's cast
        return SimpleNamespace(x=x, want=want, out=np.empty(shape, np.float32))
    return cases(("fp16", shape), build)


FP16 = grouped("fp16_round", SHAPES, AXES)


def _fp16_record(record, shape, impl, **kw):
    record("fp16_round", shape, impl, bytes=8 * _n(shape), **kw)


@pytest.mark.parametrize("shape", FP16)
def test_fp16_round_lutcore(benchmark, record, cases, simd, shape):
    c = fp16_case(cases, shape)
    c.out.fill(np.nan)
    assert np.array_equal(lutcore.fp16_round(c.x, out=c.out), c.want)
    _fp16_record(record, shape, "lutcore", call="fp16_round(x, out=)")
    benchmark(lutcore.fp16_round, c.x, out=c.out)


@pytest.mark.parametrize("shape", FP16)
def test_fp16_round_numpy_astype(benchmark, record, cases, shape):
    c = fp16_case(cases, shape)
    fn = lambda: c.x.astype(np.float16).astype(np.float32)  # noqa: E731
    assert np.array_equal(fn(), c.want)
    _fp16_record(record, shape, "numpy astype", threads=1, call="x.astype(float16).astype(float32)",
                 note="'numpy astype' allocates its two results per call (page faults included)")
    benchmark(fn)


@pytest.mark.parametrize("shape", FP16)
def test_fp16_round_numpy_out(benchmark, record, cases, shape):
    c = fp16_case(cases, shape)
    h, o = np.empty(shape, np.float16), np.full(shape, np.nan, np.float32)

    def fn():
        np.copyto(h, c.x, casting="same_kind")
        np.copyto(o, h)
        return o

    assert np.array_equal(fn(), c.want)
    _fp16_record(record, shape, "numpy out=", threads=1, call="copyto(h16, x); copyto(o, h16), reused arrays")
    benchmark(fn)


@pytest.mark.parametrize("shape", FP16)
def test_fp16_round_copy_numpy(benchmark, record, cases, shape):
    c = fp16_case(cases, shape)
    o = np.full(shape, np.nan, np.float32)
    np.copyto(o, c.x)
    assert np.array_equal(o, c.x)
    _fp16_record(record, shape, "numpy copyto", threads=1, call="np.copyto(o, x)",
                 note="'numpy copyto' / 'torch copy_' are plain float32 copies: the memory-bandwidth "
                      "yardstick, not the same result")
    benchmark(np.copyto, o, c.x)


@requires_torch
@pytest.mark.parametrize("shape", FP16)
def test_fp16_round_copy_torch(benchmark, record, cases, shape):
    c = fp16_case(cases, shape)
    tx = torch.from_numpy(c.x)
    to = torch.full(shape, float("nan"), dtype=torch.float32)
    to.copy_(tx)
    assert np.array_equal(to.numpy(), c.x)
    _fp16_record(record, shape, "torch copy_", threads=torch.get_num_threads(), call="o.copy_(x)")
    benchmark(to.copy_, tx)
