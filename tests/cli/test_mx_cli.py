"""MX units (lutcore.units.mxunits.MXUnits) through the remaining front ends: ``evaluate_units`` and
``lutcore eval`` (a lutcore GPT, a Hugging Face directory, a checkpoint trained through MX units),
``lutcore units mx...`` (describe, --verify's metric table, --save and reading the directory back),
the integer ops' refusal, assignment files (by name; an in-memory unit saved with ``units_dir=``,
its digest checked on load, its cost kept), and the searches (lutcore.torch's on a small CNN,
lutcore.search_lm's on lutcore's GPT and on a Hugging Face checkpoint) over libraries mixing
integer and MX units.

The references are computed apart from the code under test: a loss from the model's own
cross-entropy, the error metrics from ``MXUnits.error_metrics``, the energies as the products-
weighted sums of the stated powers, a search point's metric from a model built directly with its
assignment (``evaluate`` / ``evaluate_units`` of that mapping).
"""
import json
import math
import os
import shutil

import numpy as np
import pytest
import torch

import lutcore
import lutcore.torch as lt
from lutcore.cli import main
from lutcore.evaluate import checkpoint_units, evaluate_units, format_table
from lutcore.models import GPT, GPTConfig
from lutcore.models import _layers as nn_layers
from lutcore.search_lm import search_lm, sensitivity_lm
from lutcore.units import resolve
from lutcore.units.fpmul import FPUnit
from lutcore.units.mxunits import MXUnits

from test_eval import _hf_dir, _tiny_run, data_file, tokenizer_json  # noqa: F401  (fixtures)
from test_search_torch import Net

SPECS = ["none", "mxfp8", "mxfp4:mitchell", "exact"]
POWER = {"exact": 1.0, "mitchell": 0.5, "mxfp8": 0.6}


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


def U(spec):
    return resolve(spec, mx=True)


def library():
    return [resolve("exact").with_cost(power_mw=1), resolve("mitchell").with_cost(power_mw=.5),
            MXUnits.parse("mxfp8").with_cost(power_mw=.6)]


def _gpt():
    return GPT(GPTConfig(vocab=40, dim=32, context=16, layers=1, heads=2, seed=1))


def _ids(n=16 * 4 + 1, vocab=40, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, n)


# ============================================================================ evaluate_units, lutcore eval

def test_evaluate_units_rows_of_a_gpt():
    m, ids = _gpt(), _ids()
    res = evaluate_units(m, ids, SPECS)
    print(format_table(res))
    rows = res.rows
    assert [r["units"] for r in rows] == SPECS
    assert [r["name"] for r in rows] == ["float", "mxfp8", "mxfp4:mitchell", "exact"]
    assert rows[0]["digest"] is None and rows[0]["wce_pct"] is None and rows[0]["mae_pct"] is None
    for r, spec in zip(rows[1:], SPECS[1:]):
        u = U(spec)
        assert r["digest"] == u.digest and math.isfinite(r["loss"]) and r["loss"] > 0
        want = u.error_metrics() if isinstance(u, MXUnits) else None
        if want is not None:
            assert r["wce_pct"] == want["wce_pct"] and r["mae_pct"] == want["mae_pct"]
    mx8, mx4 = rows[1], rows[2]
    assert mx8["wce_pct"] == 0 and mx8["mae_pct"] == 0                       # exact products
    assert mx4["wce_pct"] > 10 and mx4["mae_pct"] > 0                       # Mitchell: up to 11.1 % below
    assert mx8["loss"] != rows[0]["loss"] and mx4["loss"] != mx8["loss"]
    # a row is the model through the units: its cross-entropy over the same windows
    wins = np.stack([ids[w * 16: w * 16 + 17] for w in range(4)])
    for r, spec in zip(rows[1:3], SPECS[1:3]):
        direct = GPT(m.config, params=m.parameters(), units=spec)
        loss, _ = nn_layers.cross_entropy(direct.forward(wins[:, :-1]), wins[:, 1:])
        assert abs(r["loss"] - loss) < 1e-6, spec
    assert "mxfp4:mitchell  11.1" in format_table(res)


