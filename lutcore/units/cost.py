"""Hardware cost and published error figures, read from a circuit (EvoApproxLib style).

Design: EvoApproxLib's ``.c`` and ``.v`` files open with comment lines, one figure
per line, value then unit::

    // MAE% = 0.081 %        // MAE = 53          // WCE% = 0.39 %     // WCE = 255
    // WCRE% = 300.00 %      // EP% = 74.61 %     // MRE% = 4.41 %     // MSE = 5462
    // PDK45_PWR = 0.301 mW  // PDK45_AREA = 558.9 um2                 // PDK45_DELAY = 1.36 ns

and the library ships a ``meta.json`` at its root (a list of groups, each
``{"datasets": [{"bitwidth": 8, "datasets": [{"folder", "instances": [{"name",
"files": [{"file", "type"}], "params": {"area", "delay", "pwr", "ep%", "mae%",
"mre%", "wce%", "wcre%"}}]}]}]}``, numbers as strings).  ``attach(units, path)``
(called by ``from_c`` / ``from_verilog``) reads both: the PDK45 figures become
``units.cost`` (``power_mw``, ``area_um2``, ``delay_ns``, ``source`` naming where they
were read), the error figures ``units.published`` (the metric names of
``lutcore.units.metrics``: mae, mae_pct, wce, wce_pct, wcre_pct, ep_pct, mre_pct, mse).
The file's own header wins over meta.json; meta.json fills what the header lacks.

Each published figure is compared with the metric computed from the table: a
difference larger than one unit of the last printed digit (``0.081`` allows 0.001,
``300.00`` allows 0.01, ``53`` allows 1: rounding or truncation either way) is a
``PublishedFigureWarning`` naming the metric, the published and the computed value —
a table converted wrongly from its circuit, or the wrong file, is caught at load.

Without any published cost, a Verilog circuit gets an area proxy from Yosys itself:
``cost["cells"]`` (cells of the gate netlist after constant folding, ``stat``) and
``cost["transistors"]`` (``stat -tech cmos``'s estimate), with ``source`` saying so.
No ``area_um2``, ``power_mw`` or ``delay_ns`` is invented from them: those stay
missing until stated (``Units.with_cost``).

    read_header(path)        -> (cost, published, digits) from the file's comment lines
    read_meta(path, root=None) -> (cost, published, digits, where) from a meta.json above path
    attach(units, path, stat=None)   sets units.cost / units.published, warns on disagreement
    check_published(units, published, digits, where)   the comparison alone

``units`` is anything with ``cost``, ``published`` and ``error_metrics()``: a ``Units`` or an
``Adder`` (``lutcore.units.adders``, whose metrics are EvoApproxLib's adder metrics and whose
MAE% comparison allows the library's rounding of MAE: ``slack``).
"""
from __future__ import annotations

import json
import math
import os
import re
import warnings

__all__ = ["PublishedFigureWarning", "read_header", "read_meta", "attach", "check_published", "HEADER_KEYS"]


class PublishedFigureWarning(UserWarning):
    """A circuit's published error figure disagrees with the metric computed from its table."""


# header key -> (where it goes, its metric / cost name, the units it may carry -> scale to ours)
HEADER_KEYS = {
    "MAE%": ("published", "mae_pct", {"%": 1.0, "": 1.0}),
    "MAE": ("published", "mae", {"": 1.0}),
    "WCE%": ("published", "wce_pct", {"%": 1.0, "": 1.0}),
    "WCE": ("published", "wce", {"": 1.0}),
    "WCRE%": ("published", "wcre_pct", {"%": 1.0, "": 1.0}),
    "EP%": ("published", "ep_pct", {"%": 1.0, "": 1.0}),
    "MRE%": ("published", "mre_pct", {"%": 1.0, "": 1.0}),
    "MSE": ("published", "mse", {"": 1.0}),
    "PDK45_PWR": ("cost", "power_mw", {"mw": 1.0, "uw": 1e-3, "w": 1e3, "": 1.0}),
    "PDK45_AREA": ("cost", "area_um2", {"um2": 1.0, "um^2": 1.0, "": 1.0}),
    "PDK45_DELAY": ("cost", "delay_ns", {"ns": 1.0, "ps": 1e-3, "": 1.0}),
}
_LINE = re.compile(r"^\s*(?://|\*|/\*)?\s*([A-Z0-9_]+%?)\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
                   r"\s*([A-Za-z%^0-9]*)")
