"""The damage table: one model, the same tokens, one row per arithmetic unit.

Design: ``evaluate_units`` scores a model on a token stream through each units
spec (``"none"`` = float32) and returns an ``EvalResult`` (it never prints;
progress goes to ``on_window``); ``format_table`` and ``write_report``
(eval.json, eval.png) present it; ``lutcore eval`` and the end of ``lutcore
train`` wire them to argv.  The model is loaded once; each unit gets its own
forward built on the same weights:

    a Hugging Face directory   (config.json: llama, qwen2, mistral, gpt2, mamba)
                               the pipeline's loader reads the weights once and a
                               one-stage ``Pipeline`` per unit computes the logits
                               (tokenizer: the directory's tokenizer.json)
    a lutcore checkpoint       (trainer.json) its MambaLM / GPT, rebuilt per unit
    a MambaLM / GPT object     rebuilt per unit on its parameters

Windows: the token stream is cut into consecutive windows of L inputs, each
predicting its L next tokens (window w covers tokens w*L .. (w+1)*L, L + 1 of
them); every full window counts, a shorter tail does not.  L defaults to the
model's context (its learned positions), capped at ``MAX_SEQ_LEN``.

A row: ``loss`` (mean next-token cross-entropy in nats, accumulated in
float64), ``perplexity`` = exp(loss), ``bits_per_token`` = loss / ln 2,
``dloss`` = loss - the float loss, ``top1_agreement`` = share of positions
whose arg-max matches float's (ties to the lowest id), ``accuracy`` = share
whose arg-max is the next token, and the unit's ``name``, ``digest`` and
``wce_pct`` (EvoApproxLib's worst-case error, % of 2^16).  The float
reference is computed once whether or not ``"none"`` is one of the rows.

Per-layer units: a spec may also be a mapping {layer / prefix / glob: spec} or an
assignment ``.json`` file (``lutcore.units.assign``; layer names: the Hugging Face
module names, "model.layers.3.mlp.down_proj", "lm_head"; a lutcore model's
``layer_names()``).  It is resolved against the model's layers before any work (the
layers no key covers run in float); its row is labelled with the spec (the file
path, or "per-layer"), its ``digest`` is the assignment's (``assign.digest_of``),
``wce_pct`` / ``mae_pct`` are None and ``layers`` maps each layer to its units name
("none" for float).

Interrupted (Ctrl-C): ``evaluate_units`` raises ``EvalInterrupted`` (a
KeyboardInterrupt) whose ``result`` holds the rows finished so far (a row is
finished when all its windows are; none is before the float reference) with
``partial`` True and the ``remaining`` specs; ``write_report`` writes it like a
whole one (eval.json ``"partial": true``), and ``lutcore eval`` exits 130.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time

import numpy as np

from lutcore.ops import accum as _accum

__all__ = ["evaluate_units", "EvalResult", "EvalInterrupted", "format_table", "write_report",
           "checkpoint_units", "load_checkpoint", "open_checkpoint", "OpenCheckpoint", "MAX_SEQ_LEN", "FLOAT_SPECS"]

MAX_SEQ_LEN = 512
FLOAT_SPECS = (None, "none", "float")


@dataclasses.dataclass
class EvalResult:
    config: dict
    rows: list                       # one dict per units spec, in the order given
    reference: dict | None           # the float row (also when "none" is not a row); None: not finished
    partial: bool = False            # interrupted: ``rows`` are the specs finished before it
    remaining: list = dataclasses.field(default_factory=list)    # partial: the specs not scored

    def to_dict(self) -> dict:
        d = {"partial": self.partial}
        if self.partial:
            d["remaining"] = self.remaining
        return {**d, "config": self.config, "reference": self.reference, "results": self.rows}

    def __getitem__(self, spec):
        for r in self.rows:
            if r["units"] == spec:
                return r
        raise KeyError(f"no row for units {spec!r} (rows: {[r['units'] for r in self.rows]})")


class EvalInterrupted(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) during ``evaluate_units``: ``result`` is an EvalResult of
    the rows finished before it (``partial`` True; ``remaining``: the specs not scored;
    ``config["interrupted_in"]``: the spec being scored and its windows done).  A
    KeyboardInterrupt, so code that does not look for it is interrupted as before."""

    def __init__(self, result: "EvalResult"):
        super().__init__(f"interrupted with {len(result.rows)} of {len(result.rows) + len(result.remaining)} "
                         f"row(s) finished")
        self.result = result


