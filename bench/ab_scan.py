"""Same-process A/B of the selective scan's bodies (issue 20): the AVX-512 body
(set_simd("avx512"), one zmm per 16-channel unit), the AVX2 body (set_simd("avx2"))
and the peers, alternated round by round in ONE process on the same inputs
(bench/test_bench_mamba.py's inputs, peers and validation helpers).

    group                          lutcore (avx512, avx2)              peer
    scan fwd 2x512x1536x16         ops.selective_scan(.., "simplified") mambapy pscan (no_grad)
    scan fwd+bwd                   selective_scan_forward(save) +      mambapy pscan + autograd
                                   selective_scan_backward(ctx=)
    Mamba1Block fwd+bwd 2x512x768  blocks[0].forward + .backward       transformers MambaBlock (mambapy scan)

Prints a table: min ms over rounds of best-of-`calls` (peers: one call a round),
ratios peer / lutcore and avx2 / avx512.  The two lutcore paths are checked to give
the same bits, the peers to agree with lutcore (as the benchmarks do).
Usage: python bench/ab_scan.py [--threads 2] [--rounds 5] [--calls 3] [--no-block]
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lutcore  # noqa: E402
import test_bench_mamba as tb  # noqa: E402
from lutbench import ab_parser, best_of, rel_err, torch, use_threads  # noqa: E402


def main():
    ap = ab_parser(rounds=5, calls=3)
    ap.add_argument("--no-block", action="store_true")
    args = ap.parse_args()
    use_threads(args.threads)
    rng = np.random.default_rng(tb.SEED)
    shape = tb.SCAN_SHAPES[0]
    c = tb.scan_inputs(rng, shape)
    c.out = np.empty_like(c.u)
    targs = [torch.from_numpy(a) for a in tb._args(c)]

    def fwd():
        return lutcore.ops.selective_scan(*tb._args(c), True, "simplified")

    def fwd_peer():
        with torch.no_grad():
            return tb.scan_mambapy(*targs)

    fb, fb_peer = tb.scan_fb_lutcore(c), tb.scan_fb_mambapy(c)
    groups = [("scan fwd", "x".join(map(str, shape)), fwd, fwd_peer, "mambapy pscan"),
              ("scan fwd+bwd", "x".join(map(str, shape)), fb, fb_peer, "mambapy pscan + autograd")]
    if not args.no_block:
        bshape = tb.BLOCK_SHAPES[0]
        bc = tb.block_inputs(np.random.default_rng(tb.SEED), bshape)
        groups.append(("Mamba1Block fwd+bwd", "x".join(map(str, bshape)), tb.block_fb_lutcore(bc),
                       tb.block_fb_hf(bc), "transformers + mambapy"))
    res = {}
    for g, _, run, peer, _ in groups:              # validate: same bits on both paths, the peer agrees
        outs = {}
        for path in ("avx512", "avx2"):
            lutcore.set_simd(path)
            o = run()
            outs[path] = ([o] if isinstance(o, np.ndarray) else
                          [v.copy() for v in o.values()] if isinstance(o, dict) else
                          [o[0].copy(), o[1].copy()] + [v.copy() for v in o[2].values()])
        assert all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(*outs.values())), g
        p = peer()
        if g == "scan fwd":
            assert rel_err(p.numpy(), outs["avx512"][0]) < tb.FWD_TOL, g
        res[g] = {"avx512": [], "avx2": [], "peer": []}
    for _ in range(args.rounds):
        for g, _, run, peer, _ in groups:
            for path in ("avx512", "avx2"):
                lutcore.set_simd(path)
                res[g][path].append(best_of(run, args.calls))
            res[g]["peer"].append(best_of(peer, 1))
    print(f"| group | shape | threads | avx512 (ms) | avx2 (ms) | peer | peer (ms) | peer/avx512 | peer/avx2 | "
          f"avx2/avx512 |")
    print("|---|---|--:|--:|--:|---|--:|--:|--:|--:|")
    for g, s, _, _, pname in groups:
        z, v, p = (min(res[g][k]) * 1e3 for k in ("avx512", "avx2", "peer"))
        print(f"| {g} | {s} | {args.threads} | {z:.1f} | {v:.1f} | {pname} | {p:.0f} | {p / z:.1f}x | "
              f"{p / v:.1f}x | {v / z:.2f}x |")


if __name__ == "__main__":
    main()
