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


# ----------------------------------------------------------------------------- issue 38: Ctrl-C, resume, checks

def _stopping(after, order=None, fn=metric_of):
    """An evaluate_many that evaluates one assignment at a time and raises KeyboardInterrupt
    (Ctrl-C) when ``after`` evaluations have finished; ``order="reversed"`` finishes each batch
    back to front, yielding ``Finished(position, metric)`` as out-of-order workers do."""
    done = {"n": 0}

    def ev(assignments):
        pos = range(len(assignments)) if order is None else reversed(range(len(assignments)))
        for j in pos:
            if done["n"] == after:
                raise KeyboardInterrupt
            done["n"] += 1
            m = fn(assignments[j])
            yield m if order is None else S.Finished(j, m)
    return ev


def test_ctrl_c_mid_batch_keeps_every_finished_evaluation(tmp_path):
    c = candidates()
    full, _ = S.run_search(c, Counter(), budget=45, seed=1)
    # 4 uniform points, then the sensitivity batch (9 new): Ctrl-C after 9 evaluations is in its middle
    with pytest.raises(KeyboardInterrupt):
        S.search_files(c, _stopping(9), budget=45, seed=1, out=tmp_path)
    part = S.SearchResult.load(tmp_path)
    assert not part.complete
    assert [p.to_dict() for p in part.points] == [p.to_dict() for p in full.points[:9]]
    ev = Counter()
    again = S.search_files(c, ev, budget=45, seed=1, out=tmp_path, prior=S.prior_result(tmp_path, True))
    assert len(ev.calls) == len(full.points) - 9
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points]


def test_out_of_order_evaluations_are_kept_and_a_resume_fills_their_gaps(tmp_path):
    c = candidates()
    full, _ = S.run_search(c, Counter(), budget=45, seed=1)
    with pytest.raises(KeyboardInterrupt):
        S.search_files(c, _stopping(7, "reversed"), budget=45, seed=1, out=tmp_path)
    part = S.SearchResult.load(tmp_path)
    # the uniform batch (indices 0-3), then the last 3 of the 9-point sensitivity batch (indices 10-12)
    assert [p.index for p in part.points] == [0, 1, 2, 3, 10, 11, 12]
    assert [p.to_dict() for p in part.points] == [full.points[i].to_dict() for i in (0, 1, 2, 3, 10, 11, 12)]
    ev = Counter()
    again = S.search_files(c, ev, budget=45, seed=1, out=tmp_path, prior=S.prior_result(tmp_path, True))
    assert len(ev.calls) == len(full.points) - 7
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points]


def test_evaluate_many_yielding_wrong_positions_or_counts_is_named():
    c = candidates()

    def twice(assignments):
        yield S.Finished(0, 1.0)
        yield S.Finished(0, 1.0)
    with pytest.raises(ValueError, match="Finished position 0 is not an unfinished position"):
        S.run_search(c, twice, budget=4, greedy=False)
    with pytest.raises(ValueError, match="expected 4 metrics, got 2"):
        S.run_search(c, lambda a: [1.0, 2.0], budget=4, greedy=False)
    with pytest.raises(ValueError, match="not both"):
        S.run_search(c, lambda a: [1.0, S.Finished(1, 1.0), 1.0, 1.0], budget=4, greedy=False)


def test_a_resume_replays_more_than_twenty_generations():
    """Generations a resume holds every point of are replayed, not idle: a long search
    interrupted late resumes to the uninterrupted result."""
    layers = {f"l{i}": 100 * (i + 1) for i in range(8)}
    c = S.Candidates([costed(s) for s in POWER], layers)
    w = {l: 1.0 + i for i, l in enumerate(layers)}

    def fn(a):
        return float(sum(w[l] * (1.0 - POWER[u]) ** 2 for l, u in a.items()))
    full, _ = S.run_search(c, Counter(fn), budget=180, seed=4, greedy=False, pop_size=4)
    saved = {}
    n = {"k": 0}

    def ev(assignments):
        for a in assignments:
            if n["k"] == 160:
                raise KeyboardInterrupt
            n["k"] += 1
            yield fn(a)
    with pytest.raises(KeyboardInterrupt):
        S.run_search(c, ev, budget=180, seed=4, greedy=False, pop_size=4, on_batch=lambda p: saved.update(p=p))
    assert len(saved["p"]) == 160
    again, _ = S.run_search(c, Counter(fn), budget=180, seed=4, greedy=False, pop_size=4, points=saved["p"])
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points]


@pytest.mark.parametrize("order", [None, "reversed"])
def test_ctrl_c_anywhere_resumes_to_the_uninterrupted_result(order):
    """Wherever Ctrl-C comes — in the seeds, the greedy path, a generation, mid-batch, with
    invalid points about — the resumed search is the uninterrupted one, point for point: a
    resume decides the greedy path's room, the budget left and the generations from the
    points the uninterrupted run held at that moment, not from the later ones it holds."""
    c = candidates()

    def fn(a):
        return float("nan") if a["conv1"] == "reduced:5" and a["fc"] != "exact" else metric_of(a)
    full, _ = S.run_search(c, Counter(fn), budget=55, seed=2)
    for stop in range(1, len(full.points), 3):         # 4 seeds, 9 sensitivity, the greedy path, generations
        saved = {}
        with pytest.raises(KeyboardInterrupt):
            S.run_search(c, _stopping(stop, order, fn), budget=55, seed=2, on_batch=lambda p: saved.update(p=p))
        assert len(saved["p"]) == stop
        ev2 = Counter(fn)
        again, _ = S.run_search(c, ev2, budget=55, seed=2, points=saved["p"])
        assert len(ev2.calls) == len(full.points) - stop
        assert [p.to_dict() for p in again.points] == [p.to_dict() for p in full.points], stop


