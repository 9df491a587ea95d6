"""Tests of the Mamba-1 language model (lutcore.models.MambaLM / Mamba1Block).

Expectations are independent of the implementation:

* gradients: central finite differences (4th-order stencil) of the float64
  loss, per element for every parameter tensor and along one random direction
  over all parameters at once; the same checker is shown to flag a corrupted
  gradient (so a passing check means something);
* A_log clamp: the loss is constant in A_log outside [-10, 5] (FD is 0) and
  the analytic gradient must be exactly 0 there;
* activation checkpointing and thread count must not change a single bit;
* recurrent decoding (step) must reproduce the parallel forward; generation is
  greedy-argmax / seeded-reproducible;
* Hugging Face transformers' MambaForCausalLM is the reference for logits and
  loss, and for the checkpoint format in both directions (single file,
  sharded, bfloat16);
* bad checkpoints raise clear errors; save_pretrained is atomic.

Error budgets (named below):
  FD_H, FD_ATOL, FD_RTOL   finite-difference step and |analytic - FD| <=
                           FD_ATOL + FD_RTOL * max(|analytic|, |FD|).  Measured
                           FD noise at FD_H = 1e-4 on losses ~2.5 is ~5e-12
                           absolute, so FD_ATOL = 1e-9 has a >100x margin while
                           a 1 % error in any gradient above ~1e-7 is caught.
  STEP_F32_TOL             step-by-step vs parallel forward logits, float32,
                           max |diff| relative to max(1, max |logit|).
  HF_F32_TOL               lutcore vs transformers logits (float32), max |diff|
                           relative to max(1, max |logit|) (logits ~ 4).
  HF_LOSS_RTOL             lutcore vs transformers cross-entropy (float32).
"""
import copy
import json
import os
import zlib

import dataclasses

import numpy as np
import pytest

import lutcore
from lutcore.models import Mamba1Block, MambaConfig, MambaLM
from reference.gradcheck import FD_ATOL
from reference.gradcheck import pick as _pick
from reference.gradcheck import failures as _failures
from reference.gradcheck import fmt as _fmt
from reference.gradcheck import assert_gradients, assert_checks_catch
from reference.gradcheck import check_elements as _check_elements

STEP_F32_TOL = 1e-5
HF_F32_TOL = 1e-5
HF_LOSS_RTOL = 1e-5

A_LOG_LO, A_LOG_HI = -10.0, 5.0          # DESIGN.md: A = -exp(clamp(A_log, -10, 5))


# ============================================================================ helpers

@pytest.fixture(autouse=True)
def _one_thread():
    """Run the many tiny kernels of these tests on one thread (OpenMP spin-waits make
    2-thread runs of tiny problems very slow on a busy 2-core machine).  Thread-count
    independence is tested explicitly in test_thread_count_bit_identical; conftest's
    autouse fixture restores the thread count afterwards."""
    prev = lutcore.get_num_threads()
    lutcore.set_num_threads(1)
    yield
    lutcore.set_num_threads(prev)


def _small_cfg(disc="zoh", bias=False, conv_bias=True, tied=True, **kw):
    base = dict(d_model=8, n_layer=2, vocab_size=11, d_state=4, d_conv=3, expand=2, dt_rank=2,
                bias=bias, conv_bias=conv_bias, tie_embeddings=tied, discretization=disc, seed=3)
    base.update(kw)
    return MambaConfig(**base)


def _perturb(model, rng, scale=0.1):
    """Move every parameter away from its (structured) init so gradients are generic:
    norms and D stop being exactly 1, biases stop being 0, and dt is livelier."""
    for name, p in model.parameters().items():
        if name.endswith("dt_proj.bias"):
            p[...] = rng.uniform(-2.0, 0.5, p.shape)         # softplus -> dt in ~[0.13, 0.97]
        else:
            p += (scale * rng.standard_normal(p.shape)).astype(p.dtype)
    return model


# ============================================================================ 1. gradients (float64 FD)

GRAD_CASES = [
    # discretization, in/out-proj bias, conv bias, tied head, L  (full factorial at L = 6)
    (disc, bias, cb, tied, 6)
    for disc in ("zoh", "simplified") for bias in (False, True) for cb in (False, True) for tied in (False, True)
] + [
    ("zoh", True, False, False, 70),            # longer than the scan's chunk (64): chunk carry
    ("simplified", False, True, True, 70),
]


@pytest.fixture(params=GRAD_CASES, ids=lambda c: f"{c[0]}-bias{int(c[1])}-cb{int(c[2])}-tied{int(c[3])}-L{c[4]}")
def grad_case(request):
    disc, bias, cb, tied, L = request.param
    m = MambaLM(_small_cfg(disc, bias, cb, tied), dtype=np.float64)
    rng = np.random.default_rng(zlib.crc32(repr(request.param).encode()))
    _perturb(m, rng)
    bsz = 2 if L < 64 else 1
    ids = rng.integers(0, m.config.vocab_size, (bsz, L))
    tg = rng.integers(0, m.config.vocab_size, (bsz, L))
    return m, ids, tg, rng


