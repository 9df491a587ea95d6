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
