"""The Ray transport: one actor per stage.

Design: each actor builds its ``Stage`` itself from the checkpoint directory
(which every node must be able to read), so it holds that stage's tensors and
no others, and the driver holds none.  A hop is ``(x, crc32(x bytes), from
stage)``: the sending actor returns it to the object store and the next
actor's call takes its ObjectRef, so hidden states go actor to actor without
visiting the driver; the receiver checks dtype, shape and checksum before use.
Stage 0 is called twice per pass: ``first`` (embed + its layers) and ``last``
(readout).  Nothing a stage computes depends on its process's thread counts
(see stage.py), so an actor gives the driver's bits.

Latency: a decode step is three actor calls, and plain Ray calls cost
milliseconds each on a small machine.  So after ``compile_after`` passes the
ring compiles the chain into a Ray compiled graph over shared-memory channels
(seconds to build, then sub-millisecond hops) and sends every later reset, pass
and decode through it; plain calls (``info``, pings) tear the graph down first,
and the next pass compiles it again.  If compiling fails, the ring keeps to
plain calls.  The graph is ``decode_chunk`` rounds of the chain, unrolled
(``first -> run ... -> turn -> run ... -> turn ... -> final``, all on stage 0's
and the other stages' actors): decoding, stage 0 reads out, picks the next
token (the driver's draw, see ``pipeline.next_token``) and starts its pass
itself, so a token costs two hops instead of four and the driver hears once per
chunk.  A plain pass uses round 1 and passes a marker through the rest.

Priorities: Ray starts workers at nice 15, and a compiled graph's idle readers
poll.  A stage actor puts its threads back at nice 0 where the system allows it,
and its graph steps leave the reading thread at nice 19 between steps (see
``_at_work``), so a stage's OpenMP team gets the cores while the others wait.  The
driver reads the graph's results on a helper thread at nice 19 (``_Waiter``) while
the calling thread blocks.

Failures: a dead actor surfaces as Ray's ``RayActorError`` on whatever call
needed it; the ring maps the actor id (or, failing that, a ping of every
actor) back to a stage index and raises ``StageFailure`` naming it.

Time limits: a call has one deadline, ``call_timeout`` after it starts, that covers
all of it: sending (``execute`` of a compiled graph, run with the read on the
``_Waiter`` thread), every hop and the answer, and the driver never waits past it
(plus a second's grace) even where Ray's own wait would not return.  Building the
compiled graph (Ray waits on its actors without a limit there) runs on a helper
thread, bounded by ``startup_timeout``, with the stages probed every
``call_timeout``.  When a limit passes, a probe finds the stage that stalled:
pings in their own concurrency group (``probe``, one thread of each actor), so a
live stage answers even while its main thread waits for a stalled one; a stopped
process answers nothing.  Start-up (actors created, weights loaded) has its own
limit, ``startup_timeout``.
"""
from __future__ import annotations

import functools
import os
import queue
import re
import threading
import time
import zlib

import numpy as np

from lutcore.pipeline._common import HopChecksumError, StageFailure, decode_plain as _decode_plain, next_token, \
    ring_options

__all__ = ["RayRing"]


def _hop(x, src):
    x = np.ascontiguousarray(x, np.float32)
    return (x, zlib.crc32(x.data), src)


