"""Same-process A/B of the approximate layers' weight check (issue 24): what comparing
the weight with the float copy it quantized (functional.WeightCache: torch.equal of
the int32 views, on every call) costs against the layer's forward.

    A  layer(x)                          the forward with the content check (today's code)
    B  fn.linear / fn.conv(..., qw=QW)   the same forward given the QWeight (no check at all,
                                         as the old version-keyed cache did when nothing changed)
    C  the check alone                   WeightCache.get on an unchanged weight
    D  a checksum instead                zlib.crc32 of the weight's bytes (an alternative)
    E  torch.equal instead               of the int32 views (an alternative)

A and B alternate round by round in ONE process on the same inputs; the table gives the
min ms over rounds of best-of-`calls`, and the check's share of the forward (A - B) / B.
A and B are checked to give the same bits.
Usage: python bench/ab_weight_check.py [--threads 2] [--rounds 5] [--calls 5]
"""
import sys
import zlib
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutbench import ab_parser, best_of, use_threads  # noqa: E402
from lutcore.torch import functional as fn  # noqa: E402

CASES = [  # (name, float layer builder, input shape, units)
    ("Linear 768->3072 M=1", lambda: nn.Linear(768, 3072), (1, 768), "exact"),
    ("Linear 768->3072 M=1", lambda: nn.Linear(768, 3072), (1, 768), "mitchell"),
    ("Linear 768->3072 M=32", lambda: nn.Linear(768, 3072), (32, 768), "exact"),
    ("Linear 768->3072 M=32", lambda: nn.Linear(768, 3072), (32, 768), "mitchell"),
    ("Linear 256->256 M=8", lambda: nn.Linear(256, 256), (8, 256), "exact"),
    ("Conv2d 64->64 3x3 1x64x16x16", lambda: nn.Conv2d(64, 64, 3, padding=1), (1, 64, 16, 16), "exact"),
    ("Conv2d 64->64 3x3 1x64x16x16", lambda: nn.Conv2d(64, 64, 3, padding=1), (1, 64, 16, 16), "mitchell"),
]


def main():
    ap = ab_parser(rounds=5, calls=5)
    args = ap.parse_args()
    use_threads(args.threads)
    torch.manual_seed(0)
    print(f"{'case':32} {'units':9} {'A fwd+check':>12} {'B fwd':>9} {'(A-B)/B':>8} {'C check':>9} "
          f"{'D crc32':>9} {'E t.equal':>9}  (ms, threads={args.threads})")
    with torch.no_grad():
        for name, build, shape, units in CASES:
            layer = lt.approximate(build(), units)
            x = torch.randn(shape)
            qw = layer._lc_weight()
            w, groups = layer._lc_weight_of()
            if groups is None:
                def b_fwd():
                    return fn.linear(x, layer.weight, layer.bias, layer.units, "ste", None, None, "b", qw=qw)
            else:
                def b_fwd():
                    return fn.conv(x, layer.weight, layer.bias, layer.units, layer.stride, layer.padding,
                                   layer.dilation, layer.groups, "ste", None, None, "b", qw=qw)
            assert torch.equal(layer(x), b_fwd())
            wn = layer.weight.detach().numpy()
            wi, wc = layer.weight.detach().view(torch.int32), layer.weight.detach().clone().view(torch.int32)
            runs = {"A": lambda: layer(x), "B": b_fwd, "C": lambda: layer._lc_cache.get(w, groups, "c"),
                    "D": lambda: zlib.crc32(wn), "E": lambda: torch.equal(wi, wc)}
            best = {k: float("inf") for k in runs}
            for _ in range(args.rounds):
                for k, f in runs.items():
                    best[k] = min(best[k], best_of(f, args.calls))
            a, b, c, d, e = (best[k] * 1e3 for k in "ABCDE")
            print(f"{name:32} {units:9} {a:12.3f} {b:9.3f} {(a - b) / b:8.1%} {c:9.3f} {d:9.3f} {e:9.3f}")


if __name__ == "__main__":
    main()