def test_grads_every_tensor_fd(grad_case):
    m, ids, tg, rng = grad_case
    params = m.parameters()
    cfg = m.config
    # The parameter set itself: HF names, optional tensors present iff configured.
    names = set(params)
    assert ("lm_head.weight" in names) == (not cfg.tie_embeddings)
    for i in range(cfg.n_layer):
        pre = f"backbone.layers.{i}.mixer."
        assert (pre + "conv1d.bias" in names) == cfg.conv_bias
        assert (pre + "in_proj.bias" in names) == cfg.bias
        assert (pre + "out_proj.bias" in names) == cfg.bias
        for t in ("in_proj.weight", "conv1d.weight", "x_proj.weight", "dt_proj.weight", "dt_proj.bias",
                  "A_log", "D", "out_proj.weight"):
            assert pre + t in names

    loss, grads = m.loss_and_grads(ids, tg)
    assert set(grads) == names
    assert np.isfinite(loss) and 1.0 < loss < 5.0
    for n, g in grads.items():
        assert g.shape == params[n].shape and g.dtype == np.float64, n
        assert np.all(np.isfinite(g)), n
        assert np.any(g != 0), f"{n}: all-zero gradient, the check would be vacuous"
    assert m.loss(ids, tg) == loss

    loss_fn = lambda: m.loss(ids, tg)             # noqa: E731
    assert_gradients(params, grads, loss_fn, _pick(params, rng, 3), rng)


def test_grads_accumulate(grad_case):
    m, ids, tg, _ = grad_case
    l1, g1 = m.loss_and_grads(ids, tg)
    acc = {k: v.copy() for k, v in g1.items()}
    l2, acc2 = m.loss_and_grads(ids, tg, grads=acc)
    assert l2 == l1
    assert acc2 is acc
    for k in g1:
        np.testing.assert_allclose(acc[k], 2 * g1[k], rtol=1e-12, atol=1e-300, err_msg=k)


@pytest.mark.parametrize("disc", ["zoh", "simplified"])
def test_block_input_and_param_grads_fd(disc):
    rng = np.random.default_rng(11 if disc == "zoh" else 12)
    m = MambaLM(_small_cfg(disc, bias=True, conv_bias=True, tied=False, n_layer=1), dtype=np.float64)
    _perturb(m, rng)
    blk = m.blocks[0]
    assert isinstance(blk, Mamba1Block)
    x = rng.standard_normal((2, 7, m.config.d_model))
    dy = rng.standard_normal(x.shape)
    y, cache = blk.forward(x)
    assert y.shape == x.shape
    grads = m.zero_grads()
    dx = blk.backward(dy, cache, grads)
    assert dx.shape == x.shape

    def fx():
        return float(np.sum(blk.forward(x, save=False)[0] * dy))

    # every element of the block input
    recs = _check_elements({"x": x}, {"x": dx}, fx, {"x": np.arange(x.size)})
    bad = _failures(recs)
    assert not bad, "dx mismatch:\n" + _fmt(bad)
    # the block's own parameters, with the same objective sum(y * dy)
    bparams = {k: v for k, v in m.parameters().items() if k.startswith("backbone.layers.0.")}
    for k in bparams:
        assert np.any(grads[k] != 0), k
    recs = _check_elements(bparams, grads, fx, _pick(bparams, rng, 3))
    bad = _failures(recs)
    assert not bad, "block param gradient mismatch:\n" + _fmt(bad)
    # parameters outside the block are untouched by block.backward
    for k, g in grads.items():
        if k not in bparams:
            assert not np.any(g), k


# ============================================================================ 2. the checker catches wrong gradients

def test_checker_detects_corrupted_gradient():
    rng = np.random.default_rng(21)
    m = MambaLM(_small_cfg("zoh", bias=True, conv_bias=True, tied=False), dtype=np.float64)
    _perturb(m, rng)
    ids = rng.integers(0, 11, (2, 6))
    tg = rng.integers(0, 11, (2, 6))
    _, grads = m.loss_and_grads(ids, tg)
    params = m.parameters()
    loss_fn = lambda: m.loss(ids, tg)             # noqa: E731
    picks = _pick(params, np.random.default_rng(0), 3)

    assert_checks_catch(params, grads, loss_fn, picks, scaled="backbone.layers.1.mixer.x_proj.weight",
                        offset="backbone.layers.0.mixer.A_log")


# ============================================================================ 3. A_log clamp

