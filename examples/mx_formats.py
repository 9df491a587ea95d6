"""The OCP MX formats through declared floating-point units: the digits CNN and lutcore's GPT, each
trained once in float, then run with every weight product in MXFP8 (E4M3), MXFP6 (E2M3), MXFP4
(E2M1) and MXINT8 blocks of 32 -- with the exact FP multiplier, with an approximate one
(Mitchell's logarithmic multiplier on the significands), and with the exact multiplier into a
14-bit accumulator (13 mantissa bits), without and with promotion to float32 every 128 products
(DeepSeek-V3's FP8 GEMM recipe); prints the tables and writes a PNG.

    python examples/mx_formats.py [--png mx_formats.png] [--epochs 8] [--steps 500]
                                  [--eval-tokens 16384] [--threads N] [--seed 0]

The digits CNN (lutcore.torch.digits: 3 convs and a linear layer, K = 9 .. 288) is scored on its
359 held-out images; the GPT (byte tokens, 2 layers, 64 channels, context 64; as
examples/attention_units.py trains it) on held-out text of the built-in corpus, its linear layers
and tied head through the units (attention in float).  Their reductions are short (K <= 288), so
a 14-bit register loses little there; the third table is one long reduction, a (64, 4096) x
(4096, 64) MXFP8 GEMM of normal data, where the register's loss shows and promotion recovers it
(relative error of the result against the float64 product of the same MX operands).  Every unit
is a ``lutcore.units.mxunits`` name (``mxfp8``, ``mxfp8:mitchell``, ``mxfp8@m13``,
``mxfp8@m13:promote=128``); the same names go to ``lutcore eval --units``, the pipeline and the
search.  About three minutes on 2 cores.  Needs torch and scikit-learn.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import lutcore

FORMATS = (("MXFP8 (E4M3)", "fp8"), ("MXFP6 (E2M3)", "fp6"), ("MXFP4 (E2M1)", "fp4"), ("MXINT8", "int8"))
UNITS = (("exact", ""), ("mitchell", ":mitchell"), ("14-bit acc", "@m13"), ("14-bit acc, promote 128", "@m13:promote=128"))
GPT_CONFIG = dict(dim=64, context=64, layers=2, heads=2)
BATCH, LR = 16, 1e-2


def spec(fmt: str, suffix: str) -> str:
    return f"mx{fmt}{suffix}"


def digits_rows(epochs, seed, bar):
    """{spec: test accuracy} of the float-trained digits CNN, and the float accuracy."""
    from lutcore.torch import approximate, digits
    model, (_, _, xt, yt) = digits.float_baseline(epochs=epochs, seed=seed)
    out = {"float": digits.accuracy(model, xt, yt)}
    for _, fmt in FORMATS:
        for _, suf in UNITS:
            s = spec(fmt, suf)
            out[s] = digits.accuracy(approximate(model, s), xt, yt)
            bar.update(1)
    return out


def train_gpt(train_ids, steps, seed, bar):
    """lutcore's GPT trained ``steps`` steps in float (AdamW, warmup then cosine decay)."""
    from lutcore.experiment import lr_at
    from lutcore.models.gpt import GPT, GPTConfig
    from lutcore.tokenizer import Tokenizer
    from lutcore.train import Trainer
    model = GPT(GPTConfig(vocab=256, seed=seed, **GPT_CONFIG))
    tr = Trainer(model, tokenizer=Tokenizer.bytes(), lr=LR, weight_decay=0.0, seed=seed)
    warmup = min(100, steps // 10)
    tr.optimizer.lr = lr_at(0, steps, LR, warmup)

    def on_step(rec):
        tr.optimizer.lr = lr_at(rec["step"], steps, LR, warmup)
        bar.set_postfix(loss=f"{rec['loss']:.3f}", refresh=False)
        bar.update(1)

    per_epoch = max(1, len(train_ids) // (GPT_CONFIG["context"] * BATCH))
    tr.train(train_ids, epochs=steps // per_epoch + 1, seq_len=GPT_CONFIG["context"], batch_size=BATCH,
             max_steps=steps, on_step=on_step)
    return model


def gpt_rows(steps, eval_tokens, seed, threads, bars):
    """{spec: evaluate_units row} of the GPT on held-out text (and "float")."""
    from lutcore.evaluate import evaluate_units
    from lutcore.tokenizer import Tokenizer
    from lutcore.train import data as _data
    ids = _data.load_tokens(_data.builtin_corpus(), Tokenizer.bytes())
    ctx = GPT_CONFIG["context"]
    n_hold = _data.held_out_size(len(ids), ctx)           # lutcore train's split: the last 5 %
    train_ids, held = ids[:-n_hold], ids[-n_hold:]
    if eval_tokens:
        held = held[:eval_tokens + 1]
    with bars(total=steps, desc="GPT float training", unit="step") as bar:
        model = train_gpt(train_ids, steps, seed, bar)
    specs = [spec(f, s) for _, f in FORMATS for _, s in UNITS]
    n_win = (held.size - 1) // ctx
    with bars(total=n_win * (len(specs) + 1), desc="GPT held-out", unit="window") as bar:
        res = evaluate_units(model, held, ["none", *specs], ctx, threads=threads,
                             on_window=lambda done, total, s: bar.update(1))
    out = {"float": res.reference}
    out.update({s: res[s] for s in specs})
    return out


def long_k_rows(seed):
    """{label: relative error} of one (64, 4096) x (4096, 64) MXFP8 GEMM through each accumulation:
    max |y - y64| / max |y64|, y64 the float64 product of the same MX operands."""
    from lutcore.units import resolve
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 64)).astype(np.float32)
    exact = resolve("mxfp8", mx=True)
    qa, qb = exact.quantize(a, 1, "a"), exact.quantize(b, 0, "b")
    y64 = qa.dequantize().astype(np.float64) @ qb.dequantize().astype(np.float64)
    out = {}
    for label, suf in (("exact sums", ""), ("14-bit acc", "@m13"), ("14-bit acc, promote 128", "@m13:promote=128"),
                       ("14-bit acc, truncating", "@m13:truncate"),
                       ("14-bit acc, truncating, promote 128", "@m13:promote=128:truncate")):
        y = resolve(spec("fp8", suf), mx=True).matmul_q(qa, qb)
        out[label] = float(np.abs(y - y64).max() / np.abs(y64).max())
    return out


