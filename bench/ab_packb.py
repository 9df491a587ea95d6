"""Same-process A/B of the Mitchell layers' table product (issue 28): B packed once per weight
(csrc/gemm/table_packed.h) against the unpacked path it replaced, and where a layer's time goes.

    A  before   functional.product as it was: TRANSPOSE_ROWS (8 <= M < 64 rows, >= 256 columns:
                W (O, K) x a^T through the transposed table, a^T copied per call) or lut_gemm on
                the plain weight (the drivers stage B's indices per work unit; the C driver
                transposes both operands where N > M >= 48)
    B  after    lut_gemm on the QWeight's PackedB: the staged weight read as it is, A x W
    peer        the TorchApprox algorithm's GEMM alone on the same operands (bench/torchapprox_peer.cpp,
                validated equal to lut_gemm first; torch threads = the same count)
    pieces      of B's forward: quantize (absmax + codes), im2col, product, dequantize; the
                rest of the layer's call (weight check, Python) is the whole minus the pieces

ResNet-18 (CIFAR) 3x3 convs at batch 8 and 1, as bench/torch_ratios.py.  A and B alternate round
by round on the same inputs and are checked to give the same bits first; min and median ms over
all calls.  ``--cpu`` times with process CPU time at 1 thread (a busy machine's preemption left out).
Usage: python bench/ab_packb.py [--threads 2] [--rounds 5] [--cpu]
"""
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lutcore  # noqa: E402
import torchbench as tb  # noqa: E402
from lutbench import ab_parser, use_threads  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.ops.gemm import lut_gemm  # noqa: E402
from lutcore.torch import functional as fn  # noqa: E402

SPECS = [(b, c, c, hw) for b in (8, 1) for c, hw in ((64, 32), (128, 16), (256, 8), (512, 4))]


def before(a, qw, g, units, nt, out):
    """functional.product before the packed table path."""
    M, K = a.shape
    Og = out.shape[1]
    t = fn.gemm_threads(M, K, Og, units, nt)
    if fn.TRANSPOSE_ROWS[0] <= M < fn.TRANSPOSE_ROWS[1] and Og >= fn.TRANSPOSE_MIN_COLS:
        out[...] = lut_gemm(qw.q[g * Og:(g + 1) * Og], np.ascontiguousarray(a.T), fn._transposed(units), threads=t).T
        return out
    return lut_gemm(a, qw.b[g].b, units, threads=t, out=out)


def calls(f, clock, budget=0.05):
    ts, start = [], time.perf_counter()
    while True:
        t = clock()
        f()
        ts.append(clock() - t)
        if time.perf_counter() - start > budget:
            return ts


def main():
    ap = ab_parser(rounds=5, calls=None)
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    nt = 1 if args.cpu else args.threads
    clock = time.process_time if args.cpu else time.perf_counter
    use_threads(nt)
    new_product = fn.product
    print(f"Mitchell, {nt} thread(s), {'CPU' if args.cpu else 'wall'} ms, min / median; SIMD {lutcore.get_simd()}")
    print(f"{'conv (M x K x N)':22} {'A layer before':>15} {'B layer after':>15} {'A/B':>10} | after: quant im2col "
          f"product dequant rest | peer ms, peer/B")
    with torch.no_grad():
        for B, C, O, HW in SPECS:
            flt = torch.nn.Conv2d(C, O, 3, padding=1)
            layer = lt.approximate(flt, "mitchell", threads=nt)
            x = torch.randn(B, C, HW, HW, generator=torch.Generator().manual_seed(1))
            u, qw = layer.units, layer._lc_weight()
            geo = fn._Conv(x, flt.weight, 1, 1, 1, 1, "ab")
            q, s = fn.quantize_tensor(x, None, "input", "ab", nt)
            A = geo.patches(q, nt)[0].copy()
            acc = np.empty((geo.M, O), np.int32)

            def run_a():
                fn.product = before
                try:
                    return layer(x)
                finally:
                    fn.product = new_product
            ya, yb = run_a(), layer(x)
            assert torch.equal(ya.view(torch.int32), yb.view(torch.int32))
            pieces = dict(
                quant=lambda: fn.quantize_tensor(x, None, "input", "ab", nt),
                im2col=lambda: geo.patches(q, nt),
                product=lambda: new_product(A, qw, 0, u, nt, acc),
                dequant=lambda: fn._dequant(acc, qw, s, flt.bias, geo.out_shape(), geo.N, geo.OH * geo.OW, nt))
            peer = tb.peer()
            pa, pw = torch.from_numpy(A), torch.from_numpy(np.ascontiguousarray(qw.q))
            lut = torch.from_numpy(u.mul.astype(np.int32))
            assert np.array_equal(peer.ta_gemm(pa, pw, lut).numpy(), lut_gemm(A, qw.b[0].b, u))
            ta, tl, tpeer, tp = [], [], [], {k: [] for k in pieces}
            for _ in range(args.rounds):
                ta += calls(run_a, clock)
                tl += calls(lambda: layer(x), clock)
                tpeer += calls(lambda: peer.ta_gemm(pa, pw, lut), clock)
                for k, f in pieces.items():
                    tp[k] += calls(f, clock, 0.02)
            mins = {k: min(v) for k, v in tp.items()}
            rest = min(tl) - sum(mins.values())
            label = f"{geo.M}x{geo.Kg}x{O}"
            print(f"{label:22} {min(ta)*1e3:7.2f} {np.median(ta)*1e3:7.2f} {min(tl)*1e3:7.2f} {np.median(tl)*1e3:7.2f} "
                  f"{min(ta)/min(tl):4.2f}x {np.median(ta)/np.median(tl):4.2f}x | "
                  + " ".join(f"{v*1e3:.2f}" for v in mins.values()) + f" {rest*1e3:.2f}"
                  + f"  ({geo.M*geo.Kg*O/mins['product']/1e9:.1f} G products/s) | {min(tpeer)*1e3:.1f}, "
                  f"{min(tpeer)/min(tl):.1f}x (before {min(tpeer)/min(ta):.1f}x)", flush=True)


if __name__ == "__main__":
    main()