def test_A_log_clamp_zero_gradient():
    rng = np.random.default_rng(31)
    m = MambaLM(_small_cfg("zoh", bias=False, conv_bias=True, tied=True), dtype=np.float64)
    _perturb(m, rng)
    al = m.parameters()["backbone.layers.0.mixer.A_log"]
    outside = [(0, 0, -12.0), (1, 2, -10.5), (3, 1, 5.5), (5, 3, 7.0)]
    for e, n, v in outside:
        al[e, n] = v
    al[2, 0] = -9.5                                  # inside, near the clamp: ordinary gradient
    ids = rng.integers(0, 11, (2, 6))
    tg = rng.integers(0, 11, (2, 6))
    _, grads = m.loss_and_grads(ids, tg)
    g = grads["backbone.layers.0.mixer.A_log"]
    loss_fn = lambda: m.loss(ids, tg)             # noqa: E731
    flat = {"backbone.layers.0.mixer.A_log": np.array([np.ravel_multi_index((e, n), al.shape)
                                                        for e, n, _ in outside])}
    recs = _check_elements(m.parameters(), grads, loss_fn, flat)
    for (e, n, v), r in zip(outside, recs):
        assert g[e, n] == 0.0, (e, n, v, g[e, n])
        assert abs(r[3]) <= FD_ATOL, (e, n, v, r[3])  # the loss does not move there
    # other entries keep a non-zero gradient (the zero above is not a global zero)
    mask = np.ones(al.shape, bool)
    for e, n, _ in outside:
        mask[e, n] = False
    assert np.count_nonzero(g[mask]) == mask.sum()
    rec = _check_elements(m.parameters(), grads, loss_fn,
                          {"backbone.layers.0.mixer.A_log": np.array([np.ravel_multi_index((2, 0), al.shape)])})
    assert not _failures(rec), _fmt(rec)


# ============================================================================ 4-5. bit-identity: checkpointing, threads

def _f32_model(seed=41, d_model=96, tied=True, bias=True):
    cfg = MambaConfig(d_model=d_model, n_layer=2, vocab_size=37, d_state=8, d_conv=4, expand=2,
                      bias=bias, conv_bias=True, tie_embeddings=tied, discretization="zoh", seed=seed)
    m = MambaLM(cfg, dtype=np.float32)
    return _perturb(m, np.random.default_rng(seed), scale=0.05)