def print_table(rows, head) -> None:
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for i, r in enumerate([head, *rows]):
        print("  ".join(c.ljust(w[j]) if j == 0 else c.rjust(w[j]) for j, c in enumerate(r)))
        if i == 0:
            print("  ".join("-" * x for x in w))


def tables(dig, gpt, longk) -> None:
    head = ("format", "float", *(u for u, _ in UNITS))
    print("\ndigits CNN: test accuracy (359 images), trained in float, run through each unit")
    print_table([(name, f"{dig['float']:.3f}", *(f"{dig[spec(f, s)]:.3f}" for _, s in UNITS))
                 for name, f in FORMATS], head)
    print("\nGPT: held-out loss (nats/token), trained in float, linear layers through each unit")
    print_table([(name, f"{gpt['float']['loss']:.4f}", *(f"{gpt[spec(f, s)]['loss']:.4f}" for _, s in UNITS))
                 for name, f in FORMATS], head)
    print("\none long reduction: (64, 4096) x (4096, 64) MXFP8, relative error against float64 of the same operands")
    print_table([(k, f"{v:.2e}") for k, v in longk.items()], ("accumulation", "max rel. error"))


def plot(dig, gpt, longk, png) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    w = 0.2
    colors = ("#4f81bd", "#c0504d", "#9bbb59", "#8064a2")
    for ax, (vals, ylabel, title) in zip(axes[:2], (
            (lambda s: 100 * (dig[s] - dig["float"]), "test accuracy - float (points)",
             f"digits CNN (float accuracy {dig['float']:.3f})"),
            (lambda s: gpt[s]["loss"] - gpt["float"]["loss"], "held-out loss - float (nats/token)",
             f"lutcore GPT (float loss {gpt['float']['loss']:.3f})"))):
        for j, ((label, suf), c) in enumerate(zip(UNITS, colors)):
            ys = [vals(spec(f, suf)) for _, f in FORMATS]
            bars = ax.bar([i + (j - 1.5) * w for i in range(len(FORMATS))], ys, w, label=label, color=c)
            for b, v in zip(bars, ys):
                ax.annotate(f"{v:+.3f}" if ax is axes[1] else f"{v:+.1f}", (b.get_x() + b.get_width() / 2, v), ha="center",
                            va="bottom" if v >= 0 else "top", fontsize=6, rotation=90)
        ax.set_xticks(range(len(FORMATS)), [n for n, _ in FORMATS], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, title="products / accumulator", title_fontsize=7)
    for ax in axes[:2]:
        ax.axhline(0, color="k", lw=0.8)
        ax.margins(y=0.18)
    ax = axes[2]
    labels = list(longk)
    ax.bar(range(len(labels)), [longk[k] for k in labels], color="#4f81bd")
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("max relative error vs float64")
    ax.set_title("MXFP8 GEMM, K = 4096: the accumulator", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("OCP MX formats through lutcore's FP units (blocks of 32; weights and activations)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--png", default="mx_formats.png", help="where to write the plot")
    p.add_argument("--epochs", type=int, default=8, help="the digits CNN's float training epochs")
    p.add_argument("--steps", type=int, default=500, help="the GPT's float training steps")
    p.add_argument("--eval-tokens", type=int, default=16384, help="held-out tokens the GPT is scored on (0: all)")
    p.add_argument("--threads", type=int, default=None, help="lutcore threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("epochs", "steps"):
        if getattr(args, name) < 1:
            print(f"error: --{name}: expected a positive int, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.threads:
        lutcore.set_num_threads(args.threads)
    from tqdm import tqdm

    def bars(**kw):
        return tqdm(leave=False, **kw)

    t0 = time.time()
    with bars(total=len(FORMATS) * len(UNITS), desc="digits CNN through each unit", unit="unit") as bar:
        dig = digits_rows(args.epochs, args.seed, bar)
    gpt = gpt_rows(args.steps, args.eval_tokens, args.seed, args.threads, bars)
    longk = long_k_rows(args.seed)
    tables(dig, gpt, longk)
    plot(dig, gpt, longk, args.png)
    print(f"\nwrote {args.png} ({time.time() - t0:.0f} s; {lutcore.get_simd()} SIMD path)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
