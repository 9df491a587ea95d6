"""Attention through the units against float attention (and llama.cpp), alternating in one
process; where the time goes.

    python bench/ab_attention.py [--depths 512 2048] [--rounds 3] [--calls 5] [--tokens 16]
                                 [--spin] [--llama-bench BIN --gguf FILE] [--threads 2]

    side                 what is timed (2 threads; best of --calls in a round)
    float attention      Pipeline.from_pretrained(dir, units={"*": "exact"}): the linear layers
                         through the exact units, q k^T and p v in float (decode: the fused native
                         decode layer)
    float attention,     the same with the fused decode layer off (the stage's ``_fusable``):
      layer by layer     decode through the Python layer loop, as units attention decodes
    units attention      units={"*": "exact", "*.qk": "exact", "*.pv": "exact"}: attention's
                         products through the exact units too (decode: layer by layer)
    llama.cpp            (--llama-bench, --gguf) llama-bench -p D (prefill) and -n tokens -d D
                         (decode at depth D), -r calls, on a GGUF of the same checkpoint

prefill: D tokens from an empty cache; decode: ``tokens`` greedy tokens after a D-token prefill
(the prefill untimed, once a round: each decode rewinds the caches to depth D).  A round runs
every side at every depth in turn.  ``--spin`` starts ``python -c "while True: pass"`` (one core
busy) for the run and stops it after.  Then the fastest of 3 profiled passes per depth: the
seconds spent inside attn_scores / attn_values (units) and inside the float attention matmuls
(float), as a share of the pass (the fused float decode has no Python seam: not shown).

The model is bench/test_bench_attention.py's (hidden 256, 4 layers, 4/2 heads, SwiGLU 688,
vocab 2048, random weights), saved once in ~/.cache/lutcore-bench/llama_attention with a
byte-fallback BPE tokenizer.json in the llama-2 layout (llama.cpp's converter reads it).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from lutbench import cpu_name  # noqa: E402
from test_bench_attention import (FLOAT_ATTN, UNITS_ATTN, VOCAB, decode, make_model, prefill,  # noqa: E402
                                  prompt_ids)

CACHE = Path.home() / ".cache" / "lutcore-bench" / "llama_attention"


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--depths", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=5, help="calls a side makes in a round (its best counts)")
    p.add_argument("--tokens", type=int, default=16, help="decoded tokens")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--spin", action="store_true", help="keep one core busy with a spinning process")
    p.add_argument("--llama-bench", help="llama.cpp's llama-bench binary")
    p.add_argument("--gguf", help="the GGUF of the checkpoint (--model-dir) for llama-bench")
    p.add_argument("--model-dir", default=str(CACHE), help="the checkpoint (made here when absent)")
    p.add_argument("--json", help="write every timing here")
    return p.parse_args(argv)


def llama2_tokenizer(path: Path) -> None:
    """A byte-fallback BPE tokenizer.json of VOCAB ids in the llama-2 layout (metaspace,
    <0xNN> byte pieces, a Sequence decoder), trained on Python's bundled documentation: the
    form llama.cpp's converter reads without sentencepiece (its LlamaHfVocab)."""
    import tokenizers
    from tokenizers import decoders, models, normalizers, trainers
    from lutcore.train.data import builtin_corpus
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    hf.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    text = builtin_corpus().encode("ascii", "ignore").decode()
    hf.train_from_iterator([text], trainer=trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                                               show_progress=False))
    assert hf.get_vocab_size() <= VOCAB
    hf.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "add_bos_token": True, "add_eos_token": False}))


def checkpoint(path: Path) -> Path:
    if not (path / "config.json").exists():
        path.mkdir(parents=True, exist_ok=True)
        make_model(path, 4096)
        llama2_tokenizer(path)
    return path


# ---------------------------------------------------------------- timing
def best(fn, calls):
    t = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def lutcore_side(ring, ids, tokens, calls):
    """(prefill tok/s, decode tok/s): each the best of ``calls``.  The decodes share one prefill:
    before each, the caches are rewound to the prompt's end (a KV cache keeps the rows before
    it; the decode overwrites the rest), as llama-bench -d decodes at a depth."""
    pre = best(lambda: prefill(ring, ids), calls)
    first = prefill(ring, ids)
    dec, toks = [], None
    for _ in range(calls):
        for c in ring.caches:
            c.pos = len(ids)
        t0 = time.perf_counter()
        got = decode(ring, first, len(ids), tokens)
        dec.append(time.perf_counter() - t0)
        assert toks is None or got == toks, "a rewound decode differs"
        toks = got
    return len(ids) / pre, tokens / min(dec)


def llama_side(binary, gguf, depth, tokens, calls, threads):
    """(prefill tok/s, decode tok/s) from llama-bench: -p depth; -n tokens at -d depth; best of -r calls."""
    out = []
    for args in (["-p", str(depth), "-n", "0"], ["-p", "0", "-n", str(tokens), "-d", str(depth)]):
        r = subprocess.run([binary, "-m", gguf, *args, "-t", str(threads), "-r", str(calls), "-o", "json"],
                           capture_output=True, text=True, check=True)
        out.append(max(json.loads(r.stdout[r.stdout.index("["):])[0]["samples_ts"]))
    return tuple(out)


