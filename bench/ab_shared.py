"""Each parallel kernel family on a machine that is not idle: lutcore at 1 and N threads and
torch at N threads, idle and beside a process spinning on one core, alternated in ONE process.

    python bench/ab_shared.py [--rounds 3] [--budget 0.3] [--threads N] [--families a,b,...]
                              [--json FILE]

Cases: bench/shared_cases.py (one builder per family; every output checked before timing).
A round runs two blocks, idle then busy; busy = ``python -c "while True: pass"`` started 0.2 s
before its block and killed after it (lutbench.spinning).  In a block every case runs, in turn,
lutcore with 1 thread, lutcore with N threads (N = --threads, default os.cpu_count()) and torch
with N threads (torch.set_num_threads(N)), each called back to back for --budget s; every
call's time is kept (lutbench.call_times).  Right after the last N-thread call of lutcore and of
torch: "CPU after", this process's CPU time (time.process_time, every thread) during a 200 ms
sleep — what the idle workers burn spinning (lutcore's team spins ~0.1 ms, then sleeps).

Table: times in ms, best / median over every call of every round.
    Nt/1t busy   the N-thread call's rate over the 1-thread call's, both beside the spinner
                 (t 1t busy / t Nt busy, from the medians; the issue's criterion: >= 0.9)
    torch/lutcore   torch's N-thread time over lutcore's (medians; > 1: lutcore faster)
    CPU after    ms of CPU in the 200 ms after the last call, median over rounds, idle / busy
Also: the share of the machine's CPUs other processes used during the idle blocks and the
busy ones (the spinner included), from /proc/stat.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]


import lutcore  # noqa: E402
import shared_cases  # noqa: E402
from lutbench import (call_times, cpu_after, cpu_counters, cpu_name, other_cpu_share, spinning, torch,  # noqa: E402
                      use_threads)

IMPLS = ("lutcore 1t", "lutcore Nt", "torch Nt")
LOADS = ("idle", "busy")
CRITERION = 0.9
AFTER_SLEEP = 0.2


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=float, default=0.3, help="seconds each implementation is called a block")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="N (default: os.cpu_count())")
    p.add_argument("--families", default="", help=f"comma-separated subset of {','.join(shared_cases.FAMILIES)}")
    p.add_argument("--json", help="write every call's time here")
    a = p.parse_args(argv)
    bad = [n for n in a.families.split(",") if n.strip() and n.strip() not in shared_cases.FAMILIES]
    if bad:
        p.error(f"--families: unknown {bad}; known: {','.join(shared_cases.FAMILIES)}")
    if a.threads < 1 or a.rounds < 1:
        p.error("--threads and --rounds must be >= 1")
    return a


def _block(cases, load, N, budget, times, after):
    """One block: every case's three implementations in turn; appends to times / after."""
    for key, c in cases:
        fns = {"lutcore 1t": lambda c=c: c.lutcore(1), "lutcore Nt": lambda c=c: c.lutcore(N),
               "torch Nt": c.torch}
        for impl in IMPLS:
            f = fns[impl]
            if f is None:
                continue
            times[(key, impl, load)] += call_times(f, budget)
            if impl != "lutcore 1t":
                after[(key, impl, load)].append(cpu_after(AFTER_SLEEP))


def _ms(t):
    return "-" if not t else f"{min(t) * 1e3:#.3g} / {statistics.median(t) * 1e3:#.3g}"


def _med(t):
    return statistics.median(t) if t else None


def _ratio(num, den, mark=False):
    if num is None or den is None:
        return "-"
    r = num / den
    return f"{r:.2f}" + ((" ✓" if r >= CRITERION else " ✗") if mark else "")


def _after(after, key, impl):
    vals = [after.get((key, impl, load)) for load in LOADS]
    if not any(vals):
        return "-"
    return " / ".join("-" if not v else f"{statistics.median(v) * 1e3:.2f}" for v in vals)


