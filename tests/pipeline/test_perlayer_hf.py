"""Per-layer units for Hugging Face checkpoints through the pipeline (local and Ray) and
``lutcore eval``: keys are Hugging Face module names ("model.layers.3.mlp.down_proj",
"lm_head").

* a split changes no bit with per-layer units (full passes, cached decode);
* one key for everything equals the single-units pipeline bit for bit;
* a layer's matmul is the plain block-scaled product through its own unit (the fused q/k/v
  and gate/up of the llama family included, when their parts have different units);
* ``set_units`` switches units in place (nothing re-quantized) and gives the bits of a
  pipeline built with that assignment;
* ``evaluate_units`` / ``lutcore eval --units a.json`` score an assignment.
"""
import json

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.evaluate import evaluate_units
from lutcore.ops.matmul import matmul
from lutcore.pipeline import Pipeline, load_stage_weights, plan_from_splits, to_kn
from lutcore.quant import QLinear, qmatmul, quantize
from lutcore.units import approx, assign

from test_eval import data_file, tokenizer_json  # noqa: F401  (fixtures)
from test_pipeline_models import V, hf_model, save

PROMPT = np.random.default_rng(4).integers(1, V, 9)

MIXED = {
    "llama": {"model.layers.0.self_attn.q_proj": "mitchell", "model.layers.0.self_attn.k_proj": "exact",
              "model.layers.0.self_attn.v_proj": None, "model.layers.1.mlp.gate_proj": "truncated:6",
              "model.layers.1.mlp.up_proj": "exact", "model.layers.*.mlp.down_proj": "mitchell",
              "model.layers.2": "reduced:4", "lm_head": "mitchell"},
    "gpt2": {"transformer.h.0.attn.c_attn": "mitchell", "transformer.h.1": "truncated:6",
             "transformer.h.*.mlp.c_proj": "exact", "lm_head": "none"},
    "mamba": {"backbone.layers.0.mixer.in_proj": "mitchell", "backbone.layers.1": "truncated:6",
              "backbone.layers.*.mixer.out_proj": "exact", "lm_head": "mitchell"},
}


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = {}
    for kind, over in (("llama", dict(num_hidden_layers=3)), ("gpt2", dict(n_layer=3)), ("mamba", {})):
        out[kind] = str(save(hf_model(kind, seed=7, **over), tmp_path_factory.mktemp(kind)))
    return out


def _eq(tag, a, b):
    print(f"{tag}: max |diff| {float(np.max(np.abs(a.astype(np.float64) - b))):.3e}")
    assert a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32)), tag


@pytest.mark.parametrize("kind", ["llama", "gpt2", "mamba"])
def test_split_changes_no_bit_with_per_layer_units(ckpt, kind):
    """The split pipeline also runs at 2 threads: neither changes a bit."""
    mapping = MIXED[kind]
    with Pipeline.from_pretrained(ckpt[kind], units=mapping) as whole, \
            Pipeline.from_pretrained(ckpt[kind], splits=[1, 2], units=mapping, threads=2) as split:
        a = whole.assignment()
        assert list(a) == whole.layer_names() and a["lm_head"] == assign.resolve_spec(mapping["lm_head"])
        assert any(u is None for u in a.values()) and any(u is not None for u in a.values())
        _eq(f"{kind} logits", split.logits(PROMPT), whole.logits(PROMPT))
        seq = whole.generate(PROMPT, 5)
        assert split.generate(PROMPT, 5).tolist() == seq.tolist()
        _eq(f"{kind} logits of the generated", split.logits(seq), whole.logits(seq))
        assert whole.stages[0].assignment() == a
        assert "per-layer" in repr(whole.stages[0])


@pytest.mark.parametrize("kind", ["llama", "gpt2", "mamba"])
def test_one_key_for_all_equals_the_single_units_pipeline(ckpt, kind):
    with Pipeline.from_pretrained(ckpt[kind], units={"*": "mitchell"}) as per, \
            Pipeline.from_pretrained(ckpt[kind], units="mitchell") as one:
        _eq(kind, per.logits(PROMPT), one.logits(PROMPT))
        assert per.generate(PROMPT, 4).tolist() == one.generate(PROMPT, 4).tolist()


