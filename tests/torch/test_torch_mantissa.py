"""bf16 / fp16 mantissa-product units (``lutcore.units.mantissa.MantissaUnits``) in the front ends:
names, lutcore.torch's layers (forward y = unit.matmul(X, W^T) + b with X a linear layer's rows or a
conv's patches; backward "ste" = the float layer's gradients, "units" = dX = unit.matmul(dY, W),
dW = unit.matmul(dY^T, X); "table" refused), lutcore's GPT (the same per weight matmul), ``lutcore
eval``'s rows, and the refusals (attention's products, a quantized weight, the integer resolver).
The product itself (``mant_gemm``) is held to its own oracle in tests/ops/test_mantgemm.py; here
each front end must give that product's bits."""
import numpy as np
import pytest

import torch
import torch.nn.functional as F

import lutcore.torch as lt
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.units import resolve
from lutcore.units.mantissa import MantissaUnit, MantissaUnits

SPECS = ["bf16", "bf16:mitchell", "fp16:truncated:4"]


def bits(t):
    return np.ascontiguousarray(t.detach().numpy() if hasattr(t, "detach") else t, np.float32).view(np.uint32)


def unit(spec):
    return resolve(spec, mx=True)


def test_names():
    u = unit("bf16:mitchell")
    assert isinstance(u, MantissaUnits) and u.name == "bf16:mitchell" and u.mul == MantissaUnit.mitchell("bf16")
    assert unit("fp16").mul == MantissaUnit.exact("fp16") and unit("fp16").name == "fp16"
    assert unit("bfloat16:truncated:3").mul == MantissaUnit.truncated("bf16", 3)
    with pytest.raises(ValueError, match="bf16:lmul"):
        unit("bf16:lmul")
    with pytest.raises(TypeError, match="bf16/fp16"):
        resolve("bf16")
    assert unit("bf16").error_metrics()["wce_pct"] == 0 and unit("bf16:mitchell").error_metrics()["wce_pct"] > 0


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (7, 33, 5), (33, 7, 33)])
def test_linear_forward_and_backward_bits(spec, M, K, N):
    g = torch.Generator().manual_seed(M * 100 + K)
    x = torch.randn(M, K, generator=g, requires_grad=True)
    w = torch.randn(N, K, generator=g, requires_grad=True)
    b = torch.randn(N, generator=g, requires_grad=True)
    u = unit(spec)
    X, W = x.detach().numpy(), w.detach().numpy()
    want = u.mul.matmul(X, np.ascontiguousarray(W.T)) + b.detach().numpy()
    y = lt.lut_linear(x, w, b, spec, backward="units")
    assert np.array_equal(bits(y), bits(want))
    dy = torch.randn(M, N, generator=g)
    y.backward(dy)
    D = dy.numpy()
    assert np.array_equal(bits(x.grad), bits(u.mul.matmul(D, W)))
    assert np.array_equal(bits(w.grad), bits(u.mul.matmul(np.ascontiguousarray(D.T), X)))
    assert torch.equal(b.grad, dy.sum(0))


def test_conv_forward_and_ste_backward():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 7, 7, generator=g, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, generator=g, requires_grad=True)
    u = unit("bf16:mitchell")
    y = lt.lut_conv2d(x, w, None, "bf16:mitchell", stride=2, padding=1, groups=2)
    cols = F.unfold(x.detach(), 3, padding=1, stride=2).transpose(1, 2).reshape(-1, 36)   # (N*L, C*9)
    want = np.empty((cols.shape[0], 6), np.float32)
    for gi in range(2):
        want[:, 3 * gi:3 * gi + 3] = u.mul.matmul(np.ascontiguousarray(cols[:, 18 * gi:18 * gi + 18].numpy()),
                                                  np.ascontiguousarray(w[3 * gi:3 * gi + 3].detach().reshape(3, -1).numpy().T))
    want = want.reshape(2, 16, 6).transpose(0, 2, 1).reshape(2, 6, 4, 4)
    assert np.array_equal(bits(y), bits(want))
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    F.conv2d(x2, w2, None, 2, 1, 1, 2).backward(dy)
    assert torch.equal(x.grad, x2.grad) and torch.equal(w.grad, w2.grad)


def test_refusals():
    m = torch.nn.Sequential(torch.nn.Linear(8, 4))
    with pytest.raises(ValueError, match="no gradient tables"):
        lt.approximate(m, "bf16", backward="table")
    with pytest.raises(ValueError, match="static input_scale"):
        lt.lut_linear(torch.randn(2, 8), m[0].weight, None, "bf16", input_scale=0.1)
    with pytest.raises(ValueError, match="attention's products take integer or MX units"):
        GPT(GPTConfig(dim=32, context=16, layers=1, heads=2), units={"*": "bf16", "*.qk": "bf16"})
    from lutcore.quant import QLinear
    with pytest.raises(ValueError, match="quantized weight"):
        QLinear(np.ones((8, 4), np.float32), "bf16")


def test_gpt_trains_and_evaluates_through_bf16():
    from lutcore.evaluate import evaluate_units
    ids = np.random.default_rng(0).integers(0, 256, (2, 16))
    ref = GPT(GPTConfig(dim=32, context=16, layers=1, heads=2))
    for ub in (False, True):
        g = GPT(GPTConfig(dim=32, context=16, layers=1, heads=2), units="bf16:mitchell", unit_backward=ub)
        loss, grads = g.loss_and_grads(ids, ids)
        assert np.isfinite(loss) and all(np.isfinite(v).all() for v in grads.values())
        assert loss != ref.loss_and_grads(ids, ids)[0]
    r = evaluate_units(ref, np.random.default_rng(1).integers(0, 256, 200), ["none", "bf16", "fp16:mitchell"], seq_len=16)
    assert [row["name"] for row in r.rows] == ["float", "bf16", "fp16:mitchell"]
    assert r.rows[1]["wce_pct"] == 0.0 and r.rows[2]["wce_pct"] > 0
