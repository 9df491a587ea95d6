"""The unit-damage experiment: does training through a unit hurt convergence?

One model is trained several times from the same initial weights on the same
batches with the same optimizer; the only thing that changes between runs is
the arithmetic of its matmuls:

    float                  numpy float32 forward and backward (the reference)
    <units> fwd            forward matmuls through the units, float STE backward
    <units> fwd+bwd        forward and backward matmuls through the units
    <units> fwd+table      forward through the units, backward through the unit's gradient
                           tables (``backward="table"``: lutcore.models.unitmm, the table arm)

for each units spec asked for ("exact", "truncated:6", "mitchell",
"reduced:4", a directory of tables, or a ``lutcore.Units``).  A run's tail is
the mean of its last ``TAIL`` losses; a units run's ratio is its tail over
the float run's.  Verdicts (the seed experiment's): a run converged when
tail < CONVERGE_FRACTION x its first loss and tail < ln(vocab); a units run
is viable when ratio < VIABLE_RATIO.  A float run whose tail is not below
LEARNED_FRACTION x the unigram entropy of the data has learned no more than
token frequencies: the result carries a "too short to judge" warning.

Design: ``compare`` computes and returns a ``CompareResult`` (it never
prints; progress goes to ``on_step``); ``format_table`` and ``write_report``
(compare.json, compare.png) present it; the ``lutcore compare`` command
wires them to argv.  The batches are drawn once, before any run, from their
own generator, so every run sees byte-identical data whatever the units do.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import numpy as np

from lutcore import _check, _threads

__all__ = ["compare", "format_table", "write_report", "report_steps", "unigram_entropy", "lr_at", "CompareResult",
           "Run", "TAIL", "CONVERGE_FRACTION", "VIABLE_RATIO", "LEARNED_FRACTION"]

TAIL = 10                   # losses averaged into a run's final figure
CONVERGE_FRACTION = 0.75    # converged: tail < 0.75 x the first loss (and < ln vocab)
VIABLE_RATIO = 1.15         # viable: units tail / float tail below this
LEARNED_FRACTION = 0.9      # "too short to judge" unless the float tail < 0.9 x the unigram entropy
FINAL_LR_FRACTION = 0.1     # the cosine schedule ends at 0.1 x lr
DATA_STREAM = 0x5EED        # the batch generator's stream, kept apart from the model's init seed


@dataclasses.dataclass
class Run:
    label: str
    units: str | None                 # units name (None for the float run)
    units_digest: str | None
    unit_backward: bool | str         # False, True (through the units) or "table"
    losses: list
    ms_per_step: float
    first: float
    tail: float
    converged: bool
    ratio: float | None = None        # tail / float tail (units runs)
    viable: bool | None = None        # ratio < VIABLE_RATIO (units runs)
    error: str | None = None          # why a run stopped early (its remaining losses are NaN)
    units_defaulted: list | None = None   # tables the units directory lacked (exact defaults used)


@dataclasses.dataclass
class CompareResult:
    config: dict
    runs: list

    @property
    def float_run(self) -> Run:
        return self.runs[0]

    @property
    def warnings(self) -> list[str]:
        """What makes the verdicts unsafe to act on (today: a float run that has not learned past
        the unigram baseline — then every run is "close" to it and the ratios say nothing)."""
        h, f = self.config.get("unigram_entropy"), self.float_run.tail
        if h is None or f < LEARNED_FRACTION * h:
            return []
        return [f"too short to judge: the float run's tail {f:.3f} is not below {LEARNED_FRACTION} x the "
                f"corpus's unigram entropy {h:.3f} (the loss of knowing only token frequencies), so no run has "
                f"learned enough to show what a unit costs; train longer (--steps) or with a larger model"]

    def get(self, label: str) -> Run:
        for r in self.runs:
            if r.label == label:
                return r
        raise KeyError(f"no run labelled {label!r} (runs: {[r.label for r in self.runs]})")

    __getitem__ = get

    def to_dict(self) -> dict:
        return {"config": self.config, "runs": [dataclasses.asdict(r) for r in self.runs]}


def report_steps(steps: int) -> list[int]:
    """The rows of the loss table: every multiple of a round interval (1, 2, 2.5 or 5 x 10^k,
    at least steps / 6) below the last step, then the last step — 0, 25, ..., 125, 149 for 150
    steps; 0, 100, ..., 500, 599 for 600."""
    if steps <= 1:
        return [0]
    want = (steps - 1) / 6
    k = 10 ** math.floor(math.log10(want)) if want >= 1 else 1
    interval = next(int(m * k) for m in (1, 2, 2.5, 5, 10) if m * k >= want and float(m * k).is_integer())
    return list(range(0, steps - 1, max(1, interval))) + [steps - 1]


def unigram_entropy(ids: np.ndarray, vocab: int) -> float:
    """Entropy (nats/token) of the token frequencies of ``ids``: the loss of a model that has
    learned only how common each token is."""
    p = np.bincount(np.asarray(ids).reshape(-1), minlength=vocab).astype(np.float64)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


def lr_at(step: int, steps: int, lr: float, warmup: int, final_fraction: float = FINAL_LR_FRACTION) -> float:
    """The learning rate of ``step`` (0-based): linear warmup over ``warmup`` steps, then a cosine
    decay to ``final_fraction`` x ``lr`` at the last step.  The warmup keeps the first steps from
    spiking (at lr 0.02 without it the float loss jumped to 11.4 at step 13); the decay makes
    the last losses, which the verdicts average, those of a settled model rather than noise."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - 1 - warmup)
    c = 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / span)))
    return lr * (final_fraction + (1.0 - final_fraction) * c)