# ------------------------------------------------------------------ checkpoints
def checkpoint_units(path):
    """The units a lutcore checkpoint was trained through (None: float): its own tables
    (units.safetensors, written by save_checkpoint), else its built-in units name; either
    must match the digest trainer.json records.  Reads the save Trainer.resume reads
    (an interrupted save's complete copy)."""
    from lutcore._io import contained, load_tensors, path_arg
    from lutcore.train.trainer import read_trainer_json
    from lutcore.units import Units, approx
    path = path_arg(path)
    src, _, meta = read_trainer_json(path)
    digest, name = meta.get("units_digest"), meta.get("units_name")
    if not digest:
        return None
    tf = contained(src, "units.safetensors")
    if os.path.isfile(tf):
        from lutcore.train.trainer import units_from_tensors
        u = units_from_tensors(load_tensors(tf), name, tf)
    elif isinstance(name, str) and approx.is_name(name):
        u = approx.by_name(name)
    else:
        raise ValueError(f"checkpoint {path!r} was trained through units {name!r} (digest {digest[:16]}), whose "
                         f"tables it does not hold: pass them with --units / units=")
    if u.digest != digest:
        raise ValueError(f"checkpoint {path!r}: units {name!r} have digest {u.digest[:16]}, trainer.json records "
                         f"{digest[:16]}")
    return u


def load_checkpoint(path, units=None, threads=None):
    """``Trainer.resume`` for scoring and sampling: through ``units`` when given, else
    through the units the checkpoint was trained with (``checkpoint_units``)."""
    return open_checkpoint(path, units, threads).trainer


class OpenCheckpoint:
    """A lutcore checkpoint opened once (``open_checkpoint``): ``path``, ``trainer`` (its
    model through the units asked for, its tokenizer) and ``trained`` (the units it was
    trained through, None: float).  ``evaluate_units`` and ``search_lm`` take one in
    place of the path, so a command reads the checkpoint's files once."""

    def __init__(self, path, trainer, trained):
        self.path, self.trainer, self.trained = path, trainer, trained

    @property
    def tokenizer(self):
        return self.trainer.tokenizer

    def __str__(self):
        return self.path


def open_checkpoint(path, units=None, threads=None) -> OpenCheckpoint:
    """Open a lutcore checkpoint once: its trained units are read and checked once and its
    weights loaded once (``load_checkpoint`` is this, returning the trainer)."""
    from lutcore.train import Trainer
    from lutcore.units import resolve
    trained = checkpoint_units(path)
    tr = Trainer.resume(path, units=trained, threads=threads)
    if units is not None and units not in FLOAT_SPECS:
        u = resolve(units, mx=True)
        if trained is None or u.digest != trained.digest:
            tr.model = _rebuild(tr.model, u, threads)
    elif units in ("none", "float") and trained is not None:
        tr.model = _rebuild(tr.model, None, threads)
    return OpenCheckpoint(os.fspath(path), tr, trained)


def _rebuild(model, units, threads):
    """The same weights (shared, not copied) through other units, forward only."""
    return type(model)(model.config, params=model.parameters(), units=units, threads=threads)


# ------------------------------------------------------------------ models
class _HF:
    """A Hugging Face directory: weights read once, one single-stage pipeline per unit."""

    def __init__(self, path, threads):
        from lutcore._io import read_config
        from lutcore.pipeline.arch import ArchSpec
        from lutcore.pipeline.shard import load_stage_weights, plan_from_splits
        self.path, self.threads = path, threads
        cfg = read_config(path)
        self.spec = ArchSpec.from_config(cfg)
        self.plan = plan_from_splits(self.spec, [self.spec.layers])[0]
        self.weights = load_stage_weights(path, self.spec, self.plan)
        self.vocab = self.spec.vocab
        # the context: learned positions (gpt2), else the positions the config says it was trained for
        ctx = self.spec.max_pos or cfg.get("max_position_embeddings")
        self.context = ctx if isinstance(ctx, int) and not isinstance(ctx, bool) and ctx > 0 else None
        self.hard_context = self.spec.max_pos        # beyond this the model cannot run at all
        self.label = f"{self.spec.model_type} {path}"

    def layer_names(self):
        from lutcore.pipeline.arch import unit_layer_names
        return unit_layer_names(self.spec, attention=True)

    def scorer(self, units):
        from lutcore.pipeline import Pipeline
        from lutcore.pipeline.stage import Stage
        pipe = Pipeline.from_stages([Stage(self.spec, self.plan, self.weights, units=units, threads=self.threads)])
        return lambda wins: np.stack([pipe.logits(w) for w in wins])


