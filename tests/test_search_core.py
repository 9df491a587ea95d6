"""lutcore.search, the model-free part: the energy of an assignment, the cache, the seeds,
the front, resume and invalid points — on a synthetic space whose metric is a known
function of the assignment (no model), so every figure has an independent reference."""
import json
import math

import numpy as np
import pytest

from lutcore import search as S
from lutcore.units import approx, resolve

POWER = {"exact": 1.0, "mitchell": 0.4, "truncated:6": 0.25, "reduced:5": 0.6}
AREA = {"exact": 500.0, "mitchell": 220.0, "truncated:6": 120.0, "reduced:5": 300.0}
MACS = {"conv1": 1000, "conv2": 7000, "fc": 33}


def costed(spec, with_area=True):
    u = resolve(spec)
    kw = {"power_mw": POWER[spec]}
    if with_area:
        kw["area_um2"] = AREA[spec]
    return u.with_cost(**kw, source="stated by the test")


def candidates(with_area=True):
    return S.Candidates([costed(s, with_area) for s in POWER], MACS)


def metric_of(a):
    """A metric that grows with each layer's cheapness, more for conv2 (the sensitive layer)."""
    w = {"conv1": 1.0, "conv2": 5.0, "fc": 0.3}
    return float(sum(w[l] * (1.0 - POWER[u]) ** 2 for l, u in a.items()))


class Counter:
    def __init__(self, fn=metric_of):
        self.fn, self.calls = fn, []

    def __call__(self, assignments):
        self.calls += [json.dumps(a, sort_keys=True) for a in assignments]
        return [self.fn(a) for a in assignments]


def test_energy_is_the_product_weighted_power_ratio():
    c = candidates()
    a = {"conv1": "mitchell", "conv2": "truncated:6", "fc": "exact"}
    e = c.energy(a)
    num = 1000 * 0.4 + 7000 * 0.25 + 33 * 1.0
    assert e["energy"] == pytest.approx(num / (8033 * 1.0), rel=1e-15)
    assert e["power_mw_products"] == pytest.approx(num, rel=1e-15)
    assert e["area"] == pytest.approx((1000 * 220 + 7000 * 120 + 33 * 500) / (8033 * 500), rel=1e-15)
    assert c.energy(c.uniform("exact"))["energy"] == 1.0


def test_energy_needs_the_power_of_every_unit():
    bare = resolve("mitchell")
    c = S.Candidates([costed("exact"), bare], MACS)
    with pytest.raises(ValueError, match="'mitchell' has no power_mw"):
        c.check_power()
    with pytest.raises(ValueError, match="none of the candidate units is exact"):
        S.Candidates([costed("mitchell")], MACS)


def test_delay_is_the_slowest_unit_used():
    us = [resolve(s).with_cost(power_mw=POWER[s], delay_ns=d) for s, d in
          (("exact", 1.5), ("mitchell", 0.9), ("truncated:6", 0.7), ("reduced:5", 1.1))]
    c = S.Candidates(us, MACS)
    assert c.energy({"conv1": "mitchell", "conv2": "truncated:6", "fc": "mitchell"})["delay_ns"] == 0.9
    assert "area" not in c.energy(c.uniform("exact"))


def test_search_seeds_budget_cache_and_front():
    c = candidates()
    ev = Counter()
    res, sens = S.run_search(c, ev, budget=60, seed=3)
    assert len(ev.calls) == len(set(ev.calls)) == len(res.points) <= 60   # each assignment once
    seeds = {p.seed for p in res.points}
    assert {"uniform", "sensitivity", "greedy"} <= seeds
    uni = [p for p in res.points if p.seed == "uniform"]
    assert sorted(next(iter(p.assignment.values())) for p in uni) == sorted(POWER)
    for p in res.points:                     # every figure is the formula's
        assert p.metric == metric_of(p.assignment)
        assert p.energy == c.energy(p.assignment)["energy"]
    # the front: non-dominated, and every other valid point is dominated by one of it
    front = res.front
    for p in front:
        assert not any(q.energy <= p.energy and q.metric <= p.metric and (q.energy < p.energy or q.metric < p.metric)
                       for q in res.points)
    for q in res.points:
        if q not in front:
            assert any(p.energy <= q.energy and p.metric <= q.metric for p in front)
    # the sensitivity table is the metric with one layer moved
    for i, l in enumerate(sens.layers):
        for j, u in enumerate(sens.units):
            assert sens.table[i][j] == metric_of(dict(c.uniform("exact"), **{l: u}))