def test_each_matmul_is_its_layers_product(ckpt):
    """Layer 0 of the llama checkpoint: the fused q/k/v with q through Mitchell, k exact and
    v in float, and down_proj through Mitchell — each the product of that part alone."""
    path = ckpt["llama"]
    with Pipeline.from_pretrained(path, units=MIXED["llama"]) as p:
        st = p.stages[0]
        spec = st.spec
        w = load_stage_weights(path, spec, plan_from_splits(spec, [spec.layers])[0])
        C, Q, KVd, I = spec.hidden, spec.q_dim, spec.kv_dim, spec.inter
        h = np.random.default_rng(0).standard_normal((5, C)).astype(np.float32)
        L = st.layers[0]
        kn = lambda n, o, i: np.ascontiguousarray(to_kn(w[n], o, i, "out_in"), np.float32)   # noqa: E731
        pre = "model.layers.0."
        q = qmatmul(h, quantize(kn(pre + "self_attn.q_proj.weight", Q, C), axis=0), approx.mitchell())
        k = qmatmul(h, quantize(kn(pre + "self_attn.k_proj.weight", KVd, C), axis=0), "exact")
        v = matmul(h, kn(pre + "self_attn.v_proj.weight", KVd, C))
        got = st._mm(h, L.wqkv, None, np.empty((5, Q + 2 * KVd), np.float32))
        _eq("fused q|k|v", got, np.concatenate([q, k, v], axis=1))
        hi = np.random.default_rng(1).standard_normal((5, I)).astype(np.float32)
        d = qmatmul(hi, quantize(kn(pre + "mlp.down_proj.weight", C, I), axis=0), approx.mitchell())
        _eq("down_proj", st._mm(hi, L.wdown, None, np.empty((5, C), np.float32)), d)
        # a layer no key covers multiplies in float: o_proj of layer 0
        assert p.assignment()[pre + "self_attn.o_proj"] is None
        # and the whole model against a float pipeline whose layer-0 down_proj alone is swapped
    with Pipeline.from_pretrained(path, units={pre + "mlp.down_proj": "mitchell"}) as p, \
            Pipeline.from_pretrained(path) as ref:
        ref.stages[0].layers[0].wdown = QLinear(kn(pre + "mlp.down_proj.weight", C, I), approx.mitchell())
        _eq("one layer swapped", p.logits(PROMPT), ref.logits(PROMPT))