class _Own:
    """A lutcore MambaLM / GPT: one forward copy on the same parameters (built once, not per
    unit), switched from unit to unit by ``set_units``; the caller's model is left as it is."""

    def __init__(self, model, threads, label):
        self.model, self.threads, self.label = model, threads, label
        self.vocab = model.config.vocab_size
        self.context = self.hard_context = getattr(model.config, "context", None)
        self._work = None

    def layer_names(self):
        return self.model.layer_names(attention=True)

    def scorer(self, units):
        """The forward through ``units`` (valid until the next call)."""
        if self._work is None:
            self._work = _rebuild(self.model, units, self.threads)
        else:
            self._work.set_units("none" if units is None else units)
        m = self._work
        return lambda wins: m.forward(np.stack(wins))


def _open(model_or_path, tokenizer, threads):
    """-> (model wrapper, tokenizer or None, trained units or None)."""
    from lutcore._io import contained, saved_dir
    from lutcore.tokenizer import Tokenizer
    if isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        if os.path.isfile(os.path.join(saved_dir(path), "trainer.json")):
            model_or_path = open_checkpoint(path, threads=threads)
    if isinstance(model_or_path, OpenCheckpoint):
        tr, path = model_or_path.trainer, model_or_path.path
        return _Own(tr.model, threads, f"{type(tr.model).__name__} checkpoint {path}"), \
            tokenizer or tr.tokenizer, getattr(tr.model, "units", None)
    if isinstance(model_or_path, (str, os.PathLike)):
        if os.path.isfile(os.path.join(path, "config.json")):
            m = _HF(path, threads)
            tj = contained(path, "tokenizer.json")
            if tokenizer is None and os.path.isfile(tj):
                tokenizer = Tokenizer.from_file(tj)
            return m, tokenizer, None
        if not os.path.isdir(path):
            raise FileNotFoundError(f"model: no such directory {path!r}")
        raise ValueError(f"model: {path!r} holds neither trainer.json (a lutcore checkpoint) nor config.json "
                         f"(a Hugging Face checkpoint)")
    if hasattr(model_or_path, "parameters") and hasattr(model_or_path, "forward") and \
            hasattr(model_or_path, "config"):
        return _Own(model_or_path, threads, type(model_or_path).__name__), tokenizer, \
            getattr(model_or_path, "units", None)
    raise TypeError(f"model_or_path: expected a checkpoint directory (Hugging Face or lutcore) or a lutcore "
                    f"MambaLM / GPT, got {type(model_or_path).__name__}")


def _tokens(data, tokenizer, vocab, where):
    from lutcore import _check
    from lutcore.train.data import load_tokens
    if isinstance(data, str) or isinstance(data, os.PathLike):
        if tokenizer is None:
            raise ValueError(f"data: text needs a tokenizer, and {where} has no tokenizer.json; pass "
                             f"tokenizer= or token ids")
        ids = load_tokens(data, tokenizer)
    else:
        ids = np.asarray(data)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"data: expected text, a file path or integer token ids, got dtype {ids.dtype}")
        ids = ids.reshape(-1).astype(np.int64)
    return _check.token_ids(ids, "data", vocab)


def _label(spec) -> str:
    if isinstance(spec, os.PathLike):
        return os.fspath(spec)
    if isinstance(spec, dict):
        return "per-layer"
    return spec if isinstance(spec, str) else getattr(spec, "name", str(spec))


def _key(u):
    """The cache key of a resolved spec: None (float), a digest, or ("per-layer", digest)."""
    from lutcore.units import assign
    if isinstance(u, assign.Assignment):
        return ("per-layer", assign.digest_of(u))
    return None if u is None else u.digest