@pytest.mark.parametrize("threads", [1, 2])
def test_embedding_gradient_is_np_add_at_bit_for_bit(threads):
    """The models' embedding gradient (a native scatter-add for float32) accumulates the rows
    in token order, exactly np.add.at's float32 additions, repeated ids included."""
    from lutcore.models import _layers as nn
    rng = np.random.default_rng(3)
    for V, C, n in ((5, 7, 33), (256, 130, 1000), (1, 1, 1)):
        ids = rng.integers(0, V, (n,))
        dy = rng.standard_normal((n, C)).astype(np.float32) * np.float32(10.0) ** rng.integers(-4, 4, (n, 1))
        base = rng.standard_normal((V, C)).astype(np.float32)
        want = base.copy()
        np.add.at(want, ids, dy)
        got = base.copy()
        lutcore.set_num_threads(threads)
        nn.embedding_bwd(got, ids.reshape(1, -1), dy.reshape(1, n, C))
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="ids"):
        nn.embedding_bwd(np.zeros((3, 2), np.float32), np.array([0, 3]), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("R, C", [(1, 1), (7, 33), (130, 64)])
def test_float32_rmsnorm_rows_match_float64_and_keep_their_bits(R, C):
    """RMSNorm in float32 runs natively (csrc/norm/norm.h): forward, dx and the accumulated dw
    close to the float64 formula, and the same bits at 1 and 2 threads."""
    from lutcore.models import _layers as nn
    rng = np.random.default_rng(R * 100 + C)
    x, dy = (rng.standard_normal((R, C)) * 3 for _ in range(2))
    w = rng.standard_normal(C)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    r = 1 / np.sqrt(ms + 1e-5)
    y64 = x * r * w
    g = dy * w
    dx64 = r * g - x * r ** 3 * np.sum(g * x, axis=-1, keepdims=True) / C
    dw64 = 0.5 + (dy * x * r).sum(axis=0)
    outs = []
    for threads in (1, 2):
        lutcore.set_num_threads(threads)
        f = lambda a: a.astype(np.float32)          # noqa: E731
        y, rstd = nn.rmsnorm_fwd(f(x).reshape(1, R, C), f(w), 1e-5)
        dw = np.full(C, 0.5, np.float32)
        dx = nn.rmsnorm_bwd(f(dy).reshape(1, R, C), f(x).reshape(1, R, C), f(w), rstd, dw)
        outs.append((y, rstd, dx, dw))
    for a, b in zip(*outs):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), "bits depend on the thread count"
    y, rstd, dx, dw = outs[0]
    assert y.shape == (1, R, C) and rstd.shape == (1, R, 1) and dx.shape == (1, R, C)
    np.testing.assert_allclose(y[0], y64, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(dx[0], dx64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, dw64, rtol=1e-4, atol=1e-4 * max(1, R ** 0.5))


def test_checkpoint_activations_bit_identical():
    m = _f32_model(tied=False)
    mc = MambaLM(m.config, dtype=np.float32, params={k: v.copy() for k, v in m.parameters().items()},
                 checkpoint_activations=True)
    rng = np.random.default_rng(42)
    ids = rng.integers(0, 37, (2, 70))
    tg = rng.integers(0, 37, (2, 70))
    l0, g0 = m.loss_and_grads(ids, tg)
    l1, g1 = mc.loss_and_grads(ids, tg)
    assert l0 == l1
    assert set(g0) == set(g1)
    for k in g0:
        assert g1[k].dtype == np.float32
        assert np.array_equal(g0[k], g1[k]), k
    assert np.array_equal(m.forward(ids), mc.forward(ids))


def test_thread_count_bit_identical():
    m = _f32_model(tied=True)
    rng = np.random.default_rng(43)
    ids = rng.integers(0, 37, (3, 75))
    tg = rng.integers(0, 37, (3, 75))
    prev = lutcore.get_num_threads()
    try:
        res = {}
        for n in (1, 2):
            lutcore.set_num_threads(n)
            assert lutcore.get_num_threads() in (1, n)
            res[n] = m.loss_and_grads(ids, tg), m.forward(ids)
    finally:
        lutcore.set_num_threads(prev)
    assert lutcore.get_num_threads() == prev
    (l1, g1), f1 = res[1]
    (l2, g2), f2 = res[2]
    assert l1 == l2
    assert np.array_equal(f1, f2)
    for k in g1:
        assert np.array_equal(g1[k], g2[k]), k


# ============================================================================ 6. recurrent decoding

@pytest.fixture(scope="module")
def dec_model():
    cfg = MambaConfig(d_model=32, n_layer=2, vocab_size=41, d_state=8, d_conv=4, expand=2,
                      bias=True, conv_bias=True, tie_embeddings=False, discretization="zoh", seed=5)
    return _perturb(MambaLM(cfg, dtype=np.float32), np.random.default_rng(61), scale=0.1)


def _scale(a):
    return max(1.0, float(np.max(np.abs(a))))


def test_step_matches_forward(dec_model):
    m = dec_model
    rng = np.random.default_rng(62)
    ids = rng.integers(0, 41, (2, 80))                  # > one scan chunk
    full = m.forward(ids)
    state = None
    steps = []
    for t in range(ids.shape[1]):
        lg, state = m.step(ids[:, t], state)
        assert lg.shape == (2, 41)
        steps.append(lg)
    steps = np.stack(steps, axis=1)
    diff = float(np.max(np.abs(steps - full)))
    print(f"\nstep vs forward: max |diff| = {diff:.3e} (logit scale {_scale(full):.2f})")
    assert diff <= STEP_F32_TOL * _scale(full)

    # a 1-D sequence / scalar tokens, and step must not mutate the state it was given
    lg0, st0 = m.step(int(ids[0, 0]))
    snapshot = [(c.copy(), h.copy()) for c, h in st0]
    a, _ = m.step(int(ids[0, 1]), st0)
    b, _ = m.step(int(ids[0, 1]), st0)
    assert np.array_equal(a, b)
    for (c, h), (c0, h0) in zip(st0, snapshot):
        assert np.array_equal(c, c0) and np.array_equal(h, h0)
    assert np.max(np.abs(lg0[0] - full[0, 0])) <= STEP_F32_TOL * _scale(full)
    assert np.max(np.abs(a[0] - full[0, 1])) <= STEP_F32_TOL * _scale(full)


def test_generate_greedy_is_argmax_stepping(dec_model):
    m = dec_model
    prompt = np.array([3, 17, 5, 40, 0, 9], dtype=np.int64)
    out = m.generate(prompt, 12)
    assert out.ndim == 1 and out.shape == (len(prompt) + 12,)
    assert np.array_equal(out[:len(prompt)], prompt)
    assert np.array_equal(m.generate(prompt, 12), out)          # deterministic
    assert np.array_equal(m.generate(prompt, 12, temperature=0.0, top_k=3, seed=99), out)

    state = None
    for t in prompt:
        lg, state = m.step(np.array([t]), state)
    want = list(prompt)
    for _ in range(12):
        nxt = int(np.argmax(lg[0]))
        want.append(nxt)
        lg, state = m.step(np.array([nxt]), state)
    assert out.tolist() == want

    # greedy over the parallel forward of the growing sequence agrees too (no near-ties expected)
    seq = list(prompt)
    for _ in range(4):
        seq.append(int(np.argmax(m.forward(np.array(seq))[0, -1])))
    assert seq == want[:len(prompt) + 4]

    # batch prompt -> 2-D output
    out2 = m.generate(np.stack([prompt, prompt[::-1]]), 3)
    assert out2.shape == (2, len(prompt) + 3)
    assert np.array_equal(out2[0], out[:len(prompt) + 3])

    assert np.array_equal(m.generate(prompt, 0), prompt)


def test_generate_sampling_reproducible(dec_model):
    m = dec_model
    prompt = [1, 2, 3]
    for kw in (dict(temperature=1.5), dict(temperature=0.8, top_k=5), dict(temperature=1.0, top_p=0.9)):
        a = m.generate(prompt, 20, seed=7, **kw)
        b = m.generate(prompt, 20, seed=7, **kw)
        assert np.array_equal(a, b), kw
        assert a.shape == (23,) and a.min() >= 0 and a.max() < 41
        assert a[:3].tolist() == prompt
    # with a flat-ish distribution different seeds give different continuations
    outs = {tuple(m.generate(prompt, 20, temperature=5.0, seed=s)) for s in range(4)}
    assert len(outs) > 1


def test_generate_prompt_validation(dec_model):
    m = dec_model
    with pytest.raises(ValueError):
        m.generate(np.array([], dtype=np.int64), 3)
    with pytest.raises(ValueError):
        m.generate(np.zeros((1, 0), dtype=np.int64), 3)
    with pytest.raises(ValueError):
        m.generate([1, 41], 3)                        # == vocab_size
    with pytest.raises(ValueError):
        m.generate([-1, 2], 3)
    with pytest.raises(ValueError):
        m.step(41)
    with pytest.raises(ValueError):
        m.forward([[0, 1, 99]])
    with pytest.raises(TypeError):
        m.generate(np.array([1.0, 2.0]), 3)


# ============================================================================ 7. conformance with transformers

def _hf():
    import torch
    import transformers as tf
    return torch, tf


def _hf_model(use_bias, use_conv_bias, tie=True, seed=0):
    torch, tf = _hf()
    cfg = tf.MambaConfig(vocab_size=50, hidden_size=32, state_size=8, num_hidden_layers=2, conv_kernel=4,
                         expand=2, time_step_rank=4, use_bias=use_bias, use_conv_bias=use_conv_bias,
                         tie_word_embeddings=tie)
    torch.manual_seed(seed)
    hm = tf.MambaForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():                      # generic weights: livelier dt, D/norms/biases off 1/0
        for name, p in hm.named_parameters():
            if name.endswith("dt_proj.bias"):
                p.copy_(torch.rand(p.shape, generator=gen) * 3.5 - 3.0)
            else:
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return hm


def _hf_logits(hm, ids):
    torch, _ = _hf()
    with torch.no_grad():
        return hm(torch.from_numpy(ids)).logits.float().numpy()


def _compare_logits(tag, got, want, tol=HF_F32_TOL):
    assert got.shape == want.shape, (tag, got.shape, want.shape)
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"\n{tag}: max |diff| = {diff:.3e} (logit scale {_scale(want):.2f})")
    assert diff <= tol * _scale(want), (tag, diff)


