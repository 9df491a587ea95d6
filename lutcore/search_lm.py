"""Which unit where, for language models: the per-layer search on held-out loss.

Design: the front end of ``lutcore.search`` for lutcore's own GPT / MambaLM (an object or
a training checkpoint) and Hugging Face checkpoints (llama, qwen2, mistral, gpt2, mamba,
run by one pipeline stage).  The metric is the held-out loss as ``lutcore eval`` defines
it (the same windows, the same float64 accumulation), lower is better.  The model is
built once with every searched layer through the exact unit; an assignment only switches
units on the layers (no weight is re-quantized, nothing rebuilt).  Product counts come
from a dry run on one window (every window has the same length, so a layer's count is
that run's times the number of windows).  ``lutcore search`` is this function on argv.

What the points measure (search.json's ``measured_on``, checked by a resume before any
evaluation): a fingerprint of the token windows (the data as tokenized, ``seq_len``
included), of the model's weights and architecture, the windows per forward of a lutcore
model (its float64 loss is summed per batch), and the metric — with the space's layers,
products, unit tables, costs and reference.  A resume on another text, model or library is
a ValueError naming what differs.
"""
from __future__ import annotations

import numpy as np

from lutcore import search as _core

__all__ = ["search_lm", "sensitivity_lm"]


class _OwnSpace:
    """A lutcore MambaLM / GPT, rebuilt once on the same parameters with per-layer units."""

    def __init__(self, own, threads, batch_size):
        from lutcore.evaluate import _rebuild
        self.model = _rebuild(own.model, "exact", threads)
        self.names = self.model.layer_names(attention=True)
        self.step = batch_size

    def fingerprint(self) -> str:
        m = self.model
        return _core.fingerprint(type(m).__name__, repr(m.config), dict(m.parameters()))

    def count(self, win):
        return self.model.count_products(np.asarray(win)[None, :], attention=True)

    def apply(self, per):
        self.model.set_units(per)

    def logits(self, chunk):
        return self.model.forward(np.stack(chunk))


class _HFSpace:
    """A Hugging Face checkpoint: one stage holding every layer, built once through the exact
    unit; assignments switch units on its quantized weights."""

    def __init__(self, hf, threads, batch_size, cands=()):
        from lutcore.pipeline import Pipeline
        from lutcore.pipeline.stage import Stage
        mx = [u for u in cands if getattr(u, "kind", None) == "mx"]   # their blocks from the float weights, as
        self.stage = Stage(hf.spec, hf.plan, hf.weights, units="exact", threads=threads,   # lutcore eval's
                           keep_mx=mx)
        self.pipe = Pipeline.from_stages([self.stage])
        self.names = self.stage.layer_names(attention=True)
        self.step = 1
        self.spec, self.weights = hf.spec, hf.weights

    def fingerprint(self) -> str:
        return _core.fingerprint(repr(self.spec), dict(self.weights))

    def count(self, win):
        return self.stage.count_products(np.asarray(win), attention=True)

    def apply(self, per):
        self.stage.set_units(per)

    def logits(self, chunk):
        return np.stack([self.pipe.logits(np.asarray(w)) for w in chunk])


class _LMSpace:
    def __init__(self, model, data, units, *, seq_len, tokenizer, threads, layers, reference, batch_size,
                 attention=False):
        from lutcore import _check
        from lutcore.evaluate import _HF, _open, _windows
        batch_size = _check.int_arg(batch_size, "batch_size", lo=1)
        cands, ref = _core.candidates_and_reference(units, reference)   # every spec resolved before any work
        wrapped, tokenizer, _ = _open(model, tokenizer, threads)
        self.label = wrapped.label
        self.wins, self.targets, _, self.seq_len = _windows(wrapped, data, tokenizer, seq_len)
        self.m = _HFSpace(wrapped, threads, batch_size, cands) if isinstance(wrapped, _HF) else \
            _OwnSpace(wrapped, threads, batch_size)
        from lutcore.units.assign import is_attention
        names = self.m.names if attention or layers is not None else [n for n in self.m.names if not is_attention(n)]
        self.layers = _core.select_layers(names, layers)
        per_window = self.m.count(self.wins[0][:-1])
        n = len(self.wins)
        self.cand = _core.Candidates(cands, {l: per_window[l] * n for l in self.layers}, reference=ref)

    def loss(self, assignment) -> float:
        """The held-out loss with ``assignment`` {layer: candidate name} (other layers: exact)."""
        from lutcore.evaluate import _nll
        self.m.apply({l: self.cand.by_name[assignment[l]] for l in self.layers})
        nll, step = 0.0, self.m.step
        for s in range(0, len(self.wins), step):
            chunk = self.wins[s:s + step]
            part, _ = _nll(self.m.logits([w[:-1] for w in chunk]), self.targets[s:s + len(chunk)])
            nll += part
        return nll / self.targets.size

    def evaluate_many(self, assignments):
        for a in assignments:                 # each as it finishes: Ctrl-C mid-batch keeps the finished
            yield self.loss(a)

    def measured_on(self) -> dict:
        """The data (the token windows), the model (weights, architecture) and the metric."""
        return {"data": {"windows": _core.fingerprint(np.stack(self.wins).astype(np.int64)),
                         "seq_len": self.seq_len, "n_windows": len(self.wins)},
                "model": self.m.fingerprint(), "windows_per_forward": self.m.step,
                "metric_name": "held-out loss (nats/token)"}

    def config(self) -> dict:
        return {"metric_name": "held-out loss (nats/token)", "model": self.label, "seq_len": self.seq_len,
                "windows": len(self.wins), "tokens": int(self.targets.size), "measured_on": self.measured_on()}


