"""Conformance of lutcore's pipeline with Hugging Face transformers.

Random-init ``LlamaForCausalLM`` (tied; untied with llama3 RoPE scaling),
``Qwen2ForCausalLM`` (q/k/v biases), ``MistralForCausalLM`` (sliding window 5,
shorter than the prompt), ``GPT2LMHeadModel`` and ``MambaForCausalLM``, saved
with ``save_pretrained`` in float32 and in bfloat16, loaded by
``Pipeline.from_pretrained`` split in two stages:

* float32 logits match transformers' (on the bf16-rounded weights for a bf16
  checkpoint — widening bf16 is exact) within HF_LOGIT_TOL;
* greedy generation gives transformers' tokens;
* KV-cached (or Mamba-state) decode, token by token after a prefill, equals a
  full recompute of the sequence bit for bit — float32 and through the units
  (every product and reduction is an in-order FMA chain per row; see stage.py).

Error budget (max |diff| relative to max(1, max |logit|); logits here ~1-4):
  HF_LOGIT_TOL   float32 vs torch float32: different summation orders in the
                 matmuls, softmax and norms.  Measured <= ~1.2e-6.
"""
import numpy as np
import pytest

import lutcore
from lutcore.pipeline import Pipeline

from test_pipeline_models import KINDS, V, hf_greedy, hf_logits, hf_model, reference_model, save, torch

HF_LOGIT_TOL = 1e-5

PROMPT = np.random.default_rng(3).integers(1, V, 12)        # longer than mistral's window of 5
N_NEW = 8


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


def _split(model):
    n = model.config.num_hidden_layers
    return [1, n - 1]


def _close(tag, got, want, tol):
    assert got.shape == want.shape, (tag, got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want))))
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"\n{tag}: max |diff| = {diff:.3e} (logit scale {scale:.2f})")
    assert diff <= tol * scale, (tag, diff)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
def test_logits_and_greedy_tokens_match_transformers(tmp_path, kind, dtype):
    model = hf_model(kind, seed=KINDS.index(kind))
    save(model, tmp_path, dtype)
    ref = reference_model(model, tmp_path)
    if dtype == "bfloat16":                                        # the rounding did happen
        assert not all(torch.equal(a, b) for a, b in zip(ref.parameters(), model.parameters()))
    with Pipeline.from_pretrained(tmp_path, splits=_split(model)) as p:
        _close(f"{kind} {dtype} logits", p.logits(PROMPT), hf_logits(ref, PROMPT), HF_LOGIT_TOL)
        want = hf_greedy(ref, PROMPT, N_NEW)
        got = p.generate(PROMPT, N_NEW)
        assert got.tolist() == want.tolist(), f"{kind} {dtype}: greedy tokens differ from transformers"
        _close(f"{kind} {dtype} logits of the generated sequence", p.logits(got), hf_logits(ref, got),
               HF_LOGIT_TOL)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("units", [None, "exact", "mitchell"])
@pytest.mark.parametrize("kind", KINDS)
def test_cached_decode_equals_full_recompute(tmp_path, kind, units, threads):
    """One-token steps (a stage's llama-family layers decode in one native call: at two
    threads one team splits every step) give the bits of the full recompute at one thread:
    float32, exact units and an approximate table."""
    model = hf_model(kind, seed=10 + KINDS.index(kind))
    save(model, tmp_path)
    with Pipeline.from_pretrained(tmp_path, splits=None, units=units) as whole:
        seq = whole.generate(PROMPT, N_NEW)
        full = whole.logits(seq)                                      # (T, V) one pass, no cache
    with Pipeline.from_pretrained(tmp_path, splits=_split(model), units=units, threads=threads) as p:
        stages = p.stages
        head = stages[0]
        caches = [s.new_cache() for s in stages]
        steps = []
        x = head.embed(seq[:5], 0)                                    # prefill 5, then one at a time
        for s, c in zip(stages, caches):
            x = s.run_layers(x, c)
        steps.append(head.readout(x))
        for t in range(5, len(seq)):
            x = head.embed(seq[t:t + 1], t)
            for s, c in zip(stages, caches):
                x = s.run_layers(x, c)
            steps.append(head.readout(x))
        assert [c.pos for c in caches] == [len(seq)] * len(stages)
    got = np.concatenate(steps)
    print(f"\n{kind} units={units}: cached decode vs full recompute, max |diff| {np.abs(got - full).max():.3e}")
    assert np.array_equal(got.view(np.uint32), full.view(np.uint32)), "cached decode changed bits"


