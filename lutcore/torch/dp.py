"""Data-parallel training of PyTorch models (e.g. converted by ``lutcore.torch.approximate``)
with lutcore's exact reduction: the same bits for any number of Ray workers.

Design: as ``lutcore.train.dp`` — the driver owns the model and the torch optimizer; each
step it cuts (inputs, targets) into micro-batches of ``micro_batch`` rows (index j), sends
the state_dict once (``ray.put``), worker w computes micro-batches j % N == w on its copy
(``torch.set_num_threads(threads)`` fixed, so a micro-batch's gradient is the same bits on
any worker and on the driver), adds the float32 gradients into an exact accumulator
(``lutcore.train.exactsum``) and sends it back; the driver merges, rounds once, sets
``p.grad = sum / n_micro`` and calls ``optimizer.step()``.  ``workers=None`` computes the
micro-batches in the driver with the same reduction (the single-process reference).
With workers, the model is sent again whenever it changed other than in its tensors
(``set_units``, ``.eval()``: ``lutcore.train.dp.model_key``), and the driver replays the
step's forward passes in micro-batch order while the workers compute, so buffers (BatchNorm's
running statistics) are the single-process run's bits.

    dp = TorchDataParallel(model, loss_fn, micro_batch=2, workers=RayWorkers-like N or None)
    loss = dp.step(optimizer, inputs, targets)
"""
from __future__ import annotations

import pickle

import numpy as np
import torch

from lutcore import _check
from lutcore.train.exactsum import GradSum

__all__ = ["TorchDataParallel"]


def _micro_grads(model, loss_fn, micros, threads):
    """GradSum of the micro-batches' gradients and their losses [(j, loss)]."""
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        acc, losses = GradSum(), []
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        for j, x, y in micros:
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model(torch.from_numpy(x)), torch.from_numpy(y))
            loss.backward()
            acc.add({n: (p.grad.detach().numpy().astype(np.float32, copy=True) if p.grad is not None
                         else np.zeros(tuple(p.shape), np.float32)) for n, p in named})
            losses.append((j, float(loss.detach())))
        return acc, losses
    finally:
        torch.set_num_threads(prev)


class _TorchGradWorker:
    def __init__(self, index, blob, threads):
        self.index, self.threads = index, threads
        self.load(blob)

    def load(self, blob):
        self.model, self.loss_fn = pickle.loads(blob)
        return True

    def info(self):
        import os
        import socket

        import lutcore
        return {"version": lutcore.__version__, "pid": os.getpid(), "node": socket.gethostname()}

    def gradients(self, state, micros):
        self.model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
        acc, losses = _micro_grads(self.model, self.loss_fn, micros, self.threads)
        return acc.to_wire(), losses


class TorchDataParallel:
    """Exact data-parallel steps for a torch ``model`` (float32, CPU) and ``loss_fn(output, target)``.

    ``workers``: None (the driver computes every micro-batch) or a count of Ray actors (a local
    Ray is started when none is running; ``address`` joins a cluster).  ``threads``: torch
    threads for every micro-batch, everywhere (default 1)."""

    def __init__(self, model, loss_fn, *, micro_batch: int, workers=None, threads: int = 1, address=None,
                 step_timeout: float = 120.0):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn: expected a callable (output, target) -> loss, got {type(loss_fn).__name__}")
        self.model, self.loss_fn = model, loss_fn
        self.micro_batch = _check.int_arg(micro_batch, "micro_batch", lo=1)
        self.threads = _check.int_arg(threads, "threads", lo=1)
        self.n = None if workers is None else _check.int_arg(workers, "workers", lo=1)
        self.group = None
        if self.n is not None:
            from lutcore.train.dp import RayWorkers
            self._sent = self._key()
            self.group = RayWorkers(self.n, address=address, step_timeout=step_timeout, threads=self.threads,
                                    worker_cls=_TorchGradWorker,
                                    worker_args=(pickle.dumps((model, loss_fn)), self.threads))
            self._ray = self.group._ray

    def _key(self) -> str:
        """What the workers' copy must match besides the state_dict sent each step (the layers'
        units after ``lutcore.torch.set_units``, train/eval mode, hooks, the loss function)."""
        from lutcore.train.dp import model_key
        return model_key((self.model, self.loss_fn), self.model.state_dict(keep_vars=True).values())

    def _sync_workers(self):
        """Send the model again when it changed other than in its tensors."""
        key = self._key()
        if key != self._sent:
            blob = self._ray.put(pickle.dumps((self.model, self.loss_fn)))
            self.group.get([a.load.remote(blob) for a in self.group.actors], "load")
            self._sent = key

    def _replay_buffers(self, micros):
        """The single-process run's buffers (BatchNorm's running statistics): the forward passes
        of the step's micro-batches, in order, on the driver's model — computed while the
        workers compute the gradients (which do not depend on them)."""
        prev = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            with torch.no_grad():
                for _, x, _ in micros:
                    self.model(torch.from_numpy(x))
        finally:
            torch.set_num_threads(prev)

    def step(self, optimizer, inputs, targets) -> float:
        """One optimizer step on the batch (rows of ``inputs`` / ``targets``); returns the mean
        of the micro-batches' losses."""
        x = np.ascontiguousarray(inputs.detach().numpy() if isinstance(inputs, torch.Tensor) else inputs)
        y = np.ascontiguousarray(targets.detach().numpy() if isinstance(targets, torch.Tensor) else targets)
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"targets: expected {x.shape[0]} rows like inputs, got {y.shape[0]}")
        if x.shape[0] % self.micro_batch:
            raise ValueError(f"micro_batch: expected a divisor of the batch's {x.shape[0]} rows, got "
                             f"{self.micro_batch}")
        nm = x.shape[0] // self.micro_batch
        if self.n is not None and self.n > nm:
            raise ValueError(f"workers: expected at most {nm} (the batch's micro-batches), got {self.n}")
        micros = [(j, x[j * self.micro_batch:(j + 1) * self.micro_batch],
                   y[j * self.micro_batch:(j + 1) * self.micro_batch]) for j in range(nm)]
        if self.n is None:
            acc, ls = _micro_grads(self.model, self.loss_fn, micros, self.threads)
        else:
            self._sync_workers()
            state = self._ray.put({k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()})
            refs = [a.gradients.remote(state, [m for m in micros if m[0] % self.n == w])
                    for w, a in enumerate(self.group.actors)]
            if any(True for _ in self.model.buffers()):
                self._replay_buffers(micros)
            answers = self.group.get(refs, "step")
            acc, ls = GradSum(), []
            for wire, part in answers:
                acc.merge_wire(wire)
                ls.extend(part)
        red = acc.result()
        inv = np.float32(1.0 / nm)
        for n, p in self.model.named_parameters():
            if p.requires_grad:
                p.grad = torch.from_numpy(red[n] * inv)
        optimizer.step()
        losses = dict(ls)
        return float(np.mean([losses[j] for j in range(nm)]))

    def close(self):
        if self.group is not None:
            self.group.close()
            self.group = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
