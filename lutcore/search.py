"""Which unit where: the energy of a per-layer assignment, one-layer sensitivity, and a Pareto search.

Design: this module knows no model.  A search *space* is a list of layer names, each with
its product count (the multiplications the layer performs on a given input, counted by a
dry run of the front end), and a list of candidate units with their costs; an *assignment*
maps every layer to the name of one candidate.  The front ends (``lutcore.torch.search``
for PyTorch models, ``lutcore search`` for language models) supply the one thing that
depends on the model — ``evaluate_many(assignments) -> metrics`` — and everything else
lives here: the energy model, the sensitivity table and its heatmap, the search (pymoo's
NSGA-II, seeded with every uniform assignment and a sensitivity-guided greedy path), the
evaluation cache, the result with its front, search.json and front.png.

Energy.  With ``P(u)`` the unit's power (``Units.cost["power_mw"]``; for a (multiplier, adder)
pair -- a unit whose declared accumulator has an adder circuit, ``pairs()`` -- the multiplier's
plus the adder's per addition, ``unit_cost``) and ``n_l`` the layer's
products, the relative energy of an assignment is
``sum_l n_l * P(u_l) / sum_l n_l * P(reference)``; the reference is the exact multiplier
(the candidate whose table is exact, or one the caller names).  Where power is known the
absolute figure ``sum_l n_l * P(u_l)`` (mW x products; times the delay in ns it is pJ per
input) is reported too; ``area`` is the same ratio with area in place of power and
``delay_ns`` the largest delay of the units used.  A unit without the cost a figure needs is
a ValueError naming it.

Metric.  ``evaluate`` returns one float per assignment, lower is better (``maximize=True``
flips it for an accuracy).  A NaN or infinite metric marks the point invalid (kept in
``points``, never on the front); the search goes on.  Every evaluation is cached by its
assignment, so a point is evaluated once, a search resumed from its search.json replays the
same generations (same seed) without evaluating anything twice, and Ctrl-C (or any error)
leaves search.json holding every point evaluated so far (written atomically after every
batch, and after a batch cut short).  ``evaluate_many(batch)`` yields each metric as it
finishes — in order, or as ``Finished(position, metric)`` when its evaluations finish out of
order (Ray workers) — and the cache records each one as it comes, so a batch interrupted
half-way keeps its finished half.  A point's ``index`` is its place in the batch order
(a batch's new points take the lowest free indices), so an interrupted batch leaves gaps
that its resumed evaluation fills with the indices the uninterrupted run gives.

What the points were measured on.  search.json's ``config["measured_on"]`` records the
space (layers, product counts, every candidate's table digest and cost figures, the
reference, ``maximize``) and what the front end adds (a fingerprint of the data, of the
model's weights, the metric...); a resume whose ``measured_on`` differs is a ValueError
naming each difference (saved vs now) before any evaluation, never a front mixing two
datasets or two models.

Checks before any evaluation: every candidate's power is finite and >= 0, the
reference's > 0 (energies are relative to it), some layer performs products (a dry run on
an empty input counts none).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import NamedTuple

import numpy as np

__all__ = ["pairs", "Candidates", "Point", "SearchResult", "Sensitivity", "Finished", "run_sensitivity", "run_search",
           "search_files", "candidate_units", "select_layers", "unit_cost", "fingerprint", "SEARCH_FILE", "FRONT_FILE",
           "SENS_FILE", "SENS_PNG"]

SEARCH_FILE, FRONT_FILE = "search.json", "front.png"
SENS_FILE, SENS_PNG = "sensitivity.json", "sensitivity.png"
_FORMAT = "lutcore-search/1"


def unit_cost(u) -> dict:
    """The cost mapping of a Units (``power_mw``, ``area_um2``, ``delay_ns``, ``source``; any
    may be missing), an empty dict when it has none.  A unit whose accumulator has an adder
    circuit costs the pair: power = the multiplier's + the adder's times the additions a product
    makes (1 one after another; 1/C for chunks of C, whose tree is not counted), area the sum,
    delay the sum (in series); a figure either lacks is missing (``adder_missing`` names it)."""
    c = getattr(u, "cost", None)
    c = dict(c) if c else {}
    acc = getattr(u, "accumulator", None)
    if acc is None or acc.adder is None:
        return c
    ad, per = dict(acc.adder.cost or {}), 1.0 / acc.chunk
    out = {"source": f"multiplier: {c.get('source', 'no cost')}; adder {acc.adder.name}: "
                     f"{ad.get('source', 'no cost')} ({per:g} addition(s) a product)"}
    missing = []
    for key, f in (("power_mw", lambda m, a: m + a * per), ("area_um2", lambda m, a: m + a),
                   ("delay_ns", lambda m, a: m + a)):
        if c.get(key) is not None and ad.get(key) is not None:
            out[key] = f(float(c[key]), float(ad[key]))
        elif c.get(key) is not None:
            missing.append(key)
    if missing:
        out["adder_missing"] = f"adder {acc.adder.name} states no {', '.join(missing)}"
    return out


def _exact_adder(u) -> bool:
    acc = getattr(u, "accumulator", None)
    return acc is None or acc.adder is None or acc.adder.is_exact


def pairs(multipliers, adders, accumulator=None) -> list:
    """Candidate (multiplier, adder) pairs for a search: every multiplier spec / Units with every
    adder (an ``Adder`` or a file spec: ``add.c``, ``add.c:function``, ``add.v``, a saved
    directory), each as ``units.with_accumulator(...)`` named ``mul+adder``.  ``accumulator``: the
    register's spelling without the adder (``"16s:saturate"``, ``"16s:wrap:chunks=8"``); default
    the adder's width and signedness, wrapping, one addition a product."""
    from lutcore.units import adder_spec, paired_name
    from lutcore.units.accumulator import Accumulator
    from lutcore.units.adders import Adder
    mults = candidate_units(multipliers)
    if isinstance(adders, (str, os.PathLike, Adder)):
        adders = [adders]
    ads = [a if isinstance(a, Adder) else adder_spec(os.fspath(a)) for a in adders]
    if not ads:
        raise ValueError("adders: expected at least one adder, got none")
    out = []
    for a in ads:
        if accumulator is None:
            acc = Accumulator(a.bits, a.signed, adder=a)
        else:
            base = Accumulator.parse(accumulator, where="accumulator")
            acc = dataclasses.replace(base, adder=a)
        for m in mults:
            u = m.with_accumulator(acc)
            u.name = paired_name(u)
            out.append(u)
    return out


