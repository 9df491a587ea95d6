"""Before/after A/B of a rebuild of the native core (the C tree moved, the Python rooms
moved: same bits, no slowdown): the kernels (GEMM exact and any table, sgemm, the selective scan,
AdamW) and the paths through the Python rooms (a Mamba and a GPT train step, lutcore.torch's
Linear and Conv2d, the llama decode), each timed in the BEFORE tree and the AFTER tree, round
by round.

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
    Mamba train step      loss_and_grads + AdamW.step, exact units          d_model 256, 2 layers, 4 x 128
    GPT train step        loss_and_grads + AdamW.step, float                dim 256, 2 layers, 8 x 256
    torch Linear mitchell lutcore.torch.approximate(nn.Linear), no_grad     16 x 768 -> 3072
    torch Conv2d exact    lutcore.torch.approximate(nn.Conv2d), no_grad     8 x 64 x 32 x 32, 3x3, 64
    llama decode          Pipeline.generate(prompt, 16), exact units        llama 512 x 4 layers, 128 prompt

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

CASES = ["gemm exact", "gemm table", "sgemm", "scan fwd", "AdamW wd 0.01", "Mamba train step", "GPT train step",
         "torch Linear mitchell", "torch Conv2d exact", "llama decode 16 tokens"]

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

def mamba_step():
    from lutcore.models import MambaConfig, MambaLM
    m = MambaLM(MambaConfig(d_model=256, n_layer=2, vocab_size=256, d_state=16, seed=1), units="exact")
    opt = AdamW(m.parameters(), lr=1e-3)
    ids = rng.integers(0, 256, (4, 129)).astype(np.int64)
    def run():
        loss, g = m.loss_and_grads(ids[:, :-1], ids[:, 1:])
        opt.step(g)
    return run, lambda: np.concatenate([v.ravel() for v in m.parameters().values()])

def gpt_step():
    from lutcore.models.gpt import GPT, GPTConfig
    m = GPT(GPTConfig(vocab=256, dim=256, context=256, layers=2, heads=4, seed=1))
    opt = AdamW(m.parameters(), lr=1e-3)
    ids = rng.integers(0, 256, (8, 257)).astype(np.int64)
    def run():
        loss, g = m.loss_and_grads(ids[:, :-1], ids[:, 1:])
        opt.step(g)
    return run, lambda: np.concatenate([v.ravel() for v in m.parameters().values()])

def torch_linear():
    import torch
    from lutcore.torch import approximate
    torch.manual_seed(0)
    lin = approximate(torch.nn.Linear(768, 3072), "mitchell")
    x = torch.randn(16, 768)
    res = {}
    def run():
        with torch.no_grad():
            res["y"] = lin(x)
    return run, lambda: res["y"].numpy()

def torch_conv():
    import torch
    from lutcore.torch import approximate
    torch.manual_seed(0)
    conv = approximate(torch.nn.Conv2d(64, 64, 3, padding=1), "exact")
    x = torch.randn(8, 64, 32, 32)
    res = {}
    def run():
        with torch.no_grad():
            res["y"] = conv(x)
    return run, lambda: res["y"].numpy()

def decode():
    import tempfile
    import torch
    import transformers as tf
    from lutcore.pipeline import Pipeline
    cfg = tf.LlamaConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1408, vocab_size=4096, max_position_embeddings=512,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    d = tempfile.mkdtemp()
    tf.LlamaForCausalLM(cfg).save_pretrained(d)
    pipe = Pipeline.from_pretrained(d, units="exact", threads=int(sys.argv[1]))
    ids = rng.integers(0, 4096, 128).astype(np.int64)
    res = {}
    def run():
        res["t"] = pipe.generate(ids, 16)
    return run, lambda: np.asarray(res["t"], np.int64)

made = {name: fn() for name, fn in zip(%(cases)r, [gemm_exact, gemm_table, sgemm, scan, adamw, mamba_step,
                                                  gpt_step, torch_linear, torch_conv, decode])}
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