def test_cli_eval_hf_dir_with_mx_units(tmp_path, tokenizer_json, data_file, capsys):  # noqa: F811
    path, _ = _hf_dir(tmp_path / "m", "llama", tokenizer_json, num_hidden_layers=2)
    out = tmp_path / "out"
    assert main(["eval", "--model", path, "--data", data_file, "--units", "none", "mxfp8", "mxfp4:mitchell",
                 "--seq-len", "32", "--out", str(out), "--threads", "1"]) == 0
    text = capsys.readouterr().out
    print(text)
    assert "mxfp4:mitchell" in text and "WCE%" in text
    rep = json.load(open(out / "eval.json"))
    rows = rep["results"]
    assert [r["units"] for r in rows] == ["none", "mxfp8", "mxfp4:mitchell"]
    assert rows[1]["digest"] == U("mxfp8").digest and rows[1]["wce_pct"] == 0
    assert rows[2]["wce_pct"] == U("mxfp4:mitchell").error_metrics()["wce_pct"]
    api = evaluate_units(path, data_file, ["mxfp8"], seq_len=32).rows[0]
    assert api["loss"] == rows[1]["loss"] != rows[0]["loss"]
    assert os.path.getsize(out / "eval.png") > 5000
    # --attention: attention's products through each spec as well
    assert main(["eval", "--model", path, "--data", data_file, "--units", "mxfp8", "--attention",
                 "--seq-len", "32", "--out", str(tmp_path / "att"), "--threads", "1"]) == 0
    r = json.load(open(tmp_path / "att" / "eval.json"))["results"][0]
    assert r["layers"]["model.layers.1.self_attn.pv"] == "mxfp8" and r["loss"] != rows[1]["loss"]


def test_checkpoint_trained_through_mx_units_saves_evaluates_and_resumes(tmp_path, capsys):
    """lutcore train --units mxfp8 writes its checkpoint (the MX units' table and description in
    units.safetensors); eval reads them back as the trained units, resume continues through them."""
    ckpt = _tiny_run(tmp_path, "mxfp8")
    assert checkpoint_units(ckpt) == U("mxfp8")
    capsys.readouterr()
    assert main(["eval", "--checkpoint", ckpt, "--out", str(tmp_path / "e1")]) == 0
    assert "trained through units mxfp8" in capsys.readouterr().err
    rows = json.load(open(tmp_path / "e1" / "eval.json"))["results"]
    assert [r["units"] for r in rows] == ["mxfp8"] and math.isfinite(rows[0]["loss"])
    assert main(["eval", "--checkpoint", ckpt, "--units", "none", "mxfp4:mitchell", "--out", str(tmp_path / "e2")]) == 0
    rows = json.load(open(tmp_path / "e2" / "eval.json"))["results"]
    assert [r["units"] for r in rows] == ["none", "mxfp4:mitchell"] and rows[1]["loss"] != rows[0]["loss"]
    tr = lutcore.train.Trainer.resume(ckpt, units="mxfp8")
    assert isinstance(tr.model.units, MXUnits) and tr.global_step == 3
    with pytest.raises(ValueError, match="digest"):
        lutcore.train.Trainer.resume(ckpt, units="mxfp8:mitchell")
    assert main(["generate", "--checkpoint", ckpt, "--prompt", "def ", "--max-new-tokens", "4"]) == 0


def test_checkpoint_tensors_of_custom_mx_units_round_trip():
    from lutcore.train.trainer import units_from_tensors, units_tensors
    fn = FPUnit.from_function("e2m3", "e4m3", lambda a, b: a * b * np.float32(0.75), name="three_quarters")
    for u in (MXUnits(fn), MXUnits.parse("mxfp8:lmul@m10:promote=64:truncate/block=16")):
        back = units_from_tensors(units_tensors(u), u.name, "units.safetensors")
        assert back == u and back.name == u.name and back.block == u.block and back._acc_text() == u._acc_text()


# ============================================================================ lutcore units mx...

def test_cli_units_verify_describes_and_prints_the_metric_table(capsys):
    spec = "mxfp8:mitchell@m13:promote=128"
    assert main(["units", spec, "--verify"]) == 0
    out = capsys.readouterr().out
    print(out)
    u = U(spec)
    assert repr(u) in out and u.describe() in out
    assert "14-bit accumulator, promoted every 128" in out and "mitchell products" in out
    assert "FP multipliers e4m3 x e4m3" in out
    for metric in ("mred", "max_red", "wce", "mae", "error_rate"):
        assert f"\n{metric} " in out, metric
    assert "cost: none" in out