# ----------------------------------------------------------------------------- the space

def candidate_units(units) -> list:
    """Candidate Units from a spec, a list of specs / Units, or a units library (entries with
    ``.units``); None is the exact unit."""
    from lutcore.units import Units, resolve
    if isinstance(units, (str, os.PathLike, Units)) or units is None:
        units = [units]
    try:
        units = list(units)
    except TypeError:
        raise TypeError(f"units: expected a spec, a Units, a list of them or a units library, got "
                        f"{type(units).__name__} {units!r}") from None
    out = [_resolve_named(getattr(u, "units", u) if u is not None else "exact", "units") for u in units]
    if not out:
        raise ValueError("units: expected at least one candidate unit, got none")
    return out


def _resolve_named(spec, what):
    """``units.resolve(spec)``, its ValueError / TypeError naming ``what`` (the argument)."""
    from lutcore.units import resolve
    try:
        return resolve(spec, mx=True)
    except (ValueError, TypeError) as e:
        if str(e).startswith(f"{what}:"):
            raise
        raise type(e)(f"{what}: {spec!r}: {e}") from None


def candidates_and_reference(units, reference):
    """(candidate Units, the reference Units or None): the reference joins the candidates when
    it is not among them; without one, a candidate must be exact (energy is relative to it).
    A reference named by a spec (``"exact"``, a file) that has a candidate's table is that
    candidate, cost included (the spec alone carries no stated cost); a Units given with its
    own power figure keeps it."""
    from lutcore.units import Units
    cands = candidate_units(units)
    if reference is not None and not isinstance(reference, (str, os.PathLike, Units)):
        raise TypeError(f"reference: expected None, a units spec or a Units, got {type(reference).__name__} "
                        f"{reference!r}")
    ref = _resolve_named(reference, "reference") if reference is not None else None
    if ref is not None:
        same = [u for u in cands if u.digest == ref.digest]
        if same and (not isinstance(reference, Units) or unit_cost(ref).get("power_mw") is None):
            ref = same[0]
        elif not same:
            cands = [ref] + cands
    if ref is None and not any(u.is_exact for u in cands):
        raise ValueError("units: none of the candidates is exact; add the exact unit (with its cost) or name "
                         "the reference unit energy is relative to (reference=...)")
    return cands, ref


def select_layers(names, keys) -> list:
    """The layer names ``keys`` (names, dotted prefixes or fnmatch globs, as in a per-layer
    mapping) select, in model order; a key that selects nothing is a ValueError listing the
    layers."""
    from lutcore.units import assign
    names = list(names)
    if keys is None:
        return names
    if isinstance(keys, str):
        keys = [keys]
    try:
        keys = list(keys)
    except TypeError:
        raise TypeError(f"layers: expected None, a key or a list of keys (layer names, prefixes, globs), got "
                        f"{type(keys).__name__} {keys!r}") from None
    if not keys:
        raise ValueError("layers: expected None (every layer) or at least one key, got an empty list")
    hit = assign.match({k: None for k in keys}, names, what="layers")
    return [n for n in names if n in hit]


