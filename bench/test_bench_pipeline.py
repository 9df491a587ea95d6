"""Pipeline stages (lutcore.pipeline) on a llama-style model beside transformers.

Model: hidden 512, 8 layers, 8 heads / 2 KV heads (head_dim 64), SwiGLU 1408,
vocab 4096, untied head; random weights from ``LlamaForCausalLM`` saved with
``save_pretrained`` into a temporary directory (dims /8 under
LUTCORE_BENCH_SMALL=1: hidden 64, SwiGLU 176, vocab 512, prompt 16).

    group                                   lutcore                              peers
    pipeline prefill <P> tokens             1 stage float32; 1 stage exact       transformers forward (torch,
                                            units; 2 stages local; 2 stages Ray  no cache)
    pipeline decode <N> tokens after <P>    the same four, as generate decodes   transformers, past_key_values
                                            (KV caches; Ray: chunks picked on    (DynamicCache)
                                            stage 0 through the compiled graph)

``tokens`` is recorded, so the report shows tokens/s.  A decode round starts
from a fresh prefill (``benchmark.pedantic(setup=...)``, untimed).
Validation, before anything is timed: float32 logits against transformers'
(PIPE_TOL, norm-wise), the exact units against float32 (UNITS_TOL), and the
2-stage local and Ray pipelines against the 1-stage one bit for bit (prefill
logits and every decoded token's logits).
"""
from __future__ import annotations

import numpy as np
import pytest

from lutbench import THREADS, dim, need_module, rel_err, torch

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, VOCAB = dim(512), 8, 8, 2, dim(1408), dim(4096)
PREFILL = dim(128)
DECODE = 16
SHAPE = f"h{HIDDEN}xL{LAYERS}xH{HEADS}/{KV_HEADS}xI{INTER}xV{VOCAB}"
PIPE_TOL = 1e-5              # float32 lutcore vs float32 torch, norm-wise relative (measured ~1e-7)
UNITS_TOL = 0.05             # block-scaled int8 through the exact units vs float32, norm-wise relative