def _batches(ids: np.ndarray, steps: int, batch: int, context: int, seed: int) -> np.ndarray:
    """(steps, batch, context + 1) int64 windows at uniformly drawn starts, fixed by ``seed``."""
    n = ids.size
    if n < context + 1:
        raise ValueError(f"data: {n} tokens is shorter than one window of context + 1 = {context + 1}")
    rng = np.random.default_rng([int(seed), DATA_STREAM])
    starts = rng.integers(0, n - context, size=(steps, batch))
    return ids[starts[..., None] + np.arange(context + 1)]


def _build(model, vocab, dim, context, layers, heads, seed, units, unit_backward, two_pass, threads):
    if model == "gpt":
        from lutcore.models.gpt import GPT, GPTConfig
        cfg = GPTConfig(vocab=vocab, dim=dim, context=context, layers=layers, heads=heads, seed=seed)
        return GPT(cfg, units=units, unit_backward=unit_backward, two_pass=two_pass, threads=threads)
    from lutcore.models.mamba import MambaConfig, MambaLM
    cfg = MambaConfig(d_model=dim, n_layer=layers, vocab_size=vocab, seed=seed)
    return MambaLM(cfg, units=units, unit_backward=unit_backward, threads=threads)


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name}: expected a positive int, got {v!r}")
    return int(v)


