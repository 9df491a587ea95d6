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
    # all 5 finished evaluations: the 3 uniform points and 2 of the sensitivity batch in flight (issue 38)
    assert not part.complete and len(part.points) == 5
    assert [p.to_dict() for p in part.points] == [p.to_dict() for p in first.points[:5]]
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


# ----------------------------------------------------------------------------- issue 38: resume, reference, arguments

def _count_losses(monkeypatch):
    import lutcore.search_lm as SL
    calls = []
    real = SL._LMSpace.loss

    def counting(self, a):
        calls.append(a)
        return real(self, a)
    monkeypatch.setattr(SL._LMSpace, "loss", counting)
    return calls


def test_cli_resume_refuses_other_data_units_or_checkpoint(tmp_path, capsys, monkeypatch):
    from lutcore.train.data import builtin_corpus
    ckpt = _tiny_checkpoint(tmp_path)
    out = str(tmp_path / "s")
    assert main(["search", "--checkpoint", ckpt, *CLI_UNITS, "--budget", "24", "--out", out]) == 0
    first = SearchResult.load(out)
    capsys.readouterr()
    calls = _count_losses(monkeypatch)
    other = tmp_path / "other.txt"
    other.write_text(builtin_corpus()[-3000:], encoding="utf-8")
    assert main(["search", "--checkpoint", ckpt, "--data", str(other), *CLI_UNITS, "--budget", "30", "--out", out,
                 "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[-1].startswith("lutcore search: error: resume: ") and "Traceback" not in err[0]
    assert "measured on something else" in err[-1] and "data.windows: 'sha256:" in err[-1] \
        and "(saved) vs 'sha256:" in err[-1]
    # another library: mitchell's power, truncated:8 replaced
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "mitchell", "truncated:6", "--power", "exact=1.0",
                 "mitchell=0.5", "truncated:6=0.7", "--no-progress", "--budget", "30", "--out", out, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "costs.mitchell.power_mw: 0.4 (saved) vs 0.5 (now)" in err and "units.truncated:8:" in err
    assert calls == [] and SearchResult.load(out).to_dict() == first.to_dict()     # the file is untouched
    # the same data, model and units: it continues
    assert main(["search", "--checkpoint", ckpt, *CLI_UNITS, "--budget", "30", "--out", out, "--resume"]) == 0
    assert len(calls) == 6


def test_api_resume_refuses_another_model_data_or_batching(tmp_path, monkeypatch):
    m, ids = _gpt(), _ids()
    out = tmp_path / "s"
    search_lm(m, ids, _units(), budget=20, seq_len=16, progress=False, out=out)
    calls = _count_losses(monkeypatch)
    kw = dict(budget=30, seq_len=16, progress=False, out=out, resume=True)
    other = GPT(GPTConfig(vocab=40, dim=16, context=16, layers=1, heads=2, seed=2))
    with pytest.raises(ValueError, match=r"resume: .* model: 'sha256:[0-9a-f]{16}\.\.\.' \(saved\) vs 'sha256:"):
        search_lm(other, ids, _units(), **kw)
    with pytest.raises(ValueError, match=r"data.windows: 'sha256:[0-9a-f]{16}\.\.\.' \(saved\) vs"):
        search_lm(m, _ids(seed=1), _units(), **kw)
    with pytest.raises(ValueError, match=r"data.seq_len: 16 \(saved\) vs 8 \(now\)"):
        search_lm(m, ids, _units(), **dict(kw, seq_len=8))
    with pytest.raises(ValueError, match=r"windows_per_forward: 8 \(saved\) vs 2 \(now\)"):
        search_lm(m, ids, _units(), batch_size=2, **kw)
    with pytest.raises(ValueError, match=r"layers: \[\"h.0.attn.qkv\", .*\.\.\. \(saved\) vs \[\"h.0.mlp.fc\"\] \(now\)"):
        search_lm(m, ids, _units(), layers=["h.0.mlp.fc"], **kw)
    assert calls == []
    res = search_lm(m, ids, _units(), **kw)
    assert len(res.points) == 30 and len(calls) == 10


def test_cli_reference_named_with_its_power_stated(tmp_path, capsys):
    ckpt = _tiny_checkpoint(tmp_path)
    power = ["--power", "exact=1.0", "mitchell=0.4", "truncated:8=0.7", "--no-progress", "--budget", "24"]
    # the reference among the --units, and not among them (it joins them)
    for units in (["exact", "mitchell", "truncated:8"], ["mitchell", "truncated:8"]):
        out = str(tmp_path / f"s{len(units)}")
        assert main(["search", "--checkpoint", ckpt, "--units", *units, "--reference", "exact", *power,
                     "--out", out]) == 0, capsys.readouterr().err
        res = SearchResult.load(out)
        uni = {next(iter(p.assignment.values())): p.energy for p in res.uniform()}
        assert uni == pytest.approx({"exact": 1.0, "mitchell": 0.4, "truncated:8": 0.7}, rel=1e-15)
    out = str(tmp_path / "m")
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "mitchell", "truncated:8", "--reference",
                 "mitchell", *power, "--out", out]) == 0, capsys.readouterr().err
    uni = {next(iter(p.assignment.values())): p.energy for p in SearchResult.load(out).uniform()}
    assert uni == pytest.approx({"exact": 2.5, "mitchell": 1.0, "truncated:8": 1.75}, rel=1e-15)
    # the API: a reference named by its spec is the candidate, with its cost
    m, ids = _gpt(), _ids()
    res = search_lm(m, ids, _units(), budget=4, greedy=False, seq_len=16, reference="exact", progress=False)
    assert sorted(p.energy for p in res.uniform()) == pytest.approx([0.4, 0.7, 1.0], rel=1e-15)


