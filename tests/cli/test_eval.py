"""The damage table (lutcore.evaluate, `lutcore eval`): one model, the same tokens,
one row per unit.

Random-init transformers models (llama, gpt2, and mamba) with a BPE tokenizer.json
trained here with `tokenizers`, saved with save_pretrained; lutcore checkpoints
trained for a few steps.  The float row is held to transformers' own loss
(``model.loss_function`` on its logits) over the same windows.

Error budget:
  FLOAT_LOSS_TOL   |lutcore float loss - transformers' float32 loss|: both from float32
                   logits that differ by summation order (<= ~1e-6 relative, see
                   test_pipeline_hf's HF_LOGIT_TOL); lutcore accumulates the mean in float64.
"""
from _paths import ROOT, TESTS
import json
import math
import os

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.evaluate import evaluate_units, format_table
from lutcore.tokenizer import Tokenizer
from lutcore.train.data import builtin_corpus
from test_pipeline_models import hf_model, save, torch

FLOAT_LOSS_TOL = 2e-5
TEXT = builtin_corpus()[:60_000].encode("ascii", "ignore").decode()       # a small alphabet: vocab 128 holds it


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)          # a busy shared machine makes spinning thread teams slow (conftest restores)


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers
    hf = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=128, special_tokens=["[UNK]"], show_progress=False)
    hf.train_from_iterator([TEXT], trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    hf.save(str(path))
    assert hf.get_vocab_size() <= 128
    return str(path)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "text.txt"
    p.write_text(TEXT[-8000:], encoding="utf-8")
    return str(p)


def _hf_dir(tmp_path, kind, tokenizer_json, **over):
    import shutil
    model = hf_model(kind, seed=3, **over)
    save(model, tmp_path)
    shutil.copy(tokenizer_json, tmp_path / "tokenizer.json")
    return str(tmp_path), model


def _transformers_loss(model, ids, L):
    """transformers' own loss over the windows of L inputs (every full window)."""
    n = (ids.size - 1) // L
    x = np.stack([ids[w * L: w * L + L] for w in range(n)])
    y = np.stack([ids[w * L + 1: w * L + L + 1] for w in range(n)])
    with torch.no_grad():
        logits = model(torch.from_numpy(x)).logits
        loss = model.loss_function(logits=logits, labels=None, vocab_size=model.config.vocab_size,
                                   shift_labels=torch.from_numpy(y))
    return float(loss), logits.argmax(-1).numpy()


@pytest.mark.parametrize("kind,layers", [("llama", 2), ("gpt2", 2), ("qwen2", 2), ("mistral", 2), ("mamba", 2)])
def test_float_row_equals_transformers_loss(tmp_path, tokenizer_json, data_file, kind, layers):
    path, model = _hf_dir(tmp_path, kind, tokenizer_json, num_hidden_layers=layers)
    own_context = kind in ("llama", "gpt2")                  # 64 positions; the others: long contexts, given 48
    res = evaluate_units(path, data_file, units=["none", "exact", "mitchell"], seq_len=None if own_context else 48)
    L = res.config["seq_len"]
    assert L == (64 if own_context else 48)                  # the model's 64 positions (< 512)
    ids = Tokenizer.from_file(tokenizer_json).encode(open(data_file, encoding="utf-8").read())
    want, hf_top1 = _transformers_loss(model, ids, L)
    f, ex, mi = res.rows
    print(format_table(res), f"\ntransformers loss {want:.6f}")
    assert res.config["windows"] == (ids.size - 1) // L and res.config["tokens"] == res.config["windows"] * L
    assert abs(f["loss"] - want) <= FLOAT_LOSS_TOL * want, (f["loss"], want)
    assert f["units"] == "none" and f["dloss"] == 0 and f["top1_agreement"] == 1.0
    assert math.isclose(f["perplexity"], math.exp(f["loss"])) and math.isclose(f["bits_per_token"],
                                                                                 f["loss"] / math.log(2))
    assert ex["units"] == "exact" and ex["wce_pct"] == 0 and abs(ex["dloss"]) < 0.05
    assert mi["units"] == "mitchell" and mi["loss"] != f["loss"] and mi["wce_pct"] > 1
    assert math.isclose(mi["dloss"], mi["loss"] - f["loss"]) and 0 < mi["top1_agreement"] <= 1


def test_rows_follow_the_order_given_and_float_is_always_the_reference(tmp_path, tokenizer_json, data_file):
    path, _ = _hf_dir(tmp_path, "llama", tokenizer_json, num_hidden_layers=1)
    ids = Tokenizer.from_file(tokenizer_json).encode(open(data_file, encoding="utf-8").read())[:200]
    seen = []
    res = evaluate_units(path, ids, units=["truncated:6", "mitchell"], seq_len=32,
                         on_window=lambda d, t, s: seen.append((d, t, s)))
    assert [r["units"] for r in res.rows] == ["truncated:6", "mitchell"]
    assert res.config["windows"] == 199 // 32 and res.config["tokens"] == 6 * 32       # the tail is not counted
    assert res.reference["units"] == "none"
    assert math.isclose(res["mitchell"]["dloss"], res["mitchell"]["loss"] - res.reference["loss"])
    assert seen[-1][0] == seen[-1][1] == 3 * 6 and {s for _, _, s in seen} == {"none", "truncated:6", "mitchell"}


def test_attention_runs_each_spec_in_attention_too(tmp_path, tokenizer_json, data_file):
    """attention=True: a spec's row is the mapping {"*", "*.qk", "*.pv": spec}, keeps the unit's
    name and WCE, and the progress names the unit; without it attention stays float."""
    path, _ = _hf_dir(tmp_path, "llama", tokenizer_json, num_hidden_layers=2)
    ids = Tokenizer.from_file(tokenizer_json).encode(open(data_file, encoding="utf-8").read())[:4 * 32 + 1]
    seen = []
    att = evaluate_units(path, ids, units=["mitchell"], seq_len=32, attention=True,
                         on_window=lambda d, t, s: seen.append(s))
    plain = evaluate_units(path, ids, units=["mitchell", {"*": "mitchell", "*.qk": "mitchell", "*.pv": "mitchell"}],
                           seq_len=32)
    a, (p, m) = att["mitchell"], plain.rows
    print(format_table(att), format_table(plain), sep="\n")
    assert a["loss"] == m["loss"] != p["loss"] and a["top1_agreement"] == m["top1_agreement"]
    assert a["name"] == "mitchell" and a["wce_pct"] == p["wce_pct"] > 1 and a["mae_pct"] == p["mae_pct"]
    assert a["layers"]["model.layers.1.self_attn.pv"] == "mitchell" and m["wce_pct"] is None
    assert set(seen) == {"none", "mitchell"}
    assert "1.56" in format_table(att)


def test_attention_example_runs(tmp_path, capsys):
    """examples/attention_units.py, shortened: both tables (every unit, attention in float and
    through the unit), the untrained llama's note, and the PNG."""
    import importlib.util
    path = os.path.join(ROOT, "examples", "attention_units.py")
    spec = importlib.util.spec_from_file_location("attention_units", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    png = str(tmp_path / "a.png")
    assert mod.main(["--steps", "3", "--eval-tokens", "256", "--units", "exact", "mitchell", "--png", png,
                     "--threads", "1"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert out.count("top-1=float (attn)") == 2 and "RANDOM WEIGHTS" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("float ", "exact ", "mitchell "))]
    assert [r[0] for r in rows] == ["float", "exact", "mitchell"] * 2
    assert all(len(r) == 8 for r in rows)
    assert os.path.getsize(png) > 5000


def test_bad_arguments(tmp_path, tokenizer_json):
    path, _ = _hf_dir(tmp_path, "gpt2", tokenizer_json, num_hidden_layers=1)
    with pytest.raises(ValueError, match="seq_len: 65 exceeds the model's context of 64"):
        evaluate_units(path, np.arange(300) % 100, units=["none"], seq_len=65)
    with pytest.raises(ValueError, match="data: 10 tokens is fewer than one window"):
        evaluate_units(path, np.arange(10), units=["none"], seq_len=16)
    with pytest.raises(ValueError, match="units: unknown name 'bogus'"):
        evaluate_units(path, np.arange(300) % 100, units=["none", "bogus"], seq_len=16)
    with pytest.raises(ValueError, match="data: .*outside|data"):
        evaluate_units(path, np.arange(300), units=["none"], seq_len=16)          # ids >= vocab 128
    with pytest.raises(FileNotFoundError, match="model: no such directory"):
        evaluate_units(str(tmp_path / "nope"), "text", units=["none"])
    with pytest.raises(TypeError, match="model_or_path"):
        evaluate_units(3, "text")


def test_cli_eval_model_writes_table_json_and_png(tmp_path, tokenizer_json, data_file, capsys):
    path, _ = _hf_dir(tmp_path / "m", "llama", tokenizer_json, num_hidden_layers=2)
    out = tmp_path / "out"
    circuits = os.path.join(TESTS, "circuits")
    v, c = os.path.join(circuits, "behavioural_mul.v"), os.path.join(circuits, "array_mul.c") + ":mul8_trunc4"
    assert main(["eval", "--model", path, "--data", data_file, "--units", "none", "exact", "truncated:6",
                 "mitchell", v, c, "--seq-len", "32", "--out", str(out), "--threads", "1"]) == 0
    text = capsys.readouterr().out
    print(text)
    assert "Δloss" in text and "top-1 = float" in text and "mitchell" in text and "WCE%" in text
    rep = json.load(open(out / "eval.json"))
    assert [r["units"] for r in rep["results"]] == ["none", "exact", "truncated:6", "mitchell", v, c]
    assert rep["results"][4]["loss"] == rep["results"][1]["loss"]          # the behavioural * is the exact unit
    assert rep["results"][5]["name"] == "mul8_trunc4" and rep["results"][5]["wce_pct"] > 0
    for r in rep["results"]:
        assert {"units", "digest", "loss", "perplexity", "bits_per_token", "dloss", "top1_agreement",
                "wce_pct"} <= set(r)
    assert rep["results"][0]["digest"] is None and len(rep["results"][3]["digest"]) == 64
    assert os.path.getsize(out / "eval.png") > 5000
    assert main(["eval", "--model", path, "--units", "none"]) == 2                   # --data required


def _tiny_run(tmp_path, units, eval_units=("none",)):
    data = tmp_path / "train.txt"
    data.write_text(TEXT[:12_000], encoding="utf-8")
    args = ["train", "--data", str(data), "--steps", "3", "--d-model", "16", "--layers", "1", "--d-state", "4",
            "--seq-len", "32", "--batch-size", "2", "--sample-tokens", "4", "--out", str(tmp_path / "run"),
            "--threads", "1"] + (["--eval-units", *eval_units] if eval_units else [])
    if units:
        args += ["--units", units]
    assert main(args) == 0
    return str(tmp_path / "run" / "checkpoint")


def test_checkpoint_trained_through_units_evaluates_and_generates(tmp_path, capsys):
    ckpt = _tiny_run(tmp_path, "truncated:6")
    capsys.readouterr()
    assert main(["eval", "--checkpoint", ckpt, "--out", str(tmp_path / "e1")]) == 0
    cap = capsys.readouterr()
    assert "trained through units truncated:6" in cap.err
    rows = json.load(open(tmp_path / "e1" / "eval.json"))["results"]
    assert [r["units"] for r in rows] == ["truncated:6"]              # its own units by default
    cfg = json.load(open(tmp_path / "e1" / "eval.json"))["config"]
    held = json.load(open(os.path.join(ckpt, "heldout.json")))
    assert cfg["data_tokens"] == held["held_out"] and cfg["seq_len"] == 32      # train's held-out split
    assert main(["eval", "--checkpoint", ckpt, "--units", "none", "mitchell", "--out", str(tmp_path / "e2")]) == 0
    rows = json.load(open(tmp_path / "e2" / "eval.json"))["results"]
    assert rows[0]["units"] == "none" and rows[1]["loss"] != rows[0]["loss"]
    assert main(["generate", "--checkpoint", ckpt, "--prompt", "def ", "--max-new-tokens", "5"]) == 0


def test_checkpoint_units_read_the_save_resume_reads(tmp_path, monkeypatch):
    """An interrupted save is read from its complete copy (lutcore._io.saved_dir): the units
    a checkpoint was trained through come from there too, as its weights do."""
    import shutil

    import lutcore._io as io
    from lutcore.evaluate import checkpoint_units, load_checkpoint
    ckpt = _tiny_run(tmp_path, "truncated:6")
    complete = str(tmp_path / "complete")
    shutil.copytree(ckpt, complete)
    for n in ("trainer.json", "units.safetensors"):               # the directory itself: a torn mixture
        if os.path.exists(os.path.join(ckpt, n)):
            os.remove(os.path.join(ckpt, n))
    monkeypatch.setattr(io, "saved_dir", lambda p: complete if os.path.abspath(p) == os.path.abspath(ckpt) else p)
    assert checkpoint_units(ckpt) == lutcore.units.approx.truncated(6)
    assert load_checkpoint(ckpt).model.units == lutcore.units.approx.truncated(6)
    res = evaluate_units(ckpt, TEXT[:2000], units=["none"], seq_len=32)             # the directory is found
    assert res.config["trained_units"] == "truncated:6"


def test_eval_without_data_scores_the_held_out_split(tmp_path, capsys):
    ckpt = _tiny_run(tmp_path, None, eval_units=None)              # train's default: its damage table
    out = capsys.readouterr().out
    print(out)
    table = out[out.index("units "):]
    for spec in ("none", "exact", "mitchell", "truncated:6"):
        assert f"\n{spec} " in table
    train_rows = json.load(open(tmp_path / "run" / "eval" / "eval.json"))["results"]
    assert [r["units"] for r in train_rows] == ["none", "exact", "mitchell", "truncated:6"]
    assert main(["eval", "--checkpoint", ckpt, "--out", str(tmp_path / "e")]) == 0
    rep = json.load(open(tmp_path / "e" / "eval.json"))
    from lutcore.train.data import held_out_size
    n = Tokenizer.bytes().encode(TEXT[:12_000]).size
    assert rep["config"]["data_tokens"] == held_out_size(n, 32) < n
    assert rep["results"][0]["units"] == "none"
    assert math.isclose(rep["results"][0]["loss"], train_rows[0]["loss"])      # the same split, the same windows
    tr = lutcore.train.Trainer.resume(ckpt)
    ev = tr.evaluate(Tokenizer.bytes().encode(TEXT[:12_000])[-held_out_size(n, 32):], seq_len=32)
    assert f"held-out: loss {ev['loss']:.4f}" in out              # what train reported, on the same split


def test_python_face_on_a_model_object():
    from lutcore.models import GPT, GPTConfig
    m = GPT(GPTConfig(vocab=256, dim=32, context=16, layers=1, heads=2, seed=1))
    ids = Tokenizer.bytes().encode(TEXT[:400])
    res = lutcore.evaluate_units(m, ids, units=["none", "exact", "reduced:3"])
    assert res.config["seq_len"] == 16 and res.config["windows"] == 399 // 16
    # the float row is the model's own cross-entropy over the same windows
    from lutcore.models import _layers as nn
    wins = np.stack([ids[w * 16: w * 16 + 17] for w in range(399 // 16)])
    loss, _ = nn.cross_entropy(m.forward(wins[:, :-1]), wins[:, 1:])
    assert abs(res.rows[0]["loss"] - loss) < 1e-6
    assert res.rows[2]["dloss"] != 0


@pytest.mark.parametrize("spec", ["exact:8u", "exact:12u"])
def test_a_checkpoint_trained_through_another_format_keeps_it_and_eval_compares_formats(tmp_path, capsys, spec):
    """lutcore train --units exact:8u (zero points, block-scaled) and exact:12u (a gate netlist):
    the checkpoint keeps the unit (format, table or netlist), eval reads it back and compares it
    with units of other formats in one table."""
    from lutcore.evaluate import checkpoint_units
    ckpt = _tiny_run(tmp_path, spec)
    u = checkpoint_units(ckpt)
    assert u == lutcore.units.resolve(spec) and u.format == lutcore.units.resolve(spec).format
    capsys.readouterr()
    assert main(["eval", "--checkpoint", ckpt, "--units", "exact", "exact:8u x 4u", spec,
                 "--out", str(tmp_path / "e")]) == 0
    rows = json.load(open(tmp_path / "e" / "eval.json"))["results"]
    assert [r["units"] for r in rows] == ["exact", "exact:8u x 4u", spec]
    assert all(np.isfinite(r["loss"]) for r in rows)


def test_eval_attention_flag_runs_attention_products_through_each_unit(tmp_path, capsys, tokenizer_json, data_file):
    path = str(_hf_dir(tmp_path / "m", "llama", tokenizer_json)[0])
    out = tmp_path / "ev"
    assert main(["eval", "--model", path, "--data", data_file, "--units", "exact", "mitchell", "--attention",
                 "--seq-len", "32", "--out", str(out), "--threads", "1"]) == 0
    rep = json.load(open(out / "eval.json"))
    plain = tmp_path / "ev0"
    assert main(["eval", "--model", path, "--data", data_file, "--units", "exact", "mitchell",
                 "--seq-len", "32", "--out", str(plain), "--threads", "1"]) == 0
    base = json.load(open(plain / "eval.json"))
    for r, b in zip(rep["results"], base["results"]):
        assert r["layers"]["model.layers.0.self_attn.pv"] == b["units"] and r["loss"] != b["loss"]
    capsys.readouterr()
    mamba = str(_hf_dir(tmp_path / "mb", "mamba", tokenizer_json)[0])
    assert main(["eval", "--model", mamba, "--data", data_file, "--units", "exact", "--attention",
                 "--seq-len", "32", "--out", str(tmp_path / "e3")]) != 0
    assert "attention products" in capsys.readouterr().err