def _state_np(hm):
    return {k: v.detach().float().numpy() for k, v in hm.state_dict().items()}


def _ids(seed, shape=(2, 19), vocab=50):
    return np.random.default_rng(seed).integers(0, vocab, shape).astype(np.int64)


@pytest.mark.parametrize("use_bias,use_conv_bias,tie", [(False, True, True), (True, False, True),
                                                        (True, True, False), (False, False, False)])
def test_hf_logits_and_loss(tmp_path, use_bias, use_conv_bias, tie):
    torch, _ = _hf()
    hm = _hf_model(use_bias, use_conv_bias, tie, seed=int(use_bias) * 2 + int(use_conv_bias))
    hm.save_pretrained(tmp_path / "hf")
    m = MambaLM.from_pretrained(tmp_path / "hf")
    cfg = m.config
    assert (cfg.d_model, cfg.n_layer, cfg.vocab_size, cfg.d_state, cfg.d_conv, cfg.expand, cfg.rank) == \
        (32, 2, 50, 8, 4, 2, 4)
    assert cfg.bias == use_bias and cfg.conv_bias == use_conv_bias and cfg.tie_embeddings == tie
    assert cfg.discretization == "simplified"
    sd = _state_np(hm)
    for k, v in m.parameters().items():
        assert v.dtype == np.float32
        assert np.array_equal(v, sd[k]), k
    ids = _ids(7)
    want = _hf_logits(hm, ids)
    _compare_logits(f"from_pretrained bias={use_bias} conv_bias={use_conv_bias} tie={tie}", m.forward(ids), want)

    # loss: lutcore predicts targets = ids shifted by one from ids[:, :-1]
    got = m.loss(ids[:, :-1], ids[:, 1:])
    manual = float(torch.nn.functional.cross_entropy(torch.from_numpy(want[:, :-1].reshape(-1, 50)),
                                                     torch.from_numpy(ids[:, 1:].reshape(-1))))
    with torch.no_grad():
        hf_loss = float(hm(torch.from_numpy(ids), labels=torch.from_numpy(ids)).loss)
    print(f"loss lutcore {got:.7f} manual {manual:.7f} hf(labels) {hf_loss:.7f}")
    assert abs(manual - hf_loss) <= HF_LOSS_RTOL * abs(hf_loss)
    assert abs(got - manual) <= HF_LOSS_RTOL * abs(manual)

    # and lutcore's save_pretrained output opens in transformers with the same weights and logits
    m.save_pretrained(tmp_path / "lc")
    hm2, info = type(hm).from_pretrained(tmp_path / "lc", output_loading_info=True)
    hm2.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    sd2 = _state_np(hm2)
    for k, v in m.parameters().items():
        assert np.array_equal(sd2[k], v), k
    _compare_logits("lutcore save -> transformers", _hf_logits(hm2, ids), m.forward(ids))


