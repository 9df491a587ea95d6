"""The per-layer search on the digits example: one evaluation, switching a layer's units, and
where an evaluation's time goes.

One search evaluation = set every layer's units (an assignment) + the example's metric (the
held-out split, 359 images, through the approximate CNN).  Its peer is the same metric on the
float model (torch), on the same images in the same run; "switch" is the assignment alone
(no re-quantization: it must cost far less than one forward).  ``share_products`` in the
extra info: the part of an evaluation spent inside lutcore.lut_gemm (the products), the rest
being quantization, im2col, the float layers and Python.

    group                         lutcore                       peer
    search eval digits            set assignment + metric       torch float metric
    search switch digits          set assignment                one float forward
"""
from __future__ import annotations

import time

import pytest

from lutbench import requires_torch_nn, torch

pytestmark = requires_torch_nn

ASSIGN = {"features.0": "reduced:3", "features.2": "mitchell", "features.5": "truncated:10",
          "classifier": "exact"}


@pytest.fixture(scope="module")
def digits_case():
    import lutcore.torch as lt
    from lutcore.torch import digits
    from lutcore.units import resolve
    torch.manual_seed(0)
    xtr, ytr, xte, yte = digits.load()
    net = digits.train(digits.DigitsCNN(), xtr, ytr, epochs=3)
    model = lt.approximate(net, "exact")
    units = {n: resolve(s) for n, s in ASSIGN.items()}
    layers = dict(model.named_modules())

    def assign():
        for n, u in units.items():
            layers[n].units = u

    def evaluate(m):
        return 1.0 - digits.accuracy(m, xte, yte)
    assign()
    return net, model, assign, evaluate, xte


def _share_in_products(model, evaluate, rounds=5):
    """Seconds in lut_gemm over seconds of the whole evaluation (the smallest of ``rounds``)."""
    import lutcore.torch.functional as fn
    inner = fn.lut_gemm
    spent = [0.0]

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t
    best = None
    fn.lut_gemm = timed
    try:
        for _ in range(rounds):
            spent[0] = 0.0
            t = time.perf_counter()
            evaluate(model)
            whole = time.perf_counter() - t
            if best is None or whole < best[1]:
                best = (spent[0], whole)
    finally:
        fn.lut_gemm = inner
    return best[0] / best[1]


@pytest.mark.benchmark(group="search eval digits")
@pytest.mark.parametrize("impl", ["lutcore", "torch float"])
def test_search_eval(benchmark, record, digits_case, impl):
    net, model, assign, evaluate, xte = digits_case
    if impl == "lutcore":
        want = evaluate(model)
        got = benchmark(lambda: (assign(), evaluate(model))[1])
        assert got == want
        record("search eval", "digits 359 images", impl, share_products=round(_share_in_products(model, evaluate), 3))
    else:
        benchmark(evaluate, net)
        record("search eval", "digits 359 images", impl)


@pytest.mark.benchmark(group="search switch digits")
@pytest.mark.parametrize("impl", ["lutcore switch", "torch float forward"])
def test_search_switch(benchmark, record, digits_case, impl):
    net, model, assign, evaluate, xte = digits_case
    if impl == "lutcore switch":
        benchmark(assign)
    else:
        with torch.no_grad():
            benchmark(net, xte)
    record("search switch", "4 layers", impl)


# ----------------------------------------------------------------------------- language models

LM_SHAPE = "llama h256xL4xI688xV2048, 4 windows of 128"


@pytest.fixture(scope="module")
def lm_case(tmp_path_factory):
    """A random-init llama (transformers, save_pretrained) and 4 windows of 128 tokens; the
    search space built once (every layer exact), and one mixed assignment."""
    import numpy as np
    from lutbench import need_module
    from lutcore.search_lm import _LMSpace
    from lutcore.units import resolve
    tf = need_module("transformers")
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=4, vocab_size=2048, max_position_embeddings=512)
    model = tf.LlamaForCausalLM(cfg).eval()
    path = tmp_path_factory.mktemp("llama")
    model.save_pretrained(path)
    ids = np.random.default_rng(0).integers(0, 2048, 4 * 128 + 1)
    units = [resolve(s).with_cost(power_mw=p) for s, p in (("exact", 1.0), ("mitchell", 0.4), ("truncated:8", 0.7))]
    space = _LMSpace(str(path), ids, units, seq_len=128, tokenizer=None, threads=None, layers=None, reference=None,
                     batch_size=1)
    names = space.cand.layers
    mixed = {n: ("exact", "mitchell", "truncated:8")[i % 3] for i, n in enumerate(names)}
    return model, space, mixed, ids


@pytest.mark.benchmark(group="search eval lm")
@pytest.mark.parametrize("impl", ["lutcore", "transformers float"])
def test_search_lm_eval(benchmark, record, lm_case, impl):
    """One LM search evaluation (switch every layer + held-out loss on 512 tokens) beside the
    same loss in float by transformers."""
    model, space, mixed, ids = lm_case
    if impl == "lutcore":
        benchmark.pedantic(space.loss, args=(mixed,), rounds=3, iterations=1, warmup_rounds=1)
    else:
        x = torch.as_tensor(ids[:-1].reshape(4, 128))
        y = torch.as_tensor(ids[1:].reshape(4, 128))

        def loss():
            with torch.no_grad():
                return torch.nn.functional.cross_entropy(model(x).logits.flatten(0, 1), y.flatten())
        benchmark.pedantic(loss, rounds=3, iterations=1, warmup_rounds=1)
    record("search eval lm", LM_SHAPE, impl)


@pytest.mark.benchmark(group="search switch lm")
@pytest.mark.parametrize("impl", ["lutcore switch"])
def test_search_lm_switch(benchmark, record, lm_case, impl):
    model, space, mixed, ids = lm_case
    per = {n: space.cand.by_name[u] for n, u in mixed.items()}
    benchmark(space.m.apply, per)
    record("search switch lm", f"{len(per)} layers", impl)