_HEAD_LINES = 200            # the figures sit in the file's opening comment
# meta.json params -> (where, name)
_META = {"pwr": ("cost", "power_mw"), "area": ("cost", "area_um2"), "delay": ("cost", "delay_ns"),
         "mae%": ("published", "mae_pct"), "wce%": ("published", "wce_pct"), "wcre%": ("published", "wcre_pct"),
         "ep%": ("published", "ep_pct"), "mre%": ("published", "mre_pct"), "mse": ("published", "mse"),
         "mae": ("published", "mae"), "wce": ("published", "wce")}


def _step(text: str) -> float:
    """One unit of the last printed digit of a number as written ("0.081" -> 0.001)."""
    t = text.lower().lstrip("+-")
    mant, _, exp = t.partition("e")
    dec = len(mant.split(".")[1]) if "." in mant else 0
    return 10.0 ** (-dec) * 10.0 ** (int(exp) if exp else 0)


def read_header(path) -> tuple[dict, dict, dict]:
    """(cost, published, steps) from the ``// NAME = value unit`` lines at the top of ``path``;
    ``steps``: {name: one unit of the last printed digit}.  Nothing found: three empty dicts."""
    cost, pub, steps = {}, {}, {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for k, line in enumerate(f):
                if k >= _HEAD_LINES:
                    break
                m = _LINE.match(line)
                if not m or m.group(1) not in HEADER_KEYS:
                    continue
                where, name, scales = HEADER_KEYS[m.group(1)]
                unit = m.group(3).lower()
                if unit not in scales:
                    warnings.warn(f"{path}: header line {line.strip()!r}: unknown unit {m.group(3)!r} "
                                  f"(expected {' or '.join(u for u in scales if u) or 'none'}); ignored",
                                  UserWarning, stacklevel=3)
                    continue
                value = float(m.group(2)) * scales[unit]
                if not math.isfinite(value) or value < 0:
                    continue
                (cost if where == "cost" else pub)[name] = value
                steps[name] = _step(m.group(2)) * scales[unit]
    except OSError:
        pass
    return cost, pub, steps


def _meta_root(path, root=None):
    """The nearest meta.json at or above the circuit's directory (or in ``root``)."""
    d = os.path.dirname(os.path.abspath(path))
    if root is not None:
        f = os.path.join(os.path.abspath(root), "meta.json")
        return f if os.path.isfile(f) else None
    while True:
        f = os.path.join(d, "meta.json")
        if os.path.isfile(f):
            return f
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _instances(meta):
    """Yield (folder, instance) over an EvoApproxLib meta.json (groups of datasets of datasets)."""
    groups = meta if isinstance(meta, list) else [meta]
    for g in groups:
        if not isinstance(g, dict):
            continue
        for ds in g.get("datasets", []) or []:
            if not isinstance(ds, dict):
                continue
            inner = ds.get("datasets", [])
            for sub in (inner if isinstance(inner, list) else []):
                if not isinstance(sub, dict):
                    continue
                for inst in sub.get("instances", []) or []:
                    if isinstance(inst, dict):
                        yield str(sub.get("folder", "") or ""), inst


def read_meta(path, root=None) -> tuple[dict, dict, dict, str | None]:
    """(cost, published, steps, where) for circuit ``path`` from the nearest EvoApproxLib
    ``meta.json`` above it (or ``root``/meta.json) that lists it — by its path relative to
    the root, its folder and name, or its file name.  A meta.json that cannot be read or is
    not in that form draws a warning naming it; one that does not list the file is silent."""
    f = _meta_root(path, root)
    if f is None:
        return {}, {}, {}, None
    try:
        with open(f, encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError) as e:
        warnings.warn(f"{f}: cannot read this meta.json ({e}); costs not read from it", UserWarning, stacklevel=3)
        return {}, {}, {}, None
    base = os.path.basename(path)
    rel = os.path.relpath(os.path.abspath(path), os.path.dirname(f)).replace(os.sep, "/")
    stem = os.path.splitext(base)[0]
    hit = None
    for folder, inst in _instances(meta):
        names = [str(x.get("file", "")) for x in inst.get("files", []) or [] if isinstance(x, dict)]
        for n in names:
            n = n.replace("\\", "/").lstrip("./")
            cands = {n, f"{folder}/{n}".strip("/")}
            if rel in cands:
                hit = inst
                break
            if hit is None and os.path.basename(n) == base:
                hit = inst                       # by file name: kept unless a path matches later
        if hit is None and str(inst.get("name", "")) == stem and not names:
            hit = inst
        if hit is not None and rel in {n.replace("\\", "/").lstrip("./") for n in names}:
            break
    if hit is None:
        return {}, {}, {}, None
    cost, pub, steps = {}, {}, {}
    params = hit.get("params", {}) if isinstance(hit.get("params"), dict) else {}
    for k, v in params.items():
        key = _META.get(str(k).lower())
        if key is None:
            continue
        try:
            val = float(str(v).strip())
        except ValueError:
            continue
        if not math.isfinite(val) or val < 0:
            continue
        (cost if key[0] == "cost" else pub)[key[1]] = val
        steps[key[1]] = _step(str(v).strip())
    return cost, pub, steps, f"{f} (instance {hit.get('name', base)})"


def check_published(units, published: dict, steps: dict, where: str, *, slack: dict | None = None,
                    computed: str = "the table") -> list:
    """Compare ``published`` {metric: value} with ``units.error_metrics()`` (a ``Units``, or
    anything with that method: an ``Adder``); warn once per metric whose difference exceeds one
    unit of its last printed digit (``steps``) plus ``slack`` {metric: how much more the
    library's own rounding allows}; ``computed`` names what the metrics were computed from, for
    the message.  -> the list of (metric, published, computed) that disagreed."""
    if not published:
        return []
    got = units.error_metrics()
    sampled = bool(got.get("sampled"))       # a wide unit: metrics over sampled pairs (Units.error_metrics)
    bad = []
    for k, v in published.items():
        if k not in got:
            continue
        tol = steps.get(k, 0.0) * (1 + 1e-9) + 1e-12 * max(1.0, abs(v)) + (slack or {}).get(k, 0.0)
        if sampled:
            if k in ("mre_pct", "wcre_pct"):             # relative errors: ruled by the few pairs of tiny
                continue                                 # products a sample may or may not hold
            if k in ("wce", "wce_pct"):                  # a sample's worst case is a lower bound
                if got[k] > v + tol:
                    bad.append((k, v, got[k]))
                    warnings.warn(f"{where}: published {k} = {v:g} but sampled pairs already give {got[k]:.6g}: "
                                  f"{computed} may not be the circuit's", PublishedFigureWarning, stacklevel=4)
                continue
            tol = max(tol, 0.10 * abs(v))                # means over 2^20 sampled pairs: within 10%
        if abs(got[k] - v) > tol:
            bad.append((k, v, got[k]))
            warnings.warn(f"{where}: published {k} = {v:g} but {computed} gives {got[k]:.6g} (difference "
                          f"{got[k] - v:+.3g}, more than the last printed digit allows): {computed} may not be "
                          f"the circuit's, or the figure is another circuit's", PublishedFigureWarning,
                          stacklevel=4)
    return bad


def attach(units, path, stat: dict | None = None, root=None, *, slack: dict | None = None,
           computed: str = "the table") -> None:
    """Set ``units.cost`` and ``units.published`` from circuit ``path``'s header and any
    EvoApproxLib meta.json above it; compare the published figures with the table (warning
    on disagreement; ``slack``, ``computed``: ``check_published``'s); without published cost
    and with Yosys's ``stat``, the area proxy.  ``units``: a ``Units`` or an ``Adder``."""
    cost, pub, steps = read_header(path)
    name = os.path.basename(path)
    srcs = []
    if cost or pub:
        srcs.append(f"the header of {name}")
    mcost, mpub, msteps, where = read_meta(path, root)
    if where is not None and (set(mcost) - set(cost) or set(mpub) - set(pub)):
        for k, v in mcost.items():
            cost.setdefault(k, v)
        for k, v in mpub.items():
            if k not in pub:
                pub[k], steps[k] = v, msteps[k]
        srcs.append(where)
    if cost:
        units.cost = {**cost, "source": "PDK45 figures from " + " and ".join(srcs)}
    elif stat is not None:
        c = {"cells": int(stat["cells"])}
        if stat.get("transistors") is not None:
            c["transistors"] = int(stat["transistors"])
        c["source"] = (f"area proxy computed by Yosys from {name} (no published figure): cells = gates of the "
                       f"netlist after constant folding (stat)"
                       + (", transistors = stat -tech cmos estimate" if "transistors" in c else "")
                       + "; no power, area or delay")
        units.cost = c
    if pub:
        units.published = dict(pub)
        check_published(units, pub, steps, f"{path} ({' and '.join(srcs)})", slack=slack, computed=computed)
