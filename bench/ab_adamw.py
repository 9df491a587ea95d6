"""lutcore's AdamW step beside torch's fused AdamW, weight decay 0 and 0.01, alternating in one
process (issue 28's AdamW row; the numbers in BENCHMARKS.md, "AdamW weight decay (issue 28)").

    python bench/ab_adamw.py [--rounds 9] [--budget 0.3] [--tree DIR] [--no-parts]

    row                  call (2 threads, 10M float32: 1 tensor x 10M and 100 x 100k)
    lutcore step         train.AdamW(params, lr, betas, eps, weight_decay).step(grads)
    torch fused          torch.optim.AdamW(params, ..., fused=True).step()   (.grad set once)
    lutcore update       the step's native update pass alone (_native.optim.adamw_multi)
    lutcore norm         the step's gradient-norm pass alone (_native.optim.sumsq_multi)

The step is the norm pass (the whole-step NaN guard and clipping need every gradient before
the first write: one read of g, 4 bytes a parameter), then the update pass (read p, g, m, v,
write p, m, v: 28 bytes); torch's fused step is one pass of 28 bytes.  Before timing, one step
of each from the same state is checked against a float64 numpy step.  Each row's calls are
timed one by one for ``--budget`` s per round, the rows in turn, round after round; min and
median over all calls.  ``--tree DIR`` imports lutcore from another checkout (a "before"
build), default this script's own tree.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--budget", type=float, default=0.3)
    p.add_argument("--tree", default=str(HERE.parent))
    p.add_argument("--no-parts", action="store_true", help="time only the two steps")
    return p.parse_args(argv)


A = _args(sys.argv[1:])
sys.path[:0] = [str(Path(A.tree).resolve()), str(HERE)]

import numpy as np  # noqa: E402

import lutcore  # noqa: E402
from lutbench import THREADS, alternate, cpu_name, rel_err, torch  # noqa: E402
from lutcore import _simd  # noqa: E402
from lutcore._native import optim as _o  # noqa: E402
from lutcore.train import AdamW  # noqa: E402

SEED = 20261203
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
SHAPES = [(1, 10_000_000), (100, 100_000)]                       # tensors x elements each
TOL = 1e-6                                                       # norm-wise vs the float64 step


def want_step(p, g, wd):
    """One float64 AdamW step from zero moments (t = 1)."""
    p64, g64 = p.astype(np.float64), g.astype(np.float64)
    m, v = (1 - BETAS[0]) * g64, (1 - BETAS[1]) * g64 * g64
    return p64 * (1 - LR * wd) - LR * (m / (1 - BETAS[0])) / (np.sqrt(v / (1 - BETAS[1])) + EPS)


def cases(shape, wd, parts):
    T, E = shape
    rng = np.random.default_rng(SEED)
    p0 = [rng.standard_normal(E, dtype=np.float32) for _ in range(T)]
    g = [rng.standard_normal(E, dtype=np.float32) * np.float32(1e-2) for _ in range(T)]
    want = [want_step(p, q, wd) for p, q in zip(p0, g)]
    names = [f"p{i:03d}" for i in range(T)]

    params, grads = {n: p.copy() for n, p in zip(names, p0)}, dict(zip(names, g))
    opt = AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=wd)
    opt.step(grads)                                              # creates the moments (not timed)
    err = max(rel_err(params[n], w) for n, w in zip(names, want))
    assert err < TOL, f"lutcore AdamW wd {wd} vs float64: {err:.2e}"

    tp = [torch.from_numpy(p.copy()).requires_grad_(True) for p in p0]
    for p, q in zip(tp, g):
        p.grad = torch.from_numpy(q)
    topt = torch.optim.AdamW(tp, lr=LR, betas=BETAS, eps=EPS, weight_decay=wd, fused=True)
    topt.step()
    err = max(rel_err(p.detach().numpy(), w) for p, w in zip(tp, want))
    assert err < TOL, f"torch fused AdamW wd {wd} vs float64: {err:.2e}"

    rows = [("lutcore step", lambda: opt.step(grads)), ("torch fused", topt.step)]
    if parts:
        ps, gs = [params[n] for n in names], [grads[n] for n in names]
        ms, vs = [opt.m[n] for n in names], [opt.v[n] for n in names]
        isa, b1, b2 = _simd.isa(), BETAS[0], BETAS[1]
        rows.append(("lutcore update", lambda: _o.adamw_multi(ps, gs, ms, vs, b1, b2, EPS, LR, wd, 0.0,
                                                              1 - b1 ** 2, 1 - b2 ** 2, 1.0, isa, THREADS)))
        rows.append(("lutcore norm", lambda: _o.sumsq_multi(gs, isa, THREADS)))
    return rows


def main():
    lutcore.set_num_threads(THREADS)
    torch.set_num_threads(THREADS)
    print(f"# {cpu_name()}; {THREADS} threads; SIMD {lutcore.get_simd()}; lutcore from {Path(lutcore.__file__).parent}")
    print(f"# {A.rounds} rounds x {A.budget} s a row; min and median (ms) over all calls; "
          "ratio = torch / lutcore (> 1: lutcore faster)")
    print("| shape | wd | row | min (ms) | median (ms) | GB/s (min, 28 B/param) |")
    print("|---|--:|---|--:|--:|--:|")
    summary = []
    for shape in SHAPES:
        for wd in (0.0, 0.01):
            rows = cases(shape, wd, not A.no_parts)
            for _, f in rows:
                f()
            res = alternate([f for _, f in rows], A.rounds, A.budget)
            n = shape[0] * shape[1]
            for (label, _), (mn, med) in zip(rows, res):
                nbytes = 4 * n if label == "lutcore norm" else 28 * n
                print(f"| {shape[0]}x{shape[1]} | {wd:g} | {label} | {mn * 1e3:.2f} | {med * 1e3:.2f} | "
                      f"{nbytes / mn / 1e9:.1f} |", flush=True)
            summary.append((shape, wd, res[1][0] / res[0][0], res[1][1] / res[0][1]))
            del rows
    print("\n| shape | wd | torch / lutcore (min) | (median) |\n|---|--:|--:|--:|")
    for shape, wd, rmin, rmed in summary:
        print(f"| {shape[0]}x{shape[1]} | {wd:g} | {rmin:.3f}x | {rmed:.3f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
