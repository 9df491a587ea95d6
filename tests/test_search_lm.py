"""lutcore.search_lm and `lutcore search`: the per-layer search of a language model.

The references here are written apart from the search: product counts from the layer
shapes (rows x in x out), the loss from a model built directly with the assignment's
per-layer mapping and a numpy cross-entropy, the exact-units row of ``evaluate_units``.
"""
import json
import os

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.search import SearchResult
from lutcore.search_lm import search_lm, sensitivity_lm
from lutcore.units import resolve

POWER = {"exact": 1.0, "mitchell": 0.4, "truncated:8": 0.7}


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


def _units():
    return [resolve(s).with_cost(power_mw=p, source="stated by the test") for s, p in POWER.items()]


def _gpt():
    return GPT(GPTConfig(vocab=40, dim=16, context=16, layers=1, heads=2, seed=1))


def _ids(n=16 * 5 + 1, vocab=40, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, n)


def _ref_loss(model, mapping, ids, L):
    """The held-out loss of ``model``'s parameters with ``mapping`` built directly.  Its
    logits are the search's bit for bit; the float64 mean over all windows at once is summed
    in another order than eval's per-batch sums, hence the 1e-9 in the comparisons (the
    bit-for-bit checks are against eval's own rows and evaluate_at)."""
    m = type(model)(model.config, params=model.parameters(), units=mapping)
    n = (ids.size - 1) // L
    x = np.stack([ids[w * L:w * L + L] for w in range(n)])
    y = np.stack([ids[w * L + 1:w * L + L + 1] for w in range(n)])
    logits = m.forward(x).astype(np.float64)
    mx = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - mx).sum(-1)) + mx[..., 0]
    return float((lse - np.take_along_axis(logits, y[..., None], -1)[..., 0]).sum() / y.size)


def test_products_are_rows_times_in_times_out():
    m = _gpt()
    ids = np.zeros((3, 16), np.int64)
    C, V, rows = 16, 40, 3 * 16
    want = {"h.0.attn.qkv": rows * C * 3 * C, "h.0.attn.proj": rows * C * C, "h.0.mlp.fc": rows * C * 4 * C,
            "h.0.mlp.proj": rows * 4 * C * C, "lm_head": rows * C * V}
    assert m.count_products(ids) == want
    mb = MambaLM(MambaConfig(d_model=8, n_layer=1, vocab_size=V, d_state=4), units={"lm_head": "mitchell"})
    got = mb.count_products(ids)
    E = 2 * 8                                                          # d_inner = expand * d_model
    assert got["backbone.layers.0.mixer.in_proj"] == rows * 8 * 2 * E
    assert got["backbone.layers.0.mixer.out_proj"] == rows * E * 8
    assert got["lm_head"] == rows * 8 * V
    assert {k: (v and v.name) for k, v in mb.assignment().items()}["lm_head"] == "mitchell"   # restored


def test_search_points_match_a_directly_built_model_bit_for_bit(tmp_path):
    m, ids = _gpt(), _ids()
    res = search_lm(m, ids, _units(), budget=40, seq_len=16, progress=False, out=tmp_path / "s")
    assert len(res.points) == 40 and res.front
    macs = res.config["macs"]
    assert macs["h.0.mlp.fc"] == 5 * 16 * 16 * 64                     # 5 windows of 16 tokens
    for p in res.front[:3] + [p for p in res.points if p.seed == "uniform"]:
        assert np.float64(res.evaluate_at(p)).tobytes() == np.float64(p.metric).tobytes()
        ref = _ref_loss(m, {k: v for k, v in p.assignment.items()}, ids, 16)
        assert abs(ref - p.metric) < 1e-9, (p.assignment, ref, p.metric)
        e = sum(macs[l] * POWER[u] for l, u in p.assignment.items()) / sum(macs.values())
        assert p.energy == pytest.approx(e, rel=1e-12)
    exact = next(p for p in res.points if p.seed == "uniform" and set(p.assignment.values()) == {"exact"})
    from lutcore.evaluate import evaluate_units
    row = evaluate_units(m, ids, ["exact"], seq_len=16).rows[0]
    assert exact.metric == row["loss"]
    saved = json.loads((tmp_path / "s" / "search.json").read_text())
    assert saved["complete"] and len(saved["points"]) == 40 and os.path.getsize(tmp_path / "s" / "front.png") > 0