def _arrive(hop, dst, hidden):
    """Check a hop on arrival at stage ``dst``; return its hidden state."""
    try:
        x, crc, src = hop
    except (TypeError, ValueError):
        raise HopChecksumError(f"stage {dst}: malformed hop {type(hop).__name__}") from None
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 2 or x.shape[1] != hidden:
        raise HopChecksumError(f"stage {dst}: hidden state from stage {src} is not float32 (T, {hidden}): "
                               f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")
    got = zlib.crc32(np.ascontiguousarray(x).data)
    if got != crc:
        raise HopChecksumError(f"stage {dst}: hidden state from stage {src} failed its checksum "
                               f"(crc32 {got:#010x}, sent {crc:#010x})")
    return x


def _actor_hex(err):
    """The id (hex) of the actor a Ray error came from, or None.  A task error that
    Ray re-raises as its cause's type keeps the ids only in its text ("actor_id=..."),
    innermost (the origin) last."""
    try:
        aid = getattr(err, "actor_id", None)
    except Exception:                                  # noqa: BLE001 - dual classes forward getattr
        aid = None
    if isinstance(aid, bytes):
        aid = aid.hex()
    if isinstance(aid, str) and aid:
        return aid
    found = re.findall(r"actor_id=([0-9a-f]+)", str(err))
    return found[-1] if found else None


def _normal_priority():
    """Give every thread of this process nice 0 (Ray starts workers at 15); True if
    the system allowed it (raising a priority needs privilege)."""
    ok = True
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [os.getpid()]:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except (OSError, ValueError):
            ok = False
    return ok


def _at_work(method):
    """A compiled-graph step that runs at nice 0 and leaves its thread at nice 19.

    Between steps the thread is Ray's channel reader, which polls (sem_trywait and
    sched_yield in a loop) for as long as the other stages compute.  At nice 19 it
    yields the cores to their OpenMP teams; at 0 it took a third of them and a
    stage's layers ran up to twice as slow.  Only where the worker may raise its
    priority again (``_normal_priority`` succeeded): else nothing changes."""
    @functools.wraps(method)
    def wrapped(self, msg):
        if not self.renice:
            return method(self, msg)
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, 0)
        try:
            return method(self, msg)
        finally:
            os.setpriority(os.PRIO_PROCESS, tid, 19)
    return wrapped


def _names_stage(method):
    """A stage method whose ValueError / TypeError (bad input) says which stage raised it."""
    @functools.wraps(method)
    def wrapped(self, *args):
        try:
            return method(self, *args)
        except (ValueError, TypeError) as e:
            raise type(e)(f"stage {self.index}: {e}") from e
    return wrapped


