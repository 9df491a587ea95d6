"""Retraining through an approximate unit with each backward: a small CNN trained
in float on scikit-learn's digits, converted to an aggressive unit that costs it several
points, then fine-tuned for a fixed number of steps with backward "ste" (the float
layer's gradients), "units" (dX and dW through the unit's table) and "table" (through the
unit's gradient tables, central differences over +-grad_h codes) — each from the same
converted start with the same seed and batch order.  Prints the accuracy table (before,
after each) and writes the training curves (test accuracy and training loss per step) as
a PNG.

    python examples/retrain_digits.py [--units truncated:10] [--steps 60] [--grad-h 1]
                                      [--png retrain_digits.png] [--threads N] [--seed 0]

About two minutes on 2 busy cores.  Needs torch, scikit-learn and matplotlib.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time

import torch
from torch import nn

import lutcore
import lutcore.torch as lt
from lutcore.torch import digits
from lutcore.units import resolve

ARMS = ("ste", "units", "table")


def finetune(model, xtr, ytr, xte, yte, steps, lr, batch, seed, every):
    """Adam for ``steps`` steps on seeded batches; returns ([(step, test acc)], [train loss per step])."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    accs, losses = [(0, digits.accuracy(model, xte, yte))], []
    perm, pos = torch.randperm(len(ytr), generator=g), 0
    for step in range(1, steps + 1):
        if pos + batch > len(ytr):
            perm, pos = torch.randperm(len(ytr), generator=g), 0
        idx = perm[pos:pos + batch]
        pos += batch
        model.train()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % every == 0 or step == steps:
            model.eval()
            accs.append((step, digits.accuracy(model, xte, yte)))
    model.eval()
    return accs, losses


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", default="truncated:10", help="the approximate unit (a name or a directory)")
    p.add_argument("--steps", type=int, default=60, help="fine-tuning steps per arm")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--grad-h", type=int, default=1, help='backward="table": smoothing half-width in codes')
    p.add_argument("--epochs", type=int, default=8, help="float training epochs")
    p.add_argument("--every", type=int, default=10, help="evaluate every this many steps")
    p.add_argument("--png", default="retrain_digits.png", help="where to write the curves")
    p.add_argument("--threads", type=int, default=None, help="lutcore and torch threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        lutcore.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    try:
        units = resolve(args.units)
    except (ValueError, TypeError, OSError) as e:
        print(f"error: --units: {e}", file=sys.stderr)
        return 2

    t0 = time.time()
    torch.manual_seed(args.seed)
    xtr, ytr, xte, yte = digits.load(seed=args.seed)
    model = digits.train(digits.DigitsCNN(), xtr, ytr, epochs=args.epochs, lr=1e-2, batch=128, seed=args.seed)
    acc_float = digits.accuracy(model, xte, yte)
    start = lt.approximate(model, units)
    acc_start = digits.accuracy(start, xte, yte)
    print(f"float {acc_float:.4f}; through {units.name} before fine-tuning {acc_start:.4f} "
          f"({time.time() - t0:.0f} s)")

    results = {}
    for arm in ARMS:
        m = copy.deepcopy(start)
        lt.set_backward(m, arm, grad_h=args.grad_h)
        t = time.time()
        torch.manual_seed(args.seed)
        accs, losses = finetune(m, xtr, ytr, xte, yte, args.steps, args.lr, args.batch, args.seed, args.every)
        results[arm] = (accs, losses, time.time() - t)
        print(f"  {arm:6s} after {args.steps} steps: {accs[-1][1]:.4f}  ({results[arm][2]:.1f} s)")

    head = ("model", "test accuracy", "vs float", "fine-tune s")
    rows = [("float", f"{acc_float:.4f}", "-", "-"),
            (f"{units.name}, before", f"{acc_start:.4f}", f"{acc_start - acc_float:+.4f}", "-")]
    for arm in ARMS:
        a = results[arm][0][-1][1]
        rows.append((f"{units.name}, {arm} x{args.steps}", f"{a:.4f}", f"{a - acc_float:+.4f}",
                     f"{results[arm][2]:.1f}"))
    print()
    digits.print_table(rows, head)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for arm in ARMS:
        accs, losses, _ = results[arm]
        ax1.plot([s for s, _ in accs], [a for _, a in accs], marker="o", label=arm)
        ax2.plot(range(1, len(losses) + 1), losses, label=arm, alpha=0.8)
    ax1.axhline(acc_float, color="gray", ls="--", label="float")
    ax1.set(xlabel="fine-tuning step", ylabel="test accuracy",
            title=f"digits CNN through {units.name}: test accuracy")
    ax2.set(xlabel="fine-tuning step", ylabel="training loss (cross-entropy)", title="training loss per step")
    for ax in (ax1, ax2):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle(f"backward ste / units / table (grad_h={args.grad_h}); Adam lr {args.lr}, batch {args.batch}, "
                 f"seed {args.seed}")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"\nwrote {args.png}  (total {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
