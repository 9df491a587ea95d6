"""Data-parallel training on Ray: the same bits for any number of workers.

Design: the driver keeps the one Trainer (parameters, AdamW moments, loss scaler,
position, checkpoints); the workers are Ray actors (``_GradWorker``) that hold a copy
of the model and nothing else.  A step:

  1. the driver cuts the step's batches into micro-batches of ``micro_batch`` rows,
     each with its index j in the step (``Trainer.train``), and puts the parameters
     in Ray's object store once (``ray.put``);
  2. worker w gets micro-batches j with j % N == w, loads the parameters, computes
     each micro-batch's loss and gradient (the Trainer's ``_micro``: same kernels,
     same thread count, so the same bits on any worker) and adds the gradients into an
     exact accumulator (``lutcore.train.exactsum.GradSum``), which it sends back;
  3. the driver merges the accumulators by integer addition and rounds once: the
     reduced gradient does not depend on N nor on which worker answered first.
     Clipping, the loss scaler's overflow decision and the NaN guard are then taken
     once, on the driver, from the reduced values (``Trainer._apply``).

Nothing of the workers enters a checkpoint, so a run saved with 3 workers resumes with
2.  Faults: a worker that dies (SIGKILL, a lost node) fails the step with
``WorkerFailure`` naming it: Ray reports a dead actor process within seconds, and no
step waits longer than ``step_timeout``.  ``fit(..., max_restarts=K)`` then starts a
fresh worker group and resumes from the last checkpoint (bit-identical to a run
without the fault).
"""
from __future__ import annotations

import os
import socket
import time

import numpy as np

from lutcore import __version__, _check

__all__ = ["RayWorkers", "WorkerFailure", "fit", "check_ray_address"]


class WorkerFailure(RuntimeError):
    """A data-parallel worker died or stopped answering; ``worker`` is its index."""

    def __init__(self, msg, worker=None):
        super().__init__(msg)
        self.worker = worker


def check_ray_address(address, timeout: float = 3.0) -> str:
    """``address`` ("host:port" of a Ray cluster's GCS, "ray://host:port", or "auto") checked: a
    host:port must accept a TCP connection and answer as a gRPC server does (an HTTP/2 SETTINGS
    frame after the client's connection preface) within ``timeout`` seconds, else a ValueError.
    A port where something else listens (an HTTP server, a silent socket) is refused here
    rather than left to ``ray.init``, which retries such an address for ever."""
    if not isinstance(address, str) or not address:
        raise ValueError(f"ray_address: expected 'host:port' of a Ray cluster (or 'auto'), got {address!r}")
    if address == "auto":
        return address
    hp = address.split("://", 1)[-1]
    host, sep, port = hp.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"ray_address: expected 'host:port' (or ray://host:port, or 'auto'), got {address!r}")
    why = _grpc_answer(host.strip("[]"), int(port), timeout)
    if why:
        raise ValueError(f"ray_address: expected a Ray cluster answering at {address!r}, got {why}")
    return address


# HTTP/2's client connection preface (RFC 9113, 3.4) and an empty SETTINGS frame: a gRPC server
# (Ray's GCS, the Ray Client server) answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _grpc_answer(host, port, timeout) -> str | None:
    """None when host:port answers the HTTP/2 preface with a SETTINGS frame within timeout
    seconds; else what happened instead (for the error message)."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(_H2_PREFACE)
            got = b""
            while len(got) < 9:
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"a connection but no answer within {timeout:g} s (not a Ray cluster's port?)"
                s.settimeout(left)
                part = s.recv(9 - len(got))
                if not part:
                    return "a connection closed without an answer (not a Ray cluster's port?)"
                got += part
    except socket.timeout:
        return f"a connection but no answer within {timeout:g} s (not a Ray cluster's port?)"
    except OSError as e:
        return f"no answer within {timeout:g} s ({e.strerror or type(e).__name__})"
    if got[3] != 4:                          # frame type: SETTINGS
        return f"an answer that is not gRPC's (first bytes {got[:9]!r}; an HTTP server, not a Ray cluster's port?)"
    return None


def model_key(obj, tensors) -> str:
    """A digest of everything ``obj`` (a model, or a tuple holding one) pickles to except the
    values of ``tensors`` (its parameters and buffers, sent to the workers every step): the
    units of each layer, the backward mode, the train/eval flags, the code it runs.  The
    workers' copy is replaced when it changes (``model.set_units`` after the workers loaded
    the model), so they never compute through what the driver's model no longer is."""
    import hashlib
    import io
    import pickle
    skip = {id(t) for t in tensors}

    class _Pickler(pickle.Pickler):
        def persistent_id(self, o):
            return "t" if id(o) in skip else None
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return hashlib.sha256(buf.getbuffer()).hexdigest()