class _StageWorker:
    """The body of one stage actor (wrapped with ``ray.remote`` by ``RayRing``)."""

    def __init__(self, path, spec, plan, units, threads):
        # before any OpenMP team exists: its threads inherit the priority
        self.renice = _normal_priority()
        from lutcore.pipeline.shard import load_stage_weights
        from lutcore.pipeline.stage import Stage
        self.index = plan.index
        if threads is None:
            # the stages of a chain run one at a time: each runs the host's CPUs (its affinity)
            from lutcore._threads import host_cpus
            threads = host_cpus()
        weights = load_stage_weights(path, spec, plan)
        self.names = sorted(weights)
        self.stage = Stage(spec, plan, weights, units=units, threads=threads)
        del weights
        self.cache = None
        self.result = None              # a compiled-graph execution's result, kept by stage 0

    def info(self):
        from lutcore._threads import resolve_threads
        return {"index": self.index, "pid": os.getpid(), "tensors": self.names, "nbytes": self.stage.nbytes(),
                "threads": resolve_threads(self.stage.threads), "reniced": self.renice, "nice": os.getpriority(os.PRIO_PROCESS, 0)}

    def ping(self):
        return self.index

    def assignment(self):
        return self.stage.assignment(attention=True)

    @_names_stage
    def set_units(self, a):
        self.stage.set_units(a)

    def reset(self):
        self.cache = self.stage.new_cache()

    # Bad input (ValueError / TypeError) is named here, where the stage is known: a compiled
    # graph's errors do not carry the actor's id for the driver to map back.
    @_names_stage
    def first(self, ids, start, cached):
        x = self.stage.embed(ids, start)
        return _hop(self.stage.run_layers(x, self.cache if cached else None), self.index)

    @_names_stage
    def run(self, hop, cached):
        x = _arrive(hop, self.index, self.stage.spec.hidden)
        return _hop(self.stage.run_layers(x, self.cache if cached else None), self.index)

    @_names_stage
    def last(self, hop, last_only):
        x = _arrive(hop, self.index, self.stage.spec.hidden)
        return self.stage.readout(x[-1:] if last_only else x)

    # The compiled graph's steps.  The graph is ``decode_chunk`` rounds of stage 0 ->
    # stage 1 -> ... -> stage 0, unrolled: an actor can be in one compiled graph only, so
    # the same graph serves every call.  A message is one of
    #   ("reset",)                                  every stage resets its cache (round 1)
    #   ("pass", hop, cached, last_only)            one pass; round 1's readout is the result
    #   ("step", hop, pos, budget, sampling, stop)  decoding: the hidden state of the token at
    #                                               ``pos``; each round's readout picks the next
    #   ("done",)                                   passed through to the end
    # and stage 0's last node returns the result its earlier nodes kept (``self.result``).
    @_at_work
    def graph_first(self, msg):
        kind = msg[0]
        if kind == "reset":
            self.reset()
            return msg
        if kind == "pass":
            _, ids, start, cached, last_only = msg
            return ("pass", self.first(ids, start, cached), cached, last_only)
        _, tok, pos, budget, sampling, stop = msg              # "step"
        self.result = ([], False)
        return self._step(tok, pos, budget, sampling, stop)

    @_at_work
    def graph_run(self, msg):
        kind = msg[0]
        if kind == "reset":
            self.reset()
            return msg
        if kind == "pass":
            return ("pass", self.run(msg[1], msg[2]), msg[2], msg[3])
        if kind == "step":
            return ("step", self.run(msg[1], True)) + msg[2:]
        return msg

    @_at_work
    def graph_turn(self, msg):
        """Stage 0 between rounds: read out, and for a decode step pick the next token and
        start its pass; when the chunk is over, pass ("done",) on."""
        kind = msg[0]
        if kind == "reset":
            self.result = None
        elif kind == "pass":
            self.result = self.last(msg[1], msg[3])
        elif kind == "step":
            cont = self._pick(msg)
            if cont is not None:
                _, _, pos, budget, sampling, stop = msg
                return self._step(cont, pos + 1, budget, sampling, stop)
        return ("done",)

    @_at_work
    def graph_final(self, msg):
        kind = msg[0]
        if kind == "pass":
            return self.last(msg[1], msg[3])
        if kind == "step":
            self._pick(msg)
        result, self.result = self.result, None
        return result

    def _step(self, tok, pos, budget, sampling, stop):
        """The "step" message carrying the pass of ``tok`` at ``pos`` through stage 0."""
        return ("step", self.first(np.array([tok], np.int64), pos, True), pos, budget, sampling, stop)

    def _pick(self, msg):
        """The token after ``pos``, added to the chunk's result; -> it, if decoding goes on."""
        _, hop, pos, budget, sampling, stop = msg
        logits = self.last(hop, True)
        toks, _ = self.result
        tok = next_token(logits[-1], pos + 1, sampling)
        if tok is None:
            self.result = (toks, True)
            return None
        toks.append(tok)
        return None if len(toks) >= budget or tok in stop else tok


def graph_chain(workers, chunk, msg, call):
    """The unrolled ring: ``chunk`` rounds of stage 0 -> 1 -> ... -> 0, each node
    ``call(worker, step name, input)``.  With ``.bind`` this builds the compiled
    graph; with plain calls on ``_StageWorker`` objects it runs the graph in order."""
    head, rest = workers[0], workers[1:]
    node = call(head, "graph_first", msg)
    for r in range(chunk):
        for w in rest:
            node = call(w, "graph_run", node)
        node = call(head, "graph_final" if r == chunk - 1 else "graph_turn", node)
    return node


def _teardown(graph):
    try:
        graph.teardown()
    except Exception:                                  # noqa: BLE001 - a dead actor's graph is gone anyway
        pass


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt|Exit)(?:\([^)]*\))?): (.*\S.*)$")


def _reason(err) -> str:
    """Why an actor died, in one line.  An actor whose start failed (a malformed checkpoint:
    the stage's own ValueError names the file and tensor) carries that exception under
    Ray's first line and a traceback: give the innermost exception, as local transport
    does; else Ray's first line."""
    lines = [l.rstrip() for l in str(err).strip().splitlines() if l.strip()]
    if not lines:
        return type(err).__name__
    for l in reversed(lines):
        m = _EXC_LINE.match(l.strip())
        if m and not m.group(1).startswith("ray."):
            cls = m.group(1).split("(")[0].rsplit(".", 1)[-1]
            return f"{cls}: {m.group(2)}"
    return lines[0]


