"""Property-based tests of `lutcore train`'s and ``Trainer.train``'s argument checks (hypothesis).

Any bad value of any flag (or keyword) is refused before the work starts: the CLI exits 2
with one line naming the flag, the API raises ValueError/TypeError naming the argument;
never a traceback, never a started training run, never a Ray cluster started for nothing.
``derandomize=True`` fixes the examples; each case costs milliseconds."""
import math
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lutcore.cli import main
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.train import Trainer

SETTINGS = settings(derandomize=True, max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

POS_INT_FLAGS = ["--steps", "--epochs", "--d-model", "--layers", "--d-state", "--seq-len", "--batch-size",
                 "--grad-accum", "--micro-batch", "--workers", "--threads"]
NONNEG_INT_FLAGS = ["--seed", "--sample-tokens"]
FLOAT_FLAGS = {"--lr": 0.0, "--weight-decay": 0.0, "--clip": None}      # lower bound (None: > 0)
UNIT_FLAGS = ["--units", "--eval-units"]

words = st.text(alphabet="abcxyz:/._-", min_size=1, max_size=8).filter(lambda s: not s.startswith("-"))
not_int = st.one_of(words, st.floats(allow_nan=True, allow_infinity=True).filter(
    lambda f: not (math.isfinite(f) and f == int(f))).map(repr))


def bad_value(flag):
    if flag in POS_INT_FLAGS:
        return st.one_of(not_int, st.integers(-10**6, 0).map(str))
    if flag in NONNEG_INT_FLAGS:
        return st.one_of(not_int, st.integers(-10**6, -1).map(str))
    if flag in FLOAT_FLAGS:
        lo = FLOAT_FLAGS[flag]
        neg = st.floats(max_value=-1e-6 if lo == 0.0 else 0.0, allow_nan=False, allow_infinity=False)
        return st.one_of(words, st.sampled_from(["nan", "inf", "-inf"]), neg.map(repr))
    if flag == "--save-every":
        return st.one_of(st.sampled_from(["-1", "5q", "1.5", "nanm", "infs", "m", ""]), words.filter(
            lambda w: not w[:-1].replace(".", "").isdigit()))
    return st.one_of(st.sampled_from(["mitchel", "truncated:99", "truncated:x", "reduced:0", "no/such/dir",
                                      "exact:3"]), words.filter(lambda w: w not in ("exact", "mitchell", "none")))


@st.composite
def flag_and_bad_value(draw):
    flag = draw(st.sampled_from(POS_INT_FLAGS + NONNEG_INT_FLAGS + list(FLOAT_FLAGS) + UNIT_FLAGS
                                + ["--save-every"]))
    return flag, draw(bad_value(flag))


@pytest.fixture
def no_work(monkeypatch):
    """Training or starting Ray is a failure: every case must stop at the argument checks."""
    import lutcore.train.dp as dp
    monkeypatch.setattr(Trainer, "train", lambda *a, **k: pytest.fail("Trainer.train ran"))
    monkeypatch.setattr(dp.RayWorkers, "__init__", lambda *a, **k: pytest.fail("Ray workers started"))


@SETTINGS
@given(fv=flag_and_bad_value())
def test_cli_train_refuses_any_bad_flag_value_naming_it(no_work, capsys, fv):
    flag, value = fv
    with tempfile.TemporaryDirectory() as d:
        rc = main(["train", "--out", d, "--steps", "1", "--d-model", "8", "--layers", "1",
                   "--eval-units", "none", f"{flag}={value}"])
    err = capsys.readouterr().err
    assert rc == 2, (flag, value, err)
    assert flag in err and "Traceback" not in err, (flag, value, err)


@SETTINGS
@given(batch=st.integers(1, 12), micro=st.integers(1, 12), accum=st.integers(1, 3), workers=st.integers(1, 40))
def test_cli_train_refuses_inconsistent_batch_flags_before_any_work(no_work, capsys, batch, micro, accum, workers):
    """--micro-batch must divide --batch-size; --workers at most the step's micro-batches."""
    ok_micro = batch % micro == 0
    if ok_micro and workers <= accum * batch // micro:
        return                                   # a consistent set (covered by the training tests)
    with tempfile.TemporaryDirectory() as d:
        rc = main(["train", "--out", d, "--steps", "1", "--d-model", "8", "--layers", "1", "--seq-len", "16",
                   "--eval-units", "none", "--batch-size", str(batch), "--micro-batch", str(micro),
                   "--grad-accum", str(accum), "--workers", str(workers)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert ("--micro-batch: expected a divisor" if not ok_micro else "--workers: expected at most") in err
    assert "Traceback" not in err


API_BAD = {
    "epochs": [0, -1, 1.5, "2", True, None],
    "seq_len": [0, -3, 2.0, "8", False],
    "batch_size": [0, -1, 3.5, "4", None],
    "grad_accum": [0, 1.5, "1"],
    "max_grad_norm": [0.0, -1.0, float("nan"), "1"],
    "max_delta": [-0.5, float("nan"), "x"],
    "max_steps": [-1, 2.5, "3"],
    "micro_batch": [0, -2, 1.5, "1", 3],         # 3 does not divide batch_size 4
    "mixed_precision": [1, "yes", None],
    "wsla": [0, "no"],
    "on_step": [1, "f"],
}


@SETTINGS
@given(arg=st.sampled_from(sorted(API_BAD)), data=st.data())
def test_trainer_train_refuses_any_bad_argument_naming_it(arg, data):
    value = data.draw(st.sampled_from(API_BAD[arg]))
    tr = Trainer(MambaLM(MambaConfig(d_model=8, n_layer=1, vocab_size=256, d_state=2, seed=1)), threads=1)
    kw = {"seq_len": 8, "batch_size": 4, "max_steps": 1, arg: value}
    with pytest.raises((ValueError, TypeError), match=arg):
        tr.train("some text to train on, long enough for windows " * 4, **kw)
    assert tr.global_step == 0
