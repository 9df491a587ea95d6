"""Issue 26, the Python half: one owner each for threads, the exact-or-table choice and
the checkpoint.

* threads: an entry point (a model, Trainer, Stage/Pipeline, a lutcore.torch layer) built
  with ``threads=n`` runs every native call with n threads (or 1 where a kernel is too
  small to share) — never lutcore's global default, set here to 3 so a leak shows.
  ``lutcore._threads.record()`` sees every native call that takes a thread count.
* Units.kernel_path: forcing "table" on the exact units sends every integer product
  through the table kernels (no exact-path call) and gives the same bits.
* ``lutcore eval --checkpoint`` opens the checkpoint once.
"""
import numpy as np
import pytest

import lutcore
from lutcore import _threads
from lutcore.models import GPT, GPTConfig, MambaConfig, MambaLM
from lutcore.train import Trainer

LEAK = 3          # the global default while a model built with threads=n runs


@pytest.fixture(autouse=True)
def _leaky_default():
    lutcore.set_num_threads(LEAK)           # conftest restores the thread count


def _counts(calls):
    assert calls, "no native call recorded"
    return {n for _, n in calls}


def _ids(V, B=2, L=9, seed=0):
    return np.random.default_rng(seed).integers(0, V, (B, L))


def test_record_sees_explicit_and_scoped_counts():
    a = np.ones((5, 7), np.int8)
    with _threads.record() as calls:
        lutcore.lut_gemm(a, a.T.copy(), threads=2)
        with _threads.scope(1):
            lutcore.lut_gemm(a, a.T.copy())
            with _threads.scope(None):                   # a nested None inherits
                lutcore.lut_gemm(a, a.T.copy())
        lutcore.lut_gemm(a, a.T.copy())
    assert [n for f, n in calls if f.startswith("gemm.gemm")] == [2, 1, 1, LEAK]
    assert lutcore.lut_gemm.__module__ == "lutcore.ops.gemm"


MODELS = {
    "gpt": lambda units, n: GPT(GPTConfig(vocab=40, dim=16, context=12, layers=2, heads=2, seed=1), units=units,
                                threads=n),
    "mamba": lambda units, n: MambaLM(MambaConfig(vocab_size=40, d_model=16, n_layer=2, d_state=4, seed=2),
                                      units=units, unit_backward=True, threads=n),
}


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("kind,units", [("gpt", None), ("gpt", "exact"), ("gpt", "mitchell"), ("mamba", None),
                                        ("mamba", "mitchell")])
def test_model_every_call_uses_its_threads(kind, units, n):
    m = MODELS[kind](units, n)
    ids = _ids(40)
    with _threads.record() as calls:
        m.loss_and_grads(ids[:, :-1], ids[:, 1:])
        m.generate(ids[0, :3], 2)
    assert _counts(calls) == {n}, calls


@pytest.mark.parametrize("n", [1, 2])
def test_trainer_step_uses_its_threads(n):
    m = GPT(GPTConfig(vocab=256, dim=16, context=12, layers=1, heads=2, seed=0))    # the model says nothing
    tr = Trainer(m, lr=1e-2, seed=0, threads=n)
    with _threads.record() as calls:
        tr.train(np.random.default_rng(0).integers(0, 256, 400), epochs=1, seq_len=8, batch_size=2,
                 max_steps=2)
    counts = _counts(calls)
    assert counts == {n}, calls
    assert any(f.startswith("optim.") for f, _ in calls)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from test_pipeline_models import hf_model, save
    return str(save(hf_model("llama"), tmp_path_factory.mktemp("llama")))


@pytest.mark.parametrize("n", [1, 2])
def test_stage_and_pipeline_use_their_threads(n, llama):
    from lutcore.pipeline import Pipeline
    for units in (None, "exact", "mitchell"):
        with Pipeline.from_pretrained(llama, splits=[2, 4], units=units, threads=n) as p:
            with _threads.record() as calls:
                toks = p.generate([5, 11, 42], 3)
                p.logits(toks)
            counts = _counts(calls)
            assert counts <= {1, n} and LEAK not in counts, (units, calls)   # 1: an elementwise kernel too small
            assert n in counts


@pytest.mark.parametrize("n", [1, 2])
def test_torch_layers_use_their_threads(n):
    import torch
    from lutcore.torch import ApproxConv2d, ApproxLinear
    torch.manual_seed(0)
    for units in ("exact", "mitchell"):
        lin = ApproxLinear(64, 300, units=units, backward="units", threads=n)
        conv = ApproxConv2d(3, 8, 3, padding=1, units=units, backward="units", threads=n)
        x = torch.randn(70, 64, requires_grad=True)
        img = torch.randn(2, 3, 33, 33, requires_grad=True)
        with _threads.record() as calls:
            lin(x).sum().backward()
            conv(img).sum().backward()
        counts = _counts(calls)
        assert counts <= {1, n} and LEAK not in counts, (units, calls)


