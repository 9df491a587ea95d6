"""A real data set through the units: scikit-learn's load_digits (8x8), a small CNN
(lutcore.torch.digits) trained in float, evaluated through the exact unit and an
aggressive approximate one, then retrained through it (approximate() + torch.optim).

Budgets (named): FLOAT_MIN test accuracy of the float CNN; EXACT_TOL how far the
exact unit may move it; AGGRESSIVE_DROP the least drop truncated:11 must cause;
RECOVER the least a few epochs of approximation-aware training must win back.
Runs in ~15 s on 2 cores.
"""

# torch and scikit-learn come with the test extra (pyproject [test]): a missing one is an error, not a skip
import sklearn  # noqa: F401  (load_digits, imported by lutcore.torch.digits)
import torch

import lutcore.torch as lt
from lutcore.torch import digits

FLOAT_MIN = 0.9
EXACT_TOL = 0.02
AGGRESSIVE = "truncated:11"      # the 11 low bits of |a|*|b| dropped (products below 2048 vanish)
AGGRESSIVE_DROP = 0.05
RECOVER = 0.02


def test_digits_cnn_through_units():
    torch.manual_seed(0)
    xtr, ytr, xte, yte = digits.load(seed=0)
    model = digits.train(digits.DigitsCNN(), xtr, ytr, epochs=8, lr=1e-2, batch=128)
    acc_float = digits.accuracy(model, xte, yte)
    acc_exact = digits.accuracy(lt.approximate(model, "exact"), xte, yte)
    approx_model = lt.approximate(model, AGGRESSIVE)
    acc_approx = digits.accuracy(approx_model, xte, yte)
    digits.train(approx_model, xtr, ytr, epochs=3, lr=1e-3, batch=128)
    acc_retrained = digits.accuracy(approx_model, xte, yte)
    print(f"float {acc_float:.4f} exact {acc_exact:.4f} {AGGRESSIVE} {acc_approx:.4f} retrained {acc_retrained:.4f}")
    assert acc_float >= FLOAT_MIN
    assert abs(acc_exact - acc_float) <= EXACT_TOL
    assert acc_approx <= acc_float - AGGRESSIVE_DROP
    assert acc_retrained >= acc_approx + RECOVER
    assert isinstance(approx_model.features[0], lt.ApproxConv2d)        # trained as an approximate model


def test_formats_example_runs(tmp_path, capsys):
    """examples/digits_formats.py, shortened: every format's row and the PNG."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "digits_formats.py")
    spec = importlib.util.spec_from_file_location("digits_formats", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    png = str(tmp_path / "f.png")
    assert mod.main(["--epochs", "1", "--retrain-epochs", "1", "--png", png]) == 0
    out = capsys.readouterr().out
    for fmt in ("8s x 8s -> 16s", "8u x 8u -> 16u", "8u x 4u -> 12u", "8u x 2u -> 10u", "12u x 12u -> 24u"):
        assert fmt in out
    assert os.path.getsize(png) > 1000


def test_accumulators_example_runs(tmp_path, capsys):
    """examples/digits_accumulators.py, shortened: every register's row, the 12-bit registers'
    overflows under the layers' module names, the 16-bit ones without, and the PNG."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "digits_accumulators.py")
    spec = importlib.util.spec_from_file_location("digits_accumulators", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    png = str(tmp_path / "a.png")
    assert mod.main(["--epochs", "1", "--png", png]) == 0
    out = capsys.readouterr().out
    for label, _ in mod.REGISTERS:
        assert label in out
    for name in ("features.0", "features.2", "features.5", "classifier"):
        assert name in out
    assert "12s wrap      exact" in out and "12s saturate  exact" in out
    assert "no overflow (either multiplier): 16s wrap, 16s saturate" in out
    assert os.path.getsize(png) > 1000


def test_mx_formats_example_runs(tmp_path, capsys):
    """examples/mx_formats.py, shortened: every format's row in both tables (digits CNN, GPT), the
    long reduction's table where promoting the 14-bit register every 128 products loses less than
    never promoting it, and the PNG."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "mx_formats.py")
    spec = importlib.util.spec_from_file_location("mx_formats", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    png = str(tmp_path / "mx.png")
    assert mod.main(["--epochs", "1", "--steps", "20", "--eval-tokens", "512", "--png", png, "--threads", "1"]) == 0
    out = capsys.readouterr().out
    print(out)
    digits_part = out[out.index("digits CNN:"):out.index("GPT:")]
    gpt_part = out[out.index("GPT:"):out.index("one long reduction")]
    for part in (digits_part, gpt_part):
        for head in ("exact", "mitchell", "14-bit acc", "14-bit acc, promote 128"):
            assert head in part
        for name in ("MXFP8 (E4M3)", "MXFP6 (E2M3)", "MXFP4 (E2M1)", "MXINT8"):
            row = [line for line in part.splitlines() if line.startswith(name)]
            assert len(row) == 1, (name, part)
            assert len(row[0][len(name):].split()) == 5                  # float and the four units
    longk = out[out.index("one long reduction"):]
    err = {}
    for line in longk.splitlines()[3:]:
        label, _, value = line.rpartition("  ")
        if label.strip():
            err[label.strip()] = float(value)
    assert set(err) >= {"exact sums", "14-bit acc", "14-bit acc, promote 128"}
    assert err["14-bit acc, promote 128"] < err["14-bit acc"]
    assert err["exact sums"] <= err["14-bit acc, promote 128"]
    assert os.path.getsize(png) > 1000
