"""Issue 28's rows side by side in one process, alternating, 2 threads (the numbers in
BENCHMARKS.md, "Issue 28 on ...").

    python bench/issue28.py [--rounds 5] [--busy] [--only gemm,table,conv1,mamba]

    case       lutcore call                                  peer
    gemm       lut_gemm(a, pack_b(b), out=) 1024^3 exact     torch._int_mm (oneDNN VNNI)
    table      lut_gemm(a, b, units=mitchell) 256x1024x256   (GOP/s: 2*M*N*K / s)
    conv1      ApproxConv2d(3 -> 64, 3x3 pad 1), exact table  torch conv2d float32, batch 8 and 1
    mamba      Mamba1Block fwd+bwd 2x512x768                 transformers MambaBlock (mambapy scan)

--busy starts one spinning python process (a busy second core, as when another user builds)
for the run and stops it after.  The CPU is read from /proc/cpuinfo at run time.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
from lutbench import THREADS, alternate, cpu_name, torch  # noqa: E402


def gemm_cases():
    rng = np.random.default_rng(20261203)
    a = rng.integers(-128, 128, (1024, 1024), dtype=np.int8)
    b = rng.integers(-128, 128, (1024, 1024), dtype=np.int8)
    bp, out = lutcore.pack_b(b), np.empty((1024, 1024), np.int32)
    ta, tb_ = torch.from_numpy(a), torch.from_numpy(b)
    lutcore.lut_gemm(a, bp, out=out)
    assert np.array_equal(torch._int_mm(ta, tb_).numpy(), out)
    return [("exact lut_gemm 1024^3", lambda: lutcore.lut_gemm(a, bp, out=out)),
            ("torch._int_mm 1024^3", lambda: torch._int_mm(ta, tb_))], 2 * 1024 ** 3


def table_cases():
    from lutcore.units import approx
    rng = np.random.default_rng(20261203)
    a = rng.integers(-128, 128, (256, 1024), dtype=np.int8)
    b = rng.integers(-128, 128, (1024, 256), dtype=np.int8)
    u, out = approx.mitchell(), np.empty((256, 256), np.int32)
    return [("Mitchell lut_gemm 256x1024x256", lambda: lutcore.lut_gemm(a, b, units=u, out=out))], 2 * 256 * 1024 * 256


def _im2col(layer, x):
    os.environ["LUTCORE_CONV_IM2COL"] = "1"      # lutcore.torch's test-only switch to the im2col + GEMM path
    try:
        return layer(x)
    finally:
        del os.environ["LUTCORE_CONV_IM2COL"]


def conv1_cases():
    import lutcore.torch as lt
    import torch.nn.functional as F
    out = []
    for B in (8, 1):
        g = torch.Generator().manual_seed(5)
        flt = torch.nn.Conv2d(3, 64, 3, padding=1).requires_grad_(False)
        x = torch.randn(B, 3, 32, 32, generator=g)
        layer = lt.approximate(flt, "exact").requires_grad_(False)
        out.append((f"first conv exact table b{B}", lambda layer=layer, x=x: layer(x)))
        out.append((f"first conv torch float b{B}", lambda flt=flt, x=x: F.conv2d(x, flt.weight, flt.bias, padding=1)))
        out.append((f"first conv exact table b{B} (direct)", lambda layer=layer, x=x: layer(x)))
        out.append((f"first conv exact table b{B} (im2col forced)", lambda layer=layer, x=x: _im2col(layer, x)))
    return out, None


def mamba_cases():
    import test_bench_mamba as tm
    c = tm.block_inputs(np.random.default_rng(tm.SEED), (2, 512, 768))
    return [("Mamba1Block fwd+bwd lutcore", tm.block_fb_lutcore(c)),
            ("Mamba1Block fwd+bwd transformers+mambapy", tm.block_fb_hf(c))], None


GROUPS = {"gemm": gemm_cases, "table": table_cases, "conv1": conv1_cases, "mamba": mamba_cases}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--busy", action="store_true")
    p.add_argument("--only", default=",".join(GROUPS))
    a = p.parse_args(argv)
    lutcore.set_num_threads(THREADS)
    torch.set_num_threads(THREADS)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.busy else None
    try:
        print(f"# {cpu_name()}; {THREADS} threads; SIMD {lutcore.get_simd()}; busy core: {a.busy}", flush=True)
        for name in a.only.split(","):
            cases, ops = GROUPS[name]()
            with torch.no_grad() if name == "conv1" else _null():
                for _, f in cases:
                    f()
                res = alternate([f for _, f in cases], a.rounds)
            for (label, _), (mn, med) in zip(cases, res):
                rate = f"  {ops / mn / 1e9:7.1f} GOP/s (median {ops / med / 1e9:.1f})" if ops else ""
                print(f"{label:44s} min {mn * 1e3:9.3f} ms  median {med * 1e3:9.3f} ms{rate}", flush=True)
            if len(cases) >= 2:
                for i in range(0, len(cases) - 1, 2):
                    print(f"  ratio {cases[i + 1][0]} / {cases[i][0]}: min {res[i + 1][0] / res[i][0]:.3f}  "
                          f"median {res[i + 1][1] / res[i][1]:.3f}", flush=True)
    finally:
        if spin is not None:
            spin.kill()
            spin.wait()
    return 0


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    sys.exit(main())
