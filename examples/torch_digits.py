"""Train a small CNN on scikit-learn's digits in float, evaluate it through float, the
exact unit, lutcore's shipped approximate multipliers and any table directories given,
retrain it through the worst one (approximation-aware training: approximate() then
ordinary torch.optim steps; --retrain-all: through every approximate unit), and print
the accuracy table and write a PNG.

    python examples/torch_digits.py [--units DIR_OR_NAME ...] [--png digits_units.png]
                                    [--epochs 8] [--retrain-epochs 3] [--retrain-all] [--threads N]

Under two minutes on 2 cores.  Needs torch and scikit-learn (pip install 'lutcore[torch]'
scikit-learn).
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

import lutcore
import lutcore.torch as lt
from lutcore.torch import digits
from lutcore.units import resolve

SHIPPED = ["mitchell", "truncated:6", "truncated:10", "truncated:11", "reduced:2", "reduced:3"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", nargs="*", default=[], help="extra units: table directories or names")
    p.add_argument("--png", default="digits_units.png", help="where to write the plot")
    p.add_argument("--epochs", type=int, default=8, help="float training epochs")
    p.add_argument("--retrain-epochs", type=int, default=3, help="approximation-aware epochs per unit")
    p.add_argument("--retrain-all", action="store_true", help="retrain through every approximate unit")
    p.add_argument("--threads", type=int, default=None, help="lutcore and torch threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        lutcore.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    names = ["exact"] + SHIPPED + list(args.units)
    try:
        resolved = {name: resolve(name) for name in names}          # a bad directory fails before training
    except (ValueError, TypeError, OSError) as e:
        print(f"error: --units: {e}", file=sys.stderr)
        return 2

    t0 = time.time()
    model, (xtr, ytr, xte, yte) = digits.float_baseline(
        args.epochs, args.seed, progress=lambda r: tqdm(r, desc="float training", leave=False))
    rows = [("float", "-", digits.accuracy(model, xte, yte), None)]
    models = {}
    for name in tqdm(names, desc="evaluating units", leave=False):
        units = resolved[name]
        models[name] = lt.approximate(model, units)
        rows.append([name, units.digest[:12], digits.accuracy(models[name], xte, yte), None])
    worst = min(rows[2:], key=lambda r: r[2])
    for r in tqdm([r for r in rows[2:] if args.retrain_all or r is worst], desc="retraining", leave=False):
        digits.train(models[r[0]], xtr, ytr, epochs=args.retrain_epochs, lr=1e-3, batch=128, seed=args.seed)
        r[3] = digits.accuracy(models[r[0]], xte, yte)

    print(f"digits CNN, {len(yte)} test images; 'retrained': after {args.retrain_epochs} epochs of "
          f"approximation-aware training through that unit (worst: {worst[0]})")
    digits.print_table([(n, d, f"{b:.4f}", "-" if a is None else f"{a:.4f}") for n, d, b, a in rows],
                       ("units", "digest", "accuracy", "retrained"))
    digits.plot_bars([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows], args.png,
                     f"digits CNN through lutcore's units (worst: {worst[0]})",
                     ("through the unit", f"after {args.retrain_epochs} epochs of approximation-aware training"))
    print(f"wrote {args.png} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
