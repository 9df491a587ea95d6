"""Attention's own products through the units: prefill and decode of a llama pipeline stage with
q k^T and p v through the exact units beside float attention, the linear layers through the
exact units in both.

Model: hidden 256, 4 layers, 4 heads / 2 KV heads (head_dim 64), SwiGLU 688, vocab 2048, untied
head; random weights from ``LlamaForCausalLM`` (bench/test_bench_pipeline.py's generic init)
saved with ``save_pretrained`` (dims /8 under LUTCORE_BENCH_SMALL=1, and a context of 64).

    group                                     lutcore (1 stage, exact units in the linears)
    attention prefill <D> tokens              float attention; attention through the exact units
    attention decode 16 tokens after <D>      the same two, greedy, KV cache (float attention: the
                                              fused native decode layer; units: layer by layer)

``tokens`` is recorded, so the report shows tokens/s.  A decode round starts from a fresh,
untimed prefill.  Validation before anything is timed: the units-attention prefill logits
against the float-attention ones (ATTN_TOL, norm-wise), and a decoded token's logits through
the units' attention against the full recompute of the prompt plus that token, bit for bit (the
cache keeps float keys and values; each call quantizes them per position: docs/DESIGN.md,
"Attention through the units").  The depth 2048, the share of time in the products, llama.cpp
at the same depth and the runs beside a spinning process: bench/ab_attention.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from lutbench import SMALL, THREADS, dim, need_module, rel_err, torch

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, VOCAB = dim(256), 4, 4, 2, dim(688), dim(2048)
DEPTH = 64 if SMALL else 512
DECODE = 16
SHAPE = f"h{HIDDEN}xL{LAYERS}xH{HEADS}/{KV_HEADS}xI{INTER}xV{VOCAB}"
ATTN_TOL = 0.05        # 8-bit block-scaled scores and values vs float attention, logits norm-wise (measured ~0.01)
FLOAT_ATTN = {"*": "exact"}                                      # the weights; attention in float
UNITS_ATTN = {"*": "exact", "*.qk": "exact", "*.pv": "exact"}     # and attention's products
IMPLS = {"float-attention": FLOAT_ATTN, "units-attention": UNITS_ATTN}
# the report's "lutcore" row is the case under test; float attention is its reference (ratio: float
# attention's time / units attention's, < 1 where the units' attention is slower)
IMPL_NAMES = {"float-attention": "lutcore float attention", "units-attention": "lutcore"}
PREFILL_ROUNDS = dict(rounds=5, iterations=1, warmup_rounds=1)
DECODE_ROUNDS = dict(rounds=3, iterations=1, warmup_rounds=1)


def make_model(path, max_positions: int = 4096):
    """The benchmark's random-init LlamaForCausalLM (the shape above), saved into path; returns it
    (bench/ab_attention.py builds its checkpoint here too)."""
    import transformers as tf
    cfg = tf.LlamaConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, intermediate_size=INTER, vocab_size=VOCAB,
                         max_position_embeddings=max_positions, tie_word_embeddings=False)
    torch.manual_seed(0)
    hm = tf.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():                       # generic weights (HF's init is 0.02-normal, norms 1)
        gen = torch.Generator().manual_seed(1)
        for p in hm.parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if p.ndim == 1 else r / np.sqrt(p.shape[1]))
    hm.save_pretrained(path)
    return hm


def prompt_ids(n: int = DEPTH) -> np.ndarray:
    return np.random.default_rng(7).integers(0, VOCAB, n).astype(np.int64)


def prefill(ring, ids):
    ring.reset()
    return ring.forward(ids, 0, True, True)


def decode(ring, first_logits, start, n):
    """n greedy tokens, one pass each, from the prefill's logits; returns the tokens."""
    toks, logits = [], first_logits
    for i in range(n):
        toks.append(int(np.argmax(logits[-1])))
        logits = ring.forward(np.array([toks[-1]], np.int64), start + i, True, True)
    return toks


@pytest.fixture(scope="module")
def pipes(tmp_path_factory):
    """{impl: Pipeline} on one checkpoint (built once)."""
    need_module("transformers")
    if torch is None:
        pytest.skip("torch is not importable")
    from lutcore.pipeline import Pipeline
    path = tmp_path_factory.mktemp("llama_attention")
    make_model(path, max(4096, DEPTH + DECODE + 8))
    made = {name: Pipeline.from_pretrained(str(path), units=u, threads=THREADS) for name, u in IMPLS.items()}
    yield made
    for p in made.values():
        p.close()


@pytest.fixture(scope="module")
def validated(pipes):
    """Checks run once before any timing: -> {impl: extra_info fields}."""
    ids = prompt_ids()
    ref = prefill(pipes["float-attention"]._ring, ids)
    ring = pipes["units-attention"]._ring
    got = prefill(ring, ids)
    err = rel_err(got, ref)
    assert err <= ATTN_TOL, f"units attention vs float attention logits: {err:.3g}"
    tok = int(np.argmax(got[-1]))
    step = ring.forward(np.array([tok], np.int64), len(ids), True, True)          # the cached decode
    whole = prefill(ring, np.append(ids, tok))[-1:]                               # the recompute
    assert np.array_equal(step.view(np.uint32), whole.view(np.uint32)), "cached decode bits != recompute"
    return {"float-attention": {}, "units-attention": {"rel_err_vs_float_attention": float(f"{err:.3g}"),
                                                       "decode_bits_equal_recompute": True}}


@pytest.mark.benchmark(group=f"attention prefill {DEPTH} tokens {SHAPE}")
@pytest.mark.parametrize("name", list(IMPLS))
def test_prefill(benchmark, record, pipes, validated, name):
    ring, ids = pipes[name]._ring, prompt_ids()
    record("attention prefill", SHAPE, IMPL_NAMES[name], tokens=len(ids), units=str(IMPLS[name]),
           **validated[name])
    benchmark.pedantic(prefill, args=(ring, ids), **PREFILL_ROUNDS)


@pytest.mark.benchmark(group=f"attention decode {DECODE} tokens after {DEPTH} {SHAPE}")
@pytest.mark.parametrize("name", list(IMPLS))
def test_decode(benchmark, record, pipes, validated, name):
    ring, ids = pipes[name]._ring, prompt_ids()
    record("attention decode", SHAPE, IMPL_NAMES[name], tokens=DECODE, prefill=len(ids),
           units=str(IMPLS[name]), **validated[name])

    def setup():
        return (ring, prefill(ring, ids), len(ids), DECODE), {}
    benchmark.pedantic(decode, setup=setup, **DECODE_ROUNDS)