def test_default_threads_on_a_long_prompt(tmp_path):
    """threads=None (the default) resolves at call time everywhere, also in the prefill's
    elementwise kernels that only go parallel past 65536 values (here 2 x 280 x 140 scores)."""
    save(hf_model("llama", seed=4, num_hidden_layers=2, max_position_embeddings=160), tmp_path)
    prompt = np.random.default_rng(5).integers(1, V, 140)
    with Pipeline.from_pretrained(tmp_path) as p:
        got = p.logits(prompt)
    with Pipeline.from_pretrained(tmp_path, threads=1) as p:
        want = p.logits(prompt)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _on_every_simd_path(path_dir, model, **pipe):
    """{SIMD path: (greedy tokens, full-pass logits, cached step-by-step decode logits)} of
    one pipeline over ``model``'s checkpoint, switched through every available path."""
    prev, got = lutcore.get_simd(), {}
    try:
        with Pipeline.from_pretrained(path_dir, splits=_split(model), **pipe) as p:
            for path in lutcore.available_simd():
                lutcore.set_simd(path)
                seq = p.generate(PROMPT, N_NEW)
                st = p.stages
                caches = [s.new_cache() for s in st]
                steps = []
                for t in range(len(seq)):
                    x = st[0].embed(seq[t:t + 1], t)
                    for s, c in zip(st, caches):
                        x = s.run_layers(x, c)
                    steps.append(st[0].readout(x))
                got[path] = (seq, p.logits(seq), np.concatenate(steps))
    finally:
        lutcore.set_simd(prev)
    return got


@pytest.mark.parametrize("kind", ["llama", "gpt2", "mistral"])
def test_every_simd_path_gives_the_generic_bits(tmp_path, kind):
    """Prefill (the norms' rows, sgemm, softmax) and cached decode (the decode layer: the
    one-row norm, attention, the float GEMV) on every SIMD path give the generic path's
    logits bit for bit, at two threads."""
    model = hf_model(kind, seed=20 + KINDS.index(kind))
    save(model, tmp_path)
    got = _on_every_simd_path(tmp_path, model, threads=2)
    want = got["generic"]
    for path, (seq, full, steps) in got.items():
        assert seq.tolist() == want[0].tolist(), path
        assert np.array_equal(full.view(np.uint32), want[1].view(np.uint32)), f"{path}: full-pass logits bits"
        assert np.array_equal(steps.view(np.uint32), want[2].view(np.uint32)), f"{path}: cached decode bits"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["llama_untied", "qwen2"])
def test_exact_units_decode_bits_on_every_simd_path(tmp_path, kind, threads):
    """Cached decode through the exact units (the decode layer's int8 linears: the generic
    tile, AVX2, and on AVX-512 CPUs the VNNI body's GEMV over each thread's panels, with
    qwen2's biases) gives the generic path's logits bit for bit, at one and two threads;
    odd shapes: K = 48 (a partial Q8 block), 80 gate/up columns (5 panels, split 2 | 3)."""
    model = hf_model(kind, seed=40 + KINDS.index(kind))
    save(model, tmp_path)
    got = _on_every_simd_path(tmp_path, model, units="exact", threads=threads)
    assert "avx512" in got or "avx2" in got or len(got) == 1
    want = got["generic"]
    for path, (seq, full, steps) in got.items():
        assert seq.tolist() == want[0].tolist(), path
        assert np.array_equal(full.view(np.uint32), want[1].view(np.uint32)), f"{path}: exact full-pass bits"
        assert np.array_equal(steps.view(np.uint32), want[2].view(np.uint32)), f"{path}: exact decode bits"
