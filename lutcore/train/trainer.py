"""The training loop: batching, gradient accumulation, clipping, mixed
precision, the write-through (WSLA) trainable set, evaluation, adaptation
with rollback, and checkpoints that resume bit-exactly.

Design: the Trainer works with any model exposing ``parameters()`` (the live
float32 arrays, by name) and ``loss_and_grads(ids, targets)``; it never
prints — progress goes to the ``on_step`` / ``on_epoch_end`` callbacks.  A
checkpoint is one directory saved crash-safely (``lutcore._io.atomic_dir``: new
files fsynced, one journal rename as the switch; a killed save leaves the old or
the new checkpoint resumable): weights and moments in safetensors, everything
else in JSON (trainer.json, checked whole on resume).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import threading
import time

import numpy as np

from lutcore import __version__, _check, _threads
from lutcore.ops.elementwise import fp16_round
from lutcore.tokenizer import Tokenizer
from lutcore.train import data as _data
from lutcore.train.amp import DynamicLossScaler
from lutcore.train.optim import AdamW

__all__ = ["Trainer", "wsla_names", "MODEL_CLASSES"]

WSLA_KEY = ".mixer.x_proj."
CKPT_FORMAT = "lutcore-trainer/1"


def _model_classes():
    from lutcore.models.mamba import MambaConfig, MambaLM
    out = {"MambaLM": (MambaLM, MambaConfig)}
    try:
        from lutcore.models.gpt import GPT, GPTConfig
        out["GPT"] = (GPT, GPTConfig)
    except ImportError:
        pass
    return out


MODEL_CLASSES = _model_classes


def wsla_names(params: dict) -> list[str]:
    """The write-through set: every layer's x_proj weight (and bias)."""
    names = [k for k in params if WSLA_KEY in k]
    if not names:
        raise ValueError("wsla: this model has no x_proj parameters (WSLA needs a Mamba model)")
    return sorted(names)


