"""GPT training step (issue 5): lutcore float, through exact units (forward +
backward), through an approximate unit, beside the same model in torch.

    group                                   lutcore                               peers
    GPT train step BxSxC (4 layers,         GPT.loss_and_grads + AdamW.step       torch functional GPT (same weights):
     4 heads, vocab 256)                    (float / units exact / mitchell,      forward, cross-entropy, backward,
                                             unit_backward=True)                  fused AdamW

Validated before timing: torch's loss on lutcore's weights equals lutcore's
float loss (GPT_TOL).  Records ``tokens`` (batch x seq).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import lutcore
from lutbench import SEED, SLOW, dim, grouped, torch
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.train import AdamW

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.gpt_torch import torch_gpt_loss  # noqa: E402

GPT_TOL = 1e-4
SHAPES = [(8, dim(256), dim(256))]
GROUP = [p for s in SHAPES for p in grouped("GPT train step", [s], "batch x seq x dim; 4 layers, 4 heads, vocab 256")]


def _cfg(shape):
    B, L, C = shape
    return GPTConfig(vocab=256, dim=C, context=L, layers=4, heads=4, mlp_ratio=4, seed=SEED)


def _data(shape):
    B, L, C = shape
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, 256, (B, L + 1))
    return ids[:, :-1], ids[:, 1:]


@pytest.mark.parametrize("variant", ["float", "units exact fwd+bwd", "units mitchell fwd+bwd"])
@pytest.mark.parametrize("shape", GROUP)
def test_gpt_step_lutcore(benchmark, record, shape, variant):
    units = {"float": None, "units exact fwd+bwd": "exact", "units mitchell fwd+bwd": "mitchell"}[variant]
    m = GPT(_cfg(shape), units=units, unit_backward=units is not None)
    opt = AdamW(m.parameters(), lr=1e-3)
    ids, tg = _data(shape)
    loss, _ = m.loss_and_grads(ids, tg)
    assert np.isfinite(loss)

    def run():
        _, g = m.loss_and_grads(ids, tg)
        opt.step(g, max_grad_norm=1.0)

    record("GPT train step", shape, "lutcore" if units is None else f"lutcore {variant}",
           threads=lutcore.get_num_threads(), tokens=shape[0] * shape[1])
    benchmark.pedantic(run, **SLOW)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("shape", GROUP)
def test_gpt_step_torch(benchmark, record, shape):
    cfg = _cfg(shape)
    m = GPT(cfg)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in m.parameters().items()}
    ids, tg = _data(shape)
    tids = torch.as_tensor(ids)

    def loss_fn():
        return torch_gpt_loss(tp, tids, tg, cfg)[1]

    want = m.loss(ids, tg)
    got = float(loss_fn())
    assert abs(got - want) <= GPT_TOL * max(1.0, abs(want)), (got, want)
    opt = torch.optim.AdamW(list(tp.values()), lr=1e-3, fused=True)

    def run():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(tp.values()), 1.0)
        opt.step()

    record("GPT train step", shape, "torch", threads=torch.get_num_threads(), tokens=shape[0] * shape[1])
    benchmark.pedantic(run, **SLOW)