BAD_LM = [("budget", v) for v in (0, 1.5, "10", True)] + [("seq_len", v) for v in (0, 1.5, 10 ** 6)] + \
    [("batch_size", v) for v in (0, "8")] + [("layers", v) for v in (5, [], ["nosuch"])] + \
    [("reference", v) for v in (3, "nosuch")] + [("units", v) for v in ([], "nosuch", 5)] + \
    [("greedy", v) for v in ("no", None)] + [("pop_size", v) for v in (1, "4")] + [("seed", v) for v in (-1, "0")] + \
    [("out", v) for v in (3, "<file>")] + [("resume", v) for v in ("yes", 1)] + [("progress", v) for v in ("no",)] + \
    [("threads", v) for v in (0, 1.5)] + [("model", v) for v in (5, None)] + \
    [("data", v) for v in ("<float>", "<vocab>", "<short>", "some text")]


def test_bad_arguments_of_search_lm_are_a_named_value_or_type_error(tmp_path, monkeypatch):
    """Property (hypothesis): any one or two bad arguments of search_lm give a ValueError /
    TypeError naming one of them ("data", "model", ...) — never another exception, never an
    evaluation."""
    from hypothesis import HealthCheck, example, given, settings, strategies as st
    m, ids = _gpt(), _ids()
    afile = tmp_path / "afile"
    afile.write_text("")
    calls = _count_losses(monkeypatch)
    special = {"<file>": str(afile), "<float>": ids.astype(np.float32), "<vocab>": ids + 40, "<short>": ids[:5]}

    @settings(derandomize=True, max_examples=50, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.sampled_from(BAD_LM), min_size=1, max_size=2, unique_by=lambda c: c[0]))
    def check(bad):
        ran.append(bad)
        kw = dict(model=m, data=ids, units=_units(), budget=24, seq_len=16, progress=False)
        for name, v in bad:
            kw[name] = special.get(v, v) if isinstance(v, str) else v
        with pytest.raises((ValueError, TypeError)) as e:
            search_lm(kw.pop("model"), kw.pop("data"), kw.pop("units"), **kw)
        assert any(n in str(e.value) for n, _ in bad), (bad, str(e.value))
        assert calls == []
    ran = []
    for case in BAD_LM:                        # every bad value alone, then random pairs
        check = example([case])(check)
    check()
    assert len(ran) > len(BAD_LM)                       # each alone, and pairs


# a bad value for each flag of `lutcore search`
BAD_CLI = [("--budget", v) for v in ("0", "x", "-1", "1.5")] + [("--seed", v) for v in ("-1", "1.5")] + \
    [("--seq-len", v) for v in ("0", "100000")] + [("--batch-size", "0"), ("--threads", "0"), ("--threads", "x")] + \
    [("--units", v) for v in ("nosuch", "truncated:99", "/nonexistent/m.v")] + \
    [("--power", v) for v in ("exact", "exact=x", "exact=nan", "exact=-1", "nosuch=1", "exact=0")] + \
    [("--reference", v) for v in ("nosuch", "truncated:6")] + [("--layers", "nosuch"), ("--out", "<file>")] + \
    [("--checkpoint", "/nonexistent"), ("--data", "/nonexistent.txt")]


def test_bad_flags_of_lutcore_search_exit_2_with_one_line_naming_them(tmp_path, capsys, monkeypatch):
    """Property (hypothesis): any one or two bad flags of `lutcore search` exit 2 with one
    error line naming one of them (the flag, its argument name or the value) — never a
    traceback, never an evaluation."""
    from hypothesis import HealthCheck, example, given, settings, strategies as st
    ckpt = _tiny_checkpoint(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("")
    calls = _count_losses(monkeypatch)
    capsys.readouterr()

    @settings(derandomize=True, max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(st.sampled_from(BAD_CLI), min_size=1, max_size=2, unique_by=lambda c: c[0]))
    def check(bad):
        ran.append(bad)
        flags = {"--checkpoint": [ckpt], "--units": ["exact", "mitchell", "truncated:8"],
                 "--power": ["exact=1.0", "mitchell=0.4", "truncated:8=0.7"], "--budget": ["24"],
                 "--out": [str(tmp_path / "o")]}
        for flag, v in bad:
            flags[flag] = [str(afile) if v == "<file>" else v]
        argv = ["search", "--no-progress"] + [a for f, vs in flags.items() for a in [f, *vs]]
        assert main(argv) == 2, bad
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if "error:" in ln]
        assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("lutcore search: error:"), err
        names = [w for f, v in bad for w in (f, f[2:].replace("-", "_"), v if v != "<file>" else str(afile))]
        assert any(w in lines[0] for w in names), (bad, lines[0])
        assert calls == []
    ran = []
    for case in BAD_CLI:                        # every bad value alone, then random pairs
        check = example([case])(check)
    check()
    assert len(ran) > len(BAD_CLI)                       # each alone, and pairs


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
