"""lutcore.torch's approximate layers beside the TorchApprox CPU algorithm and torch's float layers.

One group per layer kind, table and GEMM shape (bench/torchbench.py: the ResNet-18 CIFAR
convs at batch 8 and 1, the linear 256x768x3072 and batch 1); lutcore times the layer's
whole forward (quantize + im2col + GEMM + dequantize), the peer its GEMM alone on the
same int8 operands (validated bit for bit against lutcore.lut_gemm first), torch its float
conv2d / linear.  ``ops`` = 2*M*K*N for all three.  For the ratios in BENCHMARKS.md use
bench/torch_ratios.py, which alternates the implementations round by round.

    group                                   lutcore                peers
    torch layer[mitchell] <kind> MxKxN      ApproxConv2d/Linear    TorchApprox algorithm (C++ extension)
    torch layer[exact] <kind> MxKxN         same, exact table      TorchApprox algorithm; torch float
    torch depthwise 3x3[units] BxCxHxW      ApproxConv2d(groups=C) torch float (exact group)
"""
from __future__ import annotations

import numpy as np
import pytest

import lutcore
from lutbench import SLOW, requires_torch_nn, torch

pytestmark = requires_torch_nn

if torch is not None:
    import torch.nn.functional as F

    import torchbench as tb

    CASES = tb.cases()
else:  # pragma: no cover
    CASES = []


def _params(units_list=("mitchell", "exact")):
    return [pytest.param(units, kind, spec, id=f"{units}-{label.replace(' ', '-')}",
                         marks=pytest.mark.benchmark(group=f"torch layer[{units}] {label}"))
            for units in units_list for label, kind, spec in CASES]


_memo: dict = {}


def _case(kind, spec, units):
    key = (kind, spec, units)
    if key not in _memo:
        _memo[key] = tb.layer_case(kind, spec, units)
    return _memo[key]


def _shape(c):
    return (c.a.shape[0], c.a.shape[1], c.w.shape[0])


@pytest.mark.parametrize("units,kind,spec", _params())
def test_layer_lutcore(benchmark, record, units, kind, spec):
    c = _case(kind, spec, units)
    with torch.no_grad():
        y = c.layer(c.x)
        ref = c.flt(c.x)
        assert float((y - ref).norm() / ref.norm()) < 0.2               # through the unit, near float
        record(f"torch layer[{units}]", _shape(c), "lutcore", ops=2 * c.macs, call=f"Approx{kind}(x)")
        benchmark(c.layer, c.x)


@pytest.mark.parametrize("units,kind,spec", _params())
def test_layer_peer(benchmark, record, units, kind, spec):
    c = _case(kind, spec, units)
    run = tb.peer_call(c)
    want = lutcore.lut_gemm(c.a, c.w.T.copy(), c.layer.units)
    assert np.array_equal(run().numpy(), want)
    record(f"torch layer[{units}]", _shape(c), "torchapprox-algorithm" if tb.peer() else "numpy definition",
           ops=2 * c.macs, call="ta_gemm(a, w, lut): the GEMM alone")
    benchmark.pedantic(run, **SLOW)


@pytest.mark.parametrize("units,kind,spec", _params(("exact",)))
def test_layer_torch_float(benchmark, record, units, kind, spec):
    c = _case(kind, spec, "exact")
    with torch.no_grad():
        f = (lambda: F.conv2d(c.x, c.flt.weight, c.flt.bias, padding=1)) if kind == "conv" else \
            (lambda: F.linear(c.x, c.flt.weight, c.flt.bias))
        f()
        record("torch layer[exact]", _shape(c), "torch float32", threads=torch.get_num_threads(), ops=2 * c.macs,
               call="F.conv2d / F.linear")
        benchmark(f)


# Depthwise 3x3 (MobileNet's kind): the narrow-group pass (im2col.h lc_grouped_direct) beside
# torch's float depthwise conv on the same input (no TorchApprox peer: its CPU backend has no
# grouped product).  (B, C, HW)
DEPTHWISE = [(8, 64, 32), (8, 256, 8), (1, 128, 16)]


def _dw_params(units_list):
    return [pytest.param(units, B, C, HW, id=f"{units}-{B}x{C}x{HW}x{HW}",
                         marks=pytest.mark.benchmark(group=f"torch depthwise 3x3[{units}] {B}x{C}x{HW}x{HW}"))
            for units in units_list for B, C, HW in DEPTHWISE]


def _dw_case(B, C, HW):
    g = torch.Generator().manual_seed(5)
    flt = torch.nn.Conv2d(C, C, 3, padding=1, groups=C).requires_grad_(False)
    return flt, torch.randn(B, C, HW, HW, generator=g)


@pytest.mark.parametrize("units,B,C,HW", _dw_params(("mitchell", "exact")))
def test_depthwise_lutcore(benchmark, record, units, B, C, HW):
    import lutcore.torch as lt
    flt, x = _dw_case(B, C, HW)
    layer = lt.approximate(flt, units)
    with torch.no_grad():
        assert float((layer(x) - flt(x)).norm() / flt(x).norm()) < 0.2             # through the unit, near float
        record(f"torch depthwise[{units}]", (B, C, HW, HW), "lutcore", ops=2 * B * C * HW * HW * 9,
               call="ApproxConv2d(groups=C)(x)")
        benchmark(layer, x)


@pytest.mark.parametrize("units,B,C,HW", _dw_params(("exact",)))
def test_depthwise_torch_float(benchmark, record, units, B, C, HW):
    flt, x = _dw_case(B, C, HW)
    with torch.no_grad():
        record(f"torch depthwise[{units}]", (B, C, HW, HW), "torch float32", threads=torch.get_num_threads(),
               ops=2 * B * C * HW * HW * 9, call="F.conv2d(groups=C)")
        benchmark(flt, x)