def profile_pass(pipes, ids, tokens, passes: int = 3):
    """{side: {"prefill": (s_total, s_qk, s_pv), "decode": (...)}}: the fastest of ``passes``, with the time
    inside attention's products summed (units: attn_scores / attn_values; float: the stage's
    float matmuls, which in this configuration are attention's only)."""
    from lutcore.pipeline import stage
    spent = {"qk": 0.0, "pv": 0.0}
    orig = {n: getattr(stage, n) for n in ("attn_scores", "attn_values", "_fmm")}

    def timed(fn, key):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key if isinstance(key, str) else key(a)] += time.perf_counter() - t0
        return run

    # float: a layer's float matmuls are q k^T, then p v (the linears and the head run through units)
    calls = [0]

    def float_product(_):
        calls[0] += 1
        return "qk" if calls[0] % 2 else "pv"

    stage.attn_scores, stage.attn_values = timed(orig["attn_scores"], "qk"), timed(orig["attn_values"], "pv")
    stage._fmm = timed(orig["_fmm"], float_product)
    out = {}
    try:
        for side, pipe in pipes.items():
            ring, row = pipe._ring, {}
            for what in ("prefill", "decode"):
                for _ in range(passes):
                    first = prefill(ring, ids)
                    spent.update(qk=0.0, pv=0.0)
                    t0 = time.perf_counter()
                    if what == "prefill":
                        prefill(ring, ids)
                    else:
                        decode(ring, first, len(ids), tokens)
                    got = (time.perf_counter() - t0, spent["qk"], spent["pv"])
                    row[what] = min(row.get(what, got), got)
            out[side] = row
    finally:
        for n, f in orig.items():
            setattr(stage, n, f)
    return out


def _cpu():
    """(machine-wide busy CPU seconds, this process's CPU seconds, wall time)."""
    import os
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    t = os.times()
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), t.user + t.system, time.monotonic()


def main(a):
    import lutcore
    from lutcore.pipeline import Pipeline
    lutcore.set_num_threads(a.threads)
    model = checkpoint(Path(a.model_dir))
    pipes = {"float attention": Pipeline.from_pretrained(str(model), units=FLOAT_ATTN, threads=a.threads),
             "float attention, layer by layer": Pipeline.from_pretrained(str(model), units=FLOAT_ATTN,
                                                                         threads=a.threads),
             "units attention": Pipeline.from_pretrained(str(model), units=UNITS_ATTN, threads=a.threads)}
    for st in pipes["float attention, layer by layer"]._ring.stages:
        st._fusable = False                 # decode as units attention must: the stage's Python layer loop
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.spin else None
    res = {"cpu": cpu_name(), "threads": a.threads, "spin": a.spin, "tokens": a.tokens, "calls": a.calls,
           "rounds": []}
    print(f"# {cpu_name()}; {a.threads} threads; {'one core busy (a spinning process)' if a.spin else 'idle'}; "
          f"best of {a.calls} a round; decode: {a.tokens} tokens after the prefill")
    c0 = _cpu()
    try:
        for r in range(a.rounds):
            row = {}
            for depth in a.depths:
                ids = prompt_ids(depth)
                for side, pipe in pipes.items():
                    row[(depth, side)] = lutcore_side(pipe._ring, ids, a.tokens, a.calls)
                if a.llama_bench:
                    row[(depth, "llama.cpp")] = llama_side(a.llama_bench, a.gguf, depth, a.tokens, a.calls,
                                                           a.threads)
                for side in [s for d, s in row if d == depth]:
                    pre, dec = row[(depth, side)]
                    print(f"round {r + 1} depth {depth:5d} {side:31s} prefill {pre:9,.0f} tok/s  "
                          f"decode {dec:8,.1f} tok/s", flush=True)
            res["rounds"].append({f"{d} {s}": v for (d, s), v in row.items()})
        c1 = _cpu()
        other = max(0.0, (c1[0] - c0[0]) - (c1[1] - c0[1])) / ((c1[2] - c0[2]) * 2)
        res["other_cpu_share"] = round(other, 3)
        print(f"other processes{' (the spinner included)' if a.spin else ''} used {100 * other:.0f}% of the "
              f"2 CPUs during the rounds")
        prof = {d: profile_pass(pipes, prompt_ids(d), a.tokens) for d in a.depths}
    finally:
        if spin is not None:
            spin.terminate()
            spin.wait()
    keys = list(res["rounds"][0])
    print("\n| depth | side | prefill tok/s: best / median of rounds | decode tok/s: best / median of rounds |")
    print("|--:|---|--:|--:|")
    for k in keys:
        d, side = k.split(" ", 1)
        pre, dec = ([x[k][i] for x in res["rounds"]] for i in (0, 1))
        print(f"| {d} | {side} | {max(pre):,.0f} / {statistics.median(pre):,.0f} | "
              f"{max(dec):,.1f} / {statistics.median(dec):,.1f} |")
    print("\n| depth | side | pass | ms | q k^T ms | p v ms | share in the products |")
    print("|--:|---|---|--:|--:|--:|--:|")
    for d, sides in prof.items():
        for side, row in sides.items():
            for what, (tot, qk, pv) in row.items():
                if side == "float attention" and what == "decode" or \
                        side == "float attention, layer by layer" and what == "prefill":     # no seam / same pass
                    continue
                print(f"| {d} | {side} | {what} | {1e3 * tot:.1f} | {1e3 * qk:.1f} | {1e3 * pv:.1f} | "
                      f"{100 * (qk + pv) / tot:.0f}% |")
    res["profile"] = {str(d): v for d, v in prof.items()}
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    for p in pipes.values():
        p.close()


if __name__ == "__main__":
    main(_args(sys.argv[1:]))