class _GradWorker:
    """One data-parallel worker (wrapped with ``ray.remote`` by ``RayWorkers``)."""

    def __init__(self, index, threads):
        from lutcore._threads import resolve_threads
        self.index = index
        self.threads = None if threads is None else resolve_threads(threads)    # checked here, in the worker
        self.trainer = None

    def info(self):
        return {"version": __version__, "pid": os.getpid(), "node": socket.gethostname(), "index": self.index,
                "cpus": _host_cpus()}

    def set_threads(self, n):
        """The kernel threads this worker runs (before ``load``): the group's share of its host."""
        from lutcore._threads import resolve_threads
        self.threads = resolve_threads(n)
        if self.trainer is not None:
            self.trainer.threads = self.threads
        return self.threads

    def load(self, blob):
        import pickle
        from lutcore.train.trainer import Trainer
        model = pickle.loads(blob)          # own, writeable arrays (not views of the object store)
        from lutcore.train.optim import AdamW
        self.trainer = Trainer(model, AdamW(model.parameters()), threads=self.threads)
        return True

    def gradients(self, params, micros, trainable, mixed_precision, scale):
        from lutcore._threads import scope
        with scope(self.threads):                   # the worker's count, as the driver's trainer opens its own
            return self._gradients(params, micros, trainable, mixed_precision, scale)

    def _gradients(self, params, micros, trainable, mixed_precision, scale):
        from lutcore.train.exactsum import GradSum
        live = self.trainer.model.parameters()
        for k, v in params.items():
            live[k][...] = v
        acc, losses = GradSum(), []
        for j, m in micros:
            loss, g = self.trainer._micro(m, trainable, mixed_precision, scale)
            acc.add(g)
            losses.append((j, loss))
        return acc.to_wire(), losses


from lutcore._threads import host_cpus as _host_cpus  # noqa: E402