# ------------------------------------------------------------------ the table
def evaluate_units(model_or_path, data, units=("none",), seq_len=None, *, tokenizer=None, threads=None,
                   on_window=None, batch_size: int = 8, attention: bool = False) -> EvalResult:
    """Loss, perplexity, bits/token, Δloss and top-1 agreement with float through each units
    spec (``"none"`` = float32; names, directories, ``.v`` files, ``file.c:function`` or
    ``Units``).  ``data``: text, a text file, or token ids.  ``seq_len``: the window L
    (default: the model's context, capped at 512).  ``on_window(done, total, spec)``: progress
    over units x windows.  ``batch_size``: windows per forward of a lutcore model (a Hugging
    Face model's pipeline takes one at a time).  ``attention``: each single spec also runs
    attention's own products (q k^T, p v: ``.qk`` / ``.pv``) through its unit (a mapping names
    them with such keys); its row keeps the unit's ``name``, ``wce_pct`` and ``mae_pct`` and adds
    ``layers``.  See the module docstring for the definitions."""
    from lutcore import _check
    from lutcore.units import assign, resolve
    if isinstance(units, (str, os.PathLike, dict)) or not hasattr(units, "__iter__"):
        units = [units]
    specs = [None if (u in FLOAT_SPECS) else u for u in units]
    if not specs:
        raise ValueError("units: need at least one units spec ('none' for float)")
    if on_window is not None and not callable(on_window):
        raise TypeError(f"on_window: expected a callable(done, total, spec) or None, got {type(on_window).__name__}")
    batch_size = _check.int_arg(batch_size, "batch_size", lo=1)
    model, tokenizer, trained = _open(model_or_path, tokenizer, threads)
    resolved = []                                                     # every spec checked before any work
    single = {}                 # attention=True: the key of a single spec's assignment -> its unit
    for s in specs:
        mapping = None if s is None else assign.as_mapping(s)
        if mapping is not None:
            resolved.append(assign.assign(mapping, model.layer_names(), what=f"units {_label(s)}", fill=True))
        elif s is not None and attention:            # the spec for the weights and for attention's products
            u = resolve(s, mx=True)
            resolved.append(assign.assign({"*": u, "*.qk": u, "*.pv": u}, model.layer_names(),
                                          what=f"units {_label(s)}", fill=True))
            single[_key(resolved[-1])] = u
        else:
            resolved.append(None if s is None else resolve(s, mx=True))
    wins, targets, ids, L = _windows(model, data, tokenizer, seq_len)
    n_win = len(wins)
    todo = [None] + [u for u in resolved if u is not None]
    seen, order = set(), []
    for u in todo:
        key = _key(u)
        if key not in seen:
            seen.add(key)
            order.append(u)
    total, scored = len(order) * n_win, {}
    config = {"model": model.label, "seq_len": L, "windows": n_win, "tokens": int(targets.size),
              "data_tokens": int(ids.size), "trained_units": None if trained is None else trained.name,
              "trained_units_digest": None if trained is None else trained.digest}
    try:
        _score_all(model, order, wins, targets, batch_size, on_window, scored, total, single)
    except KeyboardInterrupt as e:
        if isinstance(e, EvalInterrupted):
            raise
        raise EvalInterrupted(_result(units, resolved, scored, config, interrupted=True)) from None
    return _result(units, resolved, scored, config)