def test_layers_selects_the_searched_layers_and_the_rest_stay_exact():
    m, ids = _gpt(), _ids()
    res = search_lm(m, ids, _units(), budget=12, seq_len=16, layers=["h.0.mlp"], greedy=False, progress=False)
    assert all(set(p.assignment) == {"h.0.mlp.fc", "h.0.mlp.proj"} for p in res.points)
    p = res.points[-1]
    ref = _ref_loss(m, dict(p.assignment, **{"*": "exact"}), ids, 16)     # the first key that matches wins
    assert abs(ref - p.metric) < 1e-9
    with pytest.raises(ValueError, match="layers: key 'h.3' matches no layer"):
        search_lm(m, ids, _units(), budget=12, seq_len=16, layers=["h.3"], progress=False)


def test_sensitivity_table():
    m, ids = _gpt(), _ids()
    sens = sensitivity_lm(m, ids, _units(), seq_len=16, progress=False)
    assert sens.layers == m.layer_names() and sens.units == list(POWER)
    j = sens.units.index("mitchell")
    for i, layer in enumerate(sens.layers):
        ref = _ref_loss(m, {layer: "mitchell", "*": "exact"}, ids, 16)
        assert abs(sens.table[i][j] - ref) < 1e-9


def test_a_unit_without_power_is_named():
    m, ids = _gpt(), _ids()
    with pytest.raises(ValueError, match="'mitchell' has no power_mw"):
        search_lm(m, ids, [resolve("exact").with_cost(power_mw=1.0), resolve("mitchell")], budget=12,
                  seq_len=16, progress=False)


def _tiny_checkpoint(tmp_path):
    from lutcore.train.data import builtin_corpus
    data = tmp_path / "train.txt"
    data.write_text(builtin_corpus()[:12_000], encoding="utf-8")
    assert main(["train", "--data", str(data), "--steps", "2", "--d-model", "8", "--layers", "1", "--d-state", "4",
                 "--seq-len", "32", "--batch-size", "2", "--sample-tokens", "2", "--out", str(tmp_path / "run"),
                 "--threads", "1", "--eval-units", "none"]) == 0
    return str(tmp_path / "run" / "checkpoint")


CLI_UNITS = ["--units", "exact", "mitchell", "truncated:8", "--power", "exact=1.0", "mitchell=0.4",
             "truncated:8=0.7", "--no-progress"]


def test_cli_search_resume_and_interrupt(tmp_path, capsys, monkeypatch):
    ckpt = _tiny_checkpoint(tmp_path)
    out = str(tmp_path / "s")
    assert main(["search", "--checkpoint", ckpt, *CLI_UNITS, "--budget", "24", "--out", out]) == 0
    first = SearchResult.load(out)
    assert len(first.points) == 24 and first.complete and os.path.isfile(os.path.join(out, "front.png"))
    assert "on the front" in capsys.readouterr().out
    # resume with a larger budget: the 24 points are kept as they are, none evaluated twice
    import lutcore.search_lm as SL
    calls = []
    real = SL._LMSpace.loss

    def counting(self, a):
        calls.append(a)
        return real(self, a)
    monkeypatch.setattr(SL._LMSpace, "loss", counting)
    assert main(["search", "--checkpoint", ckpt, *CLI_UNITS, "--budget", "30", "--out", out, "--resume"]) == 0
    again = SearchResult.load(out)
    assert len(again.points) == 30 and len(calls) == 6
    assert [p.to_dict() for p in again.points[:24]] == [p.to_dict() for p in first.points]

    # Ctrl-C after a few evaluations: exit 130, the points so far in search.json (partial), one line
    n = {"k": 0}

    def interrupted(self, a):
        n["k"] += 1
        if n["k"] > 5:
            raise KeyboardInterrupt
        return real(self, a)
    monkeypatch.setattr(SL._LMSpace, "loss", interrupted)
    out2 = str(tmp_path / "s2")
    assert main(["search", "--checkpoint", ckpt, *CLI_UNITS, "--budget", "30", "--out", out2]) == 130
    part = SearchResult.load(out2)
    assert not part.complete and 1 <= len(part.points) <= 5
    assert "interrupted" in capsys.readouterr().err


def test_cli_bad_input(tmp_path, capsys):
    ckpt = _tiny_checkpoint(tmp_path)
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "--power", "exact", "--budget", "5",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--power: expected SPEC=MILLIWATTS" in capsys.readouterr().err
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "mitchell", "--power", "exact=1",
                 "--budget", "9", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "'mitchell' has no power_mw" in capsys.readouterr().err
    assert main(["search", "--checkpoint", ckpt, "--model", ckpt, "--units", "exact", "--out",
                 str(tmp_path / "o")]) == 2
    assert "one of them" in capsys.readouterr().err
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "--power", "nosuch=1", "--out",
                 str(tmp_path / "o")]) == 2
    assert "--power: nosuch names none of the --units" in capsys.readouterr().err


