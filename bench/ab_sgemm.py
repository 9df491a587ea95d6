"""Same-process A/B of ops.matmul's register tiles (issue 20): the AVX-512 zmm tile
(set_simd("avx512")), the AVX2 tile (set_simd("avx2")) and torch.matmul, alternated
round by round in ONE process on the same float32 inputs, `out=` preallocated.

    shape (M x K x N)     A (M, K) @ B (K, N), row-major, 2 threads for all three
    1024x1024x1024, 2048x768x3072, 256x4096x4096

Prints a table (min ms over rounds of best-of-`calls`, GFLOP/s, ratios).
Usage: python bench/ab_sgemm.py [--threads 2] [--rounds 5] [--calls 5]
"""

import numpy as np
import torch

import lutcore
from lutcore.ops.matmul import matmul
from lutbench import ab_parser, best_of

SHAPES = [(1024, 1024, 1024), (2048, 768, 3072), (256, 4096, 4096)]


def main():
    ap = ab_parser(rounds=5, calls=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"| shape | threads | avx512 zmm (ms) | avx2 (ms) | torch (ms) | avx512 GFLOP/s | zmm/avx2 | zmm/torch | avx2/torch |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for M, K, N in SHAPES:
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        out = np.empty((M, N), np.float32)
        ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.empty(M, N)
        res = {"avx512": [], "avx2": [], "torch": []}
        outs = {}
        for _ in range(args.rounds):
            for path in ("avx512", "avx2"):
                lutcore.set_simd(path)
                matmul(a, b, out=out, threads=args.threads)      # warm
                res[path].append(best_of(lambda: matmul(a, b, out=out, threads=args.threads), args.calls))
                outs[path] = out.copy()
            torch.matmul(ta, tb, out=to)
            res["torch"].append(best_of(lambda: torch.matmul(ta, tb, out=to), args.calls))
        assert np.array_equal(outs["avx512"].view(np.uint32), outs["avx2"].view(np.uint32))
        z, v, t = (min(res[k]) * 1e3 for k in ("avx512", "avx2", "torch"))
        gf = 2 * M * K * N / (z * 1e-3) / 1e9
        print(f"| {M}x{K}x{N} | {args.threads} | {z:.2f} | {v:.2f} | {t:.2f} | {gf:.0f} | {v / z:.2f}x | "
              f"{t / z:.2f}x | {t / v:.2f}x |", flush=True)
    lutcore.set_simd(lutcore.available_simd()[-1])


if __name__ == "__main__":
    main()
