"""The MX GEMM's group of bench/test_bench_mxgemm.py alternated in ONE process (the VM's speed
drifts 20-40% within minutes: every case runs in every round), 256 x 1024 x 256, blocks of 32.

    python bench/ab_mxgemm.py [--rounds 5] [--budget 0.3] [--threads 2]

    case                                   call
    MXFP8 exact table                      mx_gemm(a, b, MXProducts(exact e4m3 table)): the FMA route
    MXFP8 approximate table (1 part)       ... products keeping 2 mantissa bits: row tables, one part
    MXFP8 two-part table                   ... a random factor per product: row tables, two parts
    int8 any table (mitchell)              lut_gemm(a8, b8, units=mitchell)
    torchao MX emulation                   MXTensor.dequantize(float32) @ MXTensor.dequantize(float32).t()

Every output is checked before timing (bench/test_bench_mxgemm.py's checks).  Prints min and
median ms, GOP/s (2 M N K / s, from the medians) and the ratios the targets name.
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
from lutcore.ops.mxgemm import MXProducts, mx_gemm  # noqa: E402
from lutcore.units import approx  # noqa: E402
from test_bench_mxgemm import BLOCK, EXACT_VS_F64, TAO_PER_K, tables  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=2)
    a_ = ap.parse_args(argv)
    nt = a_.threads
    lutcore.set_num_threads(nt)
    torch.set_num_threads(nt)
    M, K, N = 256, 1024, 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    a, b = mx_quantize(x, "e4m3", BLOCK), mx_quantize(w, "e4m3", BLOCK, axis=0)
    prods = {k: MXProducts(v, "e4m3", "e4m3") for k, v in tables().items()}
    out = np.empty((M, N), np.float32)
    ad, bd = a.dequantize().astype(np.float64), b.dequantize().astype(np.float64)
    ref, mag = ad @ bd, np.abs(ad) @ np.abs(bd)
    y = mx_gemm(a, b, prods["exact"])
    assert (np.abs(y - ref) <= EXACT_VS_F64 * a.nblocks * mag).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode
    ta = MXTensor.to_mx(torch.from_numpy(x), torch.float8_e4m3fn, BLOCK, ScaleCalculationMode.FLOOR)
    tb = MXTensor.to_mx(torch.from_numpy(np.ascontiguousarray(w.T)), torch.float8_e4m3fn, BLOCK,
                        ScaleCalculationMode.FLOOR)

    def emulate():
        return ta.dequantize(torch.float32) @ tb.dequantize(torch.float32).t()

    assert (np.abs(emulate().numpy().astype(np.float64) - y) <= TAO_PER_K * K * mag).all()
    a8 = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b8 = rng.integers(-128, 128, (K, N), dtype=np.int8)
    u, o8 = approx.mitchell(), np.empty((M, N), np.int32)
    cases = [("MXFP8 exact table", lambda: mx_gemm(a, b, prods["exact"], out=out)),
             ("MXFP8 approximate table (1 part)", lambda: mx_gemm(a, b, prods["approx"], out=out)),
             ("MXFP8 two-part table", lambda: mx_gemm(a, b, prods["twopart"], out=out)),
             ("int8 any table (mitchell)", lambda: lutcore.lut_gemm(a8, b8, units=u, out=o8)),
             ("torchao MX emulation", emulate)]
    res = alternate([f for _, f in cases], a_.rounds, a_.budget)
    ops = 2 * M * N * K
    print(f"{cpu_name()}, {nt} threads, SIMD {lutcore.get_simd()}, {M}x{K}x{N}, blocks of {BLOCK}, "
          f"{a_.rounds} rounds")
    print("| case | min ms | median ms | GOP/s (median) |")
    print("|---|--:|--:|--:|")
    gops = {}
    for (name, _), (mn, med) in zip(cases, res):
        gops[name] = ops / med / 1e9
        print(f"| {name} | {mn * 1e3:.3f} | {med * 1e3:.3f} | {gops[name]:.1f} |")
    i8, tao = gops["int8 any table (mitchell)"], gops["torchao MX emulation"]
    print(f"approximate table / int8 any table: {gops['MXFP8 approximate table (1 part)'] / i8:.2f} (target >= 0.5); "
          f"two-part / int8: {gops['MXFP8 two-part table'] / i8:.2f}; "
          f"exact table / torchao emulation: {gops['MXFP8 exact table'] / tao:.1f}x (target >= 1)")
    for name, p in prods.items():
        print(f"  {name}: {p.route(BLOCK)}")


if __name__ == "__main__":
    main()
