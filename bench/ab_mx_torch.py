"""bench/test_bench_mx_torch.py's cases alternated in ONE process (the VM's speed drifts 20-40%
within minutes: every case runs in every round): an MLP of two 1024 x 1024 Linear layers, batch
256, through MXFP8 (E4M3, blocks of 32) -- lutcore.torch beside torchao's emulated MX inference
and torch's float layers; inference and one SGD training step.

    python bench/ab_mx_torch.py [--rounds 5] [--budget 0.3] [--threads 2] [--busy]

``--busy``: the same beside a process that holds one core (lutbench.spinning).  Prints min and
median ms and the ratios.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutbench import alternate, cpu_name, spinning, torch  # noqa: E402
from test_bench_mx_torch import check, data, mlp, torchao_mlp, train_step  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busy", action="store_true", help="beside a process holding one core")
    a_ = ap.parse_args(argv)
    nt = a_.threads
    lutcore.set_num_threads(nt)
    torch.set_num_threads(nt)
    B, D = 256, 1024
    x, t = data(B, D)
    m = mlp(D)
    am, amm, tm = lt.approximate(m, "mxfp8"), lt.approximate(m, "mxfp8:mitchell"), torchao_mlp(m)
    xb = x.to(torch.bfloat16)
    with torch.no_grad():
        check(m, x, am(x).numpy())

    def infer(model, inp):
        def run():
            with torch.no_grad():
                return model(inp)
        return run

    steps = []
    for bw in ("ste", "table", None):
        model = mlp(D) if bw is None else lt.approximate(mlp(D), "mxfp8", backward=bw)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        steps.append((f"train step: {'torch float32' if bw is None else 'lutcore mxfp8, backward ' + bw}",
                      lambda model=model, opt=opt: train_step(model, x, t, opt)))
    cases = [("inference: lutcore mxfp8", infer(am, x)), ("inference: lutcore mxfp8:mitchell", infer(amm, x)),
             ("inference: torchao MXFP8 emulated (bf16)", infer(tm, xb)), ("inference: torch float32", infer(m, x)),
             *steps]
    with spinning() if a_.busy else contextlib.nullcontext():
        res = alternate([f for _, f in cases], a_.rounds, a_.budget)
    print(f"{cpu_name()}, {nt} threads, SIMD {lutcore.get_simd()}, MLP {D}-{D}-{D}, batch {B}, "
          f"{a_.rounds} rounds{', beside a spinning core' if a_.busy else ''}")
    print("| case | min ms | median ms |")
    print("|---|--:|--:|")
    med = {}
    for (name, _), (mn, md) in zip(cases, res):
        med[name] = md
        print(f"| {name} | {mn * 1e3:.2f} | {md * 1e3:.2f} |")
    tao = med["inference: torchao MXFP8 emulated (bf16)"]
    print(f"lutcore mxfp8 / torchao emulated: {tao / med['inference: lutcore mxfp8']:.2f}x as fast; "
          f"mitchell: {tao / med['inference: lutcore mxfp8:mitchell']:.2f}x; "
          f"vs torch float32: {med['inference: torch float32'] / med['inference: lutcore mxfp8']:.2f}x")
    fl = med["train step: torch float32"]
    for bw in ("ste", "table"):
        print(f"train step, backward {bw}: {med[f'train step: lutcore mxfp8, backward {bw}'] / fl:.2f}x torch float's time")
    return np.nan


if __name__ == "__main__":
    main()
