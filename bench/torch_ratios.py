"""lutcore.torch side by side with its peers, alternating in one process (the numbers in
BENCHMARKS.md, "PyTorch layers through the units").

    nice -n 19 python bench/torch_ratios.py [--rounds 3] [--resnet-batch 32] [--out table.md]

Per case (bench/torchbench.py): the approximate layer's whole forward (quantize + im2col
+ GEMM + dequantize) through Mitchell and through the exact table, the TorchApprox
algorithm's GEMM alone on the same int8 operands with the same tables, and torch's own
float32 conv2d / linear — called in turn, round after round, min over rounds; every
product validated (the peer's int32 result equals lutcore.lut_gemm's bit for bit) before
timing.  Then a ResNet-18 (CIFAR) at batch 32: images/s of inference and of one
approximation-aware training step (forward, STE backward, SGD step), beside float torch
and the peer-based estimate (the peer's measured MAC/s over the model's MACs per image,
GEMMs only: an upper bound for the peer).  2 threads everywhere.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
import torchbench as tb  # noqa: E402
from lutbench import THREADS, alternate, cpu_name, torch  # noqa: E402


def _best(fns, rounds, budget=0.05):
    """The min time of each callable over lutbench.alternate's rounds."""
    return [lo for lo, _ in alternate(fns, rounds, budget)]


def layer_rows(rounds):
    import torch.nn.functional as F
    rows = []
    for label, kind, spec in tb.cases():
        m = tb.layer_case(kind, spec, "mitchell")
        e = tb.layer_case(kind, spec, "exact")
        pm, pe = tb.peer_call(m), tb.peer_call(e)
        for c, p in ((m, pm), (e, pe)):
            want = lutcore.lut_gemm(c.a, c.w.T.copy(), c.layer.units).astype(np.int32)
            assert np.array_equal(p().numpy(), want), f"{label}: peer differs from lut_gemm"
        if kind == "conv":
            flt = lambda c=e: F.conv2d(c.x, c.flt.weight, c.flt.bias, padding=1)  # noqa: E731
        else:
            flt = lambda c=e: F.linear(c.x, c.flt.weight, c.flt.bias)  # noqa: E731
        with torch.no_grad():
            fns = [lambda: m.layer(m.x), pm, lambda: e.layer(e.x), pe, flt]
            for f in fns:
                f()                                                    # warm up (packing, scratch)
            t = _best(fns, rounds)
        rows.append(dict(label=label, macs=m.macs, lm=t[0], pm=t[1], le=t[2], pe=t[3], fl=t[4]))
        print(f"{label:28s} mitchell {t[0]*1e3:8.2f} ms  peer {t[1]*1e3:8.2f} ms  x{t[1]/t[0]:5.1f}   "
              f"exact {t[2]*1e3:8.2f} ms  peer {t[3]*1e3:8.2f} ms  x{t[3]/t[2]:5.1f}   float {t[4]*1e3:7.2f} ms  "
              f"exact/float {t[2]/t[4]:4.2f}", flush=True)
    return rows


def resnet_rows(batch, rounds, peer_macs_per_s):
    import lutcore.torch as lt
    model = tb.resnet18_cifar().eval()
    x = torch.randn(batch, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (batch,), generator=torch.Generator().manual_seed(2))
    macs = tb.resnet_macs_per_image(model)
    mit = lt.approximate(model, "mitchell").eval()
    ex = lt.approximate(model, "exact").eval()

    def infer(mdl):
        def f():
            with torch.no_grad():
                mdl(x)
        return f

    def step(mdl):
        mdl = lt.approximate(mdl, lt.approximate_layers(mdl)[0][1].units) if lt.approximate_layers(mdl) else mdl
        mdl.train()
        opt = torch.optim.SGD(mdl.parameters(), lr=1e-3)

        def f():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(mdl(x), y).backward()
            opt.step()
        return f

    import copy
    fns = [infer(model), infer(mit), infer(ex), step(copy.deepcopy(model)), step(mit)]
    for f in fns:
        f()
    t = _best(fns, rounds)
    ips = [batch / v for v in t]
    return dict(batch=batch, macs=macs, float_inf=ips[0], mit_inf=ips[1], exact_inf=ips[2], float_train=ips[3],
                mit_train=ips[4], peer_inf=peer_macs_per_s / macs)


def markdown(rows, rn, cpu):
    out = [f"Measured by `bench/torch_ratios.py` ({cpu}; {THREADS} threads; min per call over alternating rounds; "
           f"lutcore SIMD path `{lutcore.get_simd()}`; peer: "
           f"{'the TorchApprox algorithm as a torch C++ extension (bench/torchapprox_peer.cpp)' if tb.peer() else 'the numpy definition'}).",
           "",
           "| GEMM (M x K x N) | Mitchell layer ms | peer ms | peer / lutcore | exact layer ms | peer ms | peer / lutcore "
           "| torch float ms | exact / float |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['label']} | {r['lm']*1e3:.2f} | {r['pm']*1e3:.2f} | **{r['pm']/r['lm']:.1f}x** | "
                   f"{r['le']*1e3:.2f} | {r['pe']*1e3:.2f} | **{r['pe']/r['le']:.1f}x** | {r['fl']*1e3:.2f} | "
                   f"{r['le']/r['fl']:.2f} |")
    if rn:
        out += ["", f"ResNet-18 (CIFAR, 32x32), batch {rn['batch']}, {rn['macs']/1e6:.0f} M MACs per image, images/s:",
                "", "| | float torch | lutcore exact | lutcore Mitchell | peer estimate (Mitchell) |",
                "|---|---:|---:|---:|---:|",
                f"| inference | {rn['float_inf']:.0f} | {rn['exact_inf']:.0f} | {rn['mit_inf']:.1f} | {rn['peer_inf']:.1f} |",
                f"| training step (fwd + STE bwd + SGD) | {rn['float_train']:.0f} | - | {rn['mit_train']:.1f} | - |"]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--resnet-batch", type=int, default=32)
    p.add_argument("--no-resnet", action="store_true")
    p.add_argument("--cpu", default=None, help="the CPU named in the header (default: read from /proc/cpuinfo)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    lutcore.set_num_threads(THREADS)
    torch.set_num_threads(THREADS)
    rows = layer_rows(a.rounds)
    peer_rate = float(np.median([r["macs"] / r["pm"] for r in rows]))
    rn = None if a.no_resnet else resnet_rows(a.resnet_batch, max(1, a.rounds - 1), peer_rate)
    md = markdown(rows, rn, a.cpu or cpu_name())
    print(md)
    if a.out:
        Path(a.out).write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