class _Stuck(Exception):
    """The driver's wait on a compiled graph went past its deadline (Ray's did not return)."""


def _left(deadline):
    """Seconds to ``deadline`` (>= 0), or -1 (no limit) for None."""
    return -1 if deadline is None else max(0.0, deadline - time.monotonic())


class _Waiter:
    """A compiled graph's ``execute`` and ``ray.get`` on a helper thread of the driver
    that runs at nice 19.

    A compiled graph's reader polls (``sched_yield`` in a loop) until its result is
    written, and the driver's reader would do so at the caller's priority for the
    whole of a pass, taking a share of the cores from the stages' teams.  The caller
    blocks on an event instead (no CPU); raising a thread's nice value needs no
    privilege.  Exceptions are re-raised in the caller.  The caller waits until the
    call's deadline (plus ``GRACE`` seconds) at most: a thread still inside Ray then
    is abandoned (``stuck``; the ring starts a new waiter) and ``_Stuck`` raised."""

    GRACE = 1.0

    def __init__(self, ray):
        self._ray = ray
        self._jobs = queue.SimpleQueue()
        self.stuck = False
        self._thread = threading.Thread(target=self._serve, name="lutcore-ray-wait", daemon=True)
        self._thread.start()

    def _serve(self):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (OSError, AttributeError):
            pass
        while True:
            job = self._jobs.get()
            if job is None:
                return
            make_refs, deadline, box, done = job
            try:
                refs = make_refs()
                box.append((True, self._ray.get(refs, timeout=_left(deadline))))
            except BaseException as e:                 # noqa: BLE001 - handed to the caller
                box.append((False, e))
            # keep nothing of Ray's here: the result may be a view of the graph's channel,
            # and a graph ref must not outlive its graph on this thread
            refs = None
            del job, make_refs, box
            done.set()
            del done

    def get(self, make_refs, deadline):
        """``ray.get(make_refs())`` on the thread, within ``deadline`` (monotonic; None: none)."""
        box, done = [], threading.Event()
        self._jobs.put((make_refs, deadline, box, done))
        if not done.wait(None if deadline is None else _left(deadline) + self.GRACE):
            self.stuck = True
            self._jobs.put(None)                       # the thread ends if Ray ever lets it go
            raise _Stuck("no answer")
        ok, value = box[0]
        if ok:
            return value
        raise value

    def close(self):
        self._jobs.put(None)
        if not self.stuck:
            self._thread.join(timeout=10)


