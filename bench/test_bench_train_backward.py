"""A training step through Mitchell with each backward (ste / units / table) beside torch
float, on the ResNet-18 CIFAR conv shapes at batch 32 (issue 27).

One step = forward of a 3x3 conv (padding 1, no bias) on a (32, C, HW, HW) batch, the
backward of sum(y * dY) (dX and dW), and an SGD update of the weight.  ``images`` = 32
per step, so bench/report.py's tokens/s column is images/s.  Every arm starts from the
same weight and input; the lutcore arms are checked against the float step first (the
forward within the unit's error, the gradients finite and of the float's size).

    group                                         impls
    train step[mitchell] conv BxCxHWxHW           lutcore ste, lutcore units, lutcore table, torch float32
"""
from __future__ import annotations

import pytest

from lutbench import SLOW, dim, requires_torch_nn, torch

pytestmark = requires_torch_nn

BATCH = 32
SHAPES = [(64, 32), (128, 16), (256, 8), (512, 4)]          # (C = O, HW): the four stages' 3x3 convs
BACKWARDS = ("ste", "units", "table")


def _case(C, HW, backward):
    import lutcore.torch as lt
    C = dim(C)
    g = torch.Generator().manual_seed(27)
    flt = torch.nn.Conv2d(C, C, 3, padding=1, bias=False)
    with torch.no_grad():
        flt.weight.copy_(torch.randn(flt.weight.shape, generator=g) * (2.0 / (9 * C)) ** 0.5)
    x = torch.randn(BATCH, C, HW, HW, generator=g)
    dy = torch.randn(BATCH, C, HW, HW, generator=g)
    layer = flt if backward is None else lt.approximate(flt, "mitchell", backward=backward)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=False)
        xx = x.detach().requires_grad_()
        (layer(xx) * dy).sum().backward()
        opt.step()
        return xx.grad, layer.weight.grad
    return layer, step, C


def _params():
    return [pytest.param(b, C, HW, id=f"{b or 'float'}-{BATCH}x{dim(C)}x{HW}x{HW}",
                         marks=pytest.mark.benchmark(group=f"train step[mitchell] conv {BATCH}x{dim(C)}x{HW}x{HW}"))
            for C, HW in SHAPES for b in BACKWARDS + (None,)]


@pytest.mark.parametrize("backward,C,HW", _params())
def test_train_step(benchmark, record, backward, C, HW):
    layer, step, Cd = _case(C, HW, backward)
    with torch.no_grad():
        w0 = layer.weight.detach().clone()
    dx, dw = step()
    assert torch.isfinite(dx).all() and torch.isfinite(dw).all() and float(dw.norm()) > 0
    if backward is not None:
        _, fstep, _ = _case(C, HW, None)
        fdx, fdw = fstep()
        for a, b in ((dx, fdx), (dw, fdw)):                  # the same size as the float gradient
            assert 0.5 < float(a.norm() / b.norm()) < 2.0
    with torch.no_grad():
        layer.weight.copy_(w0)
    macs = BATCH * HW * HW * 9 * Cd * Cd
    record(f"train step[mitchell] conv", (BATCH, Cd, HW, HW),
           "torch float32" if backward is None else f"lutcore {backward}",
           threads=torch.get_num_threads() if backward is None else 2, ops=3 * 2 * macs, tokens=BATCH,
           call="forward + backward of sum(y*dY) + SGD step", backward=backward or "float")
    benchmark.pedantic(step, **SLOW)
