"""Tests of the unit-damage experiment (lutcore.experiment.compare) and ``lutcore compare``.

* On the default config (GPT, dim 32, context 32, batch 8, 2 layers, 2 heads,
  lr 0.02, 150 steps, byte tokens, built-in corpus) the exact table converges
  and is viable, forward only and forward+backward.
* A deliberately poor multiplier shows measurable damage: ``truncated:8``
  (the 8 low bits of every product dropped) through forward and backward is
  not viable and its ratio is clearly worse than exact's.  (``truncated:6``
  through the backward costs ~8 % on this config — the same order as the
  noise of a 10-step tail here — so the test uses the unambiguous table.)
* Runs are reproducible to the bit; every run sees the same batches.
* The CLI prints the table and writes compare.json and compare.png.

The default-config run is measured at ~5 ms/step (float) to ~25 ms/step
(truncated:8 fwd+bwd, the table path) on one thread, ~10 s for the module.
"""
import json
import math

import numpy as np
import pytest

import lutcore
from lutcore.experiment import (CONVERGE_FRACTION, TAIL, VIABLE_RATIO, compare, format_table, report_steps,
                                write_report)

POOR = "truncated:8"
DAMAGE_MARGIN = 0.1      # the poor table's ratio exceeds exact's by at least this much


pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.fixture(scope="module")
def default_run():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"):                   # module scope: one_blas_thread is per test
        return compare(units=["exact", POOR], threads=1)        # every other argument at its default


def test_default_config_recorded(default_run):
    c = default_run.config
    assert (c["model"], c["steps"], c["dim"], c["context"], c["batch"], c["layers"], c["heads"], c["lr"],
            c["seed"], c["vocab"], c["weight_decay"]) == ("gpt", 150, 32, 32, 8, 2, 2, 0.02, 0, 256, 0.0)
    assert [r.label for r in default_run.runs] == ["float", "exact fwd", "exact fwd+bwd", f"{POOR} fwd",
                                                   f"{POOR} fwd+bwd"]
    for r in default_run.runs:
        assert len(r.losses) == 150 and r.error is None and r.ms_per_step > 0
        assert r.tail == pytest.approx(np.mean(r.losses[-TAIL:]))
        assert r.first == r.losses[0]
        # identical init and batches: the first losses differ only by quantization
        assert abs(r.first - default_run.float_run.first) < 1e-3, r.label
    print("\n" + format_table(default_run))


def test_exact_units_converge_and_are_viable(default_run):
    f = default_run.float_run
    assert f.converged and f.ratio is None and f.viable is None
    for label in ("exact fwd", "exact fwd+bwd"):
        r = default_run[label]
        assert r.tail < CONVERGE_FRACTION * r.first and r.tail < math.log(256), (label, r.first, r.tail)
        assert r.converged, label
        assert r.ratio == pytest.approx(r.tail / f.tail) and r.ratio < VIABLE_RATIO and r.viable, (label, r.ratio)
    assert default_run["exact fwd+bwd"].unit_backward and not default_run["exact fwd"].unit_backward
    assert default_run["exact fwd"].units == "exact" and default_run["exact fwd"].units_digest


def test_poor_table_shows_damage(default_run):
    exact, poor = default_run["exact fwd+bwd"], default_run[f"{POOR} fwd+bwd"]
    print(f"\nratio exact fwd+bwd {exact.ratio:.3f}  {POOR} fwd+bwd {poor.ratio:.3f}")
    assert poor.ratio > exact.ratio + DAMAGE_MARGIN, (poor.ratio, exact.ratio)
    assert not poor.viable


