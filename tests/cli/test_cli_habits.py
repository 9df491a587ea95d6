"""A new user's first hour (issue 17): the CLI and the package say what they do and never do
something else silently.  One test per item; each failed before its fix.

* `lutcore --version`, a bare `lutcore` prints help, `--help` shows defaults, `python -m lutcore`.
* `import lutcore` loads models / train / pipeline / torch lazily (PEP 562), never torch or ray.
* importing lutcore from a source tree without built extensions explains what to do.
* `generate --checkpoint --units` runs through the units given (default: the checkpoint's, named
  in the banner with its digest); output changes with an approximate unit.
* text that is not UTF-8 is refused with the file name and byte offset (unless --encoding).
* `generate --model` without tokenizer.json: says so; refuses byte tokens for a vocabulary that
  is not byte-sized unless --tokenizer bytes; `--stages` above the layer count is refused.
* `Pipeline.logits` windows text longer than a gpt2's learned positions (against transformers).
"""
from _paths import ROOT  # noqa: F401
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import lutcore
from lutcore.cli import main

TEXT = "hello world, hello lutcore. the cat sat on the mat. " * 12


def _run(args, cwd=None, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = ROOT
    env.update(env_extra or {})
    return subprocess.run([sys.executable] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- habits of a good CLI
def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lutcore {lutcore.__version__}"


def test_bare_lutcore_prints_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lutcore") and "train" in out and "compare" in out and "generate" in out


def test_help_shows_defaults(capsys):
    assert main(["train", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())             # argparse wraps lines
    for flag, default in (("--d-model", "128"), ("--layers", "3"), ("--seq-len", "128"), ("--lr", "0.003"),
                          ("--out", "lutcore-run"), ("--encoding", "utf-8")):
        assert re.search(re.escape(flag) + r" \S+ .*?default:? " + re.escape(default), out), (flag, out)
    assert main(["compare", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "default: exact" in out and "default: gpt" in out


def test_python_dash_m_lutcore():
    r = _run(["-m", "lutcore", "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"lutcore {lutcore.__version__}"


# ---------------------------------------------------------------- lazy submodules
def test_lazy_submodules_without_torch_or_ray():
    code = ("import sys, lutcore\n"
            "heavy = ('torch', 'ray', 'transformers', 'lutcore.models', 'lutcore.train', 'lutcore.pipeline')\n"
            "assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]\n"
            "assert lutcore.models.MambaLM and lutcore.train.Trainer and lutcore.pipeline.Pipeline\n"
            "assert lutcore.experiment.compare and 'models' in dir(lutcore)\n"
            "assert not [m for m in ('torch', 'ray') if m in sys.modules]\n"
            "try:\n    lutcore.no_such_thing\nexcept AttributeError as e:\n    print('ok', e)\n")
    r = _run(["-c", code])
    assert r.returncode == 0, r.stderr
    assert "ok module 'lutcore' has no attribute 'no_such_thing'" in r.stdout


def test_lazy_torch_submodule_resolves_when_importable(monkeypatch):
    import types
    fake = types.ModuleType("lutcore.torch")
    monkeypatch.delitem(lutcore.__dict__, "torch", raising=False)
    monkeypatch.setitem(sys.modules, "lutcore.torch", fake)
    assert lutcore.torch is fake
    monkeypatch.delitem(lutcore.__dict__, "torch")


# ---------------------------------------------------------------- import from a source tree
def _python_tree(dst, with_setup):
    shutil.copytree(os.path.join(ROOT, "lutcore"), os.path.join(dst, "lutcore"),
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.c", "*.html"))
    if with_setup:
        for f in ("setup.py", "pyproject.toml"):
            shutil.copy(os.path.join(ROOT, f), dst)


@pytest.mark.parametrize("with_setup", [True, False], ids=["source-tree", "broken-install"])
def test_import_without_native_extensions_says_what_to_do(tmp_path, with_setup):
    _python_tree(tmp_path, with_setup)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", "import lutcore"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    print(last)
    assert last.startswith("ImportError: Error importing lutcore") and "lutcore._native" in last
    if with_setup:
        assert "source tree" in last and "build_ext --inplace" in last and str(tmp_path) in last
    else:
        assert "reinstall" in last


# ---------------------------------------------------------------- generate --checkpoint --units
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A float32-trained and a mitchell-trained tiny Mamba checkpoint."""
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.train import Trainer
    d = tmp_path_factory.mktemp("ckpts")
    out = {}
    for name, units in (("float", None), ("mitchell", "mitchell")):
        m = MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=256, d_state=4, seed=1), units=units)
        tr = Trainer(m)
        tr.train(TEXT, epochs=1, seq_len=16, batch_size=4)
        tr.save_checkpoint(d / name)
        out[name] = str(d / name)
    return out


def _generate(capsys, ckpt, units=None):
    argv = ["generate", "--checkpoint", ckpt, "--prompt", "hello", "--max-new-tokens", "24",
            "--temperature", "1", "--seed", "0", "--threads", "1"] + ([] if units is None else ["--units", units])
    assert main(argv) == 0
    o = capsys.readouterr()
    return o.out, o.err


def test_generate_units_change_the_output(checkpoints, capsys):
    outs = {u: _generate(capsys, checkpoints["float"], u) for u in (None, "none", "exact", "mitchell",
                                                                     "truncated:10")}
    print({k: v[0] for k, v in outs.items()})
    assert outs[None][0] == outs["none"][0]                       # a float checkpoint runs in float by default
    assert outs["truncated:10"][0] != outs[None][0]               # --units is used, not ignored
    assert outs["mitchell"][0] != outs[None][0]
    assert outs["mitchell"][0] != outs["truncated:10"][0]
    from lutcore.units import approx
    assert f"units: truncated:10 (digest {approx.truncated(10).digest[:16]})" in outs["truncated:10"][1]
    assert "float32" in outs[None][1] and "SIMD" in outs[None][1] and "threads: 1" in outs[None][1]


def test_generate_defaults_to_the_checkpoints_units(checkpoints, capsys):
    from lutcore.units import approx
    out, err = _generate(capsys, checkpoints["mitchell"])        # had refused: "pass units= to resume it"
    assert f"units: mitchell (digest {approx.mitchell().digest[:16]})" in err and "checkpoint's" in err
    assert out == _generate(capsys, checkpoints["mitchell"], "mitchell")[0]
    assert out != _generate(capsys, checkpoints["mitchell"], "none")[0]


# ---------------------------------------------------------------- text that is not UTF-8
def _bad_files(d):
    lat = d / "latin1.txt"
    lat.write_bytes(("caf\u00e9 " * 40 + "na\u00efve").encode("latin-1"))     # first bad byte at offset 3
    u16 = d / "utf16.txt"
    u16.write_bytes(TEXT.encode("utf-16"))                                    # BOM ff fe at offset 0
    nul = d / "le16.txt"
    nul.write_bytes(TEXT.encode("utf-16-le"))                                 # 'h' then a NUL at offset 1
    return [(lat, 3), (u16, 0), (nul, 1)]


def test_non_utf8_text_refused_with_file_and_offset(tmp_path, capsys):
    from lutcore.train.data import load_tokens, read_text
    from lutcore.tokenizer import Tokenizer
    for f, off in _bad_files(tmp_path):
        with pytest.raises(ValueError) as ei:
            read_text(f)
        msg = str(ei.value)
        print(msg)
        assert str(f) in msg and f"byte offset {off}" in msg and "encoding" in msg
        with pytest.raises(ValueError, match=f"byte offset {off}"):
            load_tokens(f, Tokenizer.bytes())
        for cmd in (["train", "--steps", "1", "--out", str(tmp_path / "run")],
                    ["compare", "--units", "none", "--steps", "1", "--out", str(tmp_path / "cmp")]):
            assert main(cmd + ["--data", str(f)]) == 2
            err = capsys.readouterr().err
            assert str(f) in err and f"byte offset {off}" in err and len(err.strip().splitlines()) == 1
    assert read_text(tmp_path / "latin1.txt", "latin-1").startswith("caf\u00e9 ")
    assert read_text(tmp_path / "utf16.txt", "utf-16") == TEXT
    with pytest.raises(ValueError, match="encoding: unknown"):
        read_text(tmp_path / "latin1.txt", "no-such-codec")


def test_encoding_flag_accepts_latin1(tmp_path, capsys):
    f = tmp_path / "latin1.txt"
    f.write_bytes(("caf\u00e9 na\u00efve " * 60).encode("latin-1"))
    rc = main(["train", "--data", str(f), "--encoding", "latin-1", "--steps", "1", "--d-model", "8", "--layers", "1",
               "--d-state", "2", "--seq-len", "16", "--batch-size", "2", "--sample-tokens", "0", "--threads", "1",
               "--out", str(tmp_path / "run")])
    o = capsys.readouterr()
    assert rc == 0, o.err
    assert "units: float32" in o.out and "mixed precision: off" in o.out and "SIMD" in o.out


# ---------------------------------------------------------------- Hugging Face directories
@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    from test_pipeline_models import hf_model, save            # skips without torch/transformers
    return str(save(hf_model("llama"), tmp_path_factory.mktemp("llama")))   # 6 layers, vocab 128


def test_missing_tokenizer_json_refuses_byte_tokens_for_other_vocab(llama_dir, capsys):
    base = ["generate", "--model", llama_dir, "--prompt", "The cat", "--max-new-tokens", "2", "--threads", "1"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "no tokenizer.json" in err and "128" in err and "--tokenizer bytes" in err
    assert main(base + ["--tokenizer", "bytes"]) == 0
    assert "byte-level" in capsys.readouterr().err


def test_stages_more_than_layers(llama_dir, capsys):
    base = ["generate", "--model", llama_dir, "--prompt", "ab", "--max-new-tokens", "1", "--threads", "1",
            "--tokenizer", "bytes", "--stages", "9"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "9 stages for a 6-layer model" in err and "--allow-empty-stages" in err
    assert main(base + ["--allow-empty-stages"]) == 0
    capsys.readouterr()


def test_pipeline_logits_windows_long_text(tmp_path):
    """gpt2 with 64 learned positions: 150 tokens in sliding windows, against transformers on
    the same windows."""
    import torch
    from test_pipeline_models import hf_model, save
    from lutcore.pipeline import Pipeline
    hm = hf_model("gpt2")
    save(hm, tmp_path)
    ids = np.random.default_rng(3).integers(0, 128, 150)
    with Pipeline.from_pretrained(tmp_path, threads=1) as p:
        P = p.spec.max_pos
        assert P == 64
        got = p.logits(ids)                                         # had: "positions ... exceed"
        got16 = p.logits(ids, stride=16)
        assert np.array_equal(p.logits(ids[:50]), p.logits(ids[:50], ))
        with pytest.raises(ValueError, match="stride"):
            p.logits(ids, stride=65)

    def hf(a, b):
        with torch.no_grad():
            return hm(torch.from_numpy(ids[a:b][None])).logits[0].numpy()

    for out, stride in ((got, 32), (got16, 16)):
        assert out.shape == (150, 128)
        want, end = [hf(0, P)], P
        while end < 150:
            new_end = min(end + stride, 150)
            want.append(hf(new_end - P, new_end)[end - (new_end - P):])
            end = new_end
        want = np.concatenate(want)
        diff = float(np.abs(out - want).max())
        print(f"stride {stride}: max |diff| vs transformers {diff:.2e}")
        assert diff < 1e-4 * max(1.0, float(np.abs(want).max()))


def test_compare_report_names_defaulted_tables(tmp_path):
    """A units directory holding only mul_lut.bin: the compare report says requant/relu defaulted."""
    from lutcore.experiment import compare
    from lutcore.units import approx
    d = tmp_path / "only_mul"
    d.mkdir()
    approx.mitchell().mul.astype("<i2").tofile(d / "mul_lut.bin")
    r = compare(units=[str(d)], steps=2, dim=16, context=8, batch=2, layers=1, threads=1)
    assert r.runs[1].units_defaulted == ["requant", "relu"] and r.runs[0].units_defaulted is None
    assert r.to_dict()["runs"][2]["units_defaulted"] == ["requant", "relu"]
