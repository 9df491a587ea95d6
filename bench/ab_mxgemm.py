"""The MX GEMM's group of bench/test_bench_mxgemm.py alternated in ONE process (the VM's speed
drifts 20-40% within minutes: every case runs in every round), 256 x 1024 x 256, blocks of 32, on
one or more SIMD paths (each lutcore case once per path, the body picked by set_simd).

    python bench/ab_mxgemm.py [--rounds 5] [--budget 0.3] [--threads 2] [--simd generic,avx2,avx512]
                              [--shape 256 1024 256] [--no-torch]

    case                                   call
    MXFP8 exact table                      mx_gemm(a, b, MXProducts(exact e4m3 table)): the FMA route
    MXFP8 approximate table (1 part)       ... products keeping 2 mantissa bits: row tables, one part
    MXFP8 two-part table                   ... a random factor per product: row tables, two parts
    MXFP8 e5m2 exact table (2 parts)       the same data in e5m2, its exact products: row tables, two parts
    MXFP8 narrow, Narrow(13, 128)          the exact e4m3 table into a 14-bit register promoted every 128
    int8 any table (mitchell)              lut_gemm(a8, b8, units=mitchell)
    torchao MX emulation                   MXTensor.dequantize(float32) @ MXTensor.dequantize(float32).t()

Every output is checked before timing (bench/test_bench_mxgemm.py's checks; e5m2 and narrow
against the integer oracles on a few rows), and every path's bits against the first path's.
Prints min and median ms, GOP/s (2 M N K / s, from the medians) and the ratios the targets name,
per path; with several paths, each lutcore case's speed-up over the first path.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
from lutbench import alternate, cpu_name, torch  # noqa: E402
from lutcore.mx import mx_quantize  # noqa: E402
from lutcore.ops.mxgemm import MXProducts, Narrow, mx_gemm  # noqa: E402
from lutcore.units import approx, fp_format  # noqa: E402
from test_bench_mxgemm import BLOCK, CHECK_ROWS, EXACT_VS_F64, TAO_PER_K, tables  # noqa: E402
from reference.mxgemm_ref import mx_gemm_exact_ref, mx_gemm_narrow_ref  # noqa: E402  (test_bench_mxgemm's path)

NARROW = Narrow(13, 128)
I8 = "int8 any table (mitchell)"
TAO = "torchao MX emulation"


def _same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--simd", default=lutcore.get_simd(),
                    help=f"comma-separated SIMD paths (of {lutcore.available_simd()}); default the current one")
    ap.add_argument("--shape", type=int, nargs=3, default=(256, 1024, 256), metavar=("M", "K", "N"))
    ap.add_argument("--no-torch", action="store_true", help="leave out torchao's emulation")
    a_ = ap.parse_args(argv)
    paths = [s.strip() for s in a_.simd.split(",") if s.strip()]
    for s in paths:
        lutcore.set_simd(s)                                   # refuses a path this CPU lacks
    nt = a_.threads
    lutcore.set_num_threads(nt)
    M, K, N = a_.shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    a, b = mx_quantize(x, "e4m3", BLOCK), mx_quantize(w, "e4m3", BLOCK, axis=0)
    a5, b5 = mx_quantize(x, "e5m2", BLOCK), mx_quantize(w, "e5m2", BLOCK, axis=0)
    tabs = tables()
    v5 = fp_format("e5m2").values()
    with np.errstate(all="ignore"):
        t5 = np.multiply.outer(v5, v5)
    prods = {k: MXProducts(v, "e4m3", "e4m3") for k, v in tabs.items()}
    p5 = MXProducts(t5, "e5m2", "e5m2")
    out = np.empty((M, N), np.float32)
    ad, bd = a.dequantize().astype(np.float64), b.dequantize().astype(np.float64)
    ref, mag = ad @ bd, np.abs(ad) @ np.abs(bd)
    r = slice(0, CHECK_ROWS)
    # (name, operands, products, accumulate, the oracle of rows r)
    mx_cases = [("MXFP8 exact table", a, b, prods["exact"], "exact", None),
                ("MXFP8 approximate table (1 part)", a, b, prods["approx"], "exact", tabs["approx"]),
                ("MXFP8 two-part table", a, b, prods["twopart"], "exact", tabs["twopart"]),
                ("MXFP8 e5m2 exact table (2 parts)", a5, b5, p5, "exact", t5),
                ("MXFP8 narrow, Narrow(13, 128)", a, b, prods["exact"], NARROW, tabs["exact"])]
    first = {}
    for s in paths:
        lutcore.set_simd(s)
        for name, a1, b1, p, acc, t in mx_cases:
            y = mx_gemm(a1, b1, p, acc)
            if name not in first:
                if t is None:
                    assert (np.abs(y - ref) <= EXACT_VS_F64 * a.nblocks * mag).all(), name
                elif acc == "exact":
                    want = mx_gemm_exact_ref(a1.codes[r], a1.scales[r], b1.codes, b1.scales, t, K, BLOCK)
                    assert _same(y[r], want), name
                else:
                    want = mx_gemm_narrow_ref(a1.codes[:1], a1.scales[:1], b1.codes[:, :64], b1.scales[:, :64], t, K,
                                              BLOCK, acc.mbits, acc.promote, acc.rounding)
                    assert _same(y[:1, :64], want), name
                first[name] = y
            assert _same(y, first[name]), (name, s, paths[0])
    a8 = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b8 = rng.integers(-128, 128, (K, N), dtype=np.int8)
    u, o8 = approx.mitchell(), np.empty((M, N), np.int32)

    def on(s, f):
        def call():
            lutcore.set_simd(s)
            return f()
        return call

    cases = []
    for s in paths:
        for name, a1, b1, p, acc, _t in mx_cases:
            cases.append((name, s, on(s, lambda a1=a1, b1=b1, p=p, acc=acc: mx_gemm(a1, b1, p, acc, out=out))))
        cases.append((I8, s, on(s, lambda: lutcore.lut_gemm(a8, b8, units=u, out=o8))))
    if not a_.no_torch:
        torch.set_num_threads(nt)
        y = first["MXFP8 exact table"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode
        ta = MXTensor.to_mx(torch.from_numpy(x), torch.float8_e4m3fn, BLOCK, ScaleCalculationMode.FLOOR)
        tb = MXTensor.to_mx(torch.from_numpy(np.ascontiguousarray(w.T)), torch.float8_e4m3fn, BLOCK,
                            ScaleCalculationMode.FLOOR)

        def emulate():
            return ta.dequantize(torch.float32) @ tb.dequantize(torch.float32).t()

        assert (np.abs(emulate().numpy().astype(np.float64) - y) <= TAO_PER_K * K * mag).all()
        cases.append((TAO, "-", emulate))
    res = alternate([f for _, _, f in cases], a_.rounds, a_.budget)
    ops = 2 * M * N * K
    print(f"{cpu_name()}, {nt} threads, SIMD paths {', '.join(paths)}, {M}x{K}x{N}, blocks of {BLOCK}, "
          f"{a_.rounds} rounds")
    print("| case | SIMD | min ms | median ms | GOP/s (median) |")
    print("|---|---|--:|--:|--:|")
    gops, mins = {}, {}
    for (name, s, _), (mn, med) in zip(cases, res):
        gops[name, s], mins[name, s] = ops / med / 1e9, mn
        print(f"| {name} | {s} | {mn * 1e3:.3f} | {med * 1e3:.3f} | {gops[name, s]:.1f} |")
    for s in paths:
        i8 = gops[I8, s]
        line = (f"{s}: approximate table / int8 any table: {gops['MXFP8 approximate table (1 part)', s] / i8:.2f} "
                f"(target >= 0.5); two-part / int8: {gops['MXFP8 two-part table', s] / i8:.2f}")
        if (TAO, "-") in gops:
            line += f"; exact table / torchao emulation: {gops['MXFP8 exact table', s] / gops[TAO, '-']:.1f}x"
        print(line)
    for s in paths[1:]:
        print(f"{s} over {paths[0]} (mins): " + "; ".join(
            f"{name}: {mins[name, paths[0]] / mins[name, s]:.2f}x" for name, *_ in mx_cases))
    for name, _a, _b, p, acc, _t in mx_cases:
        print(f"  {name}: " + (p.route(BLOCK) if acc == "exact" else f"{acc}: the register on the row tables"))


if __name__ == "__main__":
    main()