class Candidates:
    """The candidate units of a search, each under a unique name, and the energy model.

    ``units``: Units objects (already resolved); ``macs``: {layer: products};
    ``reference``: the Units energy is relative to (default: the candidate whose table is
    exact; a ValueError when there is none and no reference is given)."""

    def __init__(self, units, macs: dict, reference=None):
        if not units:
            raise ValueError("units: expected at least one candidate unit, got none")
        names, seen = [], {}
        for u in units:
            n = u.name
            if n in seen and seen[n].digest != u.digest:
                n = f"{u.name}@{u.digest[:8]}"
            if n in seen:
                continue                               # the same unit twice: once is enough
            seen[n] = u
            names.append(n)
        self.names = names
        self.units = [seen[n] for n in names]
        self.by_name = dict(seen)
        self.macs = {k: int(v) for k, v in macs.items()}
        if not self.macs:
            raise ValueError("macs: the model has no layers to assign units to")
        if reference is None:
            exact = [u for u in self.units if u.is_exact]
            exact.sort(key=lambda u: not _exact_adder(u))      # an exact pair first: exact multiplier and adder
            if not exact:
                raise ValueError("reference: none of the candidate units is exact; name the unit energy is "
                                 "relative to (reference=...)")
            reference = exact[0]
        self.reference = reference

    @property
    def layers(self) -> list:
        return list(self.macs)

    def _figure(self, u, key, what):
        c = unit_cost(u)
        v = c.get(key)
        if v is None and c.get("adder_missing"):
            raise ValueError(f"units {u.name!r}: {c['adder_missing']} ({what} needs the pair's {key}): give it one "
                             f"with a circuit header or meta.json, or adder.cost[{key!r}] = ...")
        if v is None:
            raise ValueError(f"units {u.name!r} has no {key} in its cost ({what} needs it): give it one with "
                             f"units.with_cost({key}=...), or a circuit header / meta.json that states it; "
                             f"its cost: {c or 'none'}")
        return float(v)

    def check_power(self) -> None:
        """What the relative energy needs, before any evaluation: every candidate and the
        reference have a finite power figure >= 0, the reference's > 0 (every energy is
        divided by it), and some layer performs products (else the ValueError naming it)."""
        try:
            ref_p = self._figure(self.reference, "power_mw", "the relative energy")
        except ValueError as e:
            raise ValueError(f"reference: {e}") from None
        for u in [self.reference] + self.units:
            p = self._figure(u, "power_mw", "the relative energy")
            if not math.isfinite(p) or p < 0:
                raise ValueError(f"units {u.name!r}: expected a finite power_mw >= 0, got {p!r} "
                                 f"(cost: {unit_cost(u)})")
        if ref_p <= 0:
            raise ValueError(f"reference: units {self.reference.name!r} has power_mw {ref_p!r}; every relative "
                             f"energy is divided by it: expected a power_mw > 0 (state it, or name another "
                             f"reference)")
        if sum(self.macs.values()) <= 0:
            raise ValueError(f"macs: the layers perform no products ({self.macs}); the energy of an assignment "
                             f"is weighted by them: count them on a non-empty input")

    def energy(self, assignment: dict) -> dict:
        """{"energy": relative multiplier energy, "power_mw_products": absolute, and "area" /
        "delay_ns" where every unit used states them} of an assignment {layer: candidate name}."""
        units = {l: self.by_name[assignment[l]] for l in self.macs}
        tot = sum(self.macs.values())
        if not tot or any(unit_cost(u).get("power_mw") is None for u in list(units.values()) + [self.reference]):
            return {"energy": float("nan")}           # no energy asked for (a sensitivity table)
        ref_p = self._figure(self.reference, "power_mw", "the relative energy")
        p = sum(n * self._figure(units[l], "power_mw", "the relative energy") for l, n in self.macs.items())
        if not ref_p:
            return {"energy": float("nan")}           # check_power refuses this before a search
        out = {"energy": p / (tot * ref_p), "power_mw_products": p}
        used = list(units.values()) + [self.reference]
        if all(unit_cost(u).get("area_um2") is not None for u in used) and \
                float(unit_cost(self.reference)["area_um2"]) > 0:          # relative to 0: no area view
            ref_a = float(unit_cost(self.reference)["area_um2"])
            a = sum(n * float(unit_cost(units[l])["area_um2"]) for l, n in self.macs.items())
            out["area"] = a / (tot * ref_a)
        if all(unit_cost(u).get("delay_ns") is not None for u in units.values()):
            out["delay_ns"] = max(float(unit_cost(u)["delay_ns"]) for u in units.values())
        return out

    def uniform(self, name: str) -> dict:
        return {l: name for l in self.macs}

    def reference_name(self) -> str:
        for n, u in zip(self.names, self.units):
            if u.digest == self.reference.digest:
                return n
        raise ValueError(f"reference: {self.reference.name!r} is not one of the candidate units {self.names}; "
                         f"the baseline assignment (every layer through the reference) needs it among them")


def _key(assignment: dict, layers) -> str:
    return json.dumps([assignment[l] for l in layers])


class Finished(NamedTuple):
    """One evaluation of a batch, as it finishes: its ``position`` in the list handed to
    ``evaluate_many`` and its ``metric``.  An ``evaluate_many`` whose evaluations finish out of
    order (workers) yields these; one that finishes them in order may yield the metrics."""
    position: int
    metric: float


# ----------------------------------------------------------------------------- what the points measure

def fingerprint(*parts) -> str:
    """``"sha256:<hex>"`` of ``parts``: numpy arrays (dtype, shape and bytes), bytes, str, numbers,
    None, and lists / tuples / dicts of them (dict keys sorted) — what a front end records of
    the data and the model its points were measured on."""
    h = hashlib.sha256()

    def add(x):
        if isinstance(x, np.ndarray) or isinstance(x, np.generic):
            a = np.ascontiguousarray(x)
            h.update(f"a{a.dtype.str}{a.shape}".encode())
            h.update(a.view(np.uint8).reshape(-1).data if a.size else b"")
        elif isinstance(x, (bytes, bytearray, memoryview)):
            h.update(b"b%d:" % len(x))
            h.update(x)
        elif isinstance(x, str):
            b = x.encode()
            h.update(b"s%d:" % len(b))
            h.update(b)
        elif x is None or isinstance(x, (bool, int, float)):
            h.update(f"n{x!r};".encode())
        elif isinstance(x, dict):
            h.update(b"d%d{" % len(x))
            for k in sorted(x, key=str):
                add(str(k))
                add(x[k])
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"l%d[" % len(x))
            for v in x:
                add(v)
            h.update(b"]")
        else:
            raise TypeError(f"fingerprint: cannot hash a {type(x).__name__}")
    for p in parts:
        add(p)
    return "sha256:" + h.hexdigest()


def measured_on(cand: "Candidates", maximize: bool, front_end=None) -> dict:
    """What a search's points were measured on (search.json's ``config["measured_on"]``):
    the space — layers, product counts, each candidate's table digest and cost figures, the
    reference — ``maximize``, and ``front_end``'s entries (the data, the model, the metric...)."""
    figs = ("power_mw", "area_um2", "delay_ns")
    out = {"layers": list(cand.layers), "macs": dict(cand.macs),
           "units": {n: u.digest for n, u in cand.by_name.items()},
           "costs": {n: {k: unit_cost(u)[k] for k in figs if unit_cost(u).get(k) is not None}
                     for n, u in cand.by_name.items()},
           "reference": {"digest": cand.reference.digest,
                         "power_mw": unit_cost(cand.reference).get("power_mw")},
           "maximize": bool(maximize)}
    for k, v in (front_end or {}).items():
        if k in out:
            raise ValueError(f"measured_on: the front end's {k!r} would hide the space's")
        out[k] = v
    return json.loads(json.dumps(out))          # as search.json holds it (lists, str keys)


