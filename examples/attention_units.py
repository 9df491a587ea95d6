"""Attention's own products through the units: lutcore's GPT trained briefly on the built-in
corpus, and a small Hugging Face llama (random weights), each scored on held-out text in float,
with the linear layers through an exact and two approximate units (attention in float), and
with attention's q k^T and p v through the same unit too; prints the table and writes a PNG.

    python examples/attention_units.py [--png attention_units.png] [--steps 500]
                                       [--units exact mitchell reduced:4] [--eval-tokens N]
                                       [--threads N] [--seed 0]

The GPT (byte tokens, 2 layers, 64 channels, 2 heads of 32, context 64) trains in float with
AdamW (``lutcore.train.Trainer``; warmup, then a cosine decay) on the built-in corpus (Python's
bundled documentation topics) less its last 5 %, the held-out text ``lutcore train`` keeps; the
table scores that text in windows of 64.  The llama (hidden 128, 2 layers, 4 heads of 32, 2 KV
heads) is built with transformers' ``LlamaConfig`` and saved with ``save_pretrained``, with a
512-token BPE tokenizer trained here on the same training text; it is NOT trained, so its rows
show what the units change relative to float (top-1 agreement), not language-model quality: a
random model's loss sits near ln(vocab) whatever the arithmetic.  Every row goes through
``lutcore.evaluate_units`` (``attention=True`` for the second column group: the spec covers
"*", "*.qk" and "*.pv").  About two minutes on 2 cores.  Needs transformers and tokenizers.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import lutcore
from lutcore.evaluate import evaluate_units
from lutcore.experiment import lr_at
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.tokenizer import Tokenizer
from lutcore.train import Trainer
from lutcore.train import data as _data

GPT_CONFIG = dict(dim=64, context=64, layers=2, heads=2)
BATCH, LR = 16, 1e-2
LLAMA_CONFIG = dict(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
LLAMA_WINDOW = 128


def train_gpt(train_ids, steps, seed, progress):
    """lutcore's GPT trained ``steps`` steps in float on ``train_ids`` (byte ids)."""
    cfg = GPTConfig(vocab=256, seed=seed, **GPT_CONFIG)
    model = GPT(cfg)
    tr = Trainer(model, tokenizer=Tokenizer.bytes(), lr=LR, weight_decay=0.0, seed=seed)
    warmup = min(100, steps // 10)
    tr.optimizer.lr = lr_at(0, steps, LR, warmup)
    losses = []

    def on_step(rec):
        losses.append(rec["loss"])
        tr.optimizer.lr = lr_at(rec["step"], steps, LR, warmup)     # the next step's rate
        progress.set_postfix(loss=f"{rec['loss']:.3f}", refresh=False)
        progress.update(1)

    per_epoch = max(1, len(train_ids) // (cfg.context * BATCH))       # at least this many batches an epoch
    tr.train(train_ids, epochs=steps // per_epoch + 1, seq_len=cfg.context, batch_size=BATCH, max_steps=steps,
             on_step=on_step)
    return model, losses


def build_llama(path, train_text, seed):
    """A random-weight llama and its BPE tokenizer.json, saved in ``path``."""
    import tokenizers
    import torch
    from tokenizers import decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM
    hf = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator([train_text], trainer=trainers.BpeTrainer(
        vocab_size=LLAMA_CONFIG["vocab_size"], special_tokens=["[UNK]"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(os.path.join(path, "tokenizer.json"))
    torch.manual_seed(seed)
    LlamaForCausalLM(LlamaConfig(**LLAMA_CONFIG)).eval().save_pretrained(path)
    return Tokenizer.from_file(os.path.join(path, "tokenizer.json"))


def score(model, ids, units, seq_len, threads, bar):
    """{"float": row, (spec, attention): row} of ``evaluate_units``, linear layers through each
    spec with attention in float, then attention through the spec too."""
    out = {}
    for attention in (False, True):
        def on_window(done, total, spec):
            bar.set_postfix(units=spec + (" (attention too)" if attention and spec != "none" else ""),
                            refresh=False)
            bar.update(1)

        res = evaluate_units(model, ids, ["none", *units] if not attention else units, seq_len, threads=threads,
                             on_window=on_window, attention=attention)
        out["float"] = res.reference
        for spec in units:
            out[(spec, attention)] = res[spec]
    return out, res.config


def table(rows, units, wce) -> list:
    """Text rows: float, then per unit float-attention and units-attention loss, Δloss, top-1 = float."""
    f = rows["float"]
    out = [("float", "-", f"{f['loss']:.4f}", "-", "-", "-", "-", "-")]
    for spec in units:
        a, b = rows[(spec, False)], rows[(spec, True)]
        out.append((spec, f"{wce[spec]:.3g}", f"{a['loss']:.4f}", f"{a['dloss']:+.4f}", f"{a['top1_agreement']:.3f}",
                    f"{b['loss']:.4f}", f"{b['dloss']:+.4f}", f"{b['top1_agreement']:.3f}"))
    return out


HEAD = ("units", "WCE%", "loss", "Δloss", "top-1=float", "loss (attn)", "Δloss (attn)", "top-1=float (attn)")


def print_table(rows) -> None:
    w = [max(len(r[i]) for r in [HEAD, *rows]) for i in range(len(HEAD))]
    for i, r in enumerate([HEAD, *rows]):
        print("  ".join(c.ljust(w[j]) if j == 0 else c.rjust(w[j]) for j, c in enumerate(r)))
        if i == 0:
            print("  ".join("-" * x for x in w))


def plot(gpt, llama, units, png, title):
    """Three panels, a pair of bars per unit (attention in float / through the unit): the GPT's
    Δloss, the GPT's and the llama's share of positions whose top-1 token differs from float's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [(gpt, "dloss", "Δloss vs float (nats/token)", "lutcore GPT (trained): Δloss"),
              (gpt, "top1", "top-1 token differs from float (%)", "lutcore GPT (trained): top-1 changed"),
              (llama, "top1", "top-1 token differs from float (%)", "llama (untrained): top-1 changed")]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    w = 0.38
    for ax, (rows, what, ylabel, name) in zip(axes, panels):
        for j, (attention, label, color) in enumerate(((False, "attention in float", "#4f81bd"),
                                                       (True, "attention through the unit", "#c0504d"))):
            vals = [rows[(s, attention)]["dloss"] if what == "dloss" else
                    100 * (1 - rows[(s, attention)]["top1_agreement"]) for s in units]
            bars = ax.bar([i + (j - 0.5) * w for i in range(len(units))], vals, w, label=label, color=color)
            for b, v in zip(bars, vals):
                ax.annotate(f"{v:+.4f}" if what == "dloss" else f"{v:.1f}", (b.get_x() + b.get_width() / 2, v),
                            ha="center", va="bottom" if v >= 0 else "top", fontsize=7)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(range(len(units)), units)
        ax.set_xlabel("unit of the linear layers (and of attention, red)")
        ax.set_ylabel(ylabel)
        ax.set_title(name, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--png", default="attention_units.png", help="where to write the plot")
    p.add_argument("--steps", type=int, default=500, help="the GPT's float training steps")
    p.add_argument("--units", nargs="+", default=["exact", "mitchell", "reduced:4"],
                   help="units specs, each run in the linear layers, then in attention too")
    p.add_argument("--eval-tokens", type=int, default=None,
                   help="score at most this many held-out tokens of each model (default: all)")
    p.add_argument("--threads", type=int, default=None, help="lutcore threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.steps < 1:
        print(f"error: --steps: expected a positive int, got {args.steps}", file=sys.stderr)
        return 2
    if args.threads:
        lutcore.set_num_threads(args.threads)
    from lutcore.units import resolve
    try:
        wce = {s: resolve(s).error_metrics()["wce_pct"] for s in args.units}      # a bad spec fails first
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: --units: {e}", file=sys.stderr)
        return 2
    from tqdm import tqdm

    t0 = time.time()
    text = _data.builtin_corpus()
    ids = _data.load_tokens(text, Tokenizer.bytes())
    ctx = GPT_CONFIG["context"]
    n_hold = _data.held_out_size(len(ids), ctx)          # lutcore train's split: the last 5 %
    train_ids, held = ids[:-n_hold], ids[-n_hold:]
    held_text = text.encode()[-n_hold:].decode("utf-8", "ignore")
    train_text = text.encode()[:-n_hold].decode("utf-8", "ignore")
    if args.eval_tokens:
        held = held[:args.eval_tokens + 1]
    with tqdm(total=args.steps, desc="GPT float training", unit="step", leave=False) as bar:
        gpt, losses = train_gpt(train_ids, args.steps, args.seed, bar)
    t_train = time.time() - t0
    n_win = (held.size - 1) // ctx
    with tqdm(total=n_win * (2 * len(args.units) + 2), desc="GPT held-out", unit="window", leave=False) as bar:
        g_rows, g_cfg = score(gpt, held, args.units, ctx, args.threads, bar)

    with tempfile.TemporaryDirectory() as d:
        tok = build_llama(d, train_text, args.seed)
        lids = tok.encode(held_text)
        if args.eval_tokens:
            lids = lids[:args.eval_tokens + 1]
        seq = min(LLAMA_WINDOW, lids.size - 1)
        n_win = (lids.size - 1) // seq
        with tqdm(total=n_win * (2 * len(args.units) + 2), desc="llama held-out", unit="window", leave=False) as bar:
            l_rows, l_cfg = score(d, lids, args.units, seq, args.threads, bar)

    c = GPT_CONFIG
    print(f"lutcore GPT ({c['layers']} layers, dim {c['dim']}, {c['heads']} heads, context {c['context']}, byte "
          f"tokens, {gpt.num_parameters():,} params) trained {args.steps} steps in float ({t_train:.0f} s; train "
          f"loss {losses[0]:.3f} -> {np.mean(losses[-20:]):.3f}); held-out: {g_cfg['tokens']:,} tokens in "
          f"{g_cfg['windows']} windows of {g_cfg['seq_len']}")
    print("linear layers through the unit; (attn): attention's q k^T and p v through it too\n")
    print_table(table(g_rows, args.units, wce))
    lc = LLAMA_CONFIG
    print(f"\nllama (transformers LlamaConfig: hidden {lc['hidden_size']}, {lc['num_hidden_layers']} layers, "
          f"{lc['num_attention_heads']} heads, {lc['num_key_value_heads']} KV heads, BPE vocab "
          f"{lc['vocab_size']}), RANDOM WEIGHTS (untrained: the numbers show what the units change "
          f"relative to float — top-1 agreement — not quality; its loss sits near ln {lc['vocab_size']} = "
          f"{np.log(lc['vocab_size']):.3f}); held-out: {l_cfg['tokens']:,} tokens in {l_cfg['windows']} "
          f"windows of {l_cfg['seq_len']}\n")
    print_table(table(l_rows, args.units, wce))
    plot(g_rows, l_rows, args.units, args.png,
         f"attention's products through the units: blue, linear layers only; red, q k^T and p v too "
         f"(8-bit units, block-scaled)")
    print(f"\nwrote {args.png} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