def test_native_model_saved_opens_in_transformers(tmp_path):
    """A model created by lutcore (simplified discretization, untied, biases) -> HF."""
    _, tf = _hf()
    cfg = MambaConfig(d_model=32, n_layer=2, vocab_size=50, d_state=8, d_conv=4, expand=2, dt_rank=4,
                      bias=True, conv_bias=True, tie_embeddings=False, discretization="simplified", seed=9)
    m = _perturb(MambaLM(cfg), np.random.default_rng(71), scale=0.05)
    m.save_pretrained(tmp_path / "c")
    hm, info = tf.MambaForCausalLM.from_pretrained(tmp_path / "c", output_loading_info=True)
    hm.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert hm.config.tie_word_embeddings is False
    ids = _ids(8)
    _compare_logits("native lutcore -> transformers", _hf_logits(hm, ids), m.forward(ids))
    # round trip in lutcore keeps config (incl. discretization) and bits
    m2 = MambaLM.from_pretrained(tmp_path / "c")
    assert m2.config.to_dict() == m.config.to_dict()
    for k, v in m.parameters().items():
        assert np.array_equal(m2.parameters()[k], v), k


def test_zoh_model_save_warns_transformers_differs(tmp_path):
    """The default zoh discretization has no transformers equivalent: saving warns with the reason,
    transformers indeed computes other logits, lutcore restores zoh; the same weights as a
    'simplified' model are what transformers computes (and save without a warning)."""
    import warnings
    _, tf = _hf()
    cfg = MambaConfig(d_model=32, n_layer=2, vocab_size=50, d_state=8, d_conv=4, expand=2, dt_rank=4, seed=5)
    assert cfg.discretization == "zoh"
    m = _perturb(MambaLM(cfg), np.random.default_rng(72), scale=0.05)
    assert "discretization='zoh'" in m.transformers_mismatch()
    with pytest.warns(UserWarning, match=r"transformers.*different model.*zoh"):
        m.save_pretrained(tmp_path / "z")
    hm = tf.MambaForCausalLM.from_pretrained(tmp_path / "z").eval()
    ids = _ids(9)
    hf, lc = _hf_logits(hm, ids), m.forward(ids)
    diff = float(np.max(np.abs(hf.astype(np.float64) - lc)))
    print(f"zoh model: transformers vs lutcore max |diff| {diff:.3e} (tolerance {HF_F32_TOL * _scale(lc):.3e})")
    assert diff > 10 * HF_F32_TOL * _scale(lc)                # the warning is not a false alarm
    m2 = MambaLM.from_pretrained(tmp_path / "z")
    assert m2.config.discretization == "zoh" and np.array_equal(m2.forward(ids), lc)
    simp = MambaLM(dataclasses.replace(cfg, discretization="simplified"), params=m.parameters())
    assert simp.transformers_mismatch() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simp.save_pretrained(tmp_path / "s")
    _compare_logits("simplified -> transformers", _hf_logits(tf.MambaForCausalLM.from_pretrained(tmp_path / "s")
                                                            .eval(), ids), simp.forward(ids))


def test_a_log_outside_clamp_is_a_transformers_mismatch():
    cfg = MambaConfig(d_model=16, n_layer=1, vocab_size=20, d_state=4, discretization="simplified")
    m = MambaLM(cfg)
    m.parameters()["backbone.layers.0.mixer.A_log"][0, 0] = 6.0
    assert "A_log" in m.transformers_mismatch()


def test_native_zoh_roundtrip_keeps_discretization(tmp_path):
    m = _perturb(MambaLM(_small_cfg("zoh", bias=True)), np.random.default_rng(72))
    m.save_pretrained(tmp_path / "z")
    m2 = MambaLM.from_pretrained(tmp_path / "z")
    assert m2.config.discretization == "zoh"
    ids = _ids(9, (1, 9), 11)
    assert np.array_equal(m2.forward(ids), m.forward(ids))
    m3 = MambaLM.from_pretrained(tmp_path / "z", dtype=np.float64)
    assert m3.parameters()["backbone.norm_f.weight"].dtype == np.float64


