"""Before/after A/B of a rebuild of the native core (issue 26: the C tree moved, same bits,
no slowdown): the GEMM (exact table, any table), sgemm (ops.matmul), the selective scan
and AdamW, each timed in the BEFORE tree and the AFTER tree, round by round.

Two builds of lutcore cannot share one process (their extension modules have the same
names), so the script runs one long-lived worker process per tree and drives them in
lockstep: a round times case X in A, then in B (the order flips every round), while the
other worker waits idle -- both see the same machine within seconds of each other.
Every worker builds the same inputs from one seed and returns a digest of its results, so
the script also checks that the two builds give the same bits.

    case                  call (2 threads)                                  size
    gemm exact            lut_gemm(a, pack_b(b), out=)                      1024x1024x1024
    gemm table            lut_gemm(a, b, units=mitchell(), out=)            256x1024x256
    sgemm                 ops.matmul(a, b, out=)                            1024x1024x1024
    scan fwd              ops.selective_scan(u, delta, A, B, C, D, z, bias) 2x512x1536x16
    AdamW wd 0.01         train.AdamW({p}, weight_decay=.01).step({g})     10M float32

Usage: python bench/ab_redesign.py BEFORE_DIR AFTER_DIR [--rounds 7] [--calls 5] [--threads 2]
(each DIR is a checkout whose lutcore/_native holds its build). Prints a markdown table:
min over rounds of best-of-calls (ms) and after/before.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

CASES = ["gemm exact", "gemm table", "sgemm", "scan fwd", "AdamW wd 0.01"]

WORKER = r"""
import hashlib, json, sys, time
import numpy as np
import lutcore
from lutcore import ops
from lutcore.units import approx
from lutcore.train import AdamW

lutcore.set_num_threads(int(sys.argv[1]))
rng = np.random.default_rng(20261202)
i8 = lambda *s: rng.integers(-128, 128, size=s, dtype=np.int8)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)

def gemm_exact():
    a, b = i8(1024, 1024), i8(1024, 1024)
    bp, out = lutcore.pack_b(b), np.empty((1024, 1024), np.int32)
    return lambda: lutcore.lut_gemm(a, bp, out=out), lambda: out

def gemm_table():
    a, b, u = i8(256, 1024), i8(1024, 256), approx.mitchell()
    out = np.empty((256, 256), np.int32)
    return lambda: lutcore.lut_gemm(a, b, units=u, out=out), lambda: out

def sgemm():
    a, b = f32(1024, 1024), f32(1024, 1024)
    out = np.empty((1024, 1024), np.float32)
    return lambda: ops.matmul(a, b, out=out), lambda: out

def scan():
    bt, L, D, N = 2, 512, 1536, 16
    u, z = f32(bt, L, D), f32(bt, L, D)
    delta = (0.1 * f32(bt, L, D)).astype(np.float32)
    A = -np.tile(np.arange(1, N + 1, dtype=np.float32), (D, 1))
    B, C = f32(bt, L, N), f32(bt, L, N)
    Dv, bias = np.ones(D, np.float32), np.full(D, -3.0, np.float32)
    res = {}
    def run():
        res["y"] = ops.selective_scan(u, delta, A, B, C, Dv, z, bias, True, "simplified")
    return run, lambda: res["y"]

def adamw():
    p, g = f32(10_000_000), (1e-3 * f32(10_000_000)).astype(np.float32)
    opt = AdamW({"p": p}, lr=1e-3, weight_decay=0.01)
    return lambda: opt.step({"p": g}), lambda: p

made = {name: fn() for name, fn in zip(%(cases)r, [gemm_exact, gemm_table, sgemm, scan, adamw])}
for line in sys.stdin:
    cmd = json.loads(line)
    run, result = made[cmd["case"]]
    best = float("inf")
    for _ in range(cmd["calls"]):
        t = time.perf_counter(); run(); best = min(best, time.perf_counter() - t)
    r = np.ascontiguousarray(result())
    print(json.dumps({"s": best, "digest": hashlib.sha256(r.view(np.uint8)).hexdigest()[:16]}), flush=True)
"""


def start(tree, threads):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    code = WORKER % {"cases": CASES}
    p = subprocess.Popen([sys.executable, "-c", code, str(threads)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env, cwd=os.path.abspath(tree))
    return p


def ask(p, case, calls):
    p.stdin.write(json.dumps({"case": case, "calls": calls}) + "\n")
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"ab_redesign: a worker died (exit {p.wait()}) on case {case!r}")
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    workers = {"before": start(args.before, args.threads), "after": start(args.after, args.threads)}
    best = {(w, c): float("inf") for w in workers for c in CASES}
    digests = {}
    try:
        for r in range(args.rounds):
            for c in CASES:
                order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
                for w in order:
                    got = ask(workers[w], c, args.calls)
                    best[w, c] = min(best[w, c], got["s"])
                    digests.setdefault(c, {})[w] = got["digest"]
    finally:
        for p in workers.values():
            p.stdin.close()
            p.wait()
    print(f"| case | before (ms) | after (ms) | after / before | same bits |")
    print("|---|--:|--:|--:|:-:|")
    for c in CASES:
        b, a = best["before", c] * 1e3, best["after", c] * 1e3
        same = "yes" if digests[c]["before"] == digests[c]["after"] else "**NO**"
        print(f"| {c} | {b:.2f} | {a:.2f} | {a / b:.3f} | {same} |")


if __name__ == "__main__":
    main()