def share_of_host(infos) -> list:
    """Threads per worker when workers on one host share its cores: each worker gets its host's
    CPUs divided by the workers on that host (at least 1) -- ``infos``: each worker's ``info()``
    (``node``, ``cpus``)."""
    on = {}
    for inf in infos:
        on[inf["node"]] = on.get(inf["node"], 0) + 1
    return [max(1, int(inf.get("cpus") or 1) // on[inf["node"]]) for inf in infos]


class RayWorkers:
    """``N`` Ray actors computing micro-batch gradients for ``Trainer.train(..., workers=)``.

    ``address``: None starts (or joins) a local Ray; else an existing cluster's address,
    checked to answer within ``connect_timeout`` seconds.  ``step_timeout``: the longest a
    step waits for its workers.  ``threads``: kernel threads per worker (same bits at any
    count); None: the workers on one host share its cores, each running its CPUs divided by the
    workers there (``share_of_host``; ``describe()`` says so).  ``actor_options``: passed to ``.options()`` of every actor.  A worker whose
    lutcore version differs from the driver's is refused (ValueError naming both).
    ``worker_cls`` / ``worker_args``: the actor class, built as ``worker_cls(index, *worker_args)``
    and answering ``info()`` (default: lutcore's own gradient worker, ``(threads,)``); the
    PyTorch helper (``lutcore.torch.dp``) runs its workers through the same group."""

    def __init__(self, n: int, *, address=None, connect_timeout: float = 3.0, step_timeout: float = 120.0,
                 threads=None, actor_options=None, startup_timeout: float = 120.0, worker_cls=None,
                 worker_args=None):
        self.n = _check.int_arg(n, "workers", lo=1)
        self.step_timeout = _check.float_arg(step_timeout, "step_timeout", lo=0.0, lo_open=True)
        self.startup_timeout = _check.float_arg(startup_timeout, "startup_timeout", lo=0.0, lo_open=True)
        if actor_options is not None and not isinstance(actor_options, dict):
            raise TypeError(f"actor_options: expected a dict or None, got {type(actor_options).__name__}")
        import ray
        self._ray = ray
        self._owns_ray = False
        self.address = address
        if address is not None:
            check_ray_address(address, connect_timeout)
        if not ray.is_initialized():
            if address is not None:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(include_dashboard=False, log_to_driver=False)
            self._owns_ray = True
        self.threads = threads
        self.worker_cls = _GradWorker if worker_cls is None else worker_cls
        self.worker_args = (threads,) if worker_args is None else tuple(worker_args)
        self.actor_options = dict(actor_options or {})
        self.actors, self.infos = [], []
        self._model_key = None
        self.bytes_sent = []            # per step: bytes each worker sent (accumulator) and received (params)
        self._start()

    def _start(self):
        ray = self._ray
        cls = ray.remote(self.worker_cls)
        o = {"num_cpus": 0, "max_restarts": 0}
        o.update(self.actor_options)
        env = dict(o.get("runtime_env") or {})
        if self.threads is not None:
            env["env_vars"] = {"OMP_NUM_THREADS": str(self.threads), **dict(env.get("env_vars") or {})}
            o["runtime_env"] = env
        try:
            self.actors = [cls.options(**o).remote(i, *self.worker_args) for i in range(self.n)]
            refs = [a.info.remote() for a in self.actors]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.startup_timeout)
            if len(ready) < len(refs):
                late = [i for i, r in enumerate(refs) if r not in ready]
                raise WorkerFailure(f"workers: worker {late[0]} did not start within startup_timeout="
                                    f"{self.startup_timeout} s", worker=late[0])
            self.infos = self.get(refs, "start-up")
        except BaseException:
            self.close()
            raise
        bad = [(i, inf["version"]) for i, inf in enumerate(self.infos) if inf["version"] != __version__]
        if bad:
            self.close()
            i, v = bad[0]
            raise ValueError(f"workers: expected lutcore {__version__} on every worker (the driver's), got "
                             f"lutcore {v} on worker {i} (pid {self.infos[i]['pid']} on {self.infos[i]['node']}); "
                             f"install the same version everywhere")
        self._model_key = None
        self.shares = None
        if self.threads is None and hasattr(self.worker_cls, "set_threads"):   # the host's cores, shared
            self.shares = share_of_host(self.infos)
            self.get([a.set_threads.remote(t) for a, t in zip(self.actors, self.shares)], "start-up")

    def describe(self) -> str:
        where = "local Ray" if self.address is None else f"Ray at {self.address}"
        out = f"{self.n} Ray workers on {where}: " + ", ".join(
            f"w{i} pid {inf['pid']}@{inf['node']}" for i, inf in enumerate(self.infos))
        if self.shares is not None:
            out += "; " + ", ".join(f"w{i} {t} thread{'s' if t > 1 else ''}" for i, t in enumerate(self.shares)) + \
                   " (each host's cores / its workers; threads= to choose)"
        elif self.threads is not None:
            out += f"; {self.threads} thread{'s' if self.threads > 1 else ''} each"
        return out

    def _which(self, err):
        aid = getattr(err, "actor_id", None)
        if isinstance(aid, bytes):
            aid = aid.hex()
        for i, a in enumerate(self.actors):
            if aid and a._actor_id.hex() == aid:
                return i
        for i, a in enumerate(self.actors):          # else: the first that does not answer a ping
            try:
                self._ray.get(a.info.remote(), timeout=2.0)
            except Exception:                        # noqa: BLE001 - any failure marks it
                return i
        return None

    def get(self, refs, what):
        """ray.get of one ref per worker, waiting at most step_timeout: a dead or silent worker
        raises WorkerFailure naming it; a worker's ValueError/TypeError is re-raised naming it."""
        ray = self._ray
        deadline = time.monotonic() + self.step_timeout
        out = [None] * len(refs)
        pending = list(range(len(refs)))
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                i = pending[0]
                raise WorkerFailure(f"{what}: worker {i} (pid {self._pid(i)}) did not answer within "
                                    f"step_timeout={self.step_timeout} s", worker=i)
            ready, _ = ray.wait([refs[i] for i in pending], num_returns=1, timeout=min(left, 1.0))
            for r in ready:
                i = next(i for i in pending if refs[i] == r)
                try:
                    out[i] = ray.get(r)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError,
                        ray.exceptions.ActorUnavailableError) as e:
                    raise WorkerFailure(f"{what}: worker {i} (pid {self._pid(i)}) died: "
                                        f"{type(e).__name__}", worker=i) from None
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, (ValueError, TypeError)):
                        raise type(cause)(f"worker {i}: {cause}") from None
                    raise WorkerFailure(f"{what}: worker {i} failed: {cause!r}", worker=i) from None
                pending.remove(i)
        return out

    def _pid(self, i):
        return self.infos[i]["pid"] if i < len(self.infos) else "?"

    def gradients(self, trainer, micros, trainable, mixed_precision, scale):
        """(reduced gradient dict, losses by micro-batch index) of one step's ``micros``."""
        from lutcore.train.exactsum import GradSum
        ray = self._ray
        params = dict(trainer.model.parameters())
        key = model_key(trainer.model, params.values())
        if self._model_key != key:                    # a new model, or the model's units changed
            import pickle
            blob = ray.put(pickle.dumps(trainer.model))
            self.get([a.load.remote(blob) for a in self.actors], "load")
            self._model_key = key
        pref = ray.put(params)
        refs = [a.gradients.remote(pref, [(j, m) for j, m in enumerate(micros) if j % self.n == w],
                                   list(trainable), mixed_precision, scale)
                for w, a in enumerate(self.actors)]
        answers = self.get(refs, "step")
        acc = GradSum()
        losses = {}
        sent = []
        for wire, ls in answers:
            sent.append(GradSum.wire_nbytes(wire))
            acc.merge_wire(wire)
            losses.update(dict(ls))
        self.bytes_sent.append({"accumulator": sent,
                                "params": int(sum(v.nbytes for v in params.values()))})
        return acc.result(), [losses[j] for j in range(len(micros))]

    def _kill(self):
        """Kill every actor (those already gone included)."""
        for a in self.actors:
            try:
                self._ray.kill(a)
            except Exception:                        # noqa: BLE001 - already gone
                pass
        self.actors = []

    def restart(self):
        """Kill every actor and start a fresh group (after a failure)."""
        self._kill()
        self.infos = []
        self._start()

    def close(self):
        self._kill()
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def fit(trainer, data, *, workers: RayWorkers, checkpoint, checkpoint_every: int = 1, max_restarts: int = 0,
        on_restart=None, **train_kw):
    """``trainer.train(data, workers=workers, **train_kw)`` with a checkpoint written to
    ``checkpoint`` every ``checkpoint_every`` steps; on a ``WorkerFailure`` (at most
    ``max_restarts`` times) the worker group is restarted and the run resumes from the
    last checkpoint.  Returns the trainer that finished (a resumed one after a restart)."""
    from lutcore.train.trainer import Trainer
    checkpoint_every = _check.int_arg(checkpoint_every, "checkpoint_every", lo=1)
    max_restarts = _check.int_arg(max_restarts, "max_restarts", lo=0)
    user_cb = train_kw.pop("on_step", None)
    restarts = 0
    ckpt = os.fspath(checkpoint)
    units = getattr(trainer.model, "units", None)
    trainer.save_checkpoint(ckpt)

    def on_step(rec):
        if rec["step"] % checkpoint_every == 0:
            trainer_ref[0].save_checkpoint(ckpt)
        if user_cb is not None:
            user_cb(rec)
    trainer_ref = [trainer]
    while True:
        try:
            trainer_ref[0].train(data, workers=workers, on_step=on_step, **train_kw)
            trainer_ref[0].save_checkpoint(ckpt)
            return trainer_ref[0]
        except WorkerFailure as e:
            if restarts >= max_restarts:
                raise
            restarts += 1
            if on_restart is not None:
                on_restart(e, restarts)
            workers.restart()
            trainer_ref[0] = Trainer.resume(ckpt, units=units, threads=trainer.threads)