def main(argv=None):
    a = _args(argv if argv is not None else sys.argv[1:])
    N = a.threads
    if torch is None:
        raise SystemExit("torch is not importable: the peers need it")
    names = [n.strip() for n in a.families.split(",") if n.strip()] or list(shared_cases.FAMILIES)
    use_threads(N)
    lutcore.set_audit(0)
    print(f"# command: python {' '.join([Path(sys.argv[0]).name] + list(argv if argv is not None else sys.argv[1:]))}")
    print(f"# {cpu_name()}; {os.cpu_count()} CPUs; N = {N} threads; lutcore SIMD {lutcore.get_simd()}; "
          f"lutcore from {Path(lutcore.__file__).parent}; torch {torch.__version__}")
    print(f"# {a.rounds} rounds x (idle, busy: one core spinning) x {a.budget} s per implementation; "
          f"families {','.join(names)}", flush=True)
    t0 = time.perf_counter()
    built = shared_cases.build(names, N)                  # validated: outputs checked, 1t and Nt bits
    cases = [((fam, i), c) for fam, cs in built for i, c in enumerate(cs)]
    print(f"# {len(cases)} cases built and checked in {time.perf_counter() - t0:.1f} s", flush=True)
    for _, c in cases:                                    # warm up (packing, scratch, lazy pools)
        c.lutcore(1), c.lutcore(N)
        if c.torch is not None:
            c.torch()
    times = {(k, impl, load): [] for k, _ in cases for impl in IMPLS for load in LOADS}
    after = {(k, impl, load): [] for k, _ in cases for impl in IMPLS[1:] for load in LOADS}
    share = {load: [] for load in LOADS}
    for r in range(a.rounds):
        for load in LOADS:
            t1 = time.perf_counter()
            if load == "busy":
                with spinning():
                    c0 = cpu_counters()
                    _block(cases, load, N, a.budget, times, after)
                    c1 = cpu_counters()
            else:
                c0 = cpu_counters()
                _block(cases, load, N, a.budget, times, after)
                c1 = cpu_counters()
            s = other_cpu_share(c0, c1)
            if s is not None:
                share[load].append(s)
            print(f"# round {r + 1} {load}: {time.perf_counter() - t1:.1f} s"
                  + (f", other processes used {100 * s:.0f}% of the CPUs" if s is not None else ""), flush=True)

    print()
    print(f"| family | case | shape | lutcore 1t idle | lutcore 1t busy | lutcore {N}t idle | lutcore {N}t busy | "
          f"{N}t/1t rate, busy (>= {CRITERION}) | torch peer | torch {N}t idle | torch {N}t busy | "
          f"torch/lutcore {N}t idle | torch/lutcore {N}t busy | CPU after ms, lutcore {N}t (idle / busy) | "
          f"CPU after ms, torch {N}t (idle / busy) |")
    print("|---|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|")
    for key, c in cases:
        T = {(impl, load): times[(key, impl, load)] for impl in IMPLS for load in LOADS}
        print(f"| {key[0]} | {c.name} | {c.shape} | {_ms(T['lutcore 1t', 'idle'])} | {_ms(T['lutcore 1t', 'busy'])} | "
              f"{_ms(T['lutcore Nt', 'idle'])} | {_ms(T['lutcore Nt', 'busy'])} | "
              f"{_ratio(_med(T['lutcore 1t', 'busy']), _med(T['lutcore Nt', 'busy']), mark=True)} | "
              f"{c.torch_label} | {_ms(T['torch Nt', 'idle'])} | {_ms(T['torch Nt', 'busy'])} | "
              f"{_ratio(_med(T['torch Nt', 'idle']), _med(T['lutcore Nt', 'idle']))} | "
              f"{_ratio(_med(T['torch Nt', 'busy']), _med(T['lutcore Nt', 'busy']))} | "
              f"{_after(after, key, 'lutcore Nt')} | {_after(after, key, 'torch Nt')} |")
    print()
    print("times: ms, best / median over every call of every round; ratios from the medians; "
          f"CPU after: this process's CPU ms in the {int(AFTER_SLEEP * 1e3)} ms after the last call "
          "(median over rounds)")
    print("other processes' share of the CPUs: " + ", ".join(
        f"{load} {100 * statistics.median(v):.0f}%" for load, v in share.items() if v)
        + " (busy: the spinner included; 100% / CPUs = one core)")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "command": sys.argv, "cpu": cpu_name(), "threads": N, "rounds": a.rounds, "budget": a.budget,
            "other_cpu_share": share,
            "cases": [{"family": k[0], "name": c.name, "shape": c.shape, "torch": c.torch_label,
                       "times": {f"{impl} {load}": times[(k, impl, load)] for impl in IMPLS for load in LOADS},
                       "cpu_after": {f"{impl} {load}": after[(k, impl, load)] for impl in IMPLS[1:] for load in LOADS}}
                      for k, c in cases]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