def compare(model: str = "gpt", units=("exact",), steps: int = 600, dim: int = 32, context: int = 32,
            batch: int = 8, layers: int = 2, heads: int = 2, lr: float = 0.01, seed: int = 0,
            tokenizer=None, data=None, on_step=None, *, weight_decay: float = 0.0,
            max_grad_norm: float | None = None, two_pass: bool = False, threads=None,
            encoding: str = "utf-8", warmup: int | None = None, backward: str = "units") -> CompareResult:
    """Train ``model`` ("gpt" or "mamba") in float, then through each units spec forward only
    and forward+backward; identical init, batches and optimizer (AdamW, betas (0.9, 0.999),
    ``weight_decay`` 0 and no clipping unless asked; the learning rate warms up linearly over
    ``warmup`` steps — default min(100, steps // 10) — then decays on a cosine to 0.1 x ``lr``).

    The defaults (600 steps, lr 0.01, about a minute for three units on 2 cores) learn well past
    the corpus's unigram baseline, which the 150-step constant-lr defaults did not; a float run
    that has not is flagged in ``CompareResult.warnings`` ("too short to judge").

    ``data``: text, a file path (read strictly as ``encoding``) or token ids (default: the
    built-in corpus); ``tokenizer``: a
    ``lutcore.tokenizer.Tokenizer`` (default byte-level, vocab 256).  ``two_pass`` is passed to
    the GPT's unit matmuls.  ``threads`` is the thread count of every kernel of the runs (a
    ``lutcore._threads.scope`` for the duration; lutcore's default is not changed).  ``backward="table"`` adds a third run per units spec, "<units> fwd+table": the
    backward through the unit's gradient tables (``unit_backward="table"``).
    ``on_step(rec)`` gets {run, step, loss, seconds} after every step."""
    import lutcore
    from lutcore.tokenizer import Tokenizer
    from lutcore.train import data as _data
    from lutcore.train.optim import AdamW
    from lutcore.units import Units, resolve

    if model not in ("gpt", "mamba"):
        raise ValueError(f"model: expected 'gpt' or 'mamba', got {model!r}")
    steps, dim, context, batch, layers, heads = (_positive(n, v) for n, v in (
        ("steps", steps), ("dim", dim), ("context", context), ("batch", batch), ("layers", layers),
        ("heads", heads)))
    warmup = min(100, steps // 10) if warmup is None else _check.int_arg(warmup, "warmup", lo=0, hi=steps)
    if backward not in ("units", "table"):
        raise ValueError(f"backward: expected 'units' or 'table', got {backward!r}")
    if two_pass and model != "gpt":
        raise ValueError("two_pass: only the GPT's unit matmuls take two_pass")
    if units is None:
        units = []
    elif isinstance(units, (str, os.PathLike, Units)):
        units = [units]
    specs = [resolve(u) for u in units]
    tok = tokenizer or Tokenizer.bytes()
    if not isinstance(tok, Tokenizer):
        raise TypeError(f"tokenizer: expected a lutcore.tokenizer.Tokenizer, got {type(tok).__name__}")
    source = "built-in corpus (pydoc_data.topics)" if data is None else (
        os.fspath(data) if isinstance(data, (str, os.PathLike)) and len(os.fspath(data)) < 4096
        and os.path.isfile(os.fspath(data)) else type(data).__name__)
    ids = _data.load_tokens(_data.builtin_corpus() if data is None else data, tok, encoding)
    vocab = tok.vocab_size
    batches = _batches(ids, steps, batch, context, seed)

    config = {"model": model, "steps": steps, "dim": dim, "context": context, "batch": batch,
              "layers": layers, "heads": heads if model == "gpt" else None, "lr": float(lr), "warmup": warmup,
              "final_lr_fraction": FINAL_LR_FRACTION, "seed": int(seed),
              "weight_decay": float(weight_decay), "max_grad_norm": max_grad_norm, "two_pass": bool(two_pass),
              "backward": backward,
              "vocab": vocab, "tokenizer": tok.name, "data": source, "tokens": int(ids.size),
              "unigram_entropy": unigram_entropy(ids, vocab),
              "threads": lutcore.get_num_threads() if threads is None else int(threads),
              "tail": TAIL, "converge_fraction": CONVERGE_FRACTION, "viable_ratio": VIABLE_RATIO}
    plan = [("float", None, False)]
    for u in specs:
        plan += [(f"{u.name} fwd", u, False), (f"{u.name} fwd+bwd", u, True)]
        if backward == "table":
            plan.append((f"{u.name} fwd+table", u, "table"))

    with _threads.scope(threads):            # every kernel of the runs below (models, AdamW) takes this count
        runs = []
        for label, u, ub in plan:
            m = _build(model, vocab, dim, context, layers, heads, seed, u, ub, two_pass and u is not None, threads)
            opt = AdamW(m.parameters(), lr=lr, weight_decay=weight_decay)
            grads = m.zero_grads()
            losses, error, total = [], None, 0.0
            for s in range(steps):
                b = batches[s]
                opt.lr = lr_at(s, steps, lr, warmup)
                t0 = time.perf_counter()
                for g in grads.values():
                    g.fill(0)
                try:
                    loss, _ = m.loss_and_grads(b[:, :-1], b[:, 1:], grads)
                except ValueError as e:
                    # A run that diverged (non-finite activations cannot be quantized) ends here;
                    # a failure on the first step is a configuration error and propagates.
                    if s == 0:
                        raise
                    error = f"step {s}: {e}"
                    losses += [float("nan")] * (steps - s)
                    break
                opt.step(grads, max_grad_norm=max_grad_norm)
                dt = time.perf_counter() - t0
                total += dt
                losses.append(float(loss))
                if on_step is not None:
                    on_step({"run": label, "step": s, "loss": float(loss), "seconds": dt})
            done = max(1, s if error else steps)            # steps timed
            first = losses[0]
            tail = float(np.mean(losses[-TAIL:]))
            converged = bool(tail < CONVERGE_FRACTION * first and tail < math.log(vocab))
            runs.append(Run(label=label, units=None if u is None else u.name,
                            units_digest=None if u is None else u.digest, unit_backward=ub, losses=losses,
                            ms_per_step=1e3 * total / done, first=first, tail=tail, converged=converged,
                            error=error, units_defaulted=None if u is None else list(u.defaulted)))
    ref = runs[0].tail
    for r in runs[1:]:
        r.ratio = float(r.tail / ref)
        r.viable = bool(r.ratio < VIABLE_RATIO)
    return CompareResult(config=config, runs=runs)


# ---------------------------------------------------------------- presentation

def _yn(v):
    return "-" if v is None else ("yes" if v else "NO")


def format_table(result: CompareResult, width: int = 100) -> str:
    """The loss table at the report steps, then tails, ms/step, ratios and verdicts, one row
    per run, and any warnings — every line at most ``width`` (100) columns."""
    import textwrap
    c, runs = result.config, result.runs
    lw = min(28, max(len(r.label) for r in runs))

    def short(label):                                       # a long units name loses its middle, not "fwd+bwd"
        if len(label) <= lw:
            return label
        name, _, kind = label.rpartition(" ")
        keep = lw - len(kind) - 4
        return f"{name[:keep]}... {kind}"
    lab = [short(r.label) for r in runs]

    def wrap(text, indent=""):
        return textwrap.wrap(text, width, subsequent_indent=indent or "  ", break_on_hyphens=False)

    head = (f"{c['model']}: dim {c['dim']}, {c['layers']} layers"
            + (f", {c['heads']} heads" if c.get("heads") else "")
            + f", context {c['context']}, batch {c['batch']}, lr {c['lr']:g}"
            + (f" (warmup {c['warmup']}, cosine to {c['final_lr_fraction']:g} x)" if "warmup" in c else "")
            + f", seed {c['seed']}; {c['steps']} steps, vocab {c['vocab']} ({c['tokenizer']})")
    lines = wrap(head) + [""]
    steps = report_steps(c["steps"])
    per = max(8, len(str(steps[-1])) + 2)
    cols = max(1, (width - lw) // per)
    for i in range(0, len(steps), cols):                     # a very long run wraps its columns
        chunk = steps[i:i + cols]
        lines.append(f"{'loss at step':<{lw}}" + "".join(f"{s:>{per}}" for s in chunk))
        for r, name in zip(runs, lab):
            lines.append(f"{name:<{lw}}" + "".join(f"{r.losses[s]:>{per}.3f}" for s in chunk))
        lines.append("")
    lines.append(f"{'':<{lw}}{f'tail({TAIL})':>10}{'ms/step':>10}{'ratio':>8}{'converged':>11}{'viable':>8}")
    for r, name in zip(runs, lab):
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        lines.append(f"{name:<{lw}}{r.tail:>10.4f}{r.ms_per_step:>10.1f}{ratio:>8}{_yn(r.converged):>11}"
                     f"{_yn(r.viable):>8}")
    lines.append("")
    lines += wrap(f"tail: mean of the last {TAIL} losses; ratio: tail / float tail (1.000 = no damage); "
                  f"converged: tail < {CONVERGE_FRACTION} x first loss and < ln(vocab) = {math.log(c['vocab']):.3f}; "
                  f"viable: ratio < {VIABLE_RATIO}" + (f"; unigram baseline {c['unigram_entropy']:.3f}"
                                                      if c.get("unigram_entropy") is not None else ""))
    for r in runs[1:]:
        verdict = ("converges" if r.converged else "FAILS TO CONVERGE") + ", " + (
            f"damage within {VIABLE_RATIO - 1:.0%} — viable" if r.viable else
            f"damage exceeds {VIABLE_RATIO - 1:.0%} — needs work"
            + ("" if c.get("two_pass") or r.unit_backward is not True or c["model"] != "gpt" else " (try two_pass)"))
        lines += wrap(f"  {r.label}: {verdict}" + (f"  [stopped: {r.error}]" if r.error else ""), "    ")
    for w in result.warnings:
        lines += [""] + wrap(f"WARNING: {w}")
    return "\n".join(lines)


def write_report(result: CompareResult, out_dir) -> dict:
    """Write ``compare.json`` (config, every curve and verdict) and ``compare.png`` (all curves)
    into ``out_dir`` (created if needed); returns {"json": path, "png": path}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    jpath, ppath = os.path.join(out_dir, "compare.json"), os.path.join(out_dir, "compare.png")
    from lutcore._io import atomic_file
    with atomic_file(jpath) as tmp, open(tmp, "w") as f:
        json.dump(result.to_dict(), f, indent=1, allow_nan=True)

    c = result.config
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, r in enumerate(result.runs):
        style = {"color": "black", "lw": 1.6} if r.units is None else {"lw": 1.1, "ls": {True: "--", "table": ":"}.get(
                                                                        r.unit_backward, "-")}
        label = f"{r.label} (tail {r.tail:.3f}" + ("" if r.ratio is None else f", x{r.ratio:.3f}") + ")"
        ax.plot(np.arange(len(r.losses)), r.losses, label=label, **style)
    ax.axhline(math.log(c["vocab"]), color="grey", lw=0.8, ls=":", label="ln(vocab)")
    if c.get("unigram_entropy") is not None:
        ax.axhline(c["unigram_entropy"], color="grey", lw=0.8, ls="-.", label="unigram entropy")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.set_title(f"lutcore compare — {c['model']}, dim {c['dim']}, {c['layers']} layers, lr {c['lr']:g}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(ppath, dpi=110)
    plt.close(fig)
    return {"json": jpath, "png": ppath}
