"""Tests of the unit-damage experiment (lutcore.experiment.compare) and ``lutcore compare``.

* The module's shared run (GPT, dim 32, context 32, batch 8, 2 layers, 2 heads, lr 0.01 with
  warmup and cosine decay, 200 steps, byte tokens, built-in corpus — the defaults but for the
  steps): the exact table converges and is viable, forward only and forward+backward.
* A deliberately poor multiplier shows measurable damage: ``truncated:10`` (the 10 low bits of
  every product dropped) through forward and backward is not viable and its ratio is clearly
  worse than exact's.  (``truncated:6`` and ``mitchell`` cost 1-10 % — the same order as the
  run-to-run noise of these small models — so the test uses the unambiguous table.)
* The defaults' float run learns past the unigram baseline without a spike; a run that does
  not is "too short to judge"; the table fits 100 columns.
* Runs are reproducible to the bit; every run sees the same batches.
* The CLI prints the table and writes compare.json and compare.png.

The shared run is measured at ~3 ms/step (float) to ~25 ms/step (truncated:10 fwd+bwd, the
table path) on one thread, ~15 s for the module on an idle 2-core machine.
"""
import json
import math

import numpy as np
import pytest

import lutcore
from lutcore.experiment import (CONVERGE_FRACTION, LEARNED_FRACTION, TAIL, VIABLE_RATIO, compare, format_table,
                                lr_at, report_steps, write_report)

POOR = "truncated:10"
SHARED = dict(steps=200)            # the defaults but for the steps
DAMAGE_MARGIN = 0.1      # the poor table's ratio exceeds exact's by at least this much


pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.fixture(scope="module")
def default_run():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"):                   # module scope: one_blas_thread is per test
        return compare(units=["exact", POOR], threads=1, **SHARED)    # every other argument at its default


def test_default_config_recorded(default_run):
    c = default_run.config
    assert (c["model"], c["steps"], c["dim"], c["context"], c["batch"], c["layers"], c["heads"], c["lr"],
            c["seed"], c["vocab"], c["weight_decay"], c["warmup"]) == ("gpt", 200, 32, 32, 8, 2, 2, 0.01, 0, 256, 0.0,
                                                                        20)
    assert [r.label for r in default_run.runs] == ["float", "exact fwd", "exact fwd+bwd", f"{POOR} fwd",
                                                   f"{POOR} fwd+bwd"]
    for r in default_run.runs:
        assert len(r.losses) == 200 and r.error is None and r.ms_per_step > 0
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
    assert report_steps(100) == [0, 20, 40, 60, 80, 99]
    assert report_steps(600) == [0, 100, 200, 300, 400, 500, 599]
    assert report_steps(12) == [0, 2, 4, 6, 8, 10, 11]
    assert report_steps(1) == [0]
    r = compare(units=["exact"], steps=12, dim=16, context=8, batch=2, layers=1, threads=1)
    t = format_table(r)
    print(t)
    for needle in ("float", "exact fwd", "exact fwd+bwd", "tail(10)", "ms/step", "ratio", "converged", "viable"):
        assert needle in t, needle
    head = [ln for ln in t.splitlines() if ln.startswith("loss at step")]
    assert len(head) == 1 and head[0].split()[3:] == [str(s) for s in report_steps(12)]


def test_table_fits_100_columns():
    """The README's three units plus one with a long directory name: no line over 100 columns
    (the old layout put every run in a column: 165 columns for the README's command)."""
    from lutcore.units import Units, approx
    long = Units.from_mul(approx.truncated(2).mul, name="my_team_multiplier_v2_final_tapeout_candidate")
    r = compare(units=["exact", "truncated:6", "mitchell", long], steps=3, dim=16, context=8, batch=2, layers=1,
                threads=1)
    t = format_table(r)
    print(t)
    assert max(len(ln) for ln in t.splitlines()) <= 100
    assert "truncated:6 fwd+bwd" in t and "my_team_multiplier_v2" in t
    rows = [ln.split()[0] + " " + ln.split()[1] for ln in t.splitlines() if ln.startswith("my_team")][:4]
    assert rows[0].endswith(" fwd") and rows[1].endswith(" fwd+bwd")          # still told apart


def test_too_short_to_judge_warning(capsys, tmp_path):
    """A float run that has not learned past the unigram baseline makes every verdict meaningless."""
    r = compare(units=["exact"], steps=5, dim=16, context=8, batch=2, layers=1, threads=1)
    h = r.config["unigram_entropy"]
    assert 3.0 < h < 3.5                                        # pydoc topics, byte tokens: ~3.26 nats
    assert r.float_run.tail > LEARNED_FRACTION * h
    assert len(r.warnings) == 1 and "too short to judge" in r.warnings[0]
    assert "WARNING: too short to judge" in format_table(r)
    from lutcore.cli import main
    assert main(["compare", "--units", "none", "--steps", "3", "--dim", "16", "--context", "8", "--batch", "2",
                 "--layers", "1", "--threads", "1", "--out", str(tmp_path / "c")]) == 0
    assert "warning: too short to judge" in capsys.readouterr().err


def test_defaults_learn_past_unigram_without_a_spike():
    """The float run of the defaults (the cheap one) ends well below the unigram baseline, and
    warmup keeps its curve from spiking (lr 0.02 without warmup jumped to 11.4 at step 13)."""
    r = compare(units=[], threads=1)
    assert (r.config["steps"], r.config["lr"], r.config["warmup"]) == (600, 0.01, 60)
    L = np.array(r.float_run.losses)
    print(f"\nfloat: first {L[0]:.3f} max {L.max():.3f} tail {r.float_run.tail:.3f} "
          f"unigram {r.config['unigram_entropy']:.3f}")
    assert L.max() <= L[0] + 0.05
    assert not r.warnings and r.float_run.tail < LEARNED_FRACTION * r.config["unigram_entropy"]


def test_lr_schedule():
    lr, steps, warm = 0.01, 600, 60
    got = [lr_at(s, steps, lr, warm) for s in range(steps)]
    assert got[0] == pytest.approx(lr / warm) and got[warm - 1] == pytest.approx(lr)
    assert got[warm] == pytest.approx(lr) and got[-1] == pytest.approx(0.1 * lr)
    assert all(a >= b for a, b in zip(got[warm:], got[warm + 1:]))      # decays monotonically
    assert lr_at(0, 10, lr, 0) == pytest.approx(lr)


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
    o = capsys.readouterr()
    text = o.out
    assert "mitchell fwd+bwd" in text and "ratio" in text and "compare.json" in text
    from lutcore.units import approx                              # the banner names units, threads, SIMD
    assert f"mitchell (digest {approx.mitchell().digest[:16]})" in o.err and "threads: 1" in o.err
    assert f"SIMD: {lutcore.get_simd()}" in o.err
    d = json.loads((out / "compare.json").read_text())
    assert len(d["runs"]) == 5 and all(len(x["losses"]) == 6 for x in d["runs"])
    assert (out / "compare.png").stat().st_size > 5000
    # a bad argument is a clean error, not a traceback
    assert main(["compare", "--units", "nonsense", "--steps", "2", "--out", str(out)]) == 2
    assert "unknown name" in capsys.readouterr().err