def test_cli_units_save_and_read_back(tmp_path, capsys):
    d = str(tmp_path / "u")
    assert main(["units", "mxfp4:lmul", "--save", d]) == 0
    first = capsys.readouterr().out
    assert f"saved to {d}" in first and os.path.isfile(os.path.join(d, "mxunits.json"))
    assert main(["units", d]) == 0
    again = capsys.readouterr().out
    u = U("mxfp4:lmul")
    assert repr(u) in again and u.describe() in again
    back = MXUnits.load(d)
    assert back == u and U(d) == u and back.loaded_from == os.path.abspath(d)
    m, ids = _gpt(), _ids()
    r_name, r_dir = evaluate_units(m, ids, ["mxfp4:lmul", d]).rows
    assert r_name["loss"] == r_dir["loss"] and r_dir["units"] == d and r_dir["name"] == "mxfp4:lmul"


def test_mx_units_are_refused_by_the_integer_ops(tmp_path):
    with pytest.raises(TypeError, match="'mxfp8' are MX units"):
        resolve("mxfp8")
    with pytest.raises(TypeError, match="'mxfp8' are MX units"):
        resolve(MXUnits.parse("mxfp8"))
    MXUnits.parse("mxfp6").save(tmp_path / "mx6")
    with pytest.raises(TypeError, match="'mxfp6' are MX units"):
        resolve(str(tmp_path / "mx6"))
    a8 = np.zeros((2, 4), np.int8)
    with pytest.raises(TypeError, match="'mxfp8' are MX units.*not this integer op"):
        lutcore.lut_gemm(a8, a8.T.copy(), "mxfp8")
    x = np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match="MX units"):
        lutcore.qmatmul(x, x.T.copy(), "mxfp8")
    assert isinstance(resolve("mxfp8", mx=True), MXUnits)


# ============================================================================ assignment files

@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(9, 2, 7, 7)
    with torch.no_grad():
        ref = net(x)

    def evaluate(model):                  # lower is better: the output's distance to float
        with torch.no_grad():
            return float(((model(x) - ref) ** 2).mean())
    return net, x, evaluate


def test_assignment_of_mx_units_by_name(cnn, tmp_path):
    net, x, evaluate = cnn
    m = lt.approximate(net, {"*": "mxfp8"})
    path = lt.save_assignment(m, tmp_path / "a.json")
    doc = json.load(open(path))
    assert {e["name"] for e in doc["layers"].values()} == {"mxfp8"}
    assert {e["digest"] for e in doc["layers"].values()} == {U("mxfp8").digest}
    a = lt.load_assignment(path)
    assert all(isinstance(u, MXUnits) and u == U("mxfp8") for u in a.values())
    m2 = lt.approximate(net, path)
    assert evaluate(m2) == evaluate(m)
    doc["layers"]["fc"]["digest"] = "0" * 64
    json.dump(doc, open(tmp_path / "bad.json", "w"))
    with pytest.raises(ValueError, match=r"layer 'fc': units at .*mxfp8.* have digest cd55c7d48be9f3df, the "
                                         r"assignment records 0000000000000000"):
        lt.load_assignment(tmp_path / "bad.json")


def test_assignment_of_in_memory_mx_units_with_units_dir(cnn, tmp_path):
    net, x, evaluate = cnn
    fn = FPUnit.from_function("e4m3", "e4m3", lambda a, b: a * b * np.float32(1.0625), name="up6")
    cu = MXUnits(fn).with_cost(power_mw=0.3, source="stated by the test")
    m = lt.approximate(net, {"c1": cu, "*": "mxfp4:mitchell"})
    with pytest.raises(ValueError, match=r"layer 'c1' runs units 'mxfp8:up6' .*built in memory.*units_dir="):
        lt.save_assignment(m, tmp_path / "a.json")
    path = lt.save_assignment(m, tmp_path / "a.json", units_dir=tmp_path / "units")
    doc = json.load(open(path))
    e = doc["layers"]["c1"]
    assert e["path"].startswith("units" + os.sep) and e["cost"] == {"power_mw": 0.3, "source": "stated by the test"}
    a = lt.load_assignment(path)
    assert a["c1"] == cu and a["c1"].cost == cu.cost and a["c2"] == U("mxfp4:mitchell")
    assert evaluate(lt.approximate(net, a)) == evaluate(m)
    # another unit's files where the assignment points: the digest names the layer
    d = os.path.join(tmp_path, e["path"])
    shutil.rmtree(d)
    MXUnits(FPUnit.from_function("e4m3", "e4m3", lambda a, b: a * b, name="up6")).save(d)
    with pytest.raises(ValueError, match=r"layer 'c1': units at .* have digest [0-9a-f]{16}, the assignment records "
                                         + cu.digest[:16]):
        lt.load_assignment(path)


