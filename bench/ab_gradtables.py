"""Same-process A/B of backward="table"'s gradient pass (issue 27) against the forward
any-table LUT GEMM on the same shape, alternated round by round in ONE process.

    shape (M x K x O)   forward: acc (M, O) = sum_k mul8[a[m, k], b[k, o]] (lut_gemm, Mitchell)
                        table:   dX (M, K) and dW (O, K) through Ga, Gb (_gradtables.table_grads)
    2048x576x64 (a ResNet-18 CIFAR 3x3 conv, 64 channels, batch 2), 512x1152x128

Prints a table (min ms over rounds of best-of-`calls`, products/s, the ratio table/forward;
issue 27's target: the table pass at >= 1/4 of the forward's rate).
Usage: python bench/ab_gradtables.py [--threads 2] [--rounds 3] [--calls 2]
"""
import argparse

import numpy as np
import torch

from lutbench import best_of
from lutcore.ops.gemm import lut_gemm, pack_b
from lutcore.torch._gradtables import table_grads
from lutcore.units import approx

SHAPES = [(2048, 576, 64), (512, 1152, 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    u = approx.by_name("mitchell")
    ga, gb = (t.reshape(65536) for t in u.gradients())
    rng = np.random.default_rng(0)
    print("| shape MxKxO | threads | forward LUT GEMM (ms) | table dX+dW (ms) | table dX only (ms) | "
          "forward Gprod/s | table Gprod/s (dX+dW) | table/forward rate |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for M, K, O in SHAPES:
        a = rng.integers(-127, 128, (M, K)).astype(np.int8)
        w = rng.integers(-127, 128, (O, K)).astype(np.int8)
        bp = pack_b(np.ascontiguousarray(w.T))
        g = rng.standard_normal((M, O)).astype(np.float32)
        res = {"fwd": [], "both": [], "dx": []}
        for _ in range(args.rounds):
            res["fwd"].append(best_of(lambda: lut_gemm(a, bp, u, threads=args.threads), args.calls))
            res["both"].append(best_of(lambda: table_grads(a, w, g, g, ga, gb, args.threads), args.calls))
            res["dx"].append(best_of(lambda: table_grads(a, w, g, None, ga, gb, args.threads), args.calls))
        f, b, x = (min(res[k]) for k in ("fwd", "both", "dx"))
        n = M * K * O
        print(f"| {M}x{K}x{O} | {args.threads} | {f * 1e3:.1f} | {b * 1e3:.1f} | {x * 1e3:.1f} | "
              f"{n / f / 1e9:.2f} | {2 * n / b / 1e9:.3f} | {(2 * n / b) / (n / f):.3f} |")


if __name__ == "__main__":
    main()
