"""Training: the fused AdamW step and a whole MambaLM training step beside torch
and transformers.

    group                              lutcore                                peers
    AdamW step TxE                     train.AdamW(params).step(grads)        torch.optim.AdamW(fused=True).step()
      (T tensors of E float32 each:      (dict of T arrays)                     (.grad set once)
       1x10M and 100x100k)
    MambaLM train step BxS             model.loss_and_grads(ids, targets)     transformers MambaForCausalLM
      (d_model 256, 4 layers, N 16,      + AdamW.step(grads, max_grad_norm)     (use_mambapy) forward, cross-entropy,
       vocab 256)                        (the Trainer's step)                   backward, clip_grad_norm_, fused AdamW

Same hyperparameters everywhere (HP; the Trainer's defaults, clipping at 1.0).
AdamW records ``bytes`` = 28 per parameter (read p, g, m, v; write p, m, v);
lutcore's step also computes the global gradient norm (its NaN guard), one
more read of g that is not counted.  The training step records ``tokens``
(batch x seq) and, like every whole-model benchmark, ``peak_mb`` measured in a
fresh spawned process (lutbench.peak_rss).  Under LUTCORE_BENCH_SMALL=1 the
tensor sizes, batch, seq and d_model are divided by 8 (tensor count, layers,
d_state and vocab stay).

Validation before timing: one AdamW step of each from the same state against
a float64 numpy step (ADAM_TOL, norm-wise on the parameters); for the model,
lutcore's loss and gradients against transformers' on the same weights
(LM_TOL), when transformers is importable.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import lutcore
from lutbench import SEED, SLOW, dim, grouped, need_module, peak_rss, rel_err, requires_torch_nn, torch
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.train import AdamW

if torch is not None:
    import torch.nn.functional as F

HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
MAX_GRAD_NORM = 1.0
ADAM_TOL = 1e-6
LM_TOL = 1e-4

ADAMW_SHAPES = [(1, dim(10_000_000)), (100, dim(100_000))]     # tensors x elements each
TRAIN_SHAPES = [(dim(8), dim(256), dim(256))]                   # batch, seq, d_model
N_LAYER, D_STATE, VOCAB = 4, 16, 256


# ================================================================ AdamW

def adamw_case(cases, shape):
    """Parameters and gradients, and one float64 AdamW step from zero moments."""
    def build(rng):
        T, E = shape
        params = [rng.standard_normal(E, dtype=np.float32) for _ in range(T)]
        grads = [(rng.standard_normal(E, dtype=np.float32) * np.float32(1e-2)).astype(np.float32)
                 for _ in range(T)]
        lr, (b1, b2), eps, wd = HP["lr"], HP["betas"], HP["eps"], HP["weight_decay"]
        want = []
        for p, g in zip(params, grads):
            p64, g64 = p.astype(np.float64), g.astype(np.float64)
            m, v = (1 - b1) * g64, (1 - b2) * g64 * g64
            want.append(p64 * (1 - lr * wd) - lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps))
        return SimpleNamespace(params=params, grads=grads, want=want)
    return cases(("adamw", shape), build)


def _adam_err(got, want) -> float:
    return max(rel_err(g, w) for g, w in zip(got, want))


def _adamw_group(shape):
    return grouped("AdamW step", [shape], f"tensors x elements; {shape[0] * shape[1] / 1e6:g}M float32")


ADAMW = [p for s in ADAMW_SHAPES for p in _adamw_group(s)]


@pytest.mark.parametrize("shape", ADAMW)
def test_adamw_lutcore(benchmark, record, cases, simd, shape):
    c = adamw_case(cases, shape)
    names = [f"p{i:03d}" for i in range(shape[0])]
    params = {n: p.copy() for n, p in zip(names, c.params)}
    grads = dict(zip(names, c.grads))
    opt = AdamW(params, **HP)
    opt.step(grads)                                      # also creates the moments (not timed)
    err = _adam_err([params[n] for n in names], c.want)
    assert err < ADAM_TOL, f"lutcore AdamW vs float64 step: {err:.2e}"
    record("AdamW step", shape, "lutcore", bytes=28 * shape[0] * shape[1], rel_err_vs_float64=float(f"{err:.3g}"),
           call="train.AdamW(params, lr, betas, eps, weight_decay).step(grads)",
           note="lutcore's step also reads g once more for the global grad norm (NaN guard); "
                "bytes count 28 per parameter for both")
    benchmark(opt.step, grads)


@requires_torch_nn
@pytest.mark.parametrize("shape", ADAMW)
def test_adamw_torch(benchmark, record, cases, shape):
    c = adamw_case(cases, shape)
    params = [torch.from_numpy(p.copy()).requires_grad_(True) for p in c.params]
    for p, g in zip(params, c.grads):
        p.grad = torch.from_numpy(g)
    opt = torch.optim.AdamW(params, **HP, fused=True)
    opt.step()
    err = _adam_err([p.detach().numpy() for p in params], c.want)
    assert err < ADAM_TOL, f"torch fused AdamW vs float64 step: {err:.2e}"
    record("AdamW step", shape, "torch fused", threads=torch.get_num_threads(), bytes=28 * shape[0] * shape[1],
           rel_err_vs_float64=float(f"{err:.3g}"),
           call="torch.optim.AdamW(params, lr, betas, eps, weight_decay, fused=True).step()")
    benchmark(opt.step)


# ================================================================ MambaLM training step

def train_config(shape):
    return MambaConfig(d_model=shape[2], n_layer=N_LAYER, vocab_size=VOCAB, d_state=D_STATE,
                       discretization="simplified")


def train_inputs(rng, shape):
    """The model's initial weights (lutcore's init) and one batch of next-token windows."""
    b, S, _ = shape
    cfg = train_config(shape)
    params0 = MambaLM(cfg).parameters()
    tokens = rng.integers(0, VOCAB, (b, S + 1))
    return SimpleNamespace(cfg=cfg, params0=params0, ids=np.ascontiguousarray(tokens[:, :-1]),
                           tg=np.ascontiguousarray(tokens[:, 1:]))


def lutcore_lm(c):
    return MambaLM(c.cfg, params={k: v.copy() for k, v in c.params0.items()})


def train_step_lutcore(c):
    """The Trainer's step: loss_and_grads, then AdamW with the global-norm clip fused in."""
    model = lutcore_lm(c)
    opt = AdamW(model.parameters(), **HP)

    def run():
        loss, g = model.loss_and_grads(c.ids, c.tg)
        opt.step(g, max_grad_norm=MAX_GRAD_NORM)
        return loss
    return run


