"""Hugging Face checkpoints through units with a declared accumulator: a register wide enough
for every block sum gives the bits of the unit without one; a narrow one changes the logits,
and still any stage split changes no bit, a cached decode equals the full recompute, and the
per-layer overflow log names the Hugging Face modules (a fused q/k/v group by its parts)."""
import numpy as np
import pytest

import lutcore
from lutcore.ops import accum
from lutcore.pipeline import Pipeline
from test_pipeline_models import V, hf_model, save

PROMPT = np.random.default_rng(4).integers(1, V, 9)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return {kind: str(save(hf_model(kind, seed=7, **over), tmp_path_factory.mktemp(kind)))
            for kind, over in (("llama", dict(num_hidden_layers=3)), ("gpt2", dict(n_layer=3)))}


def _eq(tag, a, b):
    assert a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32)), tag


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_register_through_the_pipeline(ckpt, kind):
    lutcore.set_num_threads(1)
    with Pipeline.from_pretrained(ckpt[kind], units="mitchell") as plain, \
            Pipeline.from_pretrained(ckpt[kind], units="mitchell@24s") as wide:
        _eq(f"{kind} wide register", wide.logits(PROMPT), plain.logits(PROMPT))
        ref = plain.logits(PROMPT)
    spec = "mitchell@16s:saturate"
    with Pipeline.from_pretrained(ckpt[kind], units=spec) as whole, \
            Pipeline.from_pretrained(ckpt[kind], splits=[1, 2], units=spec, threads=2) as split:
        with accum.overflow_log() as log:
            y = whole.logits(PROMPT)
        assert not np.array_equal(y.view(np.int32), ref.view(np.int32))
        _eq(f"{kind} split", split.logits(PROMPT), y)
        seq = whole.generate(PROMPT, 5)
        assert split.generate(PROMPT, 5).tolist() == seq.tolist()
        _eq(f"{kind} logits of the generated", whole.logits(seq), split.logits(seq))
        full = whole.logits(seq[:-1])                  # greedy decode with the cache = the recomputed arg-max
        assert seq[len(PROMPT):].tolist() == full[len(PROMPT) - 1:].argmax(-1).tolist()
    names = set()
    for label in log.to_dict():
        names.update(label.split("+"))
    assert names <= set(whole.layer_names()) and "lm_head" in names and len(names) > 3
