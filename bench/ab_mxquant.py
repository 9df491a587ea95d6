"""bench/test_bench_mxquant.py's cases alternated in ONE process (the VM's speed drifts 20-40%
within minutes: every case runs in every round): MX quantization of a float32 matrix, 256 x 1024
and 1024 x 1024, e4m3 and e2m1, blocks of 32 -- lutcore's native quantizer (rows and columns)
beside lutcore's numpy body and torchao's ``MXTensor.to_mx(x, dtype, 32,
ScaleCalculationMode.FLOOR)`` on the same input, after checking that all give the same bits.

    python bench/ab_mxquant.py [--rounds 5] [--budget 0.3] [--threads 2] [--busy]

``--busy``: the same beside a process that holds one core (lutbench.spinning).  Prints min and
median ms per case, the speedups over each peer, and the share of the CPUs other processes used
meanwhile.
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
from lutbench import alternate, cpu_counters, cpu_name, other_cpu_share, spinning, torch  # noqa: E402
from lutcore.mx import mx_quantize, mx_quantize_numpy  # noqa: E402
from test_bench_mxquant import BLOCK, check, torchao_quantizer  # noqa: E402

SHAPES = [(256, 1024), (1024, 1024)]
FORMATS = ["e4m3", "e2m1"]


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
    bits, to_mx = torchao_quantizer()
    rng = np.random.default_rng(0)
    cases = []
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        t = torch.from_numpy(x)
        for fmt in FORMATS:
            check(x, fmt)
            s, d = bits(t, fmt)
            m = mx_quantize(x, fmt, BLOCK)
            assert np.array_equal(s, m.scales) and np.array_equal(d, m.codes), (shape, fmt)
            key = f"{shape[0]}x{shape[1]} {fmt}"
            cases += [(key, "lutcore rows", lambda x=x, fmt=fmt: mx_quantize(x, fmt, BLOCK)),
                      (key, "lutcore columns", lambda x=x, fmt=fmt: mx_quantize(x, fmt, BLOCK, 0)),
                      (key, "numpy body", lambda x=x, fmt=fmt: mx_quantize_numpy(x, fmt, BLOCK)),
                      (key, "torchao to_mx", lambda t=t, fmt=fmt: to_mx(t, fmt))]
    c0 = cpu_counters()
    with spinning() if a_.busy else contextlib.nullcontext():
        res = alternate([f for _, _, f in cases], a_.rounds, a_.budget)
    c1 = cpu_counters()
    other = other_cpu_share(c0, c1) if c0 and c1 else None
    print(f"{cpu_name()}, {nt} threads, SIMD {lutcore.get_simd()} (mx_quantize body: "
          f"{lutcore._simd.bodies()['mx_quantize (nearest)']}), blocks of {BLOCK}, {a_.rounds} rounds"
          f"{', beside a spinning core' if a_.busy else ''}"
          + (f"; other processes used {100 * other:.0f}% of the CPUs meanwhile" if other is not None else ""))
    print("| shape, format | case | min ms | median ms |")
    print("|---|---|--:|--:|")
    med = {}
    for (key, name, _), (mn, md) in zip(cases, res):
        med[key, name] = md
        print(f"| {key} | {name} | {mn * 1e3:.3f} | {md * 1e3:.3f} |")
    print()
    print("| shape, format | rows vs numpy body | rows vs torchao | columns vs numpy body |")
    print("|---|--:|--:|--:|")
    for key in dict.fromkeys(k for k, _, _ in cases):
        r, c = med[key, "lutcore rows"], med[key, "lutcore columns"]
        print(f"| {key} | {med[key, 'numpy body'] / r:.0f}x | {med[key, 'torchao to_mx'] / r:.0f}x | "
              f"{med[key, 'numpy body'] / c:.0f}x |")


if __name__ == "__main__":
    main()