def _score_all(model, order, wins, targets, batch_size, on_window, scored, total, single=None):
    """Score each unit of ``order`` (None = float, first), filling ``scored[digest]`` as each
    finishes (an interruption leaves the finished ones; ``scored["_current"]``: where it was).
    ``single``: {key: unit} of the assignments that are one spec run in attention too
    (``attention=True``): their rows and progress carry that unit's name and error metrics."""
    from lutcore.units import assign
    n_win, L = targets.shape
    done = 0
    float_top1 = None
    for u in order:
        t0 = time.perf_counter()
        per = isinstance(u, dict)
        one = (single or {}).get(_key(u)) if per else None
        cur = {"units": "none" if u is None else one.name if one is not None else "per-layer" if per else u.name,
               "digest": _key(u),
               "windows_done": 0, "windows": n_win}
        scored["_current"] = cur
        score = model.scorer(u)
        nll, top1 = 0.0, np.empty((n_win, L), np.int64)
        step = batch_size if isinstance(model, _Own) else 1
        units_of = [] if u is None else list(u.values()) if per else [u]
        declared = any(v is not None and v.accumulator is not None for v in units_of)
        with _accum.overflow_log() if declared else contextlib.nullcontext() as log:
            for s in range(0, n_win, step):
                chunk = wins[s:s + step]
                part, top1[s:s + len(chunk)] = _nll(score([w[:-1] for w in chunk]), targets[s:s + len(chunk)])
                nll += part
                done += len(chunk)
                cur["windows_done"] = s + len(chunk)
                if on_window is not None:
                    on_window(done, total, cur["units"])
        loss = nll / targets.size
        if u is None:
            float_top1 = top1
        met = one.error_metrics() if one is not None else None if u is None or per else u.error_metrics()
        scored[_key(u)] = {
            "name": "float" if u is None else one.name if one is not None else assign.describe(_shown(u)) if per
            else u.name,
            "digest": None if u is None else _key(u)[1] if per else u.digest,
            "wce_pct": None if met is None else met["wce_pct"], "mae_pct": None if met is None else met["mae_pct"],
            **({"layers": {n: "none" if v is None else v.name for n, v in _shown(u).items()}} if per else {}),
            "loss": loss, "perplexity": math.exp(min(loss, 700.0)), "bits_per_token": loss / math.log(2),
            "accuracy": float((top1 == targets).mean()),
            "top1_agreement": float((top1 == float_top1).mean()),
            **({"overflow": _overflow_rows(log)} if declared else {}),
            "seconds": time.perf_counter() - t0}


def _shown(assignment) -> dict:
    """An assignment as a row shows it: attention's products only where they run through units."""
    from lutcore.units.assign import is_attention
    return {n: v for n, v in assignment.items() if v is not None or not is_attention(n)}


def _overflow_rows(log) -> dict:
    """{layer: {outputs, overflowed, events, additions, overflowed_pct}} of an overflow log."""
    out = {}
    for name, r in log.to_dict().items():
        out[name] = {**r, "overflowed_pct": 100.0 * r["overflowed"] / r["outputs"] if r["outputs"] else 0.0}
    return out


def _result(units, resolved, scored, config, interrupted=False):
    """The EvalResult of the rows in ``scored``: all of them, or (``interrupted``) those
    finished, with ``remaining`` the specs not scored.  Without the float reference no row
    is finished (Δloss and top-1 agreement are relative to it)."""
    ref = scored.get(None)
    cur = scored.pop("_current", None)
    rows, remaining = [], []
    for spec, u in zip(units, resolved):
        label = "none" if u is None else _label(spec)
        key = _key(u)
        if ref is None or key not in scored:
            remaining.append(label)
            continue
        r = dict(scored[key])
        r["dloss"] = r["loss"] - ref["loss"]
        rows.append({"units": label, **r})
    if not interrupted:
        return EvalResult(config=config, rows=rows, reference={"units": "none", **ref, "dloss": 0.0})
    config = {**config, "interrupted_in": None if cur is None or cur["digest"] in scored else cur}
    return EvalResult(config=config, rows=rows, reference=None if ref is None else {"units": "none", **ref,
                      "dloss": 0.0}, partial=True, remaining=remaining)


def format_table(res: EvalResult) -> str:
    c = res.config
    head = ("units", "WCE%", "loss", "ppl", "bits/tok", "Δloss", "top-1 = float", "top-1 acc")
    rows = [head]
    for r in res.rows:
        rows.append((r["units"], "-" if r["wce_pct"] is None else f"{r['wce_pct']:.3g}", f"{r['loss']:.4f}",
                     f"{r['perplexity']:.3f}", f"{r['bits_per_token']:.3f}", f"{r['dloss']:+.4f}",
                     f"{r['top1_agreement']:.3f}", f"{r['accuracy']:.3f}"))
    lines = [f"{c['model']}: {c['tokens']:,} predicted tokens in {c['windows']} window(s) of {c['seq_len']}"]
    lines += _aligned(rows)
    for r in res.rows:                        # a declared accumulator: its overflows, layer by layer
        if r.get("overflow"):
            lines.append(f"\noverflows of {r['units']}'s accumulator (dot products that wrapped or saturated "
                         f"at least once):")
            lines += _aligned([("layer", "dot products", "overflowed", "%", "events")] + [
                (n, f"{o['outputs']:,}", f"{o['overflowed']:,}", f"{o['overflowed_pct']:.3g}", f"{o['events']:,}")
                for n, o in r["overflow"].items()])
    return "\n".join(lines)


