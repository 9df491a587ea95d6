"""The digits CNN through declared accumulators: a 16-bit and a 12-bit register that wrap or
saturate, and 16-bit registers built on approximate adders (lower-part-OR and truncated, two
cuts each), behind an exact and a Mitchell multiplier of one narrow format — the CNN trained
once in float, then evaluated through every (multiplier, register) pair; prints the accuracy
table and the overflows per layer, and writes a PNG.  The exact multiplier also runs through
wrapping registers of 15, 14 and 13 bits: where overflow begins.  Every register adds one
product a step (a MAC).

    python examples/digits_accumulators.py [--png digits_accumulators.png] [--epochs 8]
                                           [--format "6u x 4s"] [--threads N] [--seed 0]

Every product must fit the register (``Accumulator.check_products``): a 12-bit signed one holds
-2048..2047, so the default format is 6-bit unsigned activations by 4-bit signed weights
(|product| <= 63 x 8).  Unsigned activations are quantized with a zero point; only the code
products reach the register (after a ReLU, and for the pixel input, the zero point is 0: the
register sees the whole dot product).  The overflow counts are ``lutcore.ops.accum``'s log,
under each layer's module name: "dot products" the share of a layer's outputs whose register
overflowed at least once, "events" the overflowing steps.  Under a minute on 2 cores.  Needs
torch and scikit-learn.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

import lutcore
import lutcore.torch as lt
from lutcore.ops import accum
from lutcore.torch import digits
from lutcore.units import Units, adder_designs
from lutcore.units.accumulator import Accumulator
from lutcore.units.adders import Adder

# (label, register): None is the exact sum (no register); adders at 16 bits, two cuts of each design
REGISTERS = [("exact sum", None),
             ("16s wrap", Accumulator(16, True, "wrap")),
             ("16s saturate", Accumulator(16, True, "saturate")),
             ("12s wrap", Accumulator(12, True, "wrap")),
             ("12s saturate", Accumulator(12, True, "saturate")),
             ("16s loa k=4", Accumulator(16, True, "wrap", adder=adder_designs.loa(16, True, 4))),
             ("16s loa k=6", Accumulator(16, True, "wrap", adder=adder_designs.loa(16, True, 6))),
             ("16s truncated k=2", Accumulator(16, True, "wrap", adder=adder_designs.truncated(16, True, 2))),
             ("16s truncated k=4", Accumulator(16, True, "wrap", adder=adder_designs.truncated(16, True, 4)))]
WIDTHS = (15, 14, 13)       # the exact multiplier through narrower wrapping registers too: where overflow begins


def _floor_log2(x):
    """floor(log2 x) of positive int64 values (up to 2^15)."""
    out = np.zeros_like(x)
    for s in (8, 4, 2, 1):
        m = x >= (1 << s)
        out, x = np.where(m, out + s, out), np.where(m, x >> s, x)
    return out


def mitchell(a, b):
    """Mitchell's logarithmic product (1962) of code grids a, b on magnitudes, the sign after (as
    lutcore.units.approx.mitchell, for any format): never above |a b|."""
    x, y = np.abs(a), np.abs(b)
    nz = (x > 0) & (y > 0)
    x, y = np.where(nz, x, 1), np.where(nz, y, 1)
    k1, k2 = _floor_log2(x), _floor_log2(y)
    s = ((x - (1 << k1)) << k2) + ((y - (1 << k2)) << k1)           # (f1 + f2) 2^(k1 + k2)
    base = 1 << (k1 + k2)
    mag = np.where(nz, np.where(s < base, base + s, 2 * s), 0)
    return np.where((a < 0) ^ (b < 0), -mag, mag)


def adder_cells(acc) -> int:
    """The register's adder in netlist gates (an exact one: a ripple-carry adder's)."""
    return (Adder.exact(acc.bits, acc.signed) if acc.adder is None else acc.adder).netlist.gate_count


def _text(v) -> str:
    return "-" if v is None else str(v)


def _share(log) -> float:
    """The share of dot products (every layer) whose register overflowed."""
    return sum(v["overflowed"] for v in log.values()) / max(1, sum(v["outputs"] for v in log.values()))


def _layer_cell(row) -> str:
    return "-" if row is None else f"{100 * row['overflowed'] / max(1, row['outputs']):.1f}% ({row['events']})"


def evaluate(model, units, xte, yte):
    """(accuracy, {layer: log row}) of the model converted to ``units``."""
    m = lt.approximate(model, units)
    with accum.overflow_log() as log:
        acc = digits.accuracy(m, xte, yte)
    return acc, log.to_dict()


def plot(rows, layers, float_acc, png, title):
    """Two panels: accuracy per register (a bar per multiplier); overflowed dot products per layer
    of the registers that overflowed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mults = list(dict.fromkeys(r["multiplier"] for r in rows))
    regs = list(dict.fromkeys(r["register"] for r in rows))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    w = 0.8 / len(mults)
    for i, mu in enumerate(mults):
        acc = [next(r["accuracy"] for r in rows if r["multiplier"] == mu and r["register"] == g) for g in regs]
        ax1.bar([x + (i - (len(mults) - 1) / 2) * w for x in range(len(regs))], acc, w, label=f"{mu} multiplier")
    ax1.axhline(float_acc, color="gray", ls="--", lw=1, label="float")
    ax1.set_xticks(range(len(regs)), regs, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("test accuracy")
    ax1.set_ylim(0, 1.12)
    ax1.set_title("accuracy per accumulator")
    ax1.legend(loc="upper center", ncol=3, fontsize=8)
    over = [r for r in rows if any(v["overflowed"] for v in r["overflow"].values())]
    w = 0.8 / max(1, len(over))
    for i, r in enumerate(over):
        pct = [100 * r["overflow"].get(n, {}).get("overflowed", 0) / max(1, r["overflow"].get(n, {}).get("outputs", 0))
               for n in layers]
        ax2.bar([x + (i - (len(over) - 1) / 2) * w for x in range(len(layers))], pct, w,
                label=f"{r['register']}, {r['multiplier']}")
    ax2.set_xticks(range(len(layers)), layers, fontsize=8)
    ax2.set_xlabel("layer (module name)")
    ax2.set_ylabel("dot products that overflowed (%)")
    ax2.set_title("overflows per layer" + ("" if over else " (none)"))
    if over:
        ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--png", default="digits_accumulators.png", help="where to write the plot")
    p.add_argument("--epochs", type=int, default=8, help="float training epochs")
    p.add_argument("--format", default="6u x 4s", help="the multipliers' operand format (products within 12 bits)")
    p.add_argument("--threads", type=int, default=None, help="lutcore and torch threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        lutcore.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    try:
        mults = [("exact", Units.exact(args.format)),
                 ("mitchell", Units.from_mul(mitchell, format=args.format, name="mitchell"))]
        for _, u in mults:                           # a register too narrow fails before training
            for _, acc in REGISTERS:
                if acc is not None:
                    u.with_accumulator(acc)
    except (ValueError, TypeError) as e:
        print(f"error: --format: {e}", file=sys.stderr)
        return 2
    t0 = time.time()
    model, (_, _, xte, yte) = digits.float_baseline(
        args.epochs, args.seed, progress=lambda r: tqdm(r, desc="float training", leave=False))
    layers = [n for n, _ in lt.approximate_layers(lt.approximate(model, "exact"))]
    rows = []
    todo = [(mn, mu, rn, acc) for mn, mu in mults for rn, acc in REGISTERS]
    todo += [("exact", mults[0][1], f"{w}s wrap", Accumulator(w, True, "wrap")) for w in WIDTHS]
    for mn, mu, rn, acc in tqdm(todo, desc="multiplier x accumulator", leave=False):
        a, log = evaluate(model, mu if acc is None else mu.with_accumulator(acc), xte, yte)
        rows.append({"multiplier": mn, "register": rn, "accumulator": "-" if acc is None else str(acc),
                     "cells": None if acc is None else adder_cells(acc), "accuracy": a, "overflow": log})

    sweep = rows[len(mults) * len(REGISTERS):]
    rows = rows[:len(mults) * len(REGISTERS)]
    float_acc = digits.accuracy(model, xte, yte)
    met = mults[1][1].error_metrics()
    print(f"digits CNN, {len(yte)} test images, float accuracy {float_acc:.4f}; units {mults[0][1].format} "
          f"(Mitchell: mae {met['mae_pct']:.3f}%, wce {met['wce_pct']:.2f}%); adder cells: gates of lutcore's "
          f"netlist (a proxy, not PDK figures)")
    by = {(r["multiplier"], r["register"]): r for r in rows}
    first = mults[0][0]
    digits.print_table([(g, by[(first, g)]["accumulator"], _text(by[(first, g)]["cells"]),
                         *(f"{by[(mn, g)]['accuracy']:.4f}" for mn, _ in mults)) for g, _ in REGISTERS],
                       ("register", "accumulator", "adder cells", *(f"{mn} multiplier" for mn, _ in mults)))
    print("\noverflows per layer: dot products that overflowed (overflow events)")
    over = [r for r in rows if any(v["events"] for v in r["overflow"].values())]
    digits.print_table([(r["register"], r["multiplier"], *(_layer_cell(r["overflow"].get(n)) for n in layers))
                        for r in over], ("register", "multiplier", *layers))
    quiet = [g for g, acc in REGISTERS if acc is not None and all((mn, g) not in
                                                                   {(r["multiplier"], r["register"]) for r in over}
                                                                   for mn, _ in mults)]
    print(f"no overflow (either multiplier): {', '.join(quiet)}")
    print("\nexact multiplier through wrapping registers of each width")
    digits.print_table([(r["register"], f"{r['accuracy']:.4f}", f"{100 * _share(r['overflow']):.2f}%")
                        for r in sorted([by[(first, "16s wrap")], *sweep, by[(first, "12s wrap")]],
                                        key=lambda r: -int(r["register"].split("s")[0]))],
                       ("register", "accuracy", "dot products overflowed (every layer)"))
    plot(rows, layers, float_acc, args.png, f"digits CNN, {mults[0][1].format} units: exact and Mitchell "
                                            f"multipliers through declared accumulators")
    print(f"wrote {args.png} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