def test_greedy_path_moves_one_layer_at_a_time_to_cheaper_units():
    c = candidates()
    sens = S.run_sensitivity(c, Counter())
    path = S.greedy_path(c, sens)
    prev = c.uniform("exact")
    for a in path:
        diff = [l for l in a if a[l] != prev[l]]
        assert len(diff) == 1 and POWER[a[diff[0]]] < POWER[prev[diff[0]]]
        prev = a
    assert prev == c.uniform("truncated:6")
    # the first move is the one with the least damage per energy saved, by brute force
    base = c.uniform("exact")
    ratios = {(l, u): (metric_of(dict(base, **{l: u})) - metric_of(base)) / (MACS[l] * (1.0 - POWER[u]))
              for l in MACS for u in POWER if POWER[u] < 1.0}
    l, u = min(ratios, key=ratios.get)
    assert path[0] == dict(base, **{l: u})


def test_same_seed_same_points_and_a_resume_evaluates_nothing_again(tmp_path):
    c = candidates()
    r1, _ = S.run_search(c, Counter(), budget=50, seed=7)
    r2, _ = S.run_search(c, Counter(), budget=50, seed=7)
    assert [p.to_dict() for p in r1.points] == [p.to_dict() for p in r2.points]
    r1.save(tmp_path)
    back = S.SearchResult.load(tmp_path)
    assert [p.to_dict() for p in back.points] == [p.to_dict() for p in r1.points]
    assert [p.index for p in back.front] == [p.index for p in r1.front]
    ev = Counter()
    r3, _ = S.run_search(c, ev, budget=50, seed=7, points=back.points)
    assert ev.calls == []
    assert [p.to_dict() for p in r3.points] == [p.to_dict() for p in r1.points]


def test_interrupted_search_resumes_to_the_uninterrupted_result():
    c = candidates()
    full, _ = S.run_search(c, Counter(), budget=45, seed=1)
    saved = {}

    def stop_after(n):
        calls = {"n": 0}

        def ev(assignments):
            calls["n"] += 1
            if calls["n"] > n:
                raise KeyboardInterrupt
            return [metric_of(a) for a in assignments]
        return ev
    with pytest.raises(KeyboardInterrupt):
        S.run_search(c, stop_after(3), budget=45, seed=1, on_batch=lambda pts: saved.update(p=pts))
    assert 0 < len(saved["p"]) < len(full.points)
    ev = Counter()
    again, _ = S.run_search(c, ev, budget=45, seed=1, points=saved["p"])
    assert len(ev.calls) == len(full.points) - len(saved["p"])
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points]


def test_nan_metrics_are_invalid_points_and_the_search_goes_on():
    c = candidates()

    def fn(a):
        return float("nan") if a["conv2"] == "truncated:6" else metric_of(a)
    res, _ = S.run_search(c, Counter(fn), budget=40, seed=0)
    bad = [p for p in res.points if not p.valid]
    assert bad and all(p.assignment["conv2"] == "truncated:6" and math.isnan(p.metric) for p in bad)
    assert all(p.valid for p in res.front)
    d = json.loads(json.dumps(res.to_dict()))               # strict JSON: no NaN literal
    assert all(p["metric"] is None for p in d["points"] if not p["valid"])


def test_maximize_flips_the_metric():
    c = candidates()
    res, _ = S.run_search(c, Counter(lambda a: -metric_of(a)), budget=40, maximize=True, seed=0)
    best_exact = [p for p in res.front if p.energy == 1.0]
    assert best_exact and best_exact[0].metric == 0.0
    assert all(p.metric <= 0.0 for p in res.front)
    assert res.best(min_metric=-1e-12).energy == 1.0


def test_budget_errors_name_what_is_needed():
    c = candidates()
    with pytest.raises(ValueError, match="budget: expected at least 16"):
        S.run_search(c, Counter(), budget=10)
    res, _ = S.run_search(c, Counter(), budget=4, greedy=False)
    assert len(res.points) == 4


def test_sensitivity_table_and_heatmap(tmp_path):
    c = candidates()
    sens = S.run_sensitivity(c, Counter())
    files = sens.save(tmp_path)
    assert open(files["png"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    d = json.load(open(files["json"]))
    assert d["layers"] == list(MACS) and d["units"] == list(POWER)
    assert "conv2" in sens.format_table()
    dmg = sens.damage()
    assert dmg.shape == (3, 4) and dmg[list(MACS).index("conv2")].max() == pytest.approx(5 * 0.75 ** 2)


def test_front_png_and_table(tmp_path):
    res, _ = S.run_search(candidates(), Counter(), budget=30, seed=0)
    files = res.save(tmp_path)
    assert open(files["png"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "on the front" in res.format_table()


def test_same_named_units_with_different_tables_stay_apart():
    a = approx.truncated(6).with_cost(power_mw=0.3)
    b = approx.truncated(5).with_cost(power_mw=0.35)
    b2 = type(b)(b.mul, name=a.name).with_cost(power_mw=0.35)
    c = S.Candidates([costed("exact"), a, b2], MACS)
    assert len(c.names) == 3 and c.names[1] != c.names[2]