def _overflowed_pct(layers: dict) -> float:
    """Share (%) of a row's dot products, over all layers, that overflowed at least once."""
    n = sum(o["outputs"] for o in layers.values())
    return 100.0 * sum(o["overflowed"] for o in layers.values()) / n if n else 0.0


def _aligned(rows) -> list:
    """Text lines of a table: the first column left-aligned, the others right, a rule under the head."""
    w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(x.ljust(w[j]) if j == 0 else x.rjust(w[j]) for j, x in enumerate(row)))
        if i == 0:
            lines.append("  ".join("-" * x for x in w))
    return lines


def write_report(res: EvalResult, out) -> dict:
    """eval.json (the rows, in order) and eval.png (Δloss per unit, labelled with WCE%) in ``out``,
    each written atomically (a failed or killed write keeps the old file).  A partial result
    (``EvalInterrupted.result``) is written the same way: eval.json says ``"partial": true``
    and lists the ``remaining`` specs."""
    from lutcore._io import atomic_file, target_dir
    out = target_dir(out, "out")
    os.makedirs(out, exist_ok=True)
    js, png = os.path.join(out, "eval.json"), os.path.join(out, "eval.png")
    with atomic_file(js) as tmp, open(tmp, "w") as f:                 # a failed write keeps the old report
        json.dump(res.to_dict(), f, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['units']}\nWCE {'-' if r['wce_pct'] is None else format(r['wce_pct'], '.3g') + '%'}"
              + (f"\noverflowed {_overflowed_pct(r['overflow']):.3g}%" if r.get("overflow") else "")
              for r in res.rows]
    d = [r["dloss"] for r in res.rows]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(d) + 2), 4.2))
    bars = ax.bar(range(len(d)), d, color=["#888" if r["digest"] is None else "#c0504d" for r in res.rows])
    for b, r in zip(bars, res.rows):
        ax.annotate(f"ppl {r['perplexity']:.3g}", (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom" if b.get_height() >= 0 else "top", fontsize=8)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(d)), labels, fontsize=8)
    ax.set_ylabel("Δloss vs float (nats/token)")
    c = res.config
    ref = "float loss -" if res.reference is None else f"float loss {res.reference['loss']:.4f}"
    ax.set_title(f"damage per unit: {os.path.basename(str(c['model']))[:60]}"
                 f"{' (partial: interrupted)' if res.partial else ''}\n"
                 f"{ref}, {c['tokens']:,} tokens, windows of {c['seq_len']}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    with atomic_file(png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return {"json": js, "png": png}


def _windows(model, data, tokenizer, seq_len):
    """The token stream of ``data`` cut into the evaluation windows (see the module docstring):
    -> (wins [(L + 1,) ids], targets (n_win, L), ids, L)."""
    from lutcore import _check
    cap = MAX_SEQ_LEN if model.context is None else min(model.context, MAX_SEQ_LEN)
    L = cap if seq_len is None else _check.int_arg(seq_len, "seq_len", lo=1)
    if model.hard_context is not None and L > model.hard_context:
        raise ValueError(f"seq_len: {L} exceeds the model's context of {model.hard_context} positions")
    ids = _tokens(data, tokenizer, model.vocab, model.label)
    n_win = (ids.size - 1) // L
    if n_win < 1:
        raise ValueError(f"data: {ids.size} tokens is fewer than one window of seq_len + 1 = {L + 1}")
    wins = [ids[w * L: w * L + L + 1] for w in range(n_win)]          # each (L + 1,)
    return wins, np.stack([w[1:] for w in wins]), ids, L


def _nll(logits, targets):
    """(summed next-token cross-entropy in float64, arg-max ids) of logits (b, L, V)."""
    logits = logits.astype(np.float64)
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]              # (b, L)
    return float((lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]).sum()), logits.argmax(-1)