def sensitivity_lm(model, data, units, *, seq_len=None, tokenizer=None, threads=None, layers=None,
                   reference=None, batch_size: int = 8, progress=True, out=None,
                   attention: bool = False) -> "_core.Sensitivity":
    """Held-out loss with one layer at a time through each unit (the rest exact): a
    ``lutcore.search.Sensitivity`` (``save(dir)``: sensitivity.json and the heatmap)."""
    space = _LMSpace(model, data, units, seq_len=seq_len, tokenizer=tokenizer, threads=threads, layers=layers,
                     reference=reference, batch_size=batch_size, attention=attention)
    bar = _core.tqdm_bar(progress, 1 + len(space.layers) * len(space.cand.names), "sensitivity")
    try:
        cache = _core._Cache(space.cand, space.evaluate_many, progress=bar.update if bar else None)
        res = _core.run_sensitivity(space.cand, space.evaluate_many, metric_name=space.config()["metric_name"],
                                    cache=cache)
    finally:
        if bar:
            bar.close()
    if out is not None:
        res.save(out)
    return res


def search_lm(model, data, units, *, budget: int = 200, seq_len=None, tokenizer=None, threads=None, layers=None,
              reference=None, greedy: bool = True, pop_size=None, seed: int = 0, batch_size: int = 8, out=None,
              resume: bool = False, progress=True, attention: bool = False) -> "_core.SearchResult":
    """The per-layer search of a language model: minimise the relative multiplier energy and
    the held-out loss on ``data`` (text, a text file or token ids; windows as ``lutcore
    eval``).

    ``model``: a Hugging Face checkpoint directory, a lutcore training checkpoint or a
    MambaLM / GPT; ``units``: specs / Units or a units library, each with a power figure in
    its ``cost`` (the exact one among them, or ``reference=``); ``layers``: names, prefixes
    or globs of the layers to search (default all weight matmuls, and with ``attention=True``
    attention's own products too; the rest stay exact, attention's products float) — the names
    are the Hugging Face module names (``model.layers.3.mlp.down_proj``, ``lm_head``,
    ``model.layers.3.self_attn.qk`` / ``.pv``: a key names those only by ending in qk / pv);
    energy counts every product of each searched layer; ``budget``,
    ``greedy``, ``pop_size``, ``seed``: as ``lutcore.torch.search``; ``out``: search.json kept
    current after every batch, front.png drawn at the end (Ctrl-C leaves every point so
    far there);
    ``resume=True`` continues from ``out``'s search.json.  Returns a
    ``lutcore.search.SearchResult``; ``result.model_at(point)`` re-applies a point (its loss
    again, bit for bit).  A resume whose search.json was measured on another text, model or
    units library is a ValueError naming the difference (see the module)."""
    a = _core.check_args(budget=budget, greedy=greedy, pop_size=pop_size, seed=seed, progress=progress)
    if threads is not None:
        from lutcore._threads import resolve_threads
        resolve_threads(threads)                      # the TypeError / ValueError naming threads
    prior = _core.prior_result(out, resume)
    space = _LMSpace(model, data, units, seq_len=seq_len, tokenizer=tokenizer, threads=threads, layers=layers,
                     reference=reference, batch_size=batch_size, attention=attention)
    bar = _core.tqdm_bar(a["progress"], a["budget"], "search", initial=len(prior.points) if prior else 0)
    try:
        res = _core.search_files(space.cand, space.evaluate_many, budget=a["budget"], greedy=a["greedy"],
                                 pop_size=a["pop_size"], seed=a["seed"], prior=prior, out=out,
                                 progress=bar.update if bar else None, config=space.config())
    finally:
        if bar:
            bar.close()

    def model_at(p):
        space.m.apply({l: space.cand.by_name[n] for l, n in
                       (p.assignment if hasattr(p, "assignment") else p).items()})
        return getattr(space.m, "model", None) or space.m.stage
    res._model_at = model_at
    res._evaluate_at = lambda p: space.loss(p.assignment if hasattr(p, "assignment") else p)
    return res