def test_hf_sharded_checkpoint(tmp_path):
    hm = _hf_model(True, True, tie=True, seed=4)
    d = tmp_path / "sharded"
    hm.save_pretrained(d, max_shard_size="20KB")
    files = os.listdir(d)
    assert "model.safetensors.index.json" in files and "model.safetensors" not in files
    shards = [f for f in files if f.startswith("model-") and f.endswith(".safetensors")]
    assert len(shards) >= 2, files
    m = MambaLM.from_pretrained(d)
    sd = _state_np(hm)
    for k, v in m.parameters().items():
        assert np.array_equal(v, sd[k]), k
    ids = _ids(10)
    _compare_logits("sharded", m.forward(ids), _hf_logits(hm, ids))


def test_hf_bf16_checkpoint(tmp_path):
    torch, _ = _hf()
    hm = _hf_model(False, True, tie=True, seed=5)
    hb = copy.deepcopy(hm).to(torch.bfloat16)
    hb.save_pretrained(tmp_path / "bf16")
    with open(tmp_path / "bf16" / "model.safetensors", "rb") as fh:   # really stored as BF16
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}
    m = MambaLM.from_pretrained(tmp_path / "bf16")
    ref = copy.deepcopy(hb).to(torch.float32).eval()          # the bf16-rounded weights, in float32
    sd = _state_np(ref)
    for k, v in m.parameters().items():
        assert v.dtype == np.float32
        assert np.array_equal(v, sd[k]), k                    # widening bf16 -> f32 is exact
    assert any(not np.array_equal(sd[k], w) for k, w in _state_np(hm).items())   # rounding did happen
    ids = _ids(11)
    _compare_logits("bf16 checkpoint", m.forward(ids), _hf_logits(ref, ids))


# ============================================================================ 8. bad checkpoints

@pytest.fixture
def saved(tmp_path):
    m = MambaLM(_small_cfg("simplified", bias=True, conv_bias=True, tied=True))
    d = tmp_path / "ck"
    m.save_pretrained(d)
    return m, d


def _rewrite(d, fn):
    from safetensors.numpy import load_file, save_file
    f = os.path.join(d, "model.safetensors")
    t = load_file(f)
    fn(t)
    save_file(t, f)


def test_bad_checkpoint_missing_tensor(saved):
    _, d = saved
    name = "backbone.layers.1.mixer.dt_proj.bias"
    _rewrite(d, lambda t: t.pop(name))
    with pytest.raises(ValueError, match="missing") as ei:
        MambaLM.from_pretrained(d)
    assert name in str(ei.value)


def test_bad_checkpoint_unknown_tensor(saved):
    _, d = saved
    name = "backbone.layers.0.mixer.bogus.weight"
    _rewrite(d, lambda t: t.__setitem__(name, np.zeros(3, np.float32)))
    with pytest.raises(ValueError) as ei:
        MambaLM.from_pretrained(d)
    assert name in str(ei.value)


def test_bad_checkpoint_misshaped_tensor(saved):
    _, d = saved
    name = "backbone.layers.0.mixer.A_log"
    _rewrite(d, lambda t: t.__setitem__(name, np.ascontiguousarray(t[name].T)))
    with pytest.raises(ValueError) as ei:
        MambaLM.from_pretrained(d)
    assert name in str(ei.value)


def test_bad_checkpoint_several_problems_all_named(saved):
    _, d = saved
    a, b, c = ("backbone.norm_f.weight", "backbone.extra", "backbone.layers.1.mixer.D")

    def fn(t):
        t.pop(a)
        t[b] = np.ones(2, np.float32)
        t[c] = np.ones(3, np.float32)
    _rewrite(d, fn)
    with pytest.raises(ValueError) as ei:
        MambaLM.from_pretrained(d)
    for n in (a, b, c):
        assert n in str(ei.value)


def test_bad_checkpoint_tied_head_differs(saved):
    m, d = saved
    _rewrite(d, lambda t: t.__setitem__("lm_head.weight", t["backbone.embeddings.weight"] + 1))
    with pytest.raises(ValueError, match="lm_head.weight"):
        MambaLM.from_pretrained(d)


def test_bad_checkpoint_wrong_architecture(saved):
    _, d = saved
    with open(d / "config.json") as f:
        cfg = json.load(f)
    cfg["model_type"] = "llama"
    cfg["architectures"] = ["LlamaForCausalLM"]
    with open(d / "config.json", "w") as f:
        json.dump(cfg, f)
    with pytest.raises(ValueError, match="unsupported architecture"):
        MambaLM.from_pretrained(d)


def test_bad_checkpoint_no_config(saved, tmp_path):
    _, d = saved
    os.remove(d / "config.json")
    with pytest.raises(FileNotFoundError):
        MambaLM.from_pretrained(d)
    with pytest.raises(FileNotFoundError):
        MambaLM.from_pretrained(tmp_path / "does-not-exist")


def test_bad_checkpoint_no_weights(saved):
    _, d = saved
    os.remove(d / "model.safetensors")
    with pytest.raises(FileNotFoundError):
        MambaLM.from_pretrained(d)