def test_resume_refuses_points_measured_on_something_else(tmp_path):
    c = candidates()
    S.search_files(c, Counter(), budget=8, greedy=False, out=tmp_path,
                   config={"measured_on": {"data": "sha256:aaaa"}})
    prior = S.prior_result(tmp_path, True)
    ev = Counter()
    with pytest.raises(ValueError, match=r"resume: .*search.json holds points measured on something else.*"
                                         r"data: 'sha256:aaaa' \(saved\) vs 'sha256:bbbb' \(now\)"):
        S.search_files(c, ev, budget=20, greedy=False, out=tmp_path, prior=prior,
                       config={"measured_on": {"data": "sha256:bbbb"}})
    # other costs (the saved energies), another table under the same name, maximize
    us = [costed(s) for s in POWER]
    us[1] = us[1].with_cost(power_mw=0.5)
    with pytest.raises(ValueError, match=r"costs.mitchell.power_mw: 0.4 \(saved\) vs 0.5 \(now\)"):
        S.search_files(S.Candidates(us, MACS), ev, budget=20, greedy=False, prior=prior,
                       config={"measured_on": {"data": "sha256:aaaa"}})
    us = [costed(s) for s in POWER]
    us[3] = type(us[3])(resolve("reduced:4").mul, name="reduced:5").with_cost(power_mw=0.6, area_um2=300.0)
    with pytest.raises(ValueError, match=r"units.reduced:5: "):
        S.search_files(S.Candidates(us, MACS), ev, budget=20, greedy=False, prior=prior,
                       config={"measured_on": {"data": "sha256:aaaa"}})
    with pytest.raises(ValueError, match=r"maximize: false \(saved\) vs true \(now\)"):
        S.search_files(c, ev, budget=20, greedy=False, maximize=True, prior=prior,
                       config={"measured_on": {"data": "sha256:aaaa"}})
    assert ev.calls == []
    # the same: it continues; a search.json that records nothing of it (an older lutcore) is refused
    S.search_files(c, ev, budget=20, greedy=False, out=tmp_path, prior=prior,
                   config={"measured_on": {"data": "sha256:aaaa"}})
    assert len(ev.calls) == 12
    d = json.loads((tmp_path / "search.json").read_text())
    del d["config"]["measured_on"]
    (tmp_path / "search.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match="does not record what its points were measured on"):
        S.search_files(c, ev, budget=30, greedy=False, prior=S.prior_result(tmp_path, True))


def test_a_zero_reference_power_or_no_products_is_refused_before_any_evaluation():
    ev = Counter()
    us = [costed(s) for s in POWER]
    us[0] = us[0].with_cost(power_mw=0.0)
    with pytest.raises(ValueError, match=r"reference: units 'exact' has power_mw 0.0.*expected a power_mw > 0"):
        S.run_search(S.Candidates(us, MACS), ev, budget=40)
    with pytest.raises(ValueError, match="macs: the layers perform no products"):
        S.run_search(S.Candidates([costed(s) for s in POWER], {k: 0 for k in MACS}), ev, budget=40)
    bad = costed("mitchell")
    bad.cost = dict(bad.cost, power_mw=float("nan"))          # a figure that bypassed with_cost
    with pytest.raises(ValueError, match="units 'mitchell': expected a finite power_mw >= 0, got nan"):
        S.run_search(S.Candidates([costed("exact"), bad], MACS), ev, budget=40)
    assert ev.calls == []


def test_a_named_reference_is_the_candidate_with_its_cost():
    units = [costed(s) for s in POWER]
    cands, ref = S.candidates_and_reference(units, "exact")
    c = S.Candidates(cands, MACS, reference=ref)
    c.check_power()
    assert len(cands) == 4 and c.energy(c.uniform("exact"))["energy"] == 1.0
    cands, ref = S.candidates_and_reference(units, "mitchell")
    c = S.Candidates(cands, MACS, reference=ref)
    c.check_power()
    assert c.energy(c.uniform("exact"))["energy"] == pytest.approx(1.0 / 0.4, rel=1e-15)
    # a reference given with its own figure keeps it; one not among the candidates joins them
    cands, ref = S.candidates_and_reference(units[1:], resolve("exact").with_cost(power_mw=2.0))
    assert len(cands) == 4 and S.Candidates(cands, MACS, reference=ref).energy(
        {l: "mitchell" for l in MACS})["energy"] == pytest.approx(0.2, rel=1e-15)
    with pytest.raises(TypeError, match="reference: expected None, a units spec or a Units, got int 3"):
        S.candidates_and_reference(units, 3)