# a prefill takes ~50 ms: ten rounds (the min of three moved by 30% between runs on a shared VM)
PREFILL_ROUNDS = dict(rounds=10, iterations=1, warmup_rounds=1)
PREFILL_GROUP = pytest.mark.benchmark(group=f"pipeline prefill {PREFILL} tokens {SHAPE}")
DECODE_GROUP = pytest.mark.benchmark(group=f"pipeline decode {DECODE} tokens after {PREFILL} {SHAPE}")
IMPLS = {  # id: (splits, units, transport)
    "float32": ([LAYERS], None, "local"),
    "units-exact": ([LAYERS], "exact", "local"),
    "float32-2stages": ([LAYERS // 2, LAYERS - LAYERS // 2], None, "local"),
    "float32-2stages-ray": ([LAYERS // 2, LAYERS - LAYERS // 2], None, "ray"),
}


def make_model(path, max_positions: int = 256):
    """The benchmark's random-init LlamaForCausalLM (the shape above), saved into path; returns it
    (bench/ab_decode_llamacpp.py builds its checkpoint here too)."""
    import transformers as tf
    cfg = tf.LlamaConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, intermediate_size=INTER, vocab_size=VOCAB,
                         max_position_embeddings=max_positions, tie_word_embeddings=False)
    torch.manual_seed(0)
    hm = tf.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():                       # generic weights (HF's init is 0.02-normal, norms 1)
        gen = torch.Generator().manual_seed(1)
        for name, p in hm.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if p.ndim == 1 else r / np.sqrt(p.shape[1]))
    hm.save_pretrained(path)
    return hm


def prompt_ids(n: int = PREFILL) -> np.ndarray:
    return np.random.default_rng(7).integers(0, VOCAB, n).astype(np.int64)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(checkpoint dir, transformers model, prompt ids)."""
    need_module("transformers")
    if torch is None:
        pytest.skip("torch is not importable")
    path = tmp_path_factory.mktemp("llama_bench")
    hm = make_model(path, max(256, PREFILL + DECODE + 8))
    return str(path), hm, prompt_ids()


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def pipes(model, request):
    """Pipelines by impl id, built once; Ray ones only when asked for (they need the cluster)."""
    from lutcore.pipeline import Pipeline
    made = {}

    def get(name):
        if name not in made:
            splits, units, transport = IMPLS[name]
            if transport == "ray":
                request.getfixturevalue("ray_cluster")
            # Ray: compile the stage chain at once (a serving setup; the default waits 256 passes)
            extra = {"compile_after": 0} if transport == "ray" else {}
            made[name] = Pipeline.from_pretrained(model[0], splits=splits, units=units, transport=transport,
                                                  threads=THREADS, **extra)
        return made[name]
    yield get
    for p in made.values():
        p.close()


def _decode(ring, first_logits, start, n):
    """n greedy tokens, one pass each, from the logits of the prefill; returns every pass's logits."""
    out, logits = [], first_logits
    for i in range(n):
        tok = int(np.argmax(logits[-1]))
        logits = ring.forward(np.array([tok], np.int64), start + i, True, True)
        out.append(logits)
    return out


def generate(ring, first_logits, start, n):
    """n greedy tokens after the prefill as ``Pipeline.generate`` decodes them (the ring's
    ``decode``: one pass a token locally; chunks picked on stage 0 over a compiled Ray
    graph); returns the tokens."""
    toks = [int(np.argmax(first_logits[-1]))]
    while len(toks) < n + 1:
        new, bad = ring.decode(toks[-1], start + len(toks) - 1, n + 1 - len(toks), (0.0, None, None, None), ())
        assert not bad
        toks += new
    return toks


def _prefill(ring, ids):
    ring.reset()
    return ring.forward(ids, 0, True, True)


@pytest.fixture(scope="module")
def reference(model, pipes):
    """The 1-stage float32 results every other implementation is checked against."""
    _, _, ids = model
    ring = pipes("float32")._ring
    first = _prefill(ring, ids)
    return first, _decode(ring, first, len(ids), DECODE)


def _validate(name, model, pipes, reference):
    path, hm, ids = model
    p = pipes(name)
    first = _prefill(p._ring, ids)
    steps = _decode(p._ring, first, len(ids), DECODE)
    ref_first, ref_steps = reference
    if name == "float32":
        with torch.no_grad():
            want = hm(torch.from_numpy(ids[None])).logits[0].numpy()
        err = rel_err(p.logits(ids), want)
        assert err <= PIPE_TOL, f"lutcore vs transformers logits: {err:.3g}"
        return {"rel_err_vs_transformers": float(f"{err:.3g}")}
    if IMPLS[name][1] is not None:
        err = rel_err(first, ref_first)
        assert err <= UNITS_TOL, f"units vs float32: {err:.3g}"
        return {"rel_err_vs_float32": float(f"{err:.3g}")}
    assert np.array_equal(first.view(np.uint32), ref_first.view(np.uint32)), f"{name}: prefill bits differ"
    for i, (a, b) in enumerate(zip(steps, ref_steps)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"{name}: decode step {i} bits differ"
    want = [int(np.argmax(x[-1])) for x in [ref_first] + ref_steps]
    assert generate(p._ring, _prefill(p._ring, ids), len(ids), DECODE) == want, f"{name}: decoded tokens differ"
    return {"bits_equal_1stage": True}


def _lutcore_case(group, name, model, pipes, reference, record, **fields):
    """Validate implementation `name` against the reference, record its row; -> (ring, prompt ids)."""
    extra = _validate(name, model, pipes, reference)
    splits, units, transport = IMPLS[name]
    record(group, SHAPE, f"lutcore {name}", stages=len(splits), units=units or "float32", transport=transport,
           **fields, **extra)
    return pipes(name)._ring, model[2]


@PREFILL_GROUP
@pytest.mark.parametrize("name", list(IMPLS))
def test_prefill_lutcore(benchmark, record, model, pipes, reference, name):
    ring, ids = _lutcore_case("pipeline prefill", name, model, pipes, reference, record, tokens=len(model[2]))
    benchmark.pedantic(_prefill, args=(ring, ids), **PREFILL_ROUNDS)


@PREFILL_GROUP
def test_prefill_transformers(benchmark, record, model):
    _, hm, ids = model
    x = torch.from_numpy(ids[None])

    def run():
        with torch.no_grad():
            return hm(x, use_cache=True).logits
    record("pipeline prefill", SHAPE, "transformers", threads=torch.get_num_threads(), tokens=len(ids))
    benchmark.pedantic(run, **PREFILL_ROUNDS)


@DECODE_GROUP
@pytest.mark.parametrize("name", list(IMPLS))
def test_decode_lutcore(benchmark, record, model, pipes, reference, name):
    ring, ids = _lutcore_case("pipeline decode", name, model, pipes, reference, record, tokens=DECODE,
                              prefill=len(model[2]))

    def setup():
        return (ring, _prefill(ring, ids), len(ids), DECODE), {}
    benchmark.pedantic(generate, setup=setup, rounds=8, iterations=1, warmup_rounds=1)


@DECODE_GROUP
def test_decode_transformers(benchmark, record, model, reference):
    _, hm, ids = model
    ref_first, ref_steps = reference

    def setup():
        with torch.no_grad():
            out = hm(torch.from_numpy(ids[None]), use_cache=True)
        return (out.logits[0, -1].numpy(), out.past_key_values), {}

    import inspect
    cache_kw = "cache" if "cache" in inspect.signature(hm.forward).parameters else "past_key_values"

    def run(logits, past):
        steps = []
        with torch.no_grad():
            for i in range(DECODE):
                tok = torch.tensor([[int(np.argmax(logits))]])
                out = hm(tok, use_cache=True, **{cache_kw: past})
                logits, past = out.logits[0, -1].numpy(), out.past_key_values
                steps.append(logits)
        return steps

    first, past = setup()[0]
    steps = run(first, past)                      # validation: same greedy path as lutcore, close logits
    assert int(np.argmax(first)) == int(np.argmax(ref_first[-1]))
    err = max(rel_err(a, b[-1]) for a, b in zip(steps, ref_steps))
    assert err <= PIPE_TOL, f"transformers decode vs lutcore: {err:.3g}"
    record("pipeline decode", SHAPE, "transformers", threads=torch.get_num_threads(), tokens=DECODE,
           prefill=len(ids), rel_err_vs_lutcore=float(f"{err:.3g}"))
    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1, warmup_rounds=1)

