"""lutcore.torch.search: product counts, sensitivity, compensation and the search on a real
(small, random) CNN — each figure against an independent computation: the products by
the convolution formula, the sensitivity by converting and setting one layer by hand, the
weight tuning by brute force, the bias correction by its defining property, re-evaluation
bit for bit."""
import json
import math
import os
import re

import numpy as np
import pytest
import torch
from torch import nn

import lutcore.torch as lt
from lutcore import search as S
from lutcore.torch import _search as TS
from lutcore.units import Units, resolve

POWER = {"exact": 1.0, "mitchell": 0.45, "truncated:9": 0.4, "reduced:3": 0.3}


def units_list():
    return [resolve(s).with_cost(power_mw=p, source="stated by the test") for s, p in POWER.items()]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 5, 3, padding=1)                   # (n, 5, 7, 7)
        self.c2 = nn.Conv2d(5, 6, 3, stride=2, bias=False)        # (n, 6, 3, 3)
        self.fc = nn.Linear(54, 7)

    def forward(self, x):
        return self.fc(torch.relu(self.c2(torch.relu(self.c1(x)))).flatten(1))


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(9, 2, 7, 7)
    with torch.no_grad():
        ref = net(x)

    def evaluate(model):                  # lower is better: the output's distance to float
        with torch.no_grad():
            return float(((model(x) - ref) ** 2).mean())
    return net, x, evaluate


def test_products_are_counted_by_a_dry_run(setup):
    net, x, _ = setup
    m = lt.approximate(net, "exact")
    n = x.shape[0]
    want = {"c1": n * 5 * 7 * 7 * (2 * 9), "c2": n * 6 * 3 * 3 * (5 * 9), "fc": n * 7 * 54}
    assert TS.count_products(m, x) == want
    assert TS.count_products(m, [x, x[:2]]) == {k: v * 11 // 9 for k, v in want.items()}


def test_sensitivity_is_one_layer_at_a_time(setup, tmp_path):
    net, x, evaluate = setup
    before = {k: v.clone() for k, v in net.state_dict().items()}
    sens = TS.sensitivity(net, units_list(), evaluate, progress=False, out=tmp_path)
    assert type(net.c1) is nn.Conv2d and all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    base = lt.approximate(net, "exact")
    assert sens.baseline == evaluate(base)
    for i, layer in enumerate(sens.layers):
        for j, name in enumerate(sens.units):
            m = lt.approximate(net, "exact")
            getattr(m, layer).units = name
            assert sens.table[i][j] == evaluate(m), (layer, name)
    assert os.path.isfile(tmp_path / "sensitivity.png") and "c2" in sens.format_table()


def test_search_points_re_evaluate_bit_for_bit(setup, tmp_path):
    net, x, evaluate = setup
    res = TS.search(net, units_list(), evaluate, x, budget=40, seed=2, progress=False, out=tmp_path)
    assert len(res.points) <= 40 and res.front
    assert {p.seed for p in res.points} >= {"uniform", "sensitivity", "greedy"}
    exact = [p for p in res.points if p.seed == "uniform" and p.assignment["fc"] == "exact"][0]
    assert exact.energy == 1.0
    for p in res.front:
        assert evaluate(res.model_at(p)) == p.metric
        m = lt.approximate(net, "exact")                        # applied by hand on a fresh conversion
        for layer, name in p.assignment.items():
            getattr(m, layer).units = name
        assert evaluate(m) == p.metric
    d = json.load(open(tmp_path / "search.json"))
    assert d["complete"] is True and len(d["points"]) == len(res.points)
    assert d["config"]["macs"] == TS.count_products(lt.approximate(net, "exact"), x)
    assert open(tmp_path / "front.png", "rb").read(4) == b"\x89PNG"


def test_layers_selects_and_unknown_keys_are_named(setup):
    net, x, evaluate = setup
    res = TS.search(net, units_list(), evaluate, x, budget=12, layers=["c*"], greedy=False, progress=False)
    assert all(set(p.assignment) == {"c1", "c2"} for p in res.points)
    with pytest.raises(ValueError, match=r"layers: key 'conv9' matches no layer .*the layers are: c1, c2, fc"):
        TS.search(net, units_list(), evaluate, x, budget=12, layers=["conv9"], progress=False)
    with pytest.raises(ValueError, match="'mitchell' has no power_mw"):
        TS.search(net, [resolve("exact").with_cost(power_mw=1.0), resolve("mitchell")], evaluate, x,
                  budget=12, progress=False)


def test_ctrl_c_keeps_the_points_and_resume_finishes_the_same_search(setup, tmp_path):
    net, x, evaluate = setup
    full = TS.search(net, units_list(), evaluate, x, budget=36, seed=5, progress=False)
    calls = {"n": 0}

    def stopping(model):
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt
        return evaluate(model)
    with pytest.raises(KeyboardInterrupt):
        TS.search(net, units_list(), stopping, x, budget=36, seed=5, progress=False, out=tmp_path)
    part = json.load(open(tmp_path / "search.json"))
    # the 19 evaluations finished before Ctrl-C, those of the batch in flight included (issue 38)
    assert part["complete"] is False and part["points"] == [p.to_dict() for p in full.points[:19]]
    calls["n"] = -10 ** 9
    again = TS.search(net, units_list(), stopping, x, budget=36, seed=5, progress=False, out=tmp_path,
                      resume=True)
    assert calls["n"] == -10 ** 9 + len(full.points) - len(part["points"])
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points]
    assert json.load(open(tmp_path / "search.json"))["complete"] is True