def _show(v, width=70) -> str:
    if isinstance(v, str):
        if v.startswith("sha256:") and len(v) > 23:
            v = v[:23] + "..."                    # a fingerprint: its first 16 hex digits
        return repr(v if len(v) <= width else v[:width - 3] + "...")
    t = json.dumps(v)
    return t if len(t) <= width else t[:width - 3] + "..."


def _differences(old, new, where="") -> list:
    """["key: old (saved) vs new (now)", ...] between two measured_on records, by key (dicts
    compared entry by entry)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            name = f"{where}.{k}" if where else str(k)
            if k not in new:
                out.append(f"{name}: {_show(old[k])} (saved) vs none (now)")
            elif k not in old:
                out.append(f"{name}: none (saved) vs {_show(new[k])} (now)")
            elif old[k] != new[k]:
                out += _differences(old[k], new[k], name)
        return out
    return [] if old == new else [f"{where}: {_show(old)} (saved) vs {_show(new)} (now)"]


def check_resume(prior: "SearchResult", measured: dict) -> None:
    """A ValueError, before any evaluation, when ``prior`` (a loaded search.json) was measured on
    anything else than ``measured`` (``measured_on``'s record of this search), naming each
    difference: its points cannot join this search's front."""
    where = prior.source or SEARCH_FILE
    saved = prior.config.get("measured_on")
    if not isinstance(saved, dict):
        raise ValueError(f"resume: {where} does not record what its points were measured on (written by an "
                         f"older lutcore), so they cannot be checked against this search's data, model and "
                         f"units: start a new search in another out directory")
    diff = _differences(saved, measured)
    if diff:
        raise ValueError(f"resume: {where} holds points measured on something else than this search: "
                         + "; ".join(diff[:8]) + (f"; and {len(diff) - 8} more" if len(diff) > 8 else "")
                         + " — resume with the same data, model, units and metric, or start a new search in "
                           "another out directory")


# ----------------------------------------------------------------------------- results

@dataclasses.dataclass
class Point:
    """One evaluated assignment: ``assignment`` {layer: units name}, ``energy`` (relative),
    ``metric`` (as ``evaluate`` returned it; NaN when invalid), ``valid``, ``seed`` ("uniform",
    "greedy", "sensitivity" or None for a point the search proposed), ``index`` (evaluation
    order: batch after batch, in each its order; a partial search.json skips the indices of an
    interrupted batch's unfinished evaluations) and ``costs`` (the absolute, area and delay
    figures where known)."""
    assignment: dict
    energy: float
    metric: float
    valid: bool
    seed: str | None
    index: int
    costs: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["metric"] = self.metric if self.valid else None
        return d

    @classmethod
    def from_dict(cls, d) -> "Point":
        m = d.get("metric")
        return cls(assignment=dict(d["assignment"]), energy=float(d["energy"]),
                   metric=float("nan") if m is None else float(m), valid=bool(d["valid"]), seed=d.get("seed"),
                   index=int(d["index"]), costs=dict(d.get("costs", {})))


def _front(points, maximize):
    """The non-dominated valid points (minimise energy, minimise the metric or maximise it),
    sorted by energy; points with equal objectives are all kept."""
    pts = [p for p in points if p.valid]
    sign = -1.0 if maximize else 1.0
    obj = [(p.energy, sign * p.metric) for p in pts]
    out = []
    for i, (e, m) in enumerate(obj):
        if not any((e2 <= e and m2 <= m) and (e2 < e or m2 < m) for e2, m2 in obj):
            out.append(pts[i])
    return sorted(out, key=lambda p: (p.energy, sign * p.metric, p.index))


class SearchResult:
    """Every evaluated point (``points``, in evaluation order) and the non-dominated ``front``."""

    def __init__(self, points, config: dict, maximize: bool = False, complete: bool = True):
        self.points = list(points)
        self.config = dict(config)
        self.maximize = bool(maximize)
        self.complete = bool(complete)
        self.source = None                 # the search.json it was loaded from
        self._model_at = None              # set by a front end that can re-apply a point
        self._evaluate_at = None           # ... and evaluate it again

    @property
    def front(self) -> list:
        return _front(self.points, self.maximize)

    def uniform(self) -> list:
        return [p for p in self.points if p.seed == "uniform"]

    def best(self, max_metric=None, min_metric=None):
        """The lowest-energy front point whose metric is at most ``max_metric`` (or, for
        ``maximize=True``, at least ``min_metric``); None if none qualifies."""
        for p in self.front:
            if (max_metric is None or p.metric <= max_metric) and (min_metric is None or p.metric >= min_metric):
                return p
        return None

    def model_at(self, point):
        """The front end's model configured at ``point`` (lutcore.torch.search: the search's own
        converted copy with that assignment and compensation) — evaluate it again to get the
        point's metric bit for bit."""
        if self._model_at is None:
            raise ValueError("model_at: this result was loaded from search.json and holds no model; apply "
                             "point.assignment with lutcore.torch.set_units(model, point.assignment)")
        return self._model_at(point)

    def evaluate_at(self, point) -> float:
        """The point's metric evaluated again (the front end's model configured at ``point``):
        the same float, bit for bit, as ``point.metric``."""
        if self._evaluate_at is None:
            raise ValueError("evaluate_at: this result was loaded from search.json and holds no model")
        return float(self._evaluate_at(point))

    def to_dict(self) -> dict:
        return {"format": _FORMAT, "complete": self.complete, "maximize": self.maximize, "config": self.config,
                "points": [p.to_dict() for p in self.points],
                "front": [p.index for p in self.front]}

    @classmethod
    def load(cls, path) -> "SearchResult":
        """A result from ``path`` (a search.json, or the directory holding it)."""
        from lutcore._io import load_json
        f = os.path.join(path, SEARCH_FILE) if os.path.isdir(path) else path
        d = load_json(f)
        if not isinstance(d, dict) or d.get("format") != _FORMAT or not isinstance(d.get("points"), list):
            raise ValueError(f"{f}: not a lutcore search result (expected format {_FORMAT!r} with a points list)")
        try:
            pts = [Point.from_dict(p) for p in d["points"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{f}: a point is malformed ({e})") from None
        if len({p.index for p in pts}) != len(pts):
            raise ValueError(f"{f}: two points have the same index")
        res = cls(pts, d.get("config", {}), d.get("maximize", False), d.get("complete", True))
        res.source = f
        return res

    def format_table(self, max_rows: int = 30) -> str:
        front = self.front
        # the absolute and the area / delay views where every front point has them
        extra = [(k, h, f) for k, h, f in (("power_mw_products", "mW x prod", "{:11.4g}"), ("area", "area", "{:7.4f}"),
                                           ("delay_ns", "delay ns", "{:8.3g}"))
                 if front and all(p.costs.get(k) is not None for p in front)]
        head = "".join(f"  {h:>{len(f.format(0.0))}}" for _, h, f in extra)
        lines = [f"{len(self.points)} assignments evaluated, {len(front)} on the front"
                 + ("" if self.complete else " (interrupted: partial)"),
                 f"{'energy':>8}{head}  {'metric':>12}  {'seed':<11}  assignment"]
        for p in front[:max_rows]:
            names = list(p.assignment.values())
            uni = names[0] if len(set(names)) == 1 else None
            desc = f"all {uni}" if uni else ", ".join(f"{k}={v}" for k, v in p.assignment.items())
            cols = "".join("  " + f.format(p.costs[k]) for k, _, f in extra)
            lines.append(f"{p.energy:8.4f}{cols}  {p.metric:12.6g}  {p.seed or '-':<11}  {desc[:100]}")
        if len(front) > max_rows:
            lines.append(f"... {len(front) - max_rows} more front points in search.json")
        return "\n".join(lines)

    def save(self, out, png: bool = True) -> dict:
        """search.json (every point, the front's indices, the configuration) and front.png in
        directory ``out`` (created if needed), each written atomically (``png=False``: the
        JSON only)."""
        from lutcore._io import atomic_file, target_dir
        out = target_dir(out, "out")
        os.makedirs(out, exist_ok=True)
        js = os.path.join(out, SEARCH_FILE)
        with atomic_file(js) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
        if not png:
            return {"json": js}
        png = os.path.join(out, FRONT_FILE)
        self.plot(png)
        return {"json": js, "png": png}

    def plot(self, png) -> None:
        from lutcore._io import atomic_file
        plt = _pyplot()
        valid = [p for p in self.points if p.valid]
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        if valid:
            ax.scatter([p.energy for p in valid], [p.metric for p in valid], s=12, c="#bbb",
                       label="evaluated", zorder=1)
        fr = self.front
        if fr:
            ax.plot([p.energy for p in fr], [p.metric for p in fr], "-o", c="#c0504d", ms=4, lw=1.2,
                    label="front", zorder=3)
        uni = [p for p in self.uniform() if p.valid]
        ref = self.config.get("reference")
        exact = [p for p in uni if next(iter(p.assignment.values())) == ref]
        others = [p for p in uni if p not in exact]
        if others:
            ax.scatter([p.energy for p in others], [p.metric for p in others], marker="s", s=40, c="#4f81bd",
                       zorder=4, edgecolors="k", linewidths=0.5, label="one unit everywhere")
        for p in exact:
            ax.scatter([p.energy], [p.metric], marker="*", s=180, c="#f2c14e", zorder=5, edgecolors="k",
                       linewidths=0.6, label=f"exact model ({ref})")
        # label the uniform points, skipping a label that would overlap one already placed
        x0, x1 = ax.get_xlim()
        y0, y1 = ax.get_ylim()
        placed = []
        for p in sorted(exact + others, key=lambda q: q.energy):
            fx, fy = (p.energy - x0) / ((x1 - x0) or 1), (p.metric - y0) / ((y1 - y0) or 1)
            if any(abs(fx - a) < 0.12 and abs(fy - b) < 0.05 for a, b in placed):
                continue
            placed.append((fx, fy))
            name = next(iter(p.assignment.values()))
            ax.annotate(name, (p.energy, p.metric), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("relative multiplier energy (1 = every layer through the reference unit)")
        what = self.config.get("metric_name") or "metric"
        ax.set_ylabel(f"{what} ({'higher' if self.maximize else 'lower'} is better)")
        ax.set_title(f"per-layer units: {len(self.points)} assignments, {len(fr)} on the front"
                     + ("" if self.complete else " (partial)"), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
        fig.tight_layout()
        with atomic_file(png) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


@dataclasses.dataclass
class Sensitivity:
    """The metric with one layer at a time through each unit (the rest through the
    reference): ``table[i][j]`` for ``layers[i]`` and ``units[j]``; ``baseline`` is every
    layer through the reference."""
    layers: list
    units: list
    table: list
    baseline: float
    maximize: bool = False
    metric_name: str = "metric"

    def damage(self) -> np.ndarray:
        """(layers, units) float64: how much worse than the baseline (positive = worse)."""
        t = np.asarray(self.table, dtype=np.float64)
        return (self.baseline - t) if self.maximize else (t - self.baseline)

    def to_dict(self) -> dict:
        return {"layers": self.layers, "units": self.units, "baseline": self.baseline, "maximize": self.maximize,
                "metric_name": self.metric_name,
                "table": [[None if not math.isfinite(v) else v for v in row] for row in self.table]}

    def format_table(self) -> str:
        w = max([len(l) for l in self.layers] + [5])
        cw = max([len(u) for u in self.units] + [10])
        lines = [f"{self.metric_name} with one layer through each unit (the rest exact; baseline "
                 f"{self.baseline:.6g})",
                 f"{'layer':<{w}}  " + "  ".join(f"{u:>{cw}}" for u in self.units)]
        for l, row in zip(self.layers, self.table):
            lines.append(f"{l:<{w}}  " + "  ".join(f"{v:>{cw}.5g}" for v in row))
        return "\n".join(lines)

    def save(self, out) -> dict:
        """sensitivity.json and sensitivity.png (the heatmap: layers x units, the damage)."""
        from lutcore._io import atomic_file, target_dir
        out = target_dir(out, "out")
        os.makedirs(out, exist_ok=True)
        js, png = os.path.join(out, SENS_FILE), os.path.join(out, SENS_PNG)
        with atomic_file(js) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
        plt = _pyplot()
        d = self.damage()
        fig, ax = plt.subplots(figsize=(1.2 * len(self.units) + 3, 0.45 * len(self.layers) + 2))
        im = ax.imshow(np.where(np.isfinite(d), d, np.nan), cmap="Reds", aspect="auto")
        ax.set_xticks(range(len(self.units)), self.units, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(self.layers)), self.layers, fontsize=8)
        for i in range(d.shape[0]):
            for j in range(d.shape[1]):
                ax.text(j, i, "NaN" if not np.isfinite(d[i, j]) else f"{d[i, j]:.3g}", ha="center",
                        va="center", fontsize=7)
        fig.colorbar(im, ax=ax, label=f"{self.metric_name}: worse than the exact model by")
        ax.set_title(f"sensitivity: one layer at a time through each unit (baseline {self.baseline:.4g})",
                     fontsize=9)
        fig.tight_layout()
        with atomic_file(png) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        return {"json": js, "png": png}


# ----------------------------------------------------------------------------- the runs

class _Cache:
    """Evaluations by assignment; new ones go through ``evaluate_many`` and are numbered.

    Each metric is recorded as ``evaluate_many`` yields it (a plain metric in order, or a
    ``Finished(position, metric)``), and ``on_batch`` sees the points after every batch —
    also one cut short by an exception (Ctrl-C), so its finished evaluations are kept.  A
    batch's new points take the lowest free indices in batch order: a resumed search fills
    an interrupted batch's gaps with the indices the uninterrupted run gave."""

    def __init__(self, cand: Candidates, evaluate_many, points=(), on_batch=None, progress=None):
        self.cand, self.layers = cand, cand.layers
        self.evaluate_many = evaluate_many
        self.points = {}
        for p in points:
            if set(p.assignment) != set(self.layers) or any(v not in cand.by_name for v in p.assignment.values()):
                raise ValueError(f"resume: search.json's point {p.index} assigns {sorted(set(p.assignment.values()))} "
                                 f"to layers {sorted(p.assignment)}; this search has layers {self.layers} and "
                                 f"units {cand.names}")
            self.points[_key(p.assignment, self.layers)] = p
        if len({p.index for p in self.points.values()}) != len(self.points):
            raise ValueError("resume: two of search.json's points have the same index")
        self.on_batch, self.progress = on_batch, progress
        self.mark = 0      # one past the highest index handed out: the points the uninterrupted run holds

    def __len__(self):
        return len(self.points)

    def known(self) -> list:
        """The points an uninterrupted run holds at this moment of the search (a resumed one
        holds its later points too: they must not steer the generations it replays)."""
        return [p for p in self.points.values() if p.index < self.mark]

    def _free(self, n) -> list:
        used = {p.index for p in self.points.values()}
        out, i = [], 0
        while len(out) < n:
            if i not in used:
                out.append(i)
            i += 1
        return out

    def get(self, assignments, seed=None, limit=None) -> list:
        """The points of ``assignments`` (evaluating those not cached, at most ``limit`` new
        ones: the rest come back as None)."""
        keys = [_key(a, self.layers) for a in assignments]
        new, seen = [], set()
        for k, a in zip(keys, assignments):
            if k not in self.points and k not in seen:
                seen.add(k)
                new.append((k, a))
        if limit is not None:
            new = new[:max(0, limit)]
        if new:
            self._evaluate(new, seed)
        out = [self.points.get(k) for k in keys]
        self.mark = max([self.mark] + [p.index + 1 for p in out if p is not None])
        return out

    def _evaluate(self, new, seed) -> None:
        """Evaluate ``new`` [(key, assignment)], recording every metric as it arrives."""
        index = self._free(len(new))
        got, in_order = 0, None
        try:
            for item in self.evaluate_many([a for _, a in new]):
                if isinstance(item, Finished):
                    j, m = item.position, item.metric
                    if in_order is True:
                        raise ValueError("evaluate: yields metrics in order or Finished(position, metric), not both")
                    in_order = False
                    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= j < len(new) \
                            or new[j][0] in self.points:
                        raise ValueError(f"evaluate: Finished position {j!r} is not an unfinished position of the "
                                         f"batch of {len(new)}")
                    j = int(j)
                else:
                    j, m = got, item
                    if in_order is False:
                        raise ValueError("evaluate: yields metrics in order or Finished(position, metric), not both")
                    in_order = True
                    if j >= len(new):
                        raise ValueError(f"evaluate: expected {len(new)} metrics, got more")
                self._record(new[j], m, seed, index[j])
                got += 1
                if self.progress is not None:
                    self.progress(1)
            if got != len(new):
                raise ValueError(f"evaluate: expected {len(new)} metrics, got {got}")
        finally:
            if got and self.on_batch is not None:       # also a batch cut short: its finished points
                self.on_batch(self.ordered())

    def _record(self, ka, m, seed, index) -> None:
        k, a = ka
        try:
            m = float(m)
        except (TypeError, ValueError):
            raise TypeError(f"evaluate: expected a float metric, got {type(m).__name__} for "
                            f"assignment {a}") from None
        e = self.cand.energy(a)
        self.points[k] = Point(assignment={l: a[l] for l in self.layers}, energy=e.pop("energy"),
                               metric=m, valid=math.isfinite(m), seed=seed, index=index, costs=e)

    def ordered(self) -> list:
        return sorted(self.points.values(), key=lambda p: p.index)


def run_sensitivity(cand: Candidates, evaluate_many, *, maximize=False, metric_name="metric", cache=None,
                    layers=None) -> Sensitivity:
    """The one-layer-at-a-time table over ``cand``'s units (the rest through the reference)."""
    cache = cache or _Cache(cand, evaluate_many)
    ref = cand.reference_name()
    base = cand.uniform(ref)
    layers = cand.layers if layers is None else list(layers)
    todo = [dict(base, **{l: n}) for l in layers for n in cand.names]
    pts = cache.get([base], seed="uniform") + cache.get(todo, seed="sensitivity")
    baseline, rest = pts[0], pts[1:]
    U = len(cand.names)
    table = [[rest[i * U + j].metric for j in range(U)] for i in range(len(layers))]
    return Sensitivity(layers=layers, units=list(cand.names), table=table, baseline=baseline.metric,
                       maximize=maximize, metric_name=metric_name)


def greedy_path(cand: Candidates, sens: Sensitivity) -> list:
    """Assignments from every layer at the reference towards every layer at the cheapest unit:
    each step moves one layer to a cheaper unit, the one that costs the least estimated damage
    (from ``sens``, summed over layers) per unit of energy saved."""
    power = {n: float(unit_cost(u)["power_mw"]) for n, u in cand.by_name.items()}
    dmg = sens.damage()
    dmg = np.where(np.isfinite(dmg), dmg, np.inf)
    li = {l: i for i, l in enumerate(sens.layers)}
    ui = {u: j for j, u in enumerate(sens.units)}
    cur = cand.uniform(cand.reference_name())
    path = []
    while True:
        best, best_score = None, None
        for l, n_l in cand.macs.items():
            if l not in li:
                continue
            d0 = max(dmg[li[l], ui[cur[l]]], 0.0)
            for u in cand.names:
                saved = n_l * (power[cur[l]] - power[u])
                if saved <= 0:
                    continue
                dd = max(dmg[li[l], ui[u]], 0.0) - d0
                score = (max(dd, 0.0) / saved, -saved, l, u)
                if not np.isfinite(score[0]):
                    continue
                if best_score is None or score < best_score:
                    best, best_score = (l, u), score
        if best is None:
            return path
        cur = dict(cur, **{best[0]: best[1]})
        path.append(dict(cur))


def run_search(cand: Candidates, evaluate_many, *, budget: int = 200, maximize: bool = False,
               greedy: bool = True, pop_size: int | None = None, seed: int = 0, points=(),
               on_batch=None, progress=None, config=None) -> tuple:
    """The NSGA-II search over per-layer assignments; returns (SearchResult, Sensitivity or None).

    ``budget``: the most distinct assignments evaluated (the seeds included); ``points``:
    earlier points to resume from (their assignments are not evaluated again); ``on_batch``:
    called with every point so far after each batch of evaluations (the front end saves
    search.json there); ``progress``: called with the number of new evaluations."""
    try:
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.sbx import SBX
        from pymoo.operators.mutation.pm import PM
        from pymoo.operators.repair.rounding import RoundingRepair
        from pymoo.termination import get_termination
    except ImportError as e:
        raise ImportError("the search needs pymoo: pip install 'lutcore[search]'") from e
    cand.check_power()
    layers, U = cand.layers, len(cand.names)
    uniform = [cand.uniform(n) for n in cand.names]
    need = len(uniform) + (len(layers) * U if greedy else 0)
    if budget < need:
        raise ValueError(f"budget: expected at least {need} evaluations ({len(uniform)} uniform assignments"
                         + (f" + {len(layers)} layers x {U} units for the sensitivity that guides the greedy "
                            f"seeds; or greedy=False" if greedy else "") + f"), got {budget}")
    cache = _Cache(cand, evaluate_many, points, on_batch, progress)
    cache.get(uniform, seed="uniform")
    sens = None
    seeds = list(uniform)
    if greedy:
        sens = run_sensitivity(cand, evaluate_many, maximize=maximize, cache=cache,
                               metric_name=(config or {}).get("metric_name", "metric"))
        path = greedy_path(cand, sens)
        room = budget - cache.mark                    # (what the uninterrupted run had left here)
        if len(path) > room // 2:                    # leave half the budget to the search itself
            k = max(room // 2, 0)
            path = [path[int(round(i))] for i in np.linspace(0, len(path) - 1, k)] if k else []
        cache.get(path, seed="greedy", limit=budget - len(cache))
        seeds += path
    # variables: one integer per layer, the candidate's index; candidates sorted by power so
    # that neighbouring values are neighbouring costs (what SBX / PM assume of a variable)
    order = sorted(range(U), key=lambda j: (float(unit_cost(cand.units[j])["power_mw"]), cand.names[j]))
    pos = {cand.names[j]: i for i, j in enumerate(order)}
    to_x = lambda a: [pos[a[l]] for l in layers]                               # noqa: E731
    to_a = lambda x: {l: cand.names[order[int(v)]] for l, v in zip(layers, x)}   # noqa: E731
    if U ** len(layers) <= budget:
        # the whole space fits the budget: every assignment, the exact front
        import itertools
        cache.get([dict(zip(layers, c)) for c in itertools.product(cand.names, repeat=len(layers))])
    elif U > 1 and len(cache) < budget:
        problem = Problem(n_var=len(layers), n_obj=2, n_ieq_constr=1, xl=0, xu=U - 1, vtype=int)
        X0 = np.unique(np.array([to_x(a) for a in seeds], dtype=np.int64), axis=0)
        n_pop = pop_size or int(min(40, max(16, 2 * len(layers))))
        alg = NSGA2(pop_size=n_pop, sampling=X0,
                    crossover=SBX(prob=0.9, eta=3.0, vtype=float, repair=RoundingRepair()),
                    mutation=PM(eta=3.0, vtype=float, repair=RoundingRepair()), eliminate_duplicates=True)
        alg.setup(problem, termination=get_termination("n_gen", 10 ** 9), seed=int(seed), verbose=False)
        sign = -1.0 if maximize else 1.0
        idle = 0
        while len(cache) < budget and idle < 20:
            pop = alg.ask()
            if pop is None or len(pop) == 0:           # no new offspring this generation
                idle += 1
                continue
            X = pop.get("X")
            before = cache.mark                        # (a resume replays generations it holds: not idle)
            pts = cache.get([to_a(x) for x in X], limit=budget - len(cache))
            if any(p is None for p in pts):
                break                                  # the budget ran out inside this generation
            idle = idle + 1 if cache.mark == before else 0
            worst = max([sign * p.metric for p in cache.known() if p.valid] or [0.0])
            F = np.array([[p.energy, sign * p.metric if p.valid else worst + 1.0] for p in pts])
            G = np.array([[-1.0 if p.valid else 1.0] for p in pts])
            pop.set("F", F)
            pop.set("G", G)
            alg.tell(infills=pop)
    cfg = dict(config or {})
    cfg.update(space_config(cand))
    cfg.update({"budget": budget, "seed": seed, "greedy": greedy})
    return SearchResult(cache.ordered(), cfg, maximize=maximize), sens


def space_config(cand: Candidates) -> dict:
    """What search.json records of a search space (also in a partial one)."""
    return {"layers": cand.layers, "units": cand.names, "macs": cand.macs, "reference": cand.reference_name(),
            "costs": {n: unit_cost(u) for n, u in cand.by_name.items()}}


def prior_result(out, resume: bool):
    """The SearchResult of ``out``'s search.json to continue from (``resume=True``; None when
    there is none yet, or no resume); checks ``out`` either way.  ``search_files`` refuses it,
    before any evaluation, when its points were measured on anything else."""
    from lutcore import _check
    resume = _check.bool_arg(resume, "resume")
    if out is not None:
        from lutcore._io import target_dir
        target_dir(out, "out")
    if not resume:
        return None
    if out is None:
        raise ValueError("resume: needs out=, the directory holding the search.json to continue")
    if not os.path.exists(os.path.join(out, SEARCH_FILE)):
        return None
    return SearchResult.load(out)


def check_args(*, budget, maximize=False, greedy=True, pop_size=None, seed=0, progress=True) -> dict:
    """The search arguments every front end takes, checked before any work (TypeError /
    ValueError naming the argument): ``budget`` an int >= 1, ``pop_size`` None or an int >= 2,
    ``seed`` an int >= 0, ``maximize`` / ``greedy`` / ``progress`` True or False."""
    from lutcore import _check
    return {"budget": _check.int_arg(budget, "budget", lo=1), "maximize": _check.bool_arg(maximize, "maximize"),
            "greedy": _check.bool_arg(greedy, "greedy"),
            "pop_size": None if pop_size is None else _check.int_arg(pop_size, "pop_size", lo=2),
            "seed": _check.int_arg(seed, "seed", lo=0), "progress": _check.bool_arg(progress, "progress")}


def search_files(cand: Candidates, evaluate_many, *, budget: int, maximize: bool = False, greedy: bool = True,
                 pop_size=None, seed: int = 0, prior=None, out=None, progress=None, config=None) -> SearchResult:
    """``run_search`` with its files kept: ``out``'s search.json is rewritten (atomically)
    after every batch — a batch cut short included — front.png at the end, and on any
    exception, Ctrl-C included, the points evaluated so far are saved (marked partial) before
    it propagates.  ``prior``: the SearchResult to resume from (``prior_result``; refused
    unless it was measured on what this search measures — ``config["measured_on"]``, the
    front end's record of its data and model, and the space) or a list of points (not
    checked); ``progress``: a callable(n new evaluations) or None."""
    config = dict(config or {})
    config["measured_on"] = measured_on(cand, maximize, config.get("measured_on"))
    if isinstance(prior, SearchResult):
        check_resume(prior, config["measured_on"])
        prior = prior.points
    prior = list(prior or ())
    partial = dict(config, **space_config(cand))
    state = {"points": None}                  # None until a batch is recorded: the old file stays as it is

    def save_partial(points):                 # after every batch: the JSON (drawing the PNG costs more)
        state["points"] = points
        if out is not None:
            SearchResult(points, partial, maximize, complete=False).save(out, png=False)
    try:
        res, _ = run_search(cand, evaluate_many, budget=budget, maximize=maximize, greedy=greedy,
                            pop_size=pop_size, seed=seed, points=prior, on_batch=save_partial,
                            progress=progress, config=config)
    except BaseException:
        if out is not None and state["points"] is not None:
            SearchResult(state["points"], partial, maximize, complete=False).save(out)
        raise
    if out is not None:
        res.save(out)
    return res


def tqdm_bar(progress, total, desc, initial=0, unit="eval"):
    """A tqdm bar (or None when ``progress`` is false)."""
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, dynamic_ncols=True, leave=False)