def test_keys_are_checked_against_the_whole_model(ckpt):
    with pytest.raises(ValueError) as e:
        Pipeline.from_pretrained(ckpt["llama"], splits=[1, 2], units={"model.layers.7": "mitchell"})
    assert "model.layers.7" in str(e.value) and "model.layers.2.mlp.down_proj" in str(e.value) \
        and "lm_head" in str(e.value)
    # a key that covers layers of the second stage only is fine with a split
    with Pipeline.from_pretrained(ckpt["llama"], splits=[1, 2], units={"model.layers.2": "mitchell"}) as p:
        assert [n for n, u in p.assignment().items() if u is not None] == \
            [f"model.layers.2.{m}" for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                             "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]


@pytest.mark.parametrize("kind", ["llama", "mamba"])
def test_set_units_switches_in_place_with_the_bits_of_a_fresh_build(ckpt, kind, monkeypatch):
    path = ckpt[kind]
    new = {"llama": {"model.layers.0.self_attn.q_proj": "mitchell", "model.layers.1.mlp.up_proj": "truncated:6",
                     "model.layers.2": "reduced:4"},
           "mamba": {"backbone.layers.0.mixer.x_proj": "mitchell", "backbone.layers.2": "truncated:6"}}[kind]
    with Pipeline.from_pretrained(path, splits=[2, 1], units="exact") as p:
        p.generate(PROMPT, 3)                                  # the fused decode linears are built
        import lutcore.quant as qm
        calls = []
        real = qm.quantize
        monkeypatch.setattr(qm, "quantize", lambda *a, **k: calls.append(1) or real(*a, **k))
        p.set_units(new)
        assert calls == []                                     # nothing re-quantized
        want = {**new, "*": "exact"}                           # the first covering key wins
        with Pipeline.from_pretrained(path, units=want) as fresh:
            assert {n: u.digest for n, u in p.assignment().items()} == \
                {n: u.digest for n, u in fresh.assignment().items()}
            _eq(f"{kind} after set_units", p.logits(PROMPT), fresh.logits(PROMPT))
            assert p.generate(PROMPT, 4).tolist() == fresh.generate(PROMPT, 4).tolist()
        p.set_units("exact")                                   # back to one units: a split group stays split
        with Pipeline.from_pretrained(path, units="exact") as fresh:
            _eq(f"{kind} back to exact", p.logits(PROMPT), fresh.logits(PROMPT))
            assert p.generate(PROMPT, 4).tolist() == fresh.generate(PROMPT, 4).tolist()
        with pytest.raises(ValueError, match="between float and units"):
            p.set_units({"lm_head": None})
        assert all(u.name == "exact" for u in p.assignment().values())
        with pytest.raises(ValueError, match="model.layers.9|backbone.layers.9"):
            p.set_units({("model" if kind == "llama" else "backbone") + ".layers.9": "exact"})


def test_evaluate_units_per_layer_rows(ckpt, tmp_path, capsys):
    path = ckpt["llama"]
    ids = np.random.default_rng(2).integers(0, V, 3 * 16 + 1)
    f = tmp_path / "a.json"
    with Pipeline.from_pretrained(path, units=MIXED["llama"]) as p:
        assign.save_assignment(p, f)
        want = p.logits(ids[:16])
    res = evaluate_units(path, ids, units=["none", "mitchell", {"*": "mitchell"}, str(f)], seq_len=16)
    rows = res.rows
    assert [r["units"] for r in rows] == ["none", "mitchell", "per-layer", str(f)]
    assert rows[2]["loss"] == rows[1]["loss"] and rows[2]["wce_pct"] is None and rows[2]["name"] == "all mitchell"
    assert rows[3]["layers"]["model.layers.0.self_attn.v_proj"] == "none"
    assert rows[3]["layers"]["lm_head"] == "mitchell" and len(rows[3]["digest"]) == 64
    assert rows[3]["loss"] != rows[0]["loss"] and rows[3]["loss"] != rows[1]["loss"]
    # a row is the assignment's: its first window scored through a pipeline built with it
    one = evaluate_units(path, ids[:17], units=[str(f)], seq_len=16).rows[0]
    lg = want.astype(np.float64)
    m = lg.max(-1, keepdims=True)
    nll = np.log(np.exp(lg - m).sum(-1)) + m[:, 0] - lg[np.arange(16), ids[1:17]]
    assert abs(one["loss"] - nll.mean()) < 1e-9
    with pytest.raises(ValueError, match="model.layers.5"):
        evaluate_units(path, ids, units=[{"model.layers.5": "mitchell"}], seq_len=16)


def test_cli_eval_units_json(tmp_path, tokenizer_json, data_file, capsys):
    import shutil
    model = hf_model("llama", seed=3, num_hidden_layers=2)
    save(model, tmp_path / "m")
    shutil.copy(tokenizer_json, tmp_path / "m" / "tokenizer.json")
    f = tmp_path / "a.json"
    f.write_text(json.dumps({"model.layers.0.mlp": "mitchell", "lm_head": "truncated:6"}))
    out = tmp_path / "out"
    assert main(["eval", "--model", str(tmp_path / "m"), "--data", data_file, "--units", "none", "mitchell",
                 str(f), "--seq-len", "32", "--out", str(out)]) == 0
    print(capsys.readouterr().out)
    rep = json.load(open(out / "eval.json"))
    r = rep["results"][2]
    assert r["units"] == str(f) and r["layers"]["model.layers.0.mlp.down_proj"] == "mitchell"
    assert r["layers"]["model.layers.1.mlp.down_proj"] == "none" and r["layers"]["lm_head"] == "truncated:6"
    assert r["loss"] != rep["results"][0]["loss"]


def test_ray_per_layer_units_and_set_units(ckpt):
    """Over Ray (one actor per stage, the compiled graph on from the first pass): per-layer
    units give the local bits, and set_units reaches every actor (the graph is rebuilt)."""
    import ray
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        path, mapping = ckpt["llama"], {"model.layers.0": "mitchell", "*": "exact"}
        new = {"model.layers.2.mlp": "truncated:6", "model.layers.0.self_attn.k_proj": "reduced:4"}
        with Pipeline.from_pretrained(path, splits=[2, 1], units=mapping, transport="ray", compile_after=0) as r, \
                Pipeline.from_pretrained(path, units=mapping) as local:
            seq = local.generate(PROMPT, 4)
            assert r.generate(PROMPT, 4).tolist() == seq.tolist()
            _eq("ray per-layer", r.logits(seq), local.logits(seq))
            r.set_units(new)
            local.set_units(new)
            assert {n: u.name for n, u in r.assignment().items()} == {n: u.name for n, u in local.assignment().items()}
            seq = local.generate(PROMPT, 4)
            assert r.generate(PROMPT, 4).tolist() == seq.tolist()
            _eq("ray after set_units", r.logits(seq), local.logits(seq))
            with pytest.raises(ValueError, match="lm_head"):
                r.set_units({"lm_head": "none"})
    finally:
        if started:
            ray.shutdown()


def test_cli_generate_model_units_json(ckpt, tmp_path, capsys):
    f = tmp_path / "a.json"
    mapping = {"transformer.h.1": "mitchell", "lm_head": "exact"}
    f.write_text(json.dumps(mapping))
    assert main(["generate", "--model", ckpt["gpt2"], "--prompt", "Hi there", "--stages", "2", "--tokenizer",
                 "bytes", "--max-new-tokens", "4", "--units", str(f), "--threads", "1"]) == 0
    out = capsys.readouterr()
    assert "per layer" in out.err
    from lutcore.tokenizer import Tokenizer
    tok = Tokenizer.bytes()
    with Pipeline.from_pretrained(ckpt["gpt2"], units=mapping) as p:
        want = tok.decode(p.generate(tok.encode("Hi there"), 4, stop_ids=0))
    assert out.out == want + "\n"