@contextlib.contextmanager
def _sigint_deferred():
    """Hold a Ctrl-C (SIGINT) that arrives inside the block until it ends, then raise the
    KeyboardInterrupt: the block (an optimizer step and its bookkeeping) runs whole.  Only
    in the main thread and only over Python's default handler (a handler of the user's is
    left alone)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    got = []
    try:
        signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if got:
        raise KeyboardInterrupt


class Trainer:
    def __init__(self, model, optimizer: AdamW | None = None, tokenizer: Tokenizer | None = None, *,
                 lr: float = 1e-3, weight_decay: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8,
                 max_delta: float = 0.0, seed: int = 0, threads=None):
        if not hasattr(model, "parameters") or not hasattr(model, "loss_and_grads"):
            raise TypeError("model: expected an object with parameters() and loss_and_grads(ids, targets)")
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer: expected a lutcore Tokenizer (Tokenizer.bytes(), Tokenizer.from_file), "
                            f"got {type(tokenizer).__name__}")
        if optimizer is not None and not isinstance(optimizer, AdamW):
            raise TypeError(f"optimizer: expected a lutcore AdamW, got {type(optimizer).__name__}")
        self.model = model
        self.tokenizer = tokenizer or Tokenizer.bytes()
        vocab = getattr(getattr(model, "config", None), "vocab_size", None)
        if vocab is not None and self.tokenizer.vocab_size > vocab:
            raise ValueError(f"tokenizer: {self.tokenizer.name} has {self.tokenizer.vocab_size} ids but the "
                             f"model's vocabulary has {vocab}")
        # no threads of its own: it steps inside this trainer's scope (its entry points)
        self.optimizer = optimizer or AdamW(model.parameters(), lr=lr, betas=betas, eps=eps,
                                            weight_decay=weight_decay, max_delta=max_delta)
        self.base_max_delta = self.optimizer.max_delta
        self.scaler: DynamicLossScaler | None = None
        self.seed = _check.int_arg(seed, "seed", lo=0)
        self.threads = threads
        self.global_step = 0
        self.position = {"epoch": 0, "batch": 0, "fingerprint": None}
        self.history: list[dict] = []
        self.train_config: dict | None = None    # what the last train() ran with (TRAIN_CONFIG_KEYS)

    # ------------------------------------------------------------ helpers
    def _tokens(self, data):
        return _data.load_tokens(data, self.tokenizer)

    def _micro(self, batch, trainable, mixed_precision, scale):
        ids, tg = batch[:, :-1], batch[:, 1:]
        params = self.model.parameters()
        if mixed_precision:
            master = {k: v.copy() for k, v in params.items()}
            for k, v in params.items():
                fp16_round(v, out=v)                 # compute on the fp16 view
            try:
                loss, g = self.model.loss_and_grads(ids, tg)
            finally:
                with _sigint_deferred():             # the float32 weights come back whole
                    for k, v in params.items():
                        v[...] = master[k]
            out = {}
            for k in trainable:
                gs = g[k] * np.float32(scale)        # scaled once per micro-batch
                out[k] = fp16_round(gs)              # what an fp16 gradient keeps
            return loss, out
        loss, g = self.model.loss_and_grads(ids, tg)
        return loss, {k: g[k] for k in trainable}

    def _trainable(self, wsla: bool) -> list[str]:
        params = self.model.parameters()
        return wsla_names(params) if wsla else sorted(params)

    # ------------------------------------------------------------ training
    @_threads.entry
    def train(self, data, epochs: int = 1, seq_len: int = 128, batch_size: int = 8, grad_accum: int = 1,
              max_grad_norm: float | None = 1.0, wsla: bool = False, max_delta: float | None = None,
              mixed_precision: bool = False, on_step=None, on_epoch_end=None, max_steps: int | None = None,
              micro_batch: int | None = None, workers=None):
        """Train; returns the mean loss of each epoch run (or partly run) in this call.

        ``max_steps`` caps the total optimizer steps (``global_step``), so a run can
        stop mid-epoch; calling ``train`` again with the same data continues from
        the recorded position (this is what a resumed checkpoint does).

        Ctrl-C (KeyboardInterrupt) leaves the trainer at the end of its last whole step:
        an optimizer step and its bookkeeping run whole (a SIGINT inside is held until
        it ends), and the micro-batches of an unfinished step are given back (their
        gradients dropped, ``position`` where the step began), so ``save_checkpoint``
        then writes a checkpoint that resumes as if the run had stopped there.

        ``micro_batch`` (rows): each batch is cut into micro-batches of that many rows (a
        batch's tail, shorter); a step's gradient is the exact, order-independent sum of
        its micro-batches' gradients (``lutcore.train.exactsum``) rounded once, divided by
        their count in the optimizer's pass.  ``workers`` (a ``lutcore.train.dp.RayWorkers``)
        computes the micro-batches on Ray actors: the parameters after any step are the
        same bits for any number of workers and equal to ``workers=None`` (docs/DESIGN.md,
        "Data-parallel training")."""
        epochs, seq_len, batch_size, grad_accum = (
            _check.int_arg(v, name, lo=1) for name, v in (("epochs", epochs), ("seq_len", seq_len),
                                                          ("batch_size", batch_size), ("grad_accum", grad_accum)))
        wsla = _check.bool_arg(wsla, "wsla")
        mixed_precision = _check.bool_arg(mixed_precision, "mixed_precision")
        if max_grad_norm is not None:
            max_grad_norm = _check.float_arg(max_grad_norm, "max_grad_norm", lo=0.0, lo_open=True)
        if max_delta is not None:
            max_delta = _check.float_arg(max_delta, "max_delta", lo=0.0)
        if max_steps is not None:
            max_steps = _check.int_arg(max_steps, "max_steps", lo=0)
        if workers is not None and micro_batch is None:
            raise ValueError("micro_batch: expected a micro-batch size (rows) with workers=, got None (the "
                             "reduction that gives the same bits for any worker count works per micro-batch)")
        if micro_batch is not None:
            micro_batch = _check.int_arg(micro_batch, "micro_batch", lo=1)
            if batch_size % micro_batch:
                raise ValueError(f"micro_batch: expected a divisor of batch_size={batch_size} (the global batch "
                                 f"is cut into micro-batches of one size), got {micro_batch}")
            if workers is not None and workers.n > grad_accum * batch_size // micro_batch:
                raise ValueError(f"workers: expected at most {grad_accum * batch_size // micro_batch} (the "
                                 f"micro-batches of a step: grad_accum {grad_accum} x batch_size {batch_size} / "
                                 f"micro_batch {micro_batch}), got {workers.n} workers")
        for name, cb in (("on_step", on_step), ("on_epoch_end", on_epoch_end)):
            if cb is not None and not callable(cb):
                raise TypeError(f"{name}: expected a callable or None, got {type(cb).__name__}")
        ids = self._tokens(data)
        windows = _data.make_windows(ids, int(seq_len))
        fp = _data.fingerprint(ids, int(seq_len), int(batch_size))
        self.train_config = {"seq_len": seq_len, "batch_size": batch_size, "grad_accum": grad_accum,
                             "max_grad_norm": max_grad_norm, "wsla": wsla, "max_delta": max_delta,
                             "mixed_precision": mixed_precision, "micro_batch": micro_batch}
        if self.position.get("fingerprint") != fp:
            self.position = {"epoch": 0, "batch": 0, "fingerprint": fp}
        trainable = self._trainable(wsla)
        self.optimizer.max_delta = float(max_delta) if max_delta is not None else (0.05 if wsla else self.base_max_delta)
        if mixed_precision and self.scaler is None:
            self.scaler = DynamicLossScaler()
        epoch_means = []
        try:
            while self.position["epoch"] < epochs:
                ep = self.position["epoch"]
                batches = _data.epoch_batches(windows, int(batch_size), self.seed, ep)
                ep_losses = []
                while self.position["batch"] < len(batches):
                    if max_steps is not None and self.global_step >= max_steps:
                        if ep_losses:
                            epoch_means.append(float(np.mean(ep_losses)))
                        return epoch_means
                    t0 = time.perf_counter()
                    acc, losses, ntok = None, [], 0
                    scale = self.scaler.scale if mixed_precision else 1.0
                    k, b0 = 0, self.position["batch"]
                    if micro_batch is not None:
                        k = min(grad_accum, len(batches) - b0)
                        micros = [b[s:s + micro_batch] for b in batches[b0:b0 + k]
                                  for s in range(0, b.shape[0], micro_batch)]
                        acc, losses = self._reduced(micros, trainable, mixed_precision, scale, workers)
                        ntok = sum(m.shape[0] * (m.shape[1] - 1) for m in micros)
                        with _sigint_deferred():
                            rec = self._apply(acc, losses, k, ntok, ep, scale, mixed_precision, max_grad_norm,
                                              t0, n_terms=len(micros))
                        ep_losses.append(rec["loss"])
                        if on_step is not None:
                            on_step(rec)
                        continue
                    # the micro-batches: an interruption here keeps nothing of the step (position
                    # moves only in _apply)
                    while k < grad_accum and b0 + k < len(batches):
                        batch = batches[b0 + k]
                        loss, g = self._micro(batch, trainable, mixed_precision, scale)
                        if acc is None:
                            acc = {n: v.copy() for n, v in g.items()}
                        else:
                            for n in acc:
                                acc[n] += g[n]
                        losses.append(loss)
                        ntok += batch.shape[0] * (batch.shape[1] - 1)
                        k += 1
                    with _sigint_deferred():
                        rec = self._apply(acc, losses, k, ntok, ep, scale, mixed_precision, max_grad_norm, t0)
                    ep_losses.append(rec["loss"])
                    if on_step is not None:
                        on_step(rec)
                if ep_losses:
                    epoch_means.append(float(np.mean(ep_losses)))
                if on_epoch_end is not None:
                    on_epoch_end(ep, epoch_means[-1] if ep_losses else float("nan"))
                self.position = {**self.position, "epoch": ep + 1, "batch": 0}   # one assignment
        finally:
            self.optimizer.max_delta = self.base_max_delta
        return epoch_means

    def _reduced(self, micros, trainable, mixed_precision, scale, workers):
        """({name: exact sum of the micro-batches' gradients, rounded once}, [loss of each
        micro-batch, by global index]) — computed here or on the Ray workers."""
        if workers is not None:
            return workers.gradients(self, micros, trainable, mixed_precision, scale)
        from lutcore.train.exactsum import GradSum
        acc, losses = GradSum(), []
        for m in micros:
            loss, g = self._micro(m, trainable, mixed_precision, scale)
            acc.add(g)
            losses.append(loss)
        return acc.result(), losses

    def _apply(self, acc, losses, k, ntok, ep, scale, mixed_precision, max_grad_norm, t0, n_terms=None) -> dict:
        """A step's update and bookkeeping (run whole: see ``train``); its history record.
        ``k`` batches consumed; the gradient is the sum of ``n_terms`` (default ``k``) means."""
        n_terms = k if n_terms is None else n_terms
        proceed = True
        if mixed_precision:
            overflow = self.scaler.check(acc)
            proceed = self.scaler.update(overflow)
        if proceed and all(math.isfinite(l) for l in losses):
            info = self.optimizer.step(acc, max_grad_norm=max_grad_norm, grad_scale=1.0 / (scale * n_terms))
        else:
            self.optimizer.skipped += 0 if mixed_precision else 1
            info = {"step": self.optimizer.t, "skipped": True, "grad_norm": float("nan"), "clip_factor": 1.0}
        self.position["batch"] += k
        self.global_step += 1
        rec = {"step": self.global_step, "epoch": ep, "loss": float(np.mean(losses)),
               "grad_norm": info["grad_norm"], "clip_factor": info["clip_factor"],
               "skipped": bool(info["skipped"]), "tokens": ntok, "seconds": time.perf_counter() - t0,
               "loss_scale": self.scaler.scale if mixed_precision else None}
        self.history.append(rec)
        return rec

    # ------------------------------------------------------------ evaluation
    @_threads.entry
    def evaluate(self, data, seq_len: int = 128, batch_size: int = 8) -> dict:
        """Mean loss (per predicted token), perplexity, bits per token, top-1 accuracy."""
        seq_len = _check.int_arg(seq_len, "seq_len", lo=1)
        batch_size = _check.int_arg(batch_size, "batch_size", lo=1)
        ids = self._tokens(data)
        windows = _data.make_windows(ids, seq_len)
        total, correct, count = 0.0, 0, 0
        from lutcore.models import _layers as nn
        by_len: dict[int, list] = {}
        for w in windows:
            by_len.setdefault(w.size, []).append(w)
        for _, ws in sorted(by_len.items()):
            for s in range(0, len(ws), batch_size):
                b = np.stack(ws[s:s + batch_size])
                logits = self.model.forward(b[:, :-1])
                loss, _ = nn.cross_entropy(logits, b[:, 1:])
                n = b.shape[0] * (b.shape[1] - 1)
                total += loss * n
                count += n
                correct += int((logits.argmax(-1) == b[:, 1:]).sum())
        mean = total / count
        return {"loss": mean, "perplexity": math.exp(min(mean, 700.0)), "bits_per_token": mean / math.log(2),
                "accuracy": correct / count, "tokens": count}

    @_threads.entry
    def adapt(self, text, epochs: int = 3, lr: float = 1e-4, rollback_tolerance: float = 1.25,
              seq_len: int = 64, batch_size: int = 4, max_delta: float = 0.05) -> dict:
        """Write-through adaptation: snapshot, measure perplexity, train only the
        x_proj weights, and roll back on a non-finite loss or when perplexity
        rose above ``rollback_tolerance`` x before."""
        rollback_tolerance = _check.float_arg(rollback_tolerance, "rollback_tolerance", lo=0.0, lo_open=True)
        lr = _check.float_arg(lr, "lr", lo=0.0)
        params = self.model.parameters()
        snap = {k: v.copy() for k, v in params.items()}
        opt_snap = self.optimizer.state_dict()
        pos_snap, step_snap, hist_len = dict(self.position), self.global_step, len(self.history)
        before = self.evaluate(text, seq_len, batch_size)
        old_lr = self.optimizer.lr
        self.optimizer.lr = float(lr)
        self.position = {"epoch": 0, "batch": 0, "fingerprint": None}
        try:
            losses = self.train(text, epochs=epochs, seq_len=seq_len, batch_size=batch_size, wsla=True,
                                max_delta=max_delta)
        finally:
            self.optimizer.lr = old_lr
        recs = self.history[hist_len:]
        after = self.evaluate(text, seq_len, batch_size)
        reason = None
        if not all(math.isfinite(r["loss"]) for r in recs) or not math.isfinite(after["loss"]):
            reason = "non-finite loss"
        elif after["perplexity"] > rollback_tolerance * before["perplexity"]:
            reason = (f"perplexity rose from {before['perplexity']:.4g} to {after['perplexity']:.4g} "
                      f"(> {rollback_tolerance} x)")
        if reason:
            for k, v in params.items():
                v[...] = snap[k]
            self.optimizer.load_state_dict(opt_snap)
            del self.history[hist_len:]
            self.global_step = step_snap
        self.position = pos_snap
        return {"losses": losses, "grad_norms": [r["grad_norm"] for r in recs],
                "perplexity_before": before["perplexity"], "perplexity_after": after["perplexity"],
                "rolled_back": reason is not None, "reason": reason}

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path) -> None:
        """Write the whole training state into directory ``path`` atomically (see
        ``lutcore._io.atomic_dir``: other files in the directory are kept)."""
        from safetensors.numpy import save_file
        from lutcore._io import MODEL_FILES, atomic_dir, sha256_file
        model = self.model
        cls = type(model).__name__
        if cls not in MODEL_CLASSES():
            raise TypeError(f"save_checkpoint: cannot checkpoint a {cls} (known: {sorted(MODEL_CLASSES())})")
        units = getattr(model, "units", None)
        if getattr(model, "mixed_units", False):
            raise ValueError("save_checkpoint: the model runs per-layer units (model.assignment()), and a "
                             "checkpoint records one units; save the assignment with "
                             "lutcore.units.assign.save_assignment and the weights with one units (or float)")
        meta = {
            "format": CKPT_FORMAT, "lutcore_version": __version__, "model_class": cls,
            "model_config": model.config.to_dict(), "dtype": str(np.dtype(getattr(model, "dtype", np.float32))),
            "unit_backward": (lambda v: v if v == "table" else bool(v))(getattr(model, "unit_backward", False)),
            "two_pass": bool(getattr(model, "two_pass", False)),
            "units_digest": getattr(units, "digest", None), "units_name": getattr(units, "name", None),
            "global_step": self.global_step, "position": self.position, "seed": self.seed,
            "optimizer": {k: v for k, v in self.optimizer.state_dict().items() if k not in ("m", "v")},
            "base_max_delta": self.base_max_delta,
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "tokenizer": self.tokenizer.spec(), "history": self.history,
            "train_config": self.train_config,
        }
        with atomic_dir(path, owned=MODEL_FILES + ("optimizer.safetensors", "trainer.json",
                                                   "units.safetensors")) as tmp:
            if units is not None:          # the tables themselves, so eval/generate can use them anywhere
                save_file(units_tensors(units), os.path.join(tmp, "units.safetensors"))
            save_file({k: np.ascontiguousarray(v) for k, v in model.parameters().items()},
                      os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
            mom = {f"m.{k}": v for k, v in self.optimizer.m.items()}
            mom.update({f"v.{k}": v for k, v in self.optimizer.v.items()})
            save_file(mom or {"_empty": np.zeros(1, np.float32)}, os.path.join(tmp, "optimizer.safetensors"))
            if hasattr(model.config, "to_hf"):
                with open(os.path.join(tmp, "config.json"), "w") as f:
                    json.dump(model.config.to_hf(), f, indent=2)
            # trainer.json goes in last and records the weights it belongs with: a save torn
            # between its renames is found on resume, not trained from
            meta["files"] = {n: {"bytes": os.path.getsize(os.path.join(tmp, n)),
                                 "sha256": sha256_file(os.path.join(tmp, n))}
                             for n in ("model.safetensors", "optimizer.safetensors")}
            with open(os.path.join(tmp, "trainer.json"), "w") as f:
                json.dump(meta, f, indent=1)

    @classmethod
    def resume(cls, path, units=None, threads=None) -> "Trainer":
        """Rebuild model, optimizer, scaler, tokenizer and data position from a checkpoint.

        Reads the save ``lutcore._io.saved_dir`` points at (a save killed while switching
        its files is read from its complete copy).  Every file is read from inside the
        checkpoint directory: a symlink pointing outside it is a ValueError naming the file
        and its target (``lutcore._io.contained``).  trainer.json is checked whole: a bad
        field is a ValueError naming the file and the field."""
        from lutcore._io import contained, load_tensors as load_file, path_arg
        path = path_arg(path)
        src, f, meta = read_trainer_json(path)
        if meta.get("format") != CKPT_FORMAT:
            raise ValueError(f"checkpoint {path!r}: unknown format {meta.get('format')!r}")
        missing = [k for k in ("model_class", "model_config", "optimizer", "tokenizer", "seed", "global_step")
                   if k not in meta]
        if missing:
            raise ValueError(f"checkpoint {path!r}: trainer.json lacks {missing}")
        _check_meta(meta, f)
        from lutcore._io import sha256_file
        for n, rec in (meta.get("files") or {}).items():
            fn = contained(src, n, f"{f}: files entry {n!r}")
            if (not os.path.isfile(fn) or os.path.getsize(fn) != rec.get("bytes")
                    or sha256_file(fn) != rec.get("sha256")):
                raise ValueError(f"checkpoint {path!r}: {n} is not the file trainer.json was saved with (a save "
                                 f"interrupted between its files, or a file changed since)")
        classes = MODEL_CLASSES()
        model_cls, cfg_cls = classes[meta["model_class"]]
        with _field(f, "model_config"):
            cfg = cfg_cls(**meta["model_config"])
        params = load_file(contained(src, "model.safetensors"))
        kw = {}
        if units is None and meta.get("units_digest"):
            raise ValueError(f"checkpoint {path!r} was trained through units {meta.get('units_name')!r} "
                             f"(digest {meta['units_digest'][:16]}); pass units= to resume it")
        if units is not None:
            from lutcore.units import resolve
            units = resolve(units, mx=True)
            if not meta.get("units_digest"):
                raise ValueError(f"units: checkpoint {path!r} was trained in float32, so resuming it through "
                                 f"{units.name!r} would not continue the same run; resume it without units= (or "
                                 f"load its model and start a new Trainer through the units)")
            if units.digest != meta["units_digest"]:
                raise ValueError(f"units: digest {units.digest[:16]} differs from the checkpoint's "
                                 f"{meta['units_digest'][:16]}")
            kw = {"units": units, "unit_backward": meta.get("unit_backward", False)}
            if meta.get("two_pass"):
                kw["two_pass"] = True
        model = model_cls(cfg, dtype=np.dtype(meta.get("dtype", "float32")), params=params, threads=threads, **kw)
        o = meta["optimizer"]
        with _field(f, "optimizer"):
            opt = AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                        weight_decay=o["weight_decay"], max_delta=meta.get("base_max_delta", o["max_delta"]))
        mom = load_file(contained(src, "optimizer.safetensors"))
        with _field(f, "optimizer"):
            opt.load_state_dict({**o, "m": {k[2:]: v for k, v in mom.items() if k.startswith("m.")},
                                 "v": {k[2:]: v for k, v in mom.items() if k.startswith("v.")}})
        with _field(f, "tokenizer"):
            tok = Tokenizer.from_spec(meta["tokenizer"])
        tr = cls(model, opt, tok, seed=meta["seed"], threads=threads)
        tr.base_max_delta = meta.get("base_max_delta", o["max_delta"])
        tr.global_step = meta["global_step"]
        tr.position = dict(meta["position"])
        tr.history = list(meta.get("history", []))
        tr.train_config = meta.get("train_config")
        if meta.get("scaler"):
            tr.scaler = DynamicLossScaler()
            with _field(f, "scaler"):
                tr.scaler.load_state_dict(meta["scaler"])
        return tr


# What Trainer.train ran with, besides the data: with the model, optimizer and position these
# decide every bit of the steps that follow (a resume that changes one is another run).
TRAIN_CONFIG_KEYS = ("seq_len", "batch_size", "grad_accum", "max_grad_norm", "wsla", "max_delta",
                     "mixed_precision", "micro_batch")


def units_tensors(units) -> dict:
    """What a checkpoint's units.safetensors holds of ``units``: the multiplier (its table, or
    its netlist's gates and outputs), the requantizer and ReLU tables, and — for another format
    than signed 8 x 8 — the format's spelling as bytes (``format``).  MX units: the FP
    multiplier's table (``mx_products``) and, as JSON bytes (``mx``), its element formats, name,
    source and the block and accumulation."""
    if getattr(units, "kind", None) == "mx":
        m = units.mul
        d = {"a": m.a.name, "b": m.b.name, "mul_name": m.name, "mul_source": m.source,
             "allow_nonfinite": bool(m.allow_nonfinite), "block": units.block, "accumulate": units._acc_text(),
             "name": units.name}
        return {"mx_products": np.ascontiguousarray(m.products, np.float32),
                "mx": np.frombuffer(json.dumps(d, sort_keys=True).encode(), np.uint8).copy()}
    t = {"requant": np.ascontiguousarray(units.requant_lut), "relu": np.ascontiguousarray(units.relu_lut)}
    if units.mul is not None:
        t["mul"] = np.ascontiguousarray(units.mul)
    else:
        t["gates"] = np.ascontiguousarray(units.netlist.gates)
        t["outputs"] = np.ascontiguousarray(units.netlist.outputs)
    if not units.format.legacy:
        t["format"] = np.frombuffer(str(units.format).encode(), np.uint8).copy()
    acc = units.accumulator
    if acc is not None:                       # the declared register (and its adder's netlist)
        d = acc.to_dict()
        if acc.adder is not None:
            ad = acc.adder
            d["adder"].update(signed=ad.signed, cost=ad.cost, published=ad.published, source=ad.source)
            t["adder_gates"] = np.ascontiguousarray(ad.netlist.gates)
            t["adder_outputs"] = np.ascontiguousarray(ad.netlist.outputs)
        t["accumulator"] = np.frombuffer(json.dumps(d, sort_keys=True).encode(), np.uint8).copy()
    return t


def _accumulator_from_tensors(t: dict, where: str):
    """The Accumulator ``units_tensors`` wrote, or None."""
    if "accumulator" not in t:
        return None
    from lutcore.units.accumulator import Accumulator
    d = json.loads(bytes(t["accumulator"]).decode())
    adder = None
    if d.get("adder") is not None:
        from lutcore.units.adders import Adder
        from lutcore.units.netlist import Netlist
        a = d["adder"]
        g, o = t["adder_gates"], t["adder_outputs"]
        adder = Adder(Netlist(d["bits"], d["bits"], int(o.shape[0]), g, o), bool(a["signed"]), name=a.get("name"))
        adder.cost, adder.published, adder.source = dict(a.get("cost") or {}), dict(a.get("published") or {}), \
            a.get("source")
        if a.get("digest") not in (None, adder.digest):
            raise ValueError(f"{where}: the adder's netlist does not match its digest")
    return Accumulator(d["bits"], d["signed"], d["overflow"], d["order"], d["chunk"], adder)


def units_from_tensors(t: dict, name, where: str):
    """The Units ``units_tensors`` wrote (a ValueError naming ``where`` when something lacks)."""
    from lutcore.units import Format, Units
    from lutcore.units.netlist import Netlist
    if "mx" in t:
        return _mx_units_from_tensors(t, name, where)
    try:
        fmt = Format.parse(bytes(t["format"]).decode(), f"{where}: format") if "format" in t else None
        if "gates" in t:
            u = Units.from_netlist(Netlist(fmt.a_bits, fmt.b_bits, fmt.p_bits, t["gates"], t["outputs"]), fmt,
                                   name=name)
            u.requant_lut, u.relu_lut = t["requant"], t["relu"]
        else:
            u = Units(t["mul"], t["requant"], t["relu"], name=name, format=fmt)
        acc = _accumulator_from_tensors(t, where)
        return u if acc is None else u.with_accumulator(acc)
    except KeyError as e:
        raise ValueError(f"{where}: lacks the {e.args[0]} table") from None


def _mx_units_from_tensors(t: dict, name, where: str):
    """The MXUnits ``units_tensors`` wrote."""
    from lutcore.units.fpmul import FPUnit
    from lutcore.units.mxunits import MXUnits, _accumulator
    try:
        d = json.loads(bytes(t["mx"]).decode())
        mul = FPUnit(d["a"], d["b"], t["mx_products"], d["mul_name"], d["mul_source"], bool(d["allow_nonfinite"]))
        acc = _accumulator(d["accumulate"][1:], where) if d["accumulate"] else "exact"
        return MXUnits(mul, block=d["block"], accumulate=acc, name=name if isinstance(name, str) else d["name"])
    except KeyError as e:
        raise ValueError(f"{where}: lacks the MX units' {e.args[0]}") from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: the MX units: {e}") from None


def read_trainer_json(path) -> tuple:
    """(directory to read the save from, its trainer.json path, the parsed json) of a
    checkpoint: the save ``lutcore._io.saved_dir`` points at (an interrupted save is read
    from its complete copy).  FileNotFoundError when there is no trainer.json."""
    from lutcore._io import contained, load_json, saved_dir
    src = saved_dir(path)
    f = contained(src, "trainer.json")
    if not os.path.isfile(f):
        raise FileNotFoundError(f"checkpoint: no trainer.json in {path!r}")
    return src, f, load_json(f)


@contextlib.contextmanager
def _field(fname, field):
    """Errors of rebuilding one part of a checkpoint name its file and field."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        msg = f"missing {e}" if isinstance(e, KeyError) else str(e)
        raise ValueError(f"{fname}: {field}: {msg}") from None


def _check_meta(meta: dict, fname) -> None:
    """trainer.json, every field a resume reads, checked before any is used."""
    def bad(field, want, got):
        raise ValueError(f"{fname}: {field}: expected {want}, got {got!r:.200}")

    def nonneg_int(field, v):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            bad(field, "an int >= 0", v)

    classes = MODEL_CLASSES()
    if not isinstance(meta["model_class"], str) or meta["model_class"] not in classes:
        bad("model_class", f"one of {sorted(classes)}", meta["model_class"])
    if not isinstance(meta["model_config"], dict):
        bad("model_config", "a JSON object (the model's config)", meta["model_config"])
    if meta.get("dtype", "float32") not in ("float32", "float64"):
        bad("dtype", "'float32' or 'float64'", meta.get("dtype"))
    if not (isinstance(meta.get("unit_backward", False), bool) or meta.get("unit_backward") == "table"):
        bad("unit_backward", "true, false or \"table\"", meta.get("unit_backward"))
    if not isinstance(meta.get("two_pass", False), bool):
        bad("two_pass", "true or false", meta.get("two_pass"))
    for k in ("units_digest", "units_name"):
        if meta.get(k) is not None and not isinstance(meta[k], str):
            bad(k, "a string or null", meta[k])
    nonneg_int("global_step", meta["global_step"])
    nonneg_int("seed", meta["seed"])
    o = meta["optimizer"]
    if not isinstance(o, dict):
        bad("optimizer", "a JSON object (AdamW.state_dict() without the moments)", o)
    for k in ("lr", "betas", "eps", "weight_decay", "max_delta", "t"):
        if k not in o:
            bad("optimizer", f"a JSON object with {k!r}", o)
    from lutcore.train.optim import _hyper
    with _field(fname, "optimizer"):
        _hyper(o["lr"], o["betas"], o["eps"], o["weight_decay"], o["max_delta"], "")
    nonneg_int("optimizer.t", o["t"])
    nonneg_int("optimizer.skipped", o.get("skipped", 0))
    if "base_max_delta" in meta:
        with _field(fname, "base_max_delta"):
            _check.float_arg(meta["base_max_delta"], "value", lo=0.0)
    pos = meta.get("position")
    if not isinstance(pos, dict):
        bad("position", "{'epoch': int >= 0, 'batch': int >= 0, 'fingerprint': str or null}", pos)
    nonneg_int("position.epoch", pos.get("epoch"))
    nonneg_int("position.batch", pos.get("batch"))
    if pos.get("fingerprint") is not None and not isinstance(pos["fingerprint"], str):
        bad("position.fingerprint", "a string or null", pos["fingerprint"])
    if not isinstance(meta.get("history", []), list) or not all(isinstance(r, dict) for r in meta.get("history", [])):
        bad("history", "a list of step records (JSON objects)", meta.get("history"))
    tc = meta.get("train_config")
    if tc is not None and (not isinstance(tc, dict) or set(tc) != set(TRAIN_CONFIG_KEYS)):
        bad("train_config", f"null or a JSON object with the keys {list(TRAIN_CONFIG_KEYS)}", tc)
    if meta.get("scaler") is not None and not isinstance(meta["scaler"], dict):
        bad("scaler", "null or a JSON object (DynamicLossScaler.state_dict())", meta["scaler"])
    if not isinstance(meta["tokenizer"], dict):
        bad("tokenizer", "a JSON object (Tokenizer.spec())", meta["tokenizer"])
    files = meta.get("files")
    if files is not None:
        if not isinstance(files, dict):
            bad("files", "a JSON object {file name: {bytes, sha256}}", files)
        for n, rec in files.items():
            if (n not in ("model.safetensors", "optimizer.safetensors") or not isinstance(rec, dict)
                    or isinstance(rec.get("bytes"), bool) or not isinstance(rec.get("bytes"), int)
                    or not isinstance(rec.get("sha256"), str)):
                bad(f"files.{n}", "{'bytes': int, 'sha256': str} for model.safetensors / optimizer.safetensors", rec)
