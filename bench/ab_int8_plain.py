"""The exact int8 GEMM 1024^3 on plain numpy arrays beside torch._int_mm, alternating in one
process (BENCHMARKS.md, "Exact int8 GEMM on plain arrays").

    python bench/ab_int8_plain.py [--threads 2] [--rounds 7] [--n 1024]

    row                  call
    lutcore rows         lut_gemm(a, b, out=)             B's VNNI form built from B's rows in the call
    lutcore panels       pack_panels(b) + gemm_exact      the call before: B packed to panels, then converted
    lutcore packed B     lut_gemm(a, pack_b(b), out=)     B's form made once (a weight)
    torch._int_mm        torch._int_mm(a, b)              oneDNN

lutcore is imported before torch, so torch's libgomp spins briefly after its calls
(lutcore/_spin.py); with its default spin the lutcore rows that follow a torch call run on
one core (the --torch-spin-default flag shows it: it sets GOMP_SPINCOUNT back to libgomp's
default before anything loads).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
if "--torch-spin-default" in sys.argv:
    sys.argv.remove("--torch-spin-default")
    os.environ["GOMP_SPINCOUNT"] = "300000"           # libgomp's own default (OMP_WAIT_POLICY unset)

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
from lutbench import ab_parser, alternate, cpu_name, torch, use_threads  # noqa: E402
from lutcore import _simd, _workspace  # noqa: E402
from lutcore._native import gemm as _g  # noqa: E402
from lutcore.ops.gemm import pack_panels  # noqa: E402


def main():
    ap = ab_parser(rounds=7, calls=None)
    ap.add_argument("--n", type=int, default=1024)
    A = ap.parse_args()
    use_threads(A.threads)
    n, t = A.n, A.threads
    rng = np.random.default_rng(20261206)
    a = rng.integers(-128, 128, (n, n), dtype=np.int8)
    b = rng.integers(-128, 128, (n, n), dtype=np.int8)
    out = np.empty((n, n), np.int32)
    bp = lutcore.pack_b(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    a16 = np.empty(-(-n // _g.MR) * _g.MR * (n + n % 2), np.int16)
    isa = _simd.isa()

    def panels():
        p, Kp = pack_panels(b, n, n + n % 2, t, out=_workspace.scratch("bpan", -(-n // _g.NR) * _g.NR * (n + n % 2),
                                                                        np.int8))
        _g.gemm_exact(out, a, p, Kp, a16, isa, t)

    want = torch._int_mm(ta, tb).numpy()
    rows = [("lutcore rows", lambda: lutcore.lut_gemm(a, b, threads=t, out=out)),
            ("lutcore panels", panels),
            ("lutcore packed B", lambda: lutcore.lut_gemm(a, bp, threads=t, out=out)),
            ("torch._int_mm", lambda: torch._int_mm(ta, tb))]
    for name, f in rows[:3]:
        out.fill(0)
        f()
        assert np.array_equal(out, want), name
    res = alternate([f for _, f in rows], A.rounds)
    print(f"CPU: {cpu_name()}; SIMD {lutcore.get_simd()}; {t} threads; GOMP_SPINCOUNT="
          f"{os.environ.get('GOMP_SPINCOUNT')}; load {os.getloadavg()[0]:.2f}")
    print(f"| {n}^3 exact int8 | min (ms) | median (ms) | torch / row (median) |\n|---|--:|--:|--:|")
    tm = res[-1][1]
    for (name, _), (mn, md) in zip(rows, res):
        print(f"| {name} | {mn * 1e3:.3f} | {md * 1e3:.3f} | {tm / md:.3f}x |")


if __name__ == "__main__":
    main()
