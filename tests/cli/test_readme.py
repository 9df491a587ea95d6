"""Every Python code block of README.md runs as written, so the README cannot drift.

The blocks run in order, in one namespace, in a scratch directory that holds what their
placeholders name: ``my_unit/`` (a units directory: mitchell's tables), ``mul8.v`` / ``cells.v``
(a behavioural multiplier; the second with its top ``mul8`` beside another module), ``mul8.c``
(``mul8_approx``), the formats block's EvoApproxLib-style circuits (``mul8u_2HH.c``,
``mul8x4u_0C9.v``, ``mul16u_0Z6.c``, ``model.c``), ``hf_mamba_dir/`` (a Hugging Face Mamba checkpoint), ``llama_dir/`` and
``hf_llama_dir/`` (a 6-layer llama saved by transformers, the second with a word-level
tokenizer.json) and ``text.txt`` (words of that tokenizer); the names the prose leaves to the
reader (``ids``, ``targets``, ``prompt_ids``) are small token arrays.
"""
from _paths import ROOT  # noqa: F401
import os
import re

import numpy as np
import pytest



def python_blocks(path=os.path.join(ROOT, "README.md")):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


@pytest.fixture
def readme_dir(tmp_path, monkeypatch):
    from test_pipeline_models import hf_model, save           # skips without torch/transformers
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.units import approx
    approx.mitchell().save(tmp_path / "my_unit")
    MambaLM(MambaConfig(d_model=32, n_layer=2, vocab_size=256, d_state=8, discretization="simplified",
                        seed=3)).save_pretrained(tmp_path / "hf_mamba_dir")
    save(hf_model("llama"), tmp_path / "llama_dir")
    save(hf_model("llama"), tmp_path / "hf_llama_dir")
    _word_tokenizer(tmp_path / "hf_llama_dir")
    (tmp_path / "text.txt").write_text(" ".join(f"w{i % 127}" for i in range(0, 2000, 7)))
    behavioural = ("module {name}(input signed [7:0] a, input signed [7:0] b, output signed [15:0] p);\n"
                   "  assign p = a * b;\nendmodule\n")
    (tmp_path / "mul8.v").write_text(behavioural.format(name="mul8"))
    (tmp_path / "cells.v").write_text("module helper(input x, output y);\n  assign y = ~x;\nendmodule\n"
                                      + behavioural.format(name="mul8"))
    (tmp_path / "mul8.c").write_text("#include <stdint.h>\n"
                                     "int16_t mul8_approx(int8_t a, int8_t b) { return (int16_t)((a * b) & ~15); }\n")
    # the formats block's circuits, in EvoApproxLib's forms (tests/units/circuits_wide.py)
    import circuits_wide as cw
    for family, form, fname in (("8x8u", "c", "mul8u_2HH.c"), ("8x4u", "verilog", "mul8x4u_0C9.v"),
                                ("16x16u", "c", "mul16u_0Z6.c")):
        text, name = cw.source(family, "trunc", form)
        (tmp_path / fname).write_text(text.replace(name, fname.split(".")[0]))
    (tmp_path / "model.c").write_text("#include <stdint.h>\n"
                                      "uint64_t f(uint64_t a, uint64_t b) { return (a * b) & ~0xFull; }\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _word_tokenizer(path):
    """A word-level tokenizer.json over the test llama's 128 ids: "w0" .. "w126", "[UNK]"."""
    from tokenizers import Tokenizer as HF, models, pre_tokenizers
    vocab = {f"w{i}": i for i in range(127)}
    vocab["[UNK]"] = 127
    t = HF(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.save(os.path.join(path, "tokenizer.json"))


def test_readme_has_python_blocks():
    blocks = python_blocks()
    assert len(blocks) >= 4
    assert any("my_unit/" in b for b in blocks) and any("Pipeline" in b for b in blocks)


def test_readme_python_blocks_run(readme_dir, capsys):
    import lutcore
    lutcore.set_num_threads(1)
    rng = np.random.default_rng(0)
    ns = {"ids": rng.integers(0, 128, (2, 16)), "targets": rng.integers(0, 128, (2, 16)),
          "prompt_ids": [5, 11, 42, 7], "__name__": "__readme__"}
    for i, block in enumerate(python_blocks()):
        try:
            exec(compile(block, f"README.md python block {i}", "exec"), ns)
        except Exception as e:                      # name the block that drifted
            raise AssertionError(f"README python block {i} failed: {type(e).__name__}: {e}\n{block}") from e
    out = capsys.readouterr().out
    assert "units" in out                          # print(u.verify()) printed the report
    assert (readme_dir / "out" / "config.json").is_file()
