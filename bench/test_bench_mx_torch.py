"""An MLP (Linear 1024 -> 1024, ReLU, Linear 1024 -> 1024; batch 256; dims /8 under
LUTCORE_BENCH_SMALL=1) through MXFP8 (E4M3, blocks of 32): lutcore.torch beside torchao's MX
inference workflow (the same format and scale rule, emulated on the CPU) and torch's float
layers, inference and one training step.

    group                          impl                                   what one call does
    mx mlp inference (BxD)         lutcore mxfp8 (exact products)         approximate(mlp, "mxfp8")(x), float32
                                   lutcore mxfp8:mitchell                 ... an approximate FP multiplier
                                   torchao MXFP8 emulated (peer)          quantize_(bf16 mlp, MXDynamicActivation
                                                                          MXWeightConfig(EMULATED, FLOOR))(x bf16)
                                   torch float32 (peer)                   mlp(x)
    mx mlp train step (BxD)        lutcore mxfp8, backward ste / table    forward, loss, backward, SGD step
                                   torch float32 (peer)                   the same step in float

ops = 2 * B * D * D * 2 (the two layers' products; a training step counts its forward only).
Validation before timing: lutcore's output against float64 of the same MX operands' products
(both layers: each product exactly summed per block, float32 between) within a named budget,
torchao's within its bf16 rounding of ours.  bench/ab_mx_torch.py alternates the same cases in
one process (the numbers reported).
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

from lutbench import THREADS, dim, grouped, requires_torch_nn, torch

SHAPES = [(dim(256), dim(1024))]
TAO_REL = 2.0 ** -6              # torchao's bf16 output and activations, relative to max |y|


def ops(B, D) -> int:
    return 2 * B * D * D * 2


def mlp(D: int, seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, D))


def data(B: int, D: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, D, generator=g), torch.randn(B, D, generator=g)


def torchao_mlp(model):
    """The float model in bf16 through torchao's emulated MXFP8 inference (FLOOR scales, as OCP)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, ScaleCalculationMode
        from torchao.quantization import quantize_
        from torchao.quantization.quantize_.common.kernel_preference import KernelPreference
    m = copy.deepcopy(model).to(torch.bfloat16)
    quantize_(m, MXDynamicActivationMXWeightConfig(kernel_preference=KernelPreference.EMULATED,
                                                   scaling_mode=ScaleCalculationMode.FLOOR))
    return m


def reference(model, x, spec="mxfp8"):
    """float64 of the layers' MX products (the same quantization), float32 between the layers."""
    from lutcore.units import resolve
    u = resolve(spec, mx=True)
    h = x.numpy()
    for i in (0, 2):
        lin = model[i]
        qa = u.quantize(h, 1, "a").dequantize().astype(np.float64)
        qw = u.quantize(lin.weight.detach().numpy(), 1, "b").dequantize().astype(np.float64)
        h = (qa @ qw.T).astype(np.float32) + lin.bias.detach().numpy()
        if i == 0:
            h = np.maximum(h, 0)
    return h


def check(model, x, y):
    ref = reference(model, x)
    assert np.abs(y - ref).max() <= 2.0 ** -18 * np.abs(ref).max(), np.abs(y - ref).max()


@requires_torch_nn
@pytest.mark.parametrize("spec", ["mxfp8", "mxfp8:mitchell"])
@pytest.mark.parametrize("shape", grouped("mx mlp inference", SHAPES, "BxD"))
def test_mx_inference_lutcore(benchmark, record, shape, spec):
    import lutcore.torch as lt
    B, D = shape
    x, _ = data(B, D)
    m = mlp(D)
    am = lt.approximate(m, spec)
    with torch.no_grad():
        y = am(x).numpy()
        if spec == "mxfp8":
            check(m, x, y)

    def run():
        with torch.no_grad():
            return am(x)
    record("mx mlp inference", shape, f"lutcore {spec}", ops=ops(B, D), call=f"approximate(mlp, {spec!r})(x)")
    benchmark(run)


@requires_torch_nn
@pytest.mark.parametrize("shape", grouped("mx mlp inference", SHAPES, "BxD"))
def test_mx_inference_torchao_peer(benchmark, record, shape):
    B, D = shape
    x, _ = data(B, D)
    m = mlp(D)
    tm = torchao_mlp(m)
    xb = x.to(torch.bfloat16)
    with torch.no_grad():
        y = tm(xb).float().numpy()
    ref = reference(m, x)
    assert np.abs(y - ref).max() <= TAO_REL * np.abs(ref).max()

    def run():
        with torch.no_grad():
            return tm(xb)
    record("mx mlp inference", shape, "torchao MXFP8 emulated (bf16)", threads=THREADS, ops=ops(B, D),
           call="quantize_(mlp.bfloat16(), MXDynamicActivationMXWeightConfig(EMULATED, FLOOR))(x)")
    benchmark(run)


@requires_torch_nn
@pytest.mark.parametrize("shape", grouped("mx mlp inference", SHAPES, "BxD"))
def test_mx_inference_float_peer(benchmark, record, shape):
    B, D = shape
    x, _ = data(B, D)
    m = mlp(D)

    def run():
        with torch.no_grad():
            return m(x)
    record("mx mlp inference", shape, "torch float32", threads=THREADS, ops=ops(B, D), call="mlp(x)")
    benchmark(run)


def train_step(model, x, t, opt):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), t).backward()
    opt.step()


@requires_torch_nn
@pytest.mark.parametrize("backward", ["ste", "table", None])
@pytest.mark.parametrize("shape", grouped("mx mlp train step", SHAPES, "BxD"))
def test_mx_train_step(benchmark, record, shape, backward):
    import lutcore.torch as lt
    B, D = shape
    x, t = data(B, D)
    m = mlp(D) if backward is None else lt.approximate(mlp(D), "mxfp8", backward=backward)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    train_step(m, x, t, opt)
    assert all(torch.isfinite(p).all() for p in m.parameters())
    name = "torch float32" if backward is None else f"lutcore mxfp8, backward {backward}"
    record("mx mlp train step", shape, name, ops=ops(B, D),
           call="zero_grad, mse_loss(model(x), t).backward(), SGD step")
    benchmark(train_step, m, x, t, opt)