def test_workers_on_ray_give_the_same_points(setup):
    net, x, evaluate = setup
    local = TS.search(net, units_list(), evaluate, x, budget=24, seed=1, progress=False)
    remote = TS.search(net, units_list(), evaluate, x, budget=24, seed=1, progress=False, workers=2)
    assert [p.to_dict() for p in remote.points] == [p.to_dict() for p in local.points]


class _Threads:
    """A metric that reports the lutcore thread count the evaluating process runs."""

    def __call__(self, model):
        import lutcore
        return float(lutcore.get_num_threads())


def test_ray_workers_on_one_host_share_its_cores(setup):
    import os
    net, x, _ = setup
    res = TS.search(net, units_list(), _Threads(), x, budget=24, seed=1, progress=False, workers=2)
    cpus = len(os.sched_getaffinity(0))
    assert {p.metric for p in res.points} == {float(max(1, cpus // 2))}


# ----------------------------------------------------------------------------- compensation

def _tuned_map_reference(f, hist):
    """Brute force: for each weight value w, the w' minimising sum_i hist[i] |i*w - f(i, w')|
    (ties: nearest w, then the smaller), over values -127..127; f indexed by values + 128."""
    vals = np.arange(-128, 128)
    out = {}
    for w in range(-127, 128):
        best = None
        for w2 in range(-127, 128):
            c = sum(hist[i] * abs(i * w - int(f[i + 128, w2 + 128])) for i in range(-128, 128) if hist[i])
            key = (c, abs(w2 - w), w2)
            if best is None or key < best:
                best = key
        out[w] = best[2]
    return out, vals


def test_weight_tuning_matches_brute_force():
    rng = np.random.default_rng(3)
    nat = (np.arange(-128, 128)[:, None] * np.arange(-128, 128)[None, :])    # natural order [a+128, b+128]
    f = np.clip(nat + rng.integers(-300, 300, nat.shape), -32768, 32767)
    hist = {i: 0 for i in range(-128, 128)}
    for i in rng.integers(-20, 60, 40):
        hist[int(i)] += int(rng.integers(1, 9))
    u = Units.from_mul(np.roll(f, (-128, -128), axis=(0, 1)))                  # lutcore's byte order
    hb = np.zeros(256, np.int64)
    for i, c in hist.items():
        hb[i & 0xff] = c
    t = TS.tuned_unit(u, hb).table().astype(np.int64)
    want, _ = _tuned_map_reference(f, hist)
    for w in range(-127, 128):
        assert np.array_equal(t[:, w & 0xff], u.table()[:, want[w] & 0xff].astype(np.int64)), w


def test_weight_tuning_undoes_a_shifted_weight_operand():
    # f(a, b) = a * (b + 1): the best code for weight w is w - 1, whatever the activations
    a = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)[:, None]
    b = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)[None, :]
    u = Units.from_mul(np.clip(a * (b + 1), -32768, 32767))
    hist = np.ones(256, np.int64)
    t = TS.tuned_unit(u, hist).table().astype(np.int64)
    exact = (a * b)
    cols = [w & 0xff for w in range(-126, 128)]
    assert np.array_equal(t[:, cols], exact[:, cols])
    assert TS.tuned_unit(resolve("exact"), hist).is_exact


def test_bias_correction_removes_the_mean_error_on_the_calibration_data(setup):
    net, x, evaluate = setup
    res = TS.search(net, units_list(), evaluate, x, budget=12, greedy=False, compensation="bias",
                    progress=False)
    exact = lt.approximate(net, "exact")
    for name in ("mitchell", "reduced:3"):
        p = {"c1": name, "c2": "exact", "fc": "exact"}
        m = res.model_at(p)
        with torch.no_grad():
            d = (m.c1(x) - exact.c1(x)).to(torch.float64).mean(dim=(0, 2, 3))
            raw = lt.approximate(net, "exact")
            raw.c1.units = name
            d0 = (raw.c1(x) - exact.c1(x)).to(torch.float64).mean(dim=(0, 2, 3))
        assert d.abs().max() < 1e-5 < d0.abs().max(), name
    assert net.c2.bias is None                                 # the caller's model is untouched
    # every point's metric is the model_at's, and the correction helps the whole model here
    for p in res.points:
        assert evaluate(res.model_at(p)) == p.metric


def test_compensation_is_checked(setup):
    net, x, evaluate = setup
    with pytest.raises(ValueError, match="compensation: expected None or some of"):
        TS.search(net, units_list(), evaluate, x, budget=12, compensation="retrain", progress=False)
    with pytest.raises(ValueError, match="none of the candidates is exact"):
        TS.search(net, [resolve("mitchell").with_cost(power_mw=0.4)], evaluate, x, budget=12, progress=False)
    res = TS.search(net, [resolve("mitchell").with_cost(power_mw=0.4)], evaluate, x, budget=12,
                    reference=resolve("exact").with_cost(power_mw=1.0), greedy=False, progress=False)
    assert math.isclose(min(p.energy for p in res.points), 0.4)


def test_ctrl_c_with_ray_workers_keeps_every_finished_evaluation(setup, tmp_path, monkeypatch):
    """Ctrl-C while the driver waits on its workers (issue 38): every evaluation they finished
    is in search.json.  The interrupt comes in the driver's first blocking wait after the 4
    uniform points, once every evaluation of the batch in flight (the 9 of the sensitivity)
    has finished: the wait is let run to the end, then raises."""
    import ray
    net, x, evaluate = setup
    full = TS.search(net, units_list(), evaluate, x, budget=24, seed=1, progress=False)
    real_get, real_wait = ray.get, ray.wait
    st = {"got": 0, "fired": False}

    def floats(v):
        return sum(floats(e) for e in v) if isinstance(v, list) else 1

    def due():
        if st["got"] >= 4 and not st["fired"]:
            st["fired"] = True
            return True
        return False

    def get(refs, *a, **k):
        if isinstance(refs, list) and not all(isinstance(r, ray.ObjectRef) for r in refs) or \
                not isinstance(refs, (list, ray.ObjectRef)):
            return real_get(refs, *a, **k)
        fire = due() and k.get("timeout") is None
        out = real_get(refs, *a, **k)
        if fire:
            raise KeyboardInterrupt
        st["got"] += floats(out)
        return out

    def wait(refs, *a, **k):
        if k.get("timeout") != 0 and due():
            real_wait(refs, num_returns=len(refs))
            raise KeyboardInterrupt
        return real_wait(refs, *a, **k)
    monkeypatch.setattr(ray, "get", get)
    monkeypatch.setattr(ray, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        TS.search(net, units_list(), evaluate, x, budget=24, seed=1, progress=False, workers=2, out=tmp_path)
    assert st["fired"] and not ray.is_initialized()
    part = json.load(open(tmp_path / "search.json"))
    assert part["complete"] is False and part["points"] == [p.to_dict() for p in full.points[:13]]


# ----------------------------------------------------------------------------- issue 38: arguments, resume

class Never:
    """An evaluate that must not run: a bad argument is refused before any evaluation."""
    calls = 0

    def __call__(self, model):
        Never.calls += 1
        raise AssertionError("evaluated despite a bad argument")


@pytest.mark.parametrize("workers, err", [(1.5, TypeError), ("2", TypeError), (True, TypeError), (0, ValueError),
                                          (-1, ValueError)])
def test_bad_workers_are_named_before_anything_starts(setup, workers, err):
    net, x, _ = setup
    Never.calls = 0
    with pytest.raises(err, match=r"workers: expected a positive int \(Ray actors\) or None \(in process\), got "
                                  r".*" + re.escape(repr(workers))):
        TS.search(net, units_list(), Never(), x, budget=12, workers=workers, progress=False)
    assert Never.calls == 0


def test_an_empty_example_input_is_refused_before_any_evaluation(setup):
    net, x, _ = setup
    Never.calls = 0
    for empty in (x[:0], [x[:0], x[:0]]):
        with pytest.raises(ValueError, match=r"example_input: the dry run counted no products in the searched "
                                             r"layers \({'c1': 0, 'c2': 0, 'fc': 0}\)"):
            TS.search(net, units_list(), Never(), empty, budget=12, progress=False)
    with pytest.raises(TypeError, match="example_input: expected a tensor"):
        TS.search(net, units_list(), Never(), None, budget=12, progress=False)
    us = units_list()
    us[0] = us[0].with_cost(power_mw=0.0)
    with pytest.raises(ValueError, match="reference: units 'exact' has power_mw 0.0"):
        TS.search(net, us, Never(), x, budget=12, progress=False)
    assert Never.calls == 0


def test_a_reference_named_by_its_spec_takes_the_candidates_cost(setup):
    net, x, evaluate = setup
    res = TS.search(net, units_list(), evaluate, x, budget=8, greedy=False, reference="exact", progress=False)
    assert [p.energy for p in res.uniform()] == pytest.approx([1.0, 0.45, 0.4, 0.3], rel=1e-15)
    res = TS.search(net, units_list(), evaluate, x, budget=8, greedy=False, reference="mitchell", progress=False)
    assert [p.energy for p in res.uniform()] == pytest.approx([1.0 / 0.45, 1.0, 0.4 / 0.45, 0.3 / 0.45], rel=1e-15)


def test_resume_refuses_another_model_input_or_metric(setup, tmp_path):
    net, x, evaluate = setup
    TS.search(net, units_list(), evaluate, x, budget=8, greedy=False, progress=False, out=tmp_path)
    Never.calls = 0
    kw = dict(budget=12, greedy=False, progress=False, out=tmp_path, resume=True)
    with pytest.raises(ValueError, match=r"resume: .*search.json holds points measured on something else.*"
                                         r"example_input: 'sha256:[0-9a-f]{16}\.\.\.' \(saved\) vs 'sha256:[0-9a-f]{16}\.\.\.' \(now\)"):
        TS.search(net, units_list(), Never(), x * 2, **kw)
    other = Net().eval()                                   # other weights
    with pytest.raises(ValueError, match=r"model: 'sha256:[0-9a-f]{16}\.\.\.' \(saved\) vs 'sha256:"):
        TS.search(other, units_list(), Never(), x, **kw)
    with pytest.raises(ValueError, match=r"metric_name: 'metric' \(saved\) vs 'accuracy' \(now\)"):
        TS.search(net, units_list(), Never(), x, metric_name="accuracy", **kw)
    with pytest.raises(ValueError, match=r"evaluate: '.*setup.<locals>.evaluate' \(saved\) vs '.*Never' \(now\)"):
        TS.search(net, units_list(), Never(), x, **kw)
    with pytest.raises(ValueError, match=r"compensation: \[\] \(saved\) vs \[\"bias\"\] \(now\)"):
        TS.search(net, units_list(), Never(), x, compensation="bias", **kw)
    assert Never.calls == 0
    calls = {"n": 0}

    def counting(model):
        calls["n"] += 1
        return evaluate(model)
    counting.__qualname__ = evaluate.__qualname__         # the same metric: it continues
    res = TS.search(net, units_list(), counting, x, **kw)
    assert len(res.points) == 12 and calls["n"] == 4


# a bad value for each argument of lutcore.torch.search; (name, value)
BAD_TORCH = [("budget", v) for v in (0, -3, 1.5, "10", True, None)] + \
    [("maximize", v) for v in ("yes", 1, None)] + [("greedy", v) for v in ("no", 0)] + \
    [("pop_size", v) for v in (0, 1, 2.5, "4")] + [("seed", v) for v in (-1, 1.5, "0", None)] + \
    [("workers", v) for v in (0, -2, 1.5, "2", True)] + [("progress", v) for v in ("no", None, 2)] + \
    [("metric_name", v) for v in (3, None)] + [("threads", v) for v in (0, -1, 1.5, "2")] + \
    [("resume", v) for v in ("yes", 1)] + [("out", v) for v in (3, "<file>")] + \
    [("layers", v) for v in (5, [], ["nosuch"], [3])] + [("reference", v) for v in (3, "nosuch", "truncated:99")] + \
    [("compensation", v) for v in ("retrain", 5, ["weights", "x"])] + \
    [("units", v) for v in ([], "nosuch", 5, "truncated:99")] + [("evaluate", v) for v in (5, None)] + \
    [("example_input", v) for v in (None, "<empty>", [], 5)] + [("model", v) for v in (5, None)] + \
    [("calibration", v) for v in (5, [])]


def test_bad_arguments_are_a_named_value_or_type_error_before_any_evaluation(setup, tmp_path):
    """Property (hypothesis): any one or two bad arguments of lutcore.torch.search give a
    ValueError / TypeError naming one of them — never another exception, never an evaluation."""
    from hypothesis import HealthCheck, example, given, settings, strategies as st
    net, x, _ = setup
    afile = tmp_path / "afile"
    afile.write_text("")

    @settings(derandomize=True, max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.sampled_from(BAD_TORCH), min_size=1, max_size=2, unique_by=lambda c: c[0]))
    def check(bad):
        ran.append(bad)
        kw = dict(model=net, units=units_list(), evaluate=Never(), example_input=x, budget=12, progress=False)
        for name, v in bad:
            kw[name] = {"<file>": str(afile), "<empty>": x[:0]}.get(v, v) if isinstance(v, str) else v
        Never.calls = 0
        with pytest.raises((ValueError, TypeError)) as e:
            TS.search(kw.pop("model"), kw.pop("units"), kw.pop("evaluate"), kw.pop("example_input"), **kw)
        assert any(n in str(e.value) for n, _ in bad), (bad, str(e.value))
        assert Never.calls == 0
    ran = []
    for case in BAD_TORCH:                        # every bad value alone, then random pairs
        check = example([case])(check)
    check()
    assert len(ran) > len(BAD_TORCH)                       # each alone, and pairs
