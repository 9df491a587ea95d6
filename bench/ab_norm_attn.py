"""Same-process A/B of the bodies added for issue 20 on branch i21n: the norms (RMSNorm,
LayerNorm, forward and forward+backward), decode attention (scores + values of one
token against a KV cache) and the one-row GEMV against packed panels (ops.matmul with
M = 1, the decode layer's float linears).  Each path (set_simd("avx512") / "avx2" /
"generic") is alternated round by round in ONE process on the same float32 inputs,
outputs preallocated, and checked bit for bit against the others.

    case                  shape
    layernorm fwd, f+b    rows x C: 2048 x 256 (the GPT bench's), 2048 x 768
    rmsnorm fwd, f+b      2048 x 768, 512 x 2048
    attention             g query heads x S cached keys x head dim: 1 x 1024 x 64, 4 x 1024 x 128,
                          8 x 4096 x 64
    gemv                  1 x K x N (packed): 1 x 768 x 3072, 1 x 1024 x 1024, 1 x 4096 x 4096

Prints a table: min ms over rounds of best-of-`calls`, and the ratios to avx512.
--gpt instead: the issue's target, the GPT float train step (bench/test_bench_gpt.py's
8 x 256 x 256 model: loss_and_grads + AdamW.step) on each path beside its torch peer
(the same weights, fused AdamW), alternated in one process.
--decode instead: the pipeline decode of bench/test_bench_pipeline.py (its llama-style
model and prompt, 1 stage float32: 16 greedy tokens after a 128-token prefill, the prefill
untimed) in tokens/s on each path.
Usage: python bench/ab_norm_attn.py [--threads 2] [--rounds 5] [--calls 7] [--gpt | --decode]
"""
import time

import numpy as np

import lutcore
from lutcore import _simd
from lutcore._native import attn as _at, norm as _d
from lutcore.ops.matmul import matmul, pack_matrix
from lutbench import ab_parser, best_of, use_threads

PATHS = ("avx512", "avx2", "generic")


def norm_cases(rng, nt):
    for kind, R, C in (("layernorm", 2048, 256), ("layernorm", 2048, 768), ("rmsnorm", 2048, 768),
                       ("rmsnorm", 512, 2048)):
        x = rng.standard_normal((R, C)).astype(np.float32)
        dy = rng.standard_normal((R, C)).astype(np.float32)
        w, b = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
        y, xh, dx = np.empty_like(x), np.empty_like(x), np.empty_like(x)
        rs, dw, db = np.empty(R, np.float32), np.zeros(C, np.float32), np.zeros(C, np.float32)
        if kind == "layernorm":
            def fwd():
                _d.layernorm_rows(y, xh, rs, x, w, b, 1e-5, _simd.isa(), nt)

            def fb():
                fwd()
                _d.layernorm_rows_backward(dx, dw, db, dy, xh, w, rs, _simd.isa(), nt)
        else:
            def fwd():
                _d.rmsnorm_rows(y, x, w, 1e-5, rs, _simd.isa(), nt)

            def fb():
                fwd()
                _d.rmsnorm_rows_backward(dx, dw, dy, x, w, rs, _simd.isa(), nt)
        yield f"{kind} fwd", f"{R}x{C}", fwd, lambda: y.copy()
        yield f"{kind} fwd+bwd", f"{R}x{C}", fb, lambda: dx.copy()


def attn_cases(rng, nt):
    for g, S, hd in ((1, 1024, 64), (4, 1024, 128), (8, 4096, 64)):
        q = rng.standard_normal((g, hd)).astype(np.float32)
        K = rng.standard_normal((S, hd)).astype(np.float32)
        V = rng.standard_normal((S, hd)).astype(np.float32)
        p = rng.random((g, S)).astype(np.float32)
        box = {}

        def run():
            box["s"] = _at.attn_scores(q, K, _simd.isa())
            box["v"] = _at.attn_values(p, V, _simd.isa())
        yield "attention scores+values", f"{g}x{S}x{hd}", run, lambda: np.concatenate([box["s"].ravel(),
                                                                                         box["v"].ravel()])


def gemv_cases(rng, nt):
    for K, N in ((768, 3072), (1024, 1024), (4096, 4096)):
        x = rng.standard_normal((1, K)).astype(np.float32)
        pb = pack_matrix(rng.standard_normal((K, N)).astype(np.float32))
        out = np.empty((1, N), np.float32)

        def run():
            matmul(x, pb, out=out, threads=nt)
        yield "gemv (packed)", f"1x{K}x{N}", run, lambda: out.copy()


