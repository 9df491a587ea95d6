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

import numpy as np
import pytest

import lutcore
from lutbench import SEED, SLOW, dim, grouped, torch
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.train import AdamW

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
    import torch.nn.functional as F
    cfg = _cfg(shape)
    m = GPT(cfg)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in m.parameters().items()}
    ids, tg = _data(shape)
    tids, ttg = torch.as_tensor(ids), torch.as_tensor(tg)
    C, H = cfg.dim, cfg.heads

    def loss_fn():
        B, L = tids.shape
        x = tp["wte"][tids] + tp["wpe"][:L]
        for i in range(cfg.layers):
            P = lambda k: tp[f"h.{i}.{k}"]            # noqa: E731
            a = F.layer_norm(x, (C,), P("ln1.weight"), P("ln1.bias"), cfg.ln_eps)
            q, k, v = F.linear(a, P("attn.qkv.weight"), P("attn.qkv.bias")).split(C, dim=-1)
            q, k, v = (t.view(B, L, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, L, C)
            x = x + F.linear(y, P("attn.proj.weight"), P("attn.proj.bias"))
            h = F.layer_norm(x, (C,), P("ln2.weight"), P("ln2.bias"), cfg.ln_eps)
            x = x + F.linear(F.gelu(F.linear(h, P("mlp.fc.weight"), P("mlp.fc.bias")), approximate="tanh"),
                             P("mlp.proj.weight"), P("mlp.proj.bias"))
        x = F.layer_norm(x, (C,), tp["ln_f.weight"], tp["ln_f.bias"], cfg.ln_eps)
        return F.cross_entropy((x @ tp["wte"].T).reshape(-1, cfg.vocab), ttg.reshape(-1))

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
