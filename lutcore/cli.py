"""The ``lutcore`` command.  The only module that parses argv or prints."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _units_arg(s):
    from lutcore.units import resolve
    return resolve(s)


def cmd_units(args) -> int:
    from lutcore.units import resolve
    units = resolve(args.path)
    print(repr(units))
    if args.verify:
        rep = units.verify()
        print(rep)
        if args.strict and not rep.ok:
            return 1
    if args.save:
        units.save(args.save)
        print(f"saved to {args.save}")
    return 0


def cmd_demo(args) -> int:
    """LUT GEMM and block-scaled matmul through the exact table and an approximate one."""
    import lutcore
    from lutcore.units import approx

    rng = np.random.default_rng(0)
    M = K = N = args.size
    a8 = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b8 = rng.integers(-128, 128, (K, N), dtype=np.int8)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    wq = lutcore.quantize(w, axis=0)
    ref = x @ w
    lutcore.show_config()
    print(f"\nshape (M, K, N) = ({M}, {K}, {N})")
    print(f"{'units':<14}{'lut_gemm GOP/s':>16}{'qmatmul GOP/s':>16}{'qmatmul rel. RMSE':>20}")
    for units in (lutcore.Units.exact(), approx.mitchell(), approx.truncated(6)):
        lutcore.lut_gemm(a8, b8, units)
        t0 = time.perf_counter()
        lutcore.lut_gemm(a8, b8, units)
        t1 = time.perf_counter()
        y = lutcore.qmatmul(x, wq, units)
        t2 = time.perf_counter()
        y = lutcore.qmatmul(x, wq, units)
        t3 = time.perf_counter()
        err = float(np.sqrt(np.mean((y - ref) ** 2) / np.mean(ref ** 2)))
        ops = 2.0 * M * N * K
        print(f"{units.name:<14}{ops / (t1 - t0) / 1e9:>16.1f}{ops / (t3 - t2) / 1e9:>16.1f}{err:>20.4f}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="lutcore", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("units", help="load, verify and fingerprint unit tables")
    u.add_argument("path", nargs="?", default="exact",
                   help="directory with mul_lut.bin/requant_lut.bin/relu_lut.bin, 'exact', "
                        "or an approximate multiplier: truncated:K, mitchell, reduced:BITS")
    u.add_argument("--verify", action="store_true", help="print the verification report")
    u.add_argument("--strict", action="store_true", help="exit 1 unless every table is exact")
    u.add_argument("--save", metavar="DIR", help="write the tables to DIR")
    u.set_defaults(fn=cmd_units)
    d = sub.add_parser("demo", help="LUT GEMM / block-scaled matmul demo with throughput")
    d.add_argument("--size", type=int, default=512)
    d.set_defaults(fn=cmd_demo)
    sub.add_parser("config", help="print build and CPU configuration").set_defaults(
        fn=lambda a: (__import__("lutcore").show_config(), 0)[1])
    args = p.parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, OSError) as e:
        print(f"lutcore {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
