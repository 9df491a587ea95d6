"""``lutcore generate --model DIR --stages N [--units ...]`` and ``lutcore inspect DIR``."""
import json
import os

import pytest

from lutcore.cli import main
from lutcore.pipeline import Pipeline
from lutcore.tokenizer import Tokenizer

from test_pipeline_models import hf_model, save


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(save(hf_model("llama"), tmp_path_factory.mktemp("llama")))


def _word_tokenizer(path):
    """A word-level tokenizer.json over the model's 128 ids: "w0" .. "w126", "[UNK]"."""
    from tokenizers import Tokenizer as HF, models, pre_tokenizers, decoders
    vocab = {f"w{i}": i for i in range(127)}
    vocab["[UNK]"] = 127
    t = HF(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.decoder = decoders.WordPiece(prefix="##")          # joins words with spaces
    t.save(os.path.join(path, "tokenizer.json"))


def test_generate_model_stages_matches_the_api(model_dir, tmp_path, capsys):
    eos = json.load(open(os.path.join(model_dir, "config.json"))).get("eos_token_id")
    for units in (None, "exact"):
        argv = ["generate", "--model", model_dir, "--prompt", "The cat", "--stages", "2",
                "--max-new-tokens", "6", "--threads", "1", "--tokenizer", "bytes"] + (["--units", units] if units else [])
        assert main(argv) == 0
        out = capsys.readouterr()
        with Pipeline.from_pretrained(model_dir, splits=[3, 3], units=units, threads=1) as p:
            tok = Tokenizer.bytes()
            want = tok.decode(p.generate(tok.encode("The cat"), 6, stop_ids=eos))
        assert out.out == want + "\n"
        assert "stage 1 (stage1): layers 3..5" in out.err and "byte-level" in out.err


def test_generate_uses_the_checkpoints_tokenizer(model_dir, tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    for f in ("config.json", "model.safetensors"):
        (d / f).write_bytes(open(os.path.join(model_dir, f), "rb").read())
    _word_tokenizer(d)
    assert main(["generate", "--model", str(d), "--prompt", "w5 w11 w42 w7", "--stages", "3",
                 "--max-new-tokens", "5", "--threads", "1"]) == 0
    out = capsys.readouterr()
    tok = Tokenizer.from_file(d / "tokenizer.json")
    assert tok.encode("w5 w11 w42 w7").tolist() == [5, 11, 42, 7]
    with Pipeline.from_pretrained(d) as p:
        want = p.generate([5, 11, 42, 7], 5, stop_ids=json.load(open(d / "config.json")).get("eos_token_id"))
    assert out.out.strip() == tok.decode(want) and out.out.startswith("w5 w11 w42 w7")
    assert "tokenizer.json" in out.err


def test_generate_argument_errors(model_dir, capsys):
    assert main(["generate", "--prompt", "x"]) == 2
    assert "--checkpoint DIR (a lutcore checkpoint) or --model DIR" in capsys.readouterr().err
    assert main(["generate", "--model", model_dir, "--checkpoint", model_dir, "--prompt", "x"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["generate", "--model", model_dir, "--prompt", "", "--stages", "2", "--tokenizer", "bytes"]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["generate", "--model", model_dir, "--prompt", "x", "--stages", "0"]) == 2
    assert "--stages" in capsys.readouterr().err
    assert main(["generate", "--model", os.path.dirname(model_dir), "--prompt", "x"]) == 2
    assert "config.json" in capsys.readouterr().err


def test_inspect_prints_spec_tensors_and_plan(model_dir, tmp_path, capsys):
    assert main(["inspect", model_dir, "--stages", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llama (family llama): 6 layers, hidden 64, heads 4/2 x 16")
    assert "tensors: 56 expected, 56 present" in out
    assert [line.split(":")[0].strip() for line in out.splitlines() if line.startswith("  stage")] == \
        ["stage 0 (stage0)", "stage 1 (stage1)", "stage 2 (stage2)", "stage 3 (stage3)"]
    assert "layers 0..1 + head" in out and "layers 5..5" in out
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert main(["inspect", str(tmp_path)]) == 2
    assert "unsupported architecture: 'bert'" in capsys.readouterr().err


def test_generate_checkpoint_still_works(tmp_path, capsys):
    import lutcore
    (tmp_path / "t.txt").write_text(" ".join(["alpha", "beta", "gamma", "delta"] * 500))
    assert main(["train", "--data", str(tmp_path / "t.txt"), "--steps", "2", "--d-model", "16", "--layers", "1",
                 "--seq-len", "16", "--batch-size", "2", "--out", str(tmp_path / "run"), "--sample-tokens", "2",
                 "--threads", "1"]) == 0
    lutcore.set_num_threads(1)
    capsys.readouterr()
    assert main(["generate", "--checkpoint", str(tmp_path / "run" / "checkpoint"), "--prompt", "alpha",
                 "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("alpha") and len(out.rstrip("\n").encode("utf-8", "replace")) >= 5