class RayRing:
    """One Ray actor per stage (see the module docstring)."""

    PROBE_WAIT = 3.0        # seconds a probe waits for the stages' pings (at most)

    def __init__(self, path, spec, plans, units=None, threads=None, actor_options=None, call_timeout=None,
                 compile_after=256, decode_chunk=8, startup_timeout=120.0):
        import ray
        self._ray = ray
        self._owns_ray = False
        ring_options(compile_after, decode_chunk, call_timeout, actor_options, startup_timeout)
        self.compile_after = compile_after
        self.decode_chunk = decode_chunk
        self.compiled = compile_after is not None
        self._passes = 0
        self._graph = None
        self._waiter = None
        self.actors = []
        if not ray.is_initialized():
            ray.init()
            self._owns_ray = True
        self.plans = list(plans)
        self.call_timeout = call_timeout
        self.startup_timeout = startup_timeout
        if units is not None:
            from lutcore.units import assign
            if not isinstance(units, assign.Assignment):
                units = assign.resolve_spec(units)
        if isinstance(actor_options, dict) or actor_options is None:
            actor_options = [dict(actor_options or {}) for _ in self.plans]
        if len(actor_options) != len(self.plans):
            raise ValueError(f"actor_options: expected one dict per stage ({len(self.plans)}), "
                             f"got {len(actor_options)}")
        # pings run in their own group (one thread): a stage whose main thread waits on a
        # stalled stage still answers them, so a probe names the stalled one
        cls = ray.remote(concurrency_groups={"probe": 1})(_StageWorker)
        try:
            for plan, opts in zip(self.plans, actor_options):
                o = {"num_cpus": 0, "max_restarts": 0}       # stages run one after another: no CPU reservation
                o.update(opts)
                # Stages take turns on the same cores (the chain runs one stage at a time), so
                # each stage runs its host's CPUs by default (_StageWorker); lutcore's team sleeps
                # 100 us after a kernel, so a stage's threads leave the cores to the next stage.
                # Ray gives an actor without CPUs OMP_NUM_THREADS=1: ask for the stage's count.
                env = dict(o.get("runtime_env") or {})
                omp = {} if threads is None else {"OMP_NUM_THREADS": str(threads)}
                env["env_vars"] = {**omp, **dict(env.get("env_vars") or {})}
                o["runtime_env"] = env
                self.actors.append(cls.options(**o).remote(os.fspath(path), spec, plan, units, threads))
            self._ids = {a._actor_id.hex(): k for k, a in enumerate(self.actors)}
            self._start()
        except BaseException:
            self.close()                               # no actors left behind
            raise

    def _start(self):
        """Wait for every actor to start (build its stage), within ``startup_timeout``."""
        ray = self._ray
        pings = [self._ping(a) for a in self.actors]
        try:
            ready, _ = ray.wait(pings, num_returns=len(pings), timeout=self.startup_timeout)
        except Exception:                              # noqa: BLE001 - mapped by the get below
            ready = pings
        done = {r.hex() for r in ready}
        late = [k for k, r in enumerate(pings) if r.hex() not in done]
        if late:
            plan = self.plans[late[0]]
            names = ", ".join(str(self.plans[k]) for k in late)
            raise StageFailure(f"pipeline start-up: no answer within startup_timeout={self.startup_timeout} s "
                               f"({names} not started)", stage=late[0], plan=plan)
        self._call(lambda: pings, "start-up")      # errors (a stage that failed to load) mapped

    def _ping(self, actor):
        return actor.ping.options(concurrency_group="probe").remote()

    # ------------------------------------------------------------------ compiled graph
    def _compiled(self, what):
        """The compiled chain of stage calls (built once ``compile_after`` passes have run
        the plain way), or None for plain calls."""
        if self._graph is None and self.compiled and self._passes >= self.compile_after:
            self._graph = self._build(what)
        return self._graph

    def _build(self, what):
        """Compile the graph on a helper thread: Ray's compile waits on every actor
        without a limit.  Waited for up to ``startup_timeout``, probing the stages every
        ``call_timeout``: a stage that does not answer -> StageFailure naming it; a build
        that is only slow (every stage answers) and overruns -> plain calls from now on,
        as when compiling fails.  An abandoned build tears its graph down if it ends."""
        state = {"graph": None, "abandoned": False}
        lock, done = threading.Lock(), threading.Event()
        actors, chunk = list(self.actors), self.decode_chunk

        def build():
            g = None
            try:
                from ray.dag import InputNode
                with InputNode() as inp:
                    node = graph_chain(actors, chunk, inp, lambda actor, step, x: getattr(actor, step).bind(x))
                g = node.experimental_compile()
            except Exception:                          # noqa: BLE001 - no compiled graphs here: plain calls
                g = None
            with lock:
                if state["abandoned"]:
                    if g is not None:
                        _teardown(g)
                    return
                state["graph"] = g
                done.set()

        def abandon():
            with lock:
                state["abandoned"] = True
                g = state["graph"]
            self.compiled = False                      # an actor can be in one compiled graph only
            if g is not None:
                _teardown(g)

        threading.Thread(target=build, name="lutcore-ray-compile", daemon=True).start()
        limit = None if self.startup_timeout is None else time.monotonic() + self.startup_timeout
        step = self.call_timeout
        while True:
            left = None if limit is None else limit - time.monotonic()
            waits = [x for x in (step, left) if x is not None]
            if done.wait(max(0.0, min(waits)) if waits else None):
                break
            k = self._probe()
            if k is not None:
                abandon()
                plan = self.plans[k[0]]
                raise StageFailure(f"pipeline {what}: building the compiled graph: "
                                   + (f"{plan} died" if k[1] else
                                      f"no answer within {step if step is not None else self.startup_timeout} s "
                                      f"({plan} does not answer)"), stage=k[0], plan=plan)
            if limit is not None and time.monotonic() >= limit:
                abandon()                              # slow, not stalled: plain calls
                return None
        g = state["graph"]
        if g is None:
            self.compiled = False
        return g

    def _drop_graph(self, wait=None):
        """Tear the compiled graph down (plain calls to its actors would wait behind it).

        On a helper thread, waited for at most ``wait`` seconds (default: as long as a
        call may take): Ray's teardown waits for every stage, and a stalled one (stopped,
        swapping, deadlocked) would hold the caller forever.  A graph that is not down by
        then is abandoned to its thread; the ring goes on with plain calls."""
        g, self._graph = self._graph, None
        if g is None:
            return
        t = threading.Thread(target=_teardown, args=(g,), name="lutcore-ray-teardown", daemon=True)
        t.start()
        t.join(timeout=wait if wait is not None else (self.call_timeout or 60.0))

    # ------------------------------------------------------------------ calls
    def _probe(self):
        """(k, died?) for the first stage that died or does not answer a ping within a
        few seconds (a stalled one), or None when all answer.  Pings run in the actors'
        ``probe`` group, beside their main thread and a compiled graph's loop, so a
        stage waiting on a stalled one answers."""
        ray = self._ray
        wait = min(self.PROBE_WAIT, max(1.0, float(self.call_timeout or self.PROBE_WAIT)))
        try:
            pings = [self._ping(a) for a in self.actors]
            ready, _ = ray.wait(pings, num_returns=len(pings), timeout=wait)
        except Exception:                              # noqa: BLE001 - ask each one below
            return self._probe_each(wait)
        done = {r.hex() for r in ready}
        for k, r in enumerate(pings):
            if r.hex() in done:
                try:
                    ray.get(r, timeout=0)
                except Exception:                      # noqa: BLE001 - a dead actor
                    return (k, True)
        for k, r in enumerate(pings):
            if r.hex() not in done:
                return (k, False)
        return None

    def _probe_each(self, wait):
        for k, a in enumerate(self.actors):
            try:
                self._ray.get(self._ping(a), timeout=wait)
            except self._ray.exceptions.GetTimeoutError:
                return (k, False)
            except Exception:                          # noqa: BLE001 - any other failure: gone
                return (k, True)
        return None

    def _which(self, err):
        self._drop_graph(wait=min(self.PROBE_WAIT, self.call_timeout or self.PROBE_WAIT))
        aid = _actor_hex(err)
        if aid in self._ids:
            return self._ids[aid]
        k = self._probe()
        return None if k is None else k[0]

    def _call(self, make_refs, what, compiled=False):
        """ray.get with the failures mapped: a dead actor -> StageFailure naming its stage;
        a bad hop -> HopChecksumError; a ValueError/TypeError raised by a stage (bad
        input) -> the same type, named by the stage that raised it; anything else -> StageFailure.
        ``compiled``: the refs come from the compiled graph (whose get would otherwise
        time out after Ray's default 10 s, and whose channels close when a stage dies).
        One deadline, ``call_timeout`` from now, covers the whole call."""
        ray = self._ray
        deadline = None if self.call_timeout is None else time.monotonic() + self.call_timeout
        try:
            if compiled:
                if self._waiter is None or self._waiter.stuck:
                    self._waiter = _Waiter(ray)
                return self._waiter.get(make_refs, deadline)
            refs = make_refs()
            return ray.get(refs, timeout=None if deadline is None else _left(deadline))
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayChannelTimeoutError, _Stuck) as e:
            self._drop_graph(wait=1.0)                 # a stalled stage: do not wait for Ray's teardown
            k = self._probe()
            plan = self.plans[k[0]] if k is not None else None
            raise StageFailure(f"pipeline {what}: no answer within {self.call_timeout} s"
                               + (f" ({plan} {'died' if k[1] else 'does not answer'})" if plan is not None
                                  else ""), stage=None if k is None else k[0], plan=plan) from e
        except (ray.exceptions.RayActorError, ray.exceptions.RayChannelError) as e:
            k = self._which(e)
            plan = self.plans[k] if k is not None else None
            raise StageFailure(f"pipeline {what}: {plan if plan is not None else 'a stage'} "
                               f"died: {_reason(e)}", stage=k, plan=plan) from e
        except ray.exceptions.RayTaskError as e:
            inner, cause = e, getattr(e, "cause", None)
            while isinstance(cause, ray.exceptions.RayTaskError):     # a failed input of a later hop
                inner, cause = cause, getattr(cause, "cause", None)
            if isinstance(cause, ray.exceptions.RayActorError):
                k = self._which(cause)
                plan = self.plans[k] if k is not None else None
                raise StageFailure(f"pipeline {what}: {plan if plan is not None else 'a stage'} "
                                   f"died", stage=k, plan=plan) from e
            k = self._ids.get(_actor_hex(inner))
            where = f"stage {k}" if k is not None else "a stage"
            if isinstance(cause, HopChecksumError):
                raise HopChecksumError(str(cause)) from e
            if isinstance(cause, (ValueError, TypeError)):               # named by the stage itself
                raise type(cause)(str(cause)) from e
            raise StageFailure(f"pipeline {what}: {where} failed: {type(cause).__name__}: {cause}",
                               stage=k, plan=self.plans[k] if k is not None else None) from e

    def reset(self):
        g = self._compiled("reset")
        if g is not None:
            self._call(lambda: g.execute(("reset",)), "reset", compiled=True)
            return
        self._call(lambda: [a.reset.remote() for a in self.actors], "reset")

    def forward(self, ids, start, cached, last_only):
        self._passes += 1
        g = self._compiled(f"token at position {start}")
        if g is not None:
            msg = ("pass", np.asarray(ids, np.int64), int(start), bool(cached), bool(last_only))
            # the result is read in place from the graph's shared-memory channel: copy it, or
            # a caller keeping logits would hold the channel and stall the graph
            return np.array(self._call(lambda: g.execute(msg), f"token at position {start}", compiled=True),
                            copy=True)

        def refs():
            hop = self.actors[0].first.remote(np.asarray(ids, np.int64), int(start), cached)
            for a in self.actors[1:]:
                hop = a.run.remote(hop, cached)
            return self.actors[0].last.remote(hop, last_only)
        return self._call(refs, f"token at position {start}")

    def decode(self, tok, pos, budget, sampling, stop):
        """New tokens after ``tok`` at ``pos`` -> (tokens, non-finite logits?): through the
        compiled graph up to ``decode_chunk`` of them in one execution, picked on stage 0
        (stopping after a stop id); else one pass, picked here."""
        self._passes += 1
        g = self._compiled(f"tokens after position {pos}")
        if g is None:
            return _decode_plain(self, tok, pos, sampling)
        msg = ("step", int(tok), int(pos), int(min(budget, self.decode_chunk)), tuple(sampling), frozenset(stop))
        toks, bad = self._call(lambda: g.execute(msg), f"tokens after position {pos}", compiled=True)
        return [int(t) for t in toks], bool(bad)

    def assignments(self):
        self._drop_graph()
        return self._call(lambda: [a.assignment.remote() for a in self.actors], "assignment")

    def set_units(self, assignment):
        """Every stage's layers to ``assignment`` (a resolved Assignment; each takes its part).
        The compiled graph is dropped first (its actors would queue a plain call behind it);
        the next passes rebuild it."""
        self._drop_graph()
        self._passes = 0
        self._call(lambda: [a.set_units.remote(assignment) for a in self.actors], "set_units")

    def info(self):
        self._drop_graph()
        return self._call(lambda: [a.info.remote() for a in self.actors], "info")

    def close(self):
        if self._waiter is not None:
            self._waiter.close()
            self._waiter = None
        self._drop_graph(wait=min(10.0, self.call_timeout or 10.0))
        for a in self.actors:
            try:
                self._ray.kill(a)
            except Exception:                          # noqa: BLE001 - already gone
                pass
        self.actors = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