# ----------------------------------------------------------------------------- Hugging Face checkpoints

def _hf(tmp_path, kind):
    from test_pipeline_models import hf_model, save
    model = hf_model(kind, seed=3)
    save(model, tmp_path)
    return str(tmp_path), model


def _torch_products(model, ids):
    """Products of every Linear / Conv1D of a transformers model on ids, by forward hooks."""
    import torch
    from transformers.pytorch_utils import Conv1D
    counts, hooks = {}, []
    for name, mod in model.named_modules():
        if isinstance(mod, (torch.nn.Linear, Conv1D)):
            k, n = (mod.in_features, mod.out_features) if isinstance(mod, torch.nn.Linear) else mod.weight.shape

            def hook(m, inp, out, name=name, k=int(k), n=int(n)):
                counts[name] = counts.get(name, 0) + inp[0].numel() // k * k * n
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model(torch.as_tensor(ids)[None])
    for h in hooks:
        h.remove()
    return counts


@pytest.mark.parametrize("kind", ["llama", "gpt2", "mamba"])
def test_hf_products_match_torch_hooks_and_points_match_eval(tmp_path, kind):
    from lutcore.evaluate import evaluate_units
    path, model = _hf(tmp_path, kind)
    vocab = model.config.vocab_size
    ids = _ids(3 * 8 + 1, vocab)
    res = search_lm(path, ids, _units(), budget=10, seq_len=8, greedy=False, progress=False)
    want = _torch_products(model, ids[:8])
    mods = dict(model.named_modules())
    for k in set(mods) - set(want):          # transformers' slow Mamba path reads dt_proj's weight directly
        if k.endswith("dt_proj"):
            want[k] = 8 * mods[k].in_features * mods[k].out_features
    got = {k: v // 3 for k, v in res.config["macs"].items()}           # three windows
    assert got == {k: want[k] for k in got}
    assert set(want) - set(got) <= {"lm_head"} and got["lm_head"] == 8 * model.config.hidden_size * vocab
    p = max(res.points, key=lambda q: len(set(q.assignment.values())))  # a mixed assignment
    row = evaluate_units(path, ids, [dict(p.assignment)], seq_len=8).rows[0]
    assert np.float64(row["loss"]).tobytes() == np.float64(p.metric).tobytes()
    assert np.float64(res.evaluate_at(p)).tobytes() == np.float64(p.metric).tobytes()


def test_cli_search_hf_model(tmp_path, capsys):
    import shutil
    from test_eval import TEXT
    path, model = _hf(tmp_path / "m", "llama")
    import tokenizers
    from tokenizers import models, pre_tokenizers, trainers
    hf = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator([TEXT[:20000]], trainer=trainers.BpeTrainer(vocab_size=model.config.vocab_size,
                                                                       special_tokens=["[UNK]"], show_progress=False))
    hf.save(os.path.join(path, "tokenizer.json"))
    data = tmp_path / "d.txt"
    data.write_text(TEXT[-600:], encoding="utf-8")
    out = str(tmp_path / "s")
    assert main(["search", "--model", path, "--data", str(data), *CLI_UNITS, "--budget", "12", "--seq-len", "16",
                 "--layers", "model.layers.0.mlp", "--out", out]) == 0
    res = SearchResult.load(out)
    assert len(res.points) == 12 and all(set(p.assignment) == {"model.layers.0.mlp.gate_proj",
               "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"} for p in res.points)
    shutil.rmtree(out)


def test_row_counting_is_per_instance_and_leaves_the_class_alone():
    """count_rows counts one QLinear's rows; the class (and every other instance) is untouched,
    so a dry run on one stage cannot count or slow another model's calls."""
    from lutcore.quant import QLinear
    rng = np.random.default_rng(3)
    a, b = (QLinear(rng.standard_normal((33, 7)).astype(np.float32), "exact") for _ in range(2))
    call = QLinear.__call__
    a.count_rows(True)
    for m in (3, 5, 1):
        a(rng.standard_normal((m, 33)).astype(np.float32))
        b(rng.standard_normal((m, 33)).astype(np.float32))
    assert QLinear.__call__ is call
    assert (a.rows_seen, b.rows_seen) == (9, None)
    a.count_rows(False)
    assert a.rows_seen is None