# ------------------------------------------------------------------ Units.kernel_path
def _same_bits_through_the_table_path(monkeypatch, run):
    """``run()`` calls exact-kernel code; with every Units' kernel_path forced to "table" it
    calls none and returns the same bits."""
    from lutcore.units import Units
    with _threads.record() as calls:
        want = run()
    assert any("exact" in f for f, _ in calls)
    monkeypatch.setattr(Units, "kernel_path", property(lambda self: "table"))
    with _threads.record() as calls:
        got = run()
    assert not any("exact" in f for f, _ in calls), calls
    for g, e in zip(got, want):
        assert np.array_equal(g, e)


def test_kernel_path_is_the_one_decision(monkeypatch):
    """Every caller asks units.kernel_path: forced to "table" for the exact units, no exact
    kernel runs anywhere and the bits are the same (the table path is exact for every table)."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (37, 70), dtype=np.int8)
    b = rng.integers(-128, 128, (70, 29), dtype=np.int8)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    w = rng.standard_normal((70, 29)).astype(np.float32)
    ex = lutcore.units.resolve("exact")
    assert ex.kernel_path == "exact" and lutcore.units.resolve("mitchell").kernel_path == "table"

    def run():
        q = lutcore.quant.quantize(w, 32, axis=0)
        return (lutcore.lut_gemm(a, b, ex), lutcore.quant.qmatmul(x, q, ex, 32),
                lutcore.quant.QLinear(w, ex, 32)(x))

    _same_bits_through_the_table_path(monkeypatch, run)


def test_kernel_path_decides_for_torch_layers_and_the_fused_decode(monkeypatch, llama):
    import torch
    from lutcore.pipeline import Pipeline
    from lutcore.torch import ApproxConv2d, ApproxLinear
    torch.manual_seed(1)
    lin, conv = ApproxLinear(40, 300, units="exact", threads=1), ApproxConv2d(3, 5, 3, units="exact", threads=1)
    x, img = torch.randn(20, 40), torch.randn(1, 3, 9, 9)

    def run():
        with Pipeline.from_pretrained(llama, units="exact", threads=1) as p:
            toks = p.generate([5, 11, 42], 3)
            return lin(x).detach().numpy(), conv(img).detach().numpy(), np.asarray(toks), p.logits(toks)
    _same_bits_through_the_table_path(monkeypatch, run)


def test_resolved_units_pass_through_and_none_rules():
    """A resolved Units passes through unchanged; the integer ops' None is the exact table;
    the float-aware resolver (models, CLI, evaluate, pipeline) reads None as float."""
    from lutcore.units import assign, resolve
    u = lutcore.units.resolve("mitchell")
    assert resolve(u) is u and assign.resolve_spec(u) is u
    assert resolve(None).is_exact and resolve("exact").is_exact
    assert assign.resolve_spec(None) is None and assign.resolve_spec("none") is None
    a = np.arange(-60, 60, dtype=np.int8).reshape(8, 15)
    assert np.array_equal(lutcore.lut_gemm(a, a.T.copy()), a.astype(np.int32) @ a.T.astype(np.int32))


# ------------------------------------------------------------------ one open per command
def test_eval_checkpoint_opens_it_once(tmp_path, monkeypatch):
    """``lutcore eval --checkpoint`` reads the checkpoint's weights (Trainer.resume) and its
    units (checkpoint_units) once each — it used to open it twice, once for the tokenizer."""
    import json
    from lutcore import evaluate
    from lutcore.cli import main
    from lutcore.train.data import builtin_corpus
    data = tmp_path / "train.txt"
    data.write_text(builtin_corpus()[:12_000], encoding="utf-8")
    assert main(["train", "--data", str(data), "--steps", "2", "--d-model", "16", "--layers", "1", "--d-state", "4",
                 "--seq-len", "32", "--batch-size", "2", "--sample-tokens", "0", "--out", str(tmp_path / "run"),
                 "--threads", "1", "--units", "truncated:6", "--eval-units", "none"]) == 0
    ckpt = str(tmp_path / "run" / "checkpoint")
    opened = {"resume": 0, "units": 0}
    real_resume, real_units = Trainer.resume.__func__, evaluate.checkpoint_units

    def resume(cls, *a, **k):
        opened["resume"] += 1
        return real_resume(cls, *a, **k)

    def units(*a, **k):
        opened["units"] += 1
        return real_units(*a, **k)
    monkeypatch.setattr(Trainer, "resume", classmethod(resume))
    monkeypatch.setattr(evaluate, "checkpoint_units", units)
    from lutcore.units import Units
    made, real_init = [], Units.__init__

    def init(self, *a, **k):
        made.append(1)
        real_init(self, *a, **k)
    monkeypatch.setattr(Units, "__init__", init)
    for extra in ([], ["--units", "none", "mitchell"]):
        opened.update(resume=0, units=0)
        made.clear()
        lutcore.set_num_threads(LEAK)
        with _threads.record() as calls:
            assert main(["eval", "--checkpoint", ckpt, "--threads", "1", "--out", str(tmp_path / "e"), *extra]) == 0
        assert opened == {"resume": 1, "units": 1}, (extra, opened)
        assert _counts(calls) == {1}                                   # the command's --threads, everywhere
        assert len(made) <= (1 if not extra else 2)       # the trained table built once (+ mitchell)
    rows = json.load(open(tmp_path / "e" / "eval.json"))["results"]
    assert [r["units"] for r in rows] == ["none", "mitchell"]
