"""Decode through the exact units beside llama.cpp Q8_0, alternating (issue 28's decode row; the
numbers in BENCHMARKS.md, Run AD).

    python bench/ab_decode_llamacpp.py --anchor PATH/llamacpp_anchor.py [--rounds 6] [--tokens 16]
                                       [--depth 128] [--threads 2] [--tree DIR]

    side        what is timed (2 threads)
    lutcore     Pipeline.from_pretrained(dir, units="exact"): ``tokens`` greedy tokens after a
                ``depth``-token prefill (the prefill untimed), as bench/test_bench_pipeline.py's
                decode case; best of 5 in a round
    llama.cpp   llama-bench -p 0 -n tokens -d depth -t threads -r 5 on the Q8_0 GGUF of the same
                checkpoint: the same number of tokens at the same context depth; best of its 5

The model is the pipeline benchmark's (hidden 512, 8 layers, 8/2 heads, SwiGLU 1408, vocab
4096, random weights from LlamaForCausalLM, save_pretrained) in ~/.cache/lutcore-bench.  The
anchor tool (llamacpp_anchor.py: builds llama-bench from PyPI's llama-cpp-python sdist and
converts the checkpoint, both cached) runs once to find the binary and the GGUF.  A round
runs llama.cpp, then lutcore; the table gives every round's tokens/s and the ratio
lutcore / llama.cpp per round, and their median: the VM drifts 2x within minutes on this
memory-bound work, so only rounds side by side compare.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CACHE = Path.home() / ".cache" / "lutcore-bench" / "llama_bench"


def _args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--anchor", required=True, help="path of llamacpp_anchor.py")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--depth", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tree", default=str(HERE.parent), help="import lutcore from this checkout (a 'before' build)")
    return p.parse_args(argv)


A = _args(sys.argv[1:])
sys.path[:0] = [str(Path(A.tree).resolve()), str(HERE)]

from lutbench import cpu_name  # noqa: E402
from test_bench_pipeline import generate, make_model, prompt_ids  # noqa: E402


def checkpoint() -> Path:
    """The pipeline benchmark's llama checkpoint (test_bench_pipeline.make_model), written once."""
    if not (CACHE / "config.json").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        make_model(CACHE, 512)
    return CACHE


def anchor_paths(anchor: str, model: Path, threads: int):
    """(llama-bench binary, Q8_0 GGUF) from one run of the anchor tool (it builds and converts once)."""
    out = subprocess.run([sys.executable, anchor, str(model), "--types", "q8_0", "--threads", str(threads),
                          "--prompt", "8", "--gen", "8", "--reps", "1"], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    binary = re.search(r"(\S+/llama-bench)\b", text)
    gguf = re.search(r"(\S+q8_0\.gguf)", text)
    if not binary or not gguf:
        raise SystemExit(f"could not find llama-bench and the GGUF in the anchor's output:\n{text[-2000:]}")
    return binary.group(1), gguf.group(1)


def llama_round(binary, gguf, a) -> float:
    out = subprocess.run([binary, "-m", gguf, "-p", "0", "-n", str(a.tokens), "-d", str(a.depth), "-t",
                          str(a.threads), "-r", "5", "-o", "json"], capture_output=True, text=True, check=True)
    return max(json.loads(out.stdout)[0]["samples_ts"])


def lutcore_round(ring, ids, a) -> float:
    """Best tokens/s of 5 decodes of a.tokens after the prompt ids (each after a fresh, untimed prefill)."""
    best = 0.0
    for _ in range(5):
        ring.reset()
        first = ring.forward(ids, 0, True, True)
        t = time.perf_counter()
        generate(ring, first, len(ids), a.tokens)
        best = max(best, a.tokens / (time.perf_counter() - t))
    return best


def main(a):
    from lutcore.pipeline import Pipeline
    model = checkpoint()
    binary, gguf = anchor_paths(a.anchor, model, a.threads)
    pipe = Pipeline.from_pretrained(str(model), splits=[8], units="exact", threads=a.threads)
    ids = prompt_ids(a.depth)
    print(f"# {cpu_name()}; {a.threads} threads; {a.tokens} tokens after {a.depth}; llama.cpp: {binary}")
    print("| round | llama.cpp Q8_0 (tok/s) | lutcore exact units (tok/s) | lutcore / llama.cpp |")
    print("|--:|--:|--:|--:|")
    ratios, best = [], [0.0, 0.0]
    try:
        for r in range(a.rounds):
            ll = llama_round(binary, gguf, a)
            lc = lutcore_round(pipe._ring, ids, a)
            ratios.append(lc / ll)
            best = [max(best[0], ll), max(best[1], lc)]
            print(f"| {r + 1} | {ll:,.0f} | {lc:,.0f} | {lc / ll:.2f}× |", flush=True)
    finally:
        pipe.close()
    print(f"\nmedian ratio {statistics.median(ratios):.2f}×; best of all: llama.cpp {best[0]:,.0f}, "
          f"lutcore {best[1]:,.0f} ({best[1] / best[0]:.2f}×)")


if __name__ == "__main__":
    main(A)
