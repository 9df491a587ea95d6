"""A whole ResNet-18 (CIFAR) training step through Mitchell with each backward (ste / units /
table) beside torch float32, batch 32 (the model, the step and the checks: bench/ab_resnet18.py,
which alternates the arms in one process and profiles them; this is the same as a
pytest-benchmark group).

One step = SGD(lr 0.01, momentum 0.9, weight decay 5e-4).zero_grad(), cross_entropy(model(x), y)
.backward(), .step() on a fixed (32, 3, 32, 32) batch in train mode; ``images`` = 32 per step, so
bench/report.py's tokens/s column is images/s.  Every arm starts from the same float weights and
is checked first (one step: the loss and every gradient finite).  ops = 3 x 2 x the forward's
multiply-accumulates (forward, dX, dW).

    group                                               impls
    train step[mitchell] ResNet-18 CIFAR 32x3x32x32     lutcore ste, lutcore units, lutcore table, torch float32
"""
from __future__ import annotations

import pytest

from lutbench import THREADS, requires_torch_nn, torch

pytestmark = requires_torch_nn

BATCH = 32
ARMS = ("ste", "units", "table", "float")


@pytest.mark.parametrize("arm", [pytest.param(a, id=a, marks=pytest.mark.benchmark(
    group=f"train step[mitchell] ResNet-18 CIFAR {BATCH}x3x32x32")) for a in ARMS])
def test_resnet18_train_step(benchmark, record, arm):
    import ab_resnet18 as ab
    steps, x = ab.build(BATCH, [arm], THREADS)
    step = steps[arm]
    ab.check(arm, step)
    record("train step[mitchell] ResNet-18 CIFAR", (BATCH, 3, 32, 32),
           "torch float32" if arm == "float" else f"lutcore {arm}", threads=THREADS,
           ops=3 * 2 * ab.macs(ab.ResNet18(), x), tokens=BATCH,
           call="SGD zero_grad + cross_entropy(model(x), y).backward() + SGD step", backward=arm)
    benchmark.pedantic(step, rounds=5, iterations=1, warmup_rounds=2)   # the scratch buffers and forms grow on the first steps