# ============================================================================ the searches

def _energy(macs, assignment):
    return sum(macs[layer] * POWER[u] for layer, u in assignment.items()) / sum(macs.values())


def test_torch_sensitivity_and_search_over_a_mixed_library(cnn):
    net, x, evaluate = cnn
    sens = lt.sensitivity(net, library(), evaluate, progress=False)
    assert sens.units == ["exact", "mitchell", "mxfp8"]
    for i, layer in enumerate(sens.layers):
        for j, name in enumerate(sens.units):
            m = lt.approximate(net, "exact")
            getattr(m, layer).units = U(name)
            assert sens.table[i][j] == evaluate(m), (layer, name)
    res = lt.search(net, library(), evaluate, x, budget=30, seed=1, progress=False)
    macs = res.config["macs"]
    assert macs == lt.count_products(lt.approximate(net, "exact"), x)
    for p in res.points:
        assert p.energy == pytest.approx(_energy(macs, p.assignment), rel=1e-12)
    mx = [p for p in res.front if "mxfp8" in p.assignment.values()]
    assert mx, res.format_table()
    uni = next(p for p in res.points if p.seed == "uniform" and set(p.assignment.values()) == {"mxfp8"})
    assert uni.energy == pytest.approx(0.6, rel=1e-12)
    for p in mx + [uni]:
        m = lt.approximate(net, {k: U(v) for k, v in p.assignment.items()})          # built directly
        assert evaluate(m) == p.metric
        assert evaluate(res.model_at(p)) == p.metric


def test_search_lm_of_a_gpt_over_a_mixed_library():
    m, ids = _gpt(), _ids()
    res = search_lm(m, ids, library(), budget=20, seq_len=16, greedy=False, seed=3, progress=False)
    macs = res.config["macs"]
    assert any("mxfp8" in p.assignment.values() and len(set(p.assignment.values())) > 1 for p in res.points)
    rows = {r["units"]: r for r in evaluate_units(m, ids, ["mxfp8", "mitchell"], seq_len=16).rows}
    for p in res.points:
        assert p.energy == pytest.approx(_energy(macs, p.assignment), rel=1e-12)
        if p.seed == "uniform" and len(set(p.assignment.values())) == 1:
            name = next(iter(p.assignment.values()))
            if name in rows:
                assert p.metric == rows[name]["loss"], name
    mixed = max(res.points, key=lambda q: len(set(q.assignment.values())))
    row = evaluate_units(m, ids, [dict(mixed.assignment)], seq_len=16).rows[0]
    assert row["loss"] == mixed.metric == res.evaluate_at(mixed)
    sens = sensitivity_lm(m, ids, library(), seq_len=16, progress=False)
    j = sens.units.index("mxfp8")
    for i, layer in enumerate(sens.layers):
        want = evaluate_units(m, ids, [{layer: "mxfp8", "*": "exact"}], seq_len=16).rows[0]["loss"]
        assert sens.table[i][j] == want, layer


def test_search_lm_of_a_hf_checkpoint_scores_mx_points_as_eval(tmp_path):
    """A Hugging Face checkpoint's search runs one stage built through the exact unit; its MX
    candidates read MX blocks of the float weights (what lutcore eval multiplies), not of the Q8:
    every point's loss is eval's for its assignment, bit for bit."""
    from test_pipeline_models import V, hf_model, save
    path = str(save(hf_model("llama", seed=7, num_hidden_layers=2), tmp_path / "m"))
    ids = _ids(3 * 16 + 1, V)
    lib = library() + [MXUnits.parse("mxfp4:mitchell").with_cost(power_mw=.2)]
    res = search_lm(path, ids, lib, budget=8, seq_len=16, greedy=False, seed=1, progress=False)
    uniform = {next(iter(p.assignment.values())): p for p in res.points
               if p.seed == "uniform" and len(set(p.assignment.values())) == 1}
    rows = {r["units"]: r for r in evaluate_units(path, ids, ["exact", "mxfp8", "mxfp4:mitchell"], seq_len=16).rows}
    for name in ("exact", "mxfp8", "mxfp4:mitchell"):
        assert uniform[name].metric == rows[name]["loss"], name
    p = max(res.points, key=lambda q: len(set(q.assignment.values())))
    assert len({v for v in p.assignment.values() if v.startswith("mx")}) >= 1
    row = evaluate_units(path, ids, [dict(p.assignment)], seq_len=16).rows[0]
    assert row["loss"] == p.metric == res.evaluate_at(p)
