"""Same-process A/B of backward="table"'s gradient pass (issue 27) against the forward
any-table LUT GEMM on the same shape, alternated round by round in ONE process.

    shape (M x K x O)   forward: acc (M, O) = sum_k mul8[a[m, k], b[k, o]] (lut_gemm, Mitchell)
                        table:   dX (M, K) and dW (O, K) through Ga, Gb (_gradtables.table_grads),
                                 native (csrc/gradtables/gradtables.h) and the numpy fallback
    2048x576x64 (a ResNet-18 CIFAR 3x3 conv, 64 channels, batch 2), 512x1152x128

Prints a table (min ms over rounds of best-of-`calls`, products/s; the rate ratio counts the
table pass's 2n gathered products (dX and dW) against the forward's n; issue 27's target:
>= 1/4 of the forward's rate).
Usage: python bench/ab_gradtables.py [--threads 2] [--rounds 3] [--calls 2]
"""

import numpy as np
import torch

from lutbench import ab_parser, best_of
from lutcore.ops.gemm import lut_gemm, pack_b
from lutcore.torch import _gradtables
from lutcore.torch._gradtables import table_grads
from lutcore.units import approx

SHAPES = [(2048, 576, 64), (512, 1152, 128)]


def main():
    ap = ab_parser(rounds=3, calls=2)
    ap.add_argument("--simd", nargs="*", default=None, help="SIMD paths (default: every one this CPU has)")
    args = ap.parse_args()
    from lutcore import _simd
    paths = args.simd or _simd.available_simd()
    torch.set_num_threads(args.threads)
    u = approx.by_name("mitchell")
    ga, gb, gbt = _gradtables.tables_for(u, 1, "bench")
    rng = np.random.default_rng(0)
    print("| shape MxKxO | simd | threads | forward LUT GEMM (ms) | native dX+dW (ms) | numpy dX+dW (ms) | "
          "forward Gprod/s | native Gprod/s | native/forward rate | numpy/forward rate |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for (M, K, O), path in [(sh, p) for sh in SHAPES for p in paths]:
        _simd.set_simd(path)
        a = rng.integers(-127, 128, (M, K)).astype(np.int8)
        w = rng.integers(-127, 128, (O, K)).astype(np.int8)
        bp = pack_b(np.ascontiguousarray(w.T))
        g = rng.standard_normal((M, O)).astype(np.float32)
        res = {"fwd": [], "native": [], "numpy": []}
        for _ in range(args.rounds):
            res["fwd"].append(best_of(lambda: lut_gemm(a, bp, u, threads=args.threads), args.calls))
            res["native"].append(best_of(lambda: table_grads(a, w, g, g, ga, gb, args.threads, gbt), args.calls))
            res["numpy"].append(best_of(lambda: table_grads(a, w, g, g, ga, gb, args.threads), args.calls))
        f, nb, npy = (min(res[k]) for k in ("fwd", "native", "numpy"))
        n = M * K * O                    # products of the forward; the table pass gathers 2n (dX and dW)
        print(f"| {M}x{K}x{O} | {path} | {args.threads} | {f * 1e3:.1f} | {nb * 1e3:.1f} | {npy * 1e3:.1f} | "
              f"{n / f / 1e9:.2f} | {2 * n / nb / 1e9:.3f} | {(2 * n / nb) / (n / f):.3f} | "
              f"{(2 * n / npy) / (n / f):.3f} |")


if __name__ == "__main__":
    main()