def gpt(args):
    import sys
    from pathlib import Path

    import torch
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_bench_gpt import SHAPES, _cfg, _data, torch_gpt_loss

    from lutcore.models.gpt import GPT
    from lutcore.train import AdamW
    use_threads(args.threads)
    shape = SHAPES[0]
    cfg = _cfg(shape)
    m = GPT(cfg)
    opt = AdamW(m.parameters(), lr=1e-3)
    ids, tg = _data(shape)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in m.parameters().items()}
    topt = torch.optim.AdamW(list(tp.values()), lr=1e-3, fused=True)
    tids = torch.as_tensor(ids)

    def ours():
        _, g = m.loss_and_grads(ids, tg)
        opt.step(g, max_grad_norm=1.0)

    def theirs():
        topt.zero_grad(set_to_none=True)
        loss = torch_gpt_loss(tp, tids, tg, cfg)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(tp.values()), 1.0)
        topt.step()
    res = {p: [] for p in ("avx512", "avx2", "torch")}
    for _ in range(args.rounds):
        for path in ("avx512", "avx2"):
            lutcore.set_simd(path)
            ours()
            res[path].append(best_of(ours, args.calls))
        theirs()
        res["torch"].append(best_of(theirs, args.calls))
    z, v, t = (min(res[p]) * 1e3 for p in ("avx512", "avx2", "torch"))
    tok = shape[0] * shape[1]
    print("| GPT float train step | shape | threads | avx512 (ms) | avx2 (ms) | torch (ms) | avx512/torch | avx2/torch |"
          "\n|---|---|--:|--:|--:|--:|--:|--:|")
    print(f"| {tok / z * 1e3:.0f} tokens/s (avx512) | {shape[0]}x{shape[1]}x{shape[2]} | {args.threads} | {z:.1f} | "
          f"{v:.1f} | {t:.1f} | {t / z:.2f}x | {t / v:.2f}x |", flush=True)
    lutcore.set_simd(lutcore.available_simd()[-1])


def decode(args):
    import sys
    import tempfile
    from pathlib import Path

    import torch
    import transformers as tf
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_bench_pipeline as tb

    from lutcore.pipeline import Pipeline
    cfg = tf.LlamaConfig(hidden_size=tb.HIDDEN, num_hidden_layers=tb.LAYERS, num_attention_heads=tb.HEADS,
                         num_key_value_heads=tb.KV_HEADS, intermediate_size=tb.INTER, vocab_size=tb.VOCAB,
                         max_position_embeddings=max(256, tb.PREFILL + tb.DECODE + 8), tie_word_embeddings=False)
    torch.manual_seed(0)
    hm = tf.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():                       # the bench's weights
        gen = torch.Generator().manual_seed(1)
        for _, p in hm.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if p.ndim == 1 else r / np.sqrt(p.shape[1]))
    ids = np.random.default_rng(7).integers(0, tb.VOCAB, tb.PREFILL).astype(np.int64)
    with tempfile.TemporaryDirectory() as d:
        hm.save_pretrained(d)
        pipe = Pipeline.from_pretrained(d, splits=[tb.LAYERS], threads=args.threads)
    ring = pipe._ring
    res = {p: [] for p in PATHS[:2]}
    toks = {}
    for _ in range(args.rounds):
        for path in PATHS[:2]:
            lutcore.set_simd(path)
            t = []
            for _ in range(args.calls):
                first = tb._prefill(ring, ids)
                t0 = time.perf_counter()
                toks[path] = tb.generate(ring, first, len(ids), tb.DECODE)
                t.append(time.perf_counter() - t0)
            res[path].append(min(t))
    assert toks["avx512"] == toks["avx2"]
    z, v = (tb.DECODE / min(res[p]) for p in PATHS[:2])
    print(f"| pipeline decode {tb.DECODE} tokens after {tb.PREFILL} | {tb.SHAPE} | {args.threads} | "
          f"avx512 {z:.0f} tok/s | avx2 {v:.0f} tok/s | avx512/avx2 {z / v:.2f}x |", flush=True)
    pipe.close()
    lutcore.set_simd(lutcore.available_simd()[-1])


def main():
    ap = ab_parser(rounds=5, calls=7)
    ap.add_argument("--gpt", action="store_true")
    ap.add_argument("--decode", action="store_true")
    args = ap.parse_args()
    if args.gpt:
        return gpt(args)
    if args.decode:
        return decode(args)
    rng = np.random.default_rng(0)
    nt = args.threads
    print(f"| case | shape | threads | avx512 (ms) | avx2 (ms) | generic (ms) | avx2/avx512 | generic/avx512 |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for gen in (norm_cases, attn_cases, gemv_cases):
        for name, shape, fn, result in gen(rng, nt):
            res = {p: [] for p in PATHS}
            outs = {}
            for _ in range(args.rounds):
                for path in PATHS:
                    lutcore.set_simd(path)
                    fn()
                    res[path].append(best_of(fn, args.calls))
                    outs[path] = result()
            for path in PATHS[1:]:
                assert np.array_equal(outs[path].view(np.uint32), outs["avx512"].view(np.uint32)), (name, path)
            z, v, g = (min(res[p]) * 1e3 for p in PATHS)
            print(f"| {name} | {shape} | {nt} | {z:.3f} | {v:.3f} | {g:.3f} | {v / z:.2f}x | {g / z:.2f}x |",
                  flush=True)
    lutcore.set_simd(lutcore.available_simd()[-1])


if __name__ == "__main__":
    main()
