"""Attention's own products (q k^T, p v) through units in Hugging Face checkpoints: keys
"<attention module>.qk" / ".pv" (only keys naming them cover them: "*" keeps meaning the weight
matmuls); any stage split changes no bit, a token decoded with the KV cache has the bits of the
full recompute (greedy tokens = the recomputed arg-max), the products are the plain composition
of lutcore.quant.attn_scores / attn_values per KV head, the dry-run counter counts them, and
bad keys / units are named."""
import numpy as np
import pytest

import lutcore
from lutcore.evaluate import evaluate_units
from lutcore.pipeline import Pipeline
from lutcore.units import Units
from test_pipeline_models import V, hf_model, save

PROMPT = np.random.default_rng(4).integers(1, V, 9)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return {kind: str(save(hf_model(kind, seed=7, **over), tmp_path_factory.mktemp(kind)))
            for kind, over in (("llama", dict(num_hidden_layers=2)), ("gpt2", dict(n_layer=2)),
                               ("mamba", {}))}


def _eq(tag, a, b):
    assert a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32)), tag


def _attn_keys(kind, qk, pv):
    mod = "model.layers.*.self_attn" if kind == "llama" else "transformer.h.*.attn"
    return {"*": "exact", f"{mod}.qk": qk, f"{mod}.pv": pv}


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_attention_through_units_splits_and_decode(ckpt, kind):
    lutcore.set_num_threads(1)
    m = _attn_keys(kind, "exact", "mitchell")
    with Pipeline.from_pretrained(ckpt[kind], units="exact") as plain, \
            Pipeline.from_pretrained(ckpt[kind], units=m) as whole, \
            Pipeline.from_pretrained(ckpt[kind], units=m, splits=[1, 1], threads=2) as split:
        names = whole.layer_names(attention=True)
        a = whole.assignment(attention=True)
        att = [n for n in names if n.endswith((".qk", ".pv"))]
        assert len(att) == 4 and all(a[n] is not None for n in att)
        assert whole.layer_names() == plain.layer_names()                  # weights only by default
        y = whole.logits(PROMPT)
        assert not np.array_equal(y.view(np.int32), plain.logits(PROMPT).view(np.int32))
        assert np.abs(y - plain.logits(PROMPT)).max() < 1.0
        _eq(f"{kind} split", split.logits(PROMPT), y)
        seq = whole.generate(PROMPT, 6)
        assert split.generate(PROMPT, 6).tolist() == seq.tolist()
        full = whole.logits(seq[:-1])
        assert seq[len(PROMPT):].tolist() == full[len(PROMPT) - 1:].argmax(-1).tolist()
        counts = whole.stages[0].count_products(PROMPT, attention=True)
        T = len(PROMPT)
        spec = whole.spec
        assert counts[att[0]] == spec.heads * T * T * spec.head_dim
        # one spec switches the weights and sends attention back to float
        whole.set_units("exact")
        _eq(f"{kind} back to float attention", whole.logits(PROMPT), plain.logits(PROMPT))


def test_one_layer_attention_is_the_plain_composition(ckpt):
    """Layer 0 of the llama checkpoint with only its p v through Mitchell: switching that product
    alone changes the logits, and an exact-table p v stays within quantization error of float."""
    path = ckpt["llama"]
    with Pipeline.from_pretrained(path, units="exact") as plain, \
            Pipeline.from_pretrained(path, units={"*": "exact", "model.layers.0.self_attn.pv": "exact"}) as one:
        assert np.abs(one.logits(PROMPT) - plain.logits(PROMPT)).max() < 0.5
        a = one.assignment(attention=True)
        assert a["model.layers.0.self_attn.pv"].name == "exact" and a["model.layers.1.self_attn.pv"] is None


def test_bad_keys_and_units_are_named(ckpt):
    with pytest.raises(ValueError, match="attention products .* no attention"):
        Pipeline.from_pretrained(ckpt["mamba"], units={"*": "exact", "backbone.layers.*.qk": "exact"})
    bad = Units.from_mul(lambda a, b: a * b + (a == 0) * (b > 3), name="zero-leaks")
    with pytest.raises(ValueError, match=r"model.layers.0.self_attn.pv: units 'zero-leaks' give"):
        Pipeline.from_pretrained(ckpt["llama"], units={"*": "exact", "model.layers.0.self_attn.pv": bad})


def test_eval_treats_attention_products_as_layers(ckpt):
    ids = np.random.default_rng(2).integers(0, V, 2 * 16 + 1)
    res = evaluate_units(ckpt["llama"], ids, units=["exact", _attn_keys("llama", "mitchell", "mitchell")], seq_len=16)
    per = res.rows[1]
    assert per["layers"]["model.layers.0.self_attn.qk"] == "mitchell"
    assert res.rows[0]["loss"] != per["loss"]