def test_runs_bit_identical_and_same_batches():
    kw = dict(steps=12, dim=16, context=16, batch=4, layers=1, threads=1)
    a = compare(units=[], **kw)
    b = compare(units=[], **kw)
    assert [r.label for r in a.runs] == ["float"]
    assert a.runs[0].losses == b.runs[0].losses
    # the unit runs are reproducible too, at any thread count
    u1 = compare(units="exact", **kw)
    prev = lutcore.get_num_threads()
    u2 = compare(units=["exact"], **{**kw, "threads": 2})
    assert lutcore.get_num_threads() == prev                    # compare restores the thread count
    for r1, r2 in zip(u1.runs, u2.runs):
        assert r1.losses == r2.losses, r1.label
    assert u1.runs[0].losses == a.runs[0].losses
    # another seed draws other batches and another init
    assert compare(units=[], **{**kw, "seed": 1}).runs[0].losses != a.runs[0].losses


def test_data_tokenizer_and_mamba():
    from lutcore.tokenizer import Tokenizer
    text = "the quick brown fox jumps over the lazy dog. " * 40
    r = compare(model="mamba", units=["mitchell"], steps=4, dim=16, context=12, batch=2, layers=1,
                tokenizer=Tokenizer.chars(), data=text, threads=1)
    assert r.config["vocab"] == 96 and r.config["model"] == "mamba" and r.config["heads"] is None
    assert [x.label for x in r.runs] == ["float", "mitchell fwd", "mitchell fwd+bwd"]
    assert all(len(x.losses) == 4 and all(np.isfinite(x.losses)) for x in r.runs)
    ids = Tokenizer.bytes().encode(text)
    assert compare(units=[], steps=3, dim=16, context=8, batch=2, layers=1, data=ids, threads=1) \
        .runs[0].losses == compare(units=[], steps=3, dim=16, context=8, batch=2, layers=1, data=text,
                                   threads=1).runs[0].losses
    with pytest.raises(ValueError, match="model"):
        compare(model="rnn")
    with pytest.raises(ValueError, match="shorter"):
        compare(units=[], steps=2, context=64, data="too short", threads=1)
    with pytest.raises(ValueError, match="two_pass"):
        compare(model="mamba", units=[], steps=2, two_pass=True)


def test_report_steps_and_table():
    assert report_steps(150) == [0, 25, 50, 75, 100, 125, 149]
    assert report_steps(126) == [0, 25, 50, 75, 100, 125]
    assert report_steps(100) == [0, 25, 50, 75, 99]
    assert report_steps(12) == [0, 11]
    assert report_steps(1) == [0]
    r = compare(units=["exact"], steps=12, dim=16, context=8, batch=2, layers=1, threads=1)
    t = format_table(r)
    for needle in ("float", "exact fwd", "exact fwd+bwd", "tail (last 10)", "ms/step", "ratio vs float",
                   "converged", "viable"):
        assert needle in t, needle
    rows = [ln.split()[0] for ln in t.splitlines() if ln[:1].isdigit()]
    assert rows == ["0", "11"]


def test_write_report(tmp_path):
    r = compare(units=["exact"], steps=5, dim=16, context=8, batch=2, layers=1, threads=1)
    paths = write_report(r, tmp_path / "rep")
    d = json.loads((tmp_path / "rep" / "compare.json").read_text())
    assert paths["json"].endswith("compare.json") and d["config"]["steps"] == 5
    assert [x["label"] for x in d["runs"]] == [x.label for x in r.runs]
    assert d["runs"][2]["losses"] == r.runs[2].losses and d["runs"][2]["unit_backward"] is True
    png = (tmp_path / "rep" / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_cli_compare(tmp_path, capsys):
    from lutcore.cli import main
    out = tmp_path / "cmp"
    rc = main(["compare", "--units", "exact", "mitchell", "--steps", "6", "--dim", "16", "--context", "8",
               "--batch", "2", "--layers", "1", "--threads", "1", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "mitchell fwd+bwd" in text and "ratio vs float" in text and "compare.json" in text
    d = json.loads((out / "compare.json").read_text())
    assert len(d["runs"]) == 5 and all(len(x["losses"]) == 6 for x in d["runs"])
    assert (out / "compare.png").stat().st_size > 5000
    # a bad argument is a clean error, not a traceback
    assert main(["compare", "--units", "nonsense", "--steps", "2", "--out", str(out)]) == 2
    assert "unknown name" in capsys.readouterr().err