def hf_lm(c):
    """transformers' MambaForCausalLM of the same config (use_mambapy) with lutcore's weights, train mode."""
    tf = need_module("transformers")
    d = c.cfg.to_hf()
    d.pop("lutcore", None)
    model = tf.MambaForCausalLM(tf.MambaConfig(**d, use_mambapy=True, use_cache=False))
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in c.params0.items()},
                                                strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    assert model.lm_head.weight.data_ptr() == model.backbone.embeddings.weight.data_ptr(), "head not tied"
    return model.train()


def hf_loss(model, ids, tg):
    logits = model(input_ids=ids, use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tg.reshape(-1))


def train_step_hf(c):
    model = hf_lm(c)
    opt = torch.optim.AdamW(model.parameters(), **HP, fused=True)
    ids, tg = torch.from_numpy(c.ids), torch.from_numpy(c.tg)

    def run():
        opt.zero_grad(set_to_none=True)
        loss = hf_loss(model, ids, tg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        opt.step()
        return loss.detach()
    return run


def _mem_train_lutcore(shape):
    return train_step_lutcore(train_inputs(np.random.default_rng(SEED), shape))


def _mem_train_hf(shape):
    return train_step_hf(train_inputs(np.random.default_rng(SEED), shape))


def train_case(cases, shape):
    """Inputs and lutcore's loss and gradients at the initial weights."""
    def build(rng):
        c = train_inputs(rng, shape)
        c.loss, c.grads = lutcore_lm(c).loss_and_grads(c.ids, c.tg)
        return c
    return cases(("train", shape), build)


def hf_train_case(cases, shape):
    """transformers' loss and gradients at the same weights (skips without torch/transformers)."""
    def build(rng):
        c = train_case(cases, shape)
        model = hf_lm(c)
        loss = hf_loss(model, torch.from_numpy(c.ids), torch.from_numpy(c.tg))
        loss.backward()
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        return SimpleNamespace(loss=float(loss.detach()), grads=grads)
    if torch is None:
        pytest.skip("torch is not importable")
    return cases(("hf_train", shape), build)


def lm_errors(c, ref) -> dict:
    assert set(ref.grads) == set(c.grads), sorted(set(ref.grads) ^ set(c.grads))
    errs = {"loss": abs(c.loss - ref.loss) / abs(ref.loss)}
    errs.update({k: rel_err(c.grads[k], ref.grads[k]) for k in ref.grads})
    return errs


def _train_axes(shape):
    return f"batch x seq x d_model; {N_LAYER} layers, d_state {D_STATE}, vocab {VOCAB}"


TRAIN = [p for s in TRAIN_SHAPES for p in grouped("MambaLM train step", [s], _train_axes(s))]
TRAIN_CALL_LC = ("loss, g = MambaLM(MambaConfig(..., discretization='simplified')).loss_and_grads(ids, targets); "
                 f"AdamW(...).step(g, max_grad_norm={MAX_GRAD_NORM})")


@pytest.mark.parametrize("shape", TRAIN)
def test_train_step_lutcore(benchmark, record, cases, simd, shape):
    c = train_case(cases, shape)
    extra = {}
    if torch is not None:
        try:
            ref = hf_train_case(cases, shape)
        except pytest.skip.Exception:
            ref = None
        if ref is not None:
            errs = lm_errors(c, ref)
            assert max(errs.values()) < LM_TOL, f"lutcore loss/gradients vs transformers: {errs}"
            extra["rel_err_vs_transformers"] = float(f"{max(errs.values()):.3g}")
    run = train_step_lutcore(c)
    l0, l1 = run(), run()
    assert np.isfinite(l0) and np.isfinite(l1) and l1 < l0, (l0, l1)   # the step trains
    mem = peak_rss(_mem_train_lutcore, shape, simd=lutcore.get_simd())
    record("MambaLM train step", shape, "lutcore", tokens=shape[0] * shape[1], **mem, **extra, call=TRAIN_CALL_LC)
    benchmark.pedantic(run, **SLOW)


@requires_torch_nn
@pytest.mark.parametrize("shape", TRAIN)
def test_train_step_transformers(benchmark, record, cases, shape):
    c = train_case(cases, shape)
    ref = hf_train_case(cases, shape)
    errs = lm_errors(c, ref)
    assert max(errs.values()) < LM_TOL, f"transformers loss/gradients vs lutcore: {errs}"
    run = train_step_hf(c)
    l0, l1 = float(run()), float(run())
    assert np.isfinite(l0) and np.isfinite(l1) and l1 < l0, (l0, l1)
    mem = peak_rss(_mem_train_hf, shape, imports=("transformers.models.mamba.modeling_mamba",))
    iu = need_module("transformers.utils.import_utils")
    impl = "transformers " + ("(mambapy scan)" if iu.is_mambapy_available() else "(sequential scan)")
    record("MambaLM train step", shape, impl, threads=torch.get_num_threads(), tokens=shape[0] * shape[1],
           rel_err_vs_lutcore=float(f"{max(errs.values()):.3g}"), **mem,
           call="MambaForCausalLM(MambaConfig(..., use_mambapy=True)).train(); cross_entropy(logits, targets)"
                f".backward(); clip_grad_norm_({MAX_GRAD_NORM}); AdamW(fused=True).step()",
           note="same config and initial weights as lutcore's model (tied head); transformers' torch "
                "fallbacks (no mamba_ssm / causal_conv1d kernels on CPU)")
    benchmark.pedantic(run, **SLOW)