# ============================================================================ 9. atomic save

def _files(d):
    return {f: (d / f).read_bytes() for f in sorted(os.listdir(d))}


def test_save_replaces_its_files_and_keeps_the_users(tmp_path):
    d = tmp_path / "ck"
    m1 = MambaLM(_small_cfg(seed=1))
    m1.save_pretrained(d)
    (d / "marker.txt").write_text("old")
    (d / "notes").mkdir()
    m2 = _perturb(MambaLM(_small_cfg(seed=2)), np.random.default_rng(91))
    m2.save_pretrained(d)
    assert sorted(os.listdir(d)) == ["config.json", "marker.txt", "model.safetensors", "notes"]
    assert (d / "marker.txt").read_text() == "old"
    back = MambaLM.from_pretrained(d)
    for k, v in m2.parameters().items():
        assert np.array_equal(back.parameters()[k], v), k
    assert sorted(os.listdir(tmp_path)) == ["ck"]              # no temporary leftovers
    # an earlier sharded save's index and shards go (the index would win over the new file)
    for name in ("model.safetensors.index.json", "model-00001-of-00002.safetensors"):
        (d / name).write_text("{}")
    m1.save_pretrained(d)
    assert sorted(os.listdir(d)) == ["config.json", "marker.txt", "model.safetensors", "notes"]
    back = MambaLM.from_pretrained(d)
    for k, v in m1.parameters().items():
        assert np.array_equal(back.parameters()[k], v), k
    # the directory itself is never replaced: a symlink, its mode and the working directory stay
    real = tmp_path / "run-001"
    m1.save_pretrained(real)
    os.chmod(real, 0o700)
    link = tmp_path / "latest"
    link.symlink_to(real)
    m2.save_pretrained(link)
    assert link.is_symlink() and (real.stat().st_mode & 0o777) == 0o700
    back = MambaLM.from_pretrained(real)
    for k, v in m2.parameters().items():
        assert np.array_equal(back.parameters()[k], v), k
    umask = os.umask(0)
    os.umask(umask)
    assert ((real / "model.safetensors").stat().st_mode & 0o777) == 0o666 & ~umask      # not 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "latest", "run-001"]    # no leftovers
    # a directory where a save's file should go refuses the save before anything changes
    d3 = tmp_path / "ck3"
    m1.save_pretrained(d3)
    before = _files(d3)
    (d3 / "model.safetensors").unlink()
    (d3 / "model.safetensors").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        m2.save_pretrained(d3)
    assert (d3 / "config.json").read_bytes() == before["config.json"]


def test_save_refuses_a_file_and_an_unresolvable_path(tmp_path, monkeypatch):
    m = MambaLM(_small_cfg(seed=1))
    f = tmp_path / "file.txt"
    f.write_text("mine")
    with pytest.raises(ValueError, match="not a directory"):
        m.save_pretrained(f)
    assert f.read_text() == "mine"
    (tmp_path / "keep.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="path"):
        m.save_pretrained("missing/..")                        # would have named the working directory
    assert sorted(os.listdir(tmp_path)) == ["file.txt", "keep.txt"]
    m.save_pretrained(".")                                     # the working directory: files go in beside
    assert sorted(os.listdir(tmp_path)) == ["config.json", "file.txt", "keep.txt", "model.safetensors"]
    assert os.getcwd() == str(tmp_path) and MambaLM.from_pretrained(".").config == m.config
    with pytest.raises(ValueError, match="under"):
        m.save_pretrained(f / "ck")                            # a file on the way
    with pytest.raises(TypeError, match="path"):
        m.save_pretrained(None)
    with pytest.raises(TypeError, match="path"):
        MambaLM.from_pretrained(None)


def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    import safetensors.numpy
    d = tmp_path / "ck"
    m1 = _perturb(MambaLM(_small_cfg(seed=1)), np.random.default_rng(92))
    m1.save_pretrained(d)
    (d / "marker.txt").write_text("keep me")
    before = _files(d)

    def boom(*a, **k):
        raise RuntimeError("disk full (simulated)")
    monkeypatch.setattr(safetensors.numpy, "save_file", boom)
    m2 = MambaLM(_small_cfg(seed=2))
    with pytest.raises(RuntimeError, match="simulated"):
        m2.save_pretrained(d)
    monkeypatch.undo()

    assert _files(d) == before
    assert sorted(os.listdir(tmp_path)) == ["ck"]              # the temporary directory was cleaned up
    back = MambaLM.from_pretrained(d)
    for k, v in m1.parameters().items():
        assert np.array_equal(back.parameters()[k], v), k

    # a failed save into a fresh path leaves nothing behind either
    monkeypatch.setattr(safetensors.numpy, "save_file", boom)
    with pytest.raises(RuntimeError):
        m2.save_pretrained(tmp_path / "new")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["ck"]
