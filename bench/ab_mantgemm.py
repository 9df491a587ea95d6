"""The mantissa-product GEMM's group of bench/test_bench_mantgemm.py alternated in ONE process (the
VM's speed drifts 20-40% within minutes: every case runs in every round), 256 x 1024 x 256 float32
N(0, 1) operands.

    python bench/ab_mantgemm.py [--rounds 5] [--budget 0.3] [--threads 2] [--shape 256,1024,256]

    case                                call
    bf16 exact                          mant_gemm(a, b, MantissaUnit.exact("bf16")): the mul route
    bf16 mitchell                       ... MantissaUnit.mitchell("bf16"): T's row by permutes
    fp16 exact                          ... MantissaUnit.exact("fp16"): the mul route
    fp16 mitchell                       ... MantissaUnit.mitchell("fp16"): gathers
    torch matmul, bf16-rounded (peer)   torch.matmul(a_bf16.float(), b_bf16.float()): float32 sgemm
    torch matmul, float32 (peer)        torch.matmul(a, b) on the raw float32 operands

Every output is checked before timing (bench/test_bench_mantgemm.py's checks).  Prints min and
median ms and GOP/s (2 M N K / s, from the medians), and the share of the CPUs other processes
used meanwhile.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
from lutbench import alternate, cpu_counters, cpu_name, other_cpu_share, torch, use_threads  # noqa: E402
from test_bench_mantgemm import UNITS, check, operands, torch_peers  # noqa: E402
from lutcore.ops.mantgemm import mant_gemm  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", default="256,1024,256")
    a_ = ap.parse_args(argv)
    use_threads(a_.threads)
    M, K, N = (int(v) for v in a_.shape.split(","))
    a, b = operands((M, K, N))
    out = np.empty((M, N), np.float32)
    cases = []
    for name, make in UNITS.items():
        u = make()
        check(a, b, u, mant_gemm(a, b, u, out=out))
        cases.append((name, lambda u=u: mant_gemm(a, b, u, out=out)))
    for name, fn in torch_peers(a, b).items():
        cases.append((name, fn))
    c0 = cpu_counters()
    res = alternate([f for _, f in cases], a_.rounds, a_.budget)
    share = other_cpu_share(c0, cpu_counters())
    ops = 2 * M * N * K
    busy = "" if share is None else f", other processes {100 * share:.0f}% of the CPUs"
    print(f"{cpu_name()}, {a_.threads} threads, SIMD {lutcore.get_simd()}, {M}x{K}x{N}, {a_.rounds} rounds, "
          f"torch {torch.__version__}{busy}")
    print("| case | min ms | median ms | GOP/s (median) |")
    print("|---|--:|--:|--:|")
    for (name, _), (mn, med) in zip(cases, res):
        print(f"| {name} | {mn * 1e3:.3f} | {med * 1e3:.3f} | {ops / med / 1e9:.1f} |")


if __name__ == "__main__":
    main()
