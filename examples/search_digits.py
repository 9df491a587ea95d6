"""Which unit where, on real data: a small CNN on scikit-learn's digits, a library of approximate
multipliers, the one-layer sensitivity heatmap, and the Pareto front of per-layer assignments —
without compensation, with ALWANN's weight tuning, with a bias correction, and with both.

    python examples/search_digits.py [OUT_DIR] [--budget N]

Writes OUT_DIR (default ``search-digits/``): sensitivity.png/.json, and per compensation a folder
with search.json and front.png; prints the tables and, per compensation, the lowest multiplier
energy within one point of the exact-units model's accuracy.

The units: the shipped ``mitchell``, ``truncated:K`` and ``reduced:BITS`` with costs stated here
(a cell-count model, below), and every circuit under tests/data/circuits/ (C and Verilog written
with EvoApproxLib-style headers, whose PDK45 figures become their cost).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch

import lutcore
import lutcore.torch as lt
from lutcore.torch import digits
from lutcore.units import resolve

HERE = os.path.dirname(os.path.abspath(__file__))
CIRCUITS = os.path.join(HERE, os.pardir, "tests", "data", "circuits")
EXACT_MW = 0.391            # power of the exact 8x8 multiplier the stated costs are scaled to


def cells_power(spec: str) -> float:
    """A stated cost for the shipped units: power in proportion to the partial-product cells
    an 8x8 sign-magnitude array multiplier keeps (64 for the exact one). truncated:K drops the
    cells of the K low columns; reduced:B keeps a BxB array plus two leading-one detectors and
    shifters (2 x 8 cells); mitchell: two leading-one detectors, shifters and one 16-bit adder
    (taken as 28 cells)."""
    kind, _, arg = spec.partition(":")
    if kind == "exact":
        cells = 64
    elif kind == "truncated":
        k = int(arg)
        cells = sum(1 for i in range(8) for j in range(8) if i + j >= k)
    elif kind == "reduced":
        b = int(arg)
        cells = b * b + 16
    elif kind == "mitchell":
        cells = 28
    else:
        raise ValueError(spec)
    return EXACT_MW * cells / 64


def library():
    specs = ["exact", "mitchell", "truncated:8", "truncated:10", "truncated:11", "truncated:12",
             "reduced:4", "reduced:3", "reduced:2"]
    units = [resolve(s).with_cost(power_mw=cells_power(s), source="stated: cell-count model "
                                                                   "(examples/search_digits.py)") for s in specs]
    if os.path.isdir(CIRCUITS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # a deliberately broken circuit is among the test ones
            lib = lutcore.units.library(CIRCUITS)
        units += [e.units for e in lib if e.units.cost.get("power_mw") is not None and not e.units.is_exact]
    return units


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="search-digits")
    ap.add_argument("--budget", type=int, default=300)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    xtr, ytr, xte, yte = digits.load()
    net = digits.train(digits.DigitsCNN(), xtr, ytr)
    units = library()
    print(f"{len(units)} units:")
    for u in units:
        m = u.error_metrics()
        print(f"  {u.name:<22} power {u.cost['power_mw']:.3f} mW   mae {m['mae_pct']:.4f}%   wce {m['wce_pct']:.3f}%")

    def error_rate(model):                       # lower is better: 1 - accuracy on the held-out split
        return 1.0 - digits.accuracy(model, xte, yte)

    exact_err = error_rate(lt.approximate(net, "exact"))
    print(f"\nfloat accuracy {1 - error_rate(net):.4f}, exact units {1 - exact_err:.4f}")
    sens = lt.sensitivity(net, units, error_rate, metric_name="error rate", out=args.out)
    print("\n" + sens.format_table())
    rows = []
    for comp in (None, "weights", "bias", ("weights", "bias")):
        label = "none" if comp is None else "+".join([comp] if isinstance(comp, str) else comp)
        res = lt.search(net, units, error_rate, xte, budget=args.budget, compensation=comp,
                        metric_name="error rate", out=os.path.join(args.out, f"front-{label}"))
        ok = res.best(max_metric=exact_err + 0.01)
        rows.append((label, len(res.points), len(res.front), ok))
        print(f"\ncompensation: {label}\n" + res.format_table(12))
    print(f"\nlowest multiplier energy within 1 point of the exact-units accuracy ({1 - exact_err:.4f}):")
    print(f"{'compensation':<14} {'points':>6} {'front':>5} {'energy':>7} {'saved':>6} {'accuracy':>8}")
    for label, n, nf, p in rows:
        print(f"{label:<14} {n:>6} {nf:>5} {p.energy:>7.3f} {1 - p.energy:>6.1%} {1 - p.metric:>8.4f}")
    print(f"\nwritten: {os.path.abspath(args.out)}")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
