"""The pipeline: stages in a ring, in one process or one Ray actor each.

Design: ``Pipeline`` owns the generation loop; a *ring* moves hidden states
through the stages and hands back logits.  The local ring calls ``Stage``
objects in turn; the Ray ring (``lutcore.pipeline._ray``) holds one actor per
stage, each of which loads only its own tensors, and passes float32 hidden
states from actor to actor through the object store with a crc32 checked on
arrival.  Both rings run the very same ``Stage`` code, whose bits depend on
neither the process nor its thread counts (see ``stage.py``), so a split or a
transport changes no bit.

Generation is prefill (the prompt in one pass, KV caches filled), then one
token per step.  Token n (its index in the full sequence) is drawn with
``np.random.default_rng((seed, n))``, so a run can be *resumed*: ``generate(
tokens_so_far, rest, prompt_len=p)`` prefills the first p tokens and replays the
rest one at a time — exactly the computation of the original run — and then
continues with identical output.  A stage failure raises ``StageFailure``
carrying the tokens so far and the prompt length for that purpose.
"""
from __future__ import annotations


import numpy as np

from lutcore import _check
from lutcore.pipeline.arch import ArchSpec
from lutcore.pipeline.shard import plan_from_splits, plan_stages
from lutcore.pipeline.stage import Stage
from lutcore.pipeline._common import HopChecksumError, StageFailure, decode_plain as _decode_plain, next_token, \
    ring_options  # noqa: F401  (public here too: lutcore.pipeline.pipeline.StageFailure, next_token, ...)

__all__ = ["Pipeline", "StageFailure", "HopChecksumError"]


def _validate_ring(spec: ArchSpec, stages):
    """Stages must be in order, contiguous, cover every layer once and hold
    exactly the layers their plans say; stage 0 must be the head."""
    if not stages:
        raise ValueError("stages: need at least one stage")
    if not stages[0].plan.head:
        raise ValueError(f"stages: the first stage must be the head, got {stages[0].plan}")
    lo = 0
    for k, st in enumerate(stages):
        if st.spec != spec:
            raise ValueError(f"stages[{k}]: built for a different model ({st.spec.model_type})")
        if st.plan.lo != lo:
            raise ValueError(f"stages[{k}]: starts at layer {st.plan.lo}, expected {lo} "
                             f"(stages out of order, or a gap/overlap)")
        held = [L.index for L in st.layers]
        if held != list(range(st.plan.lo, st.plan.hi)):
            raise ValueError(f"stages[{k}]: holds layers {held}, its plan says {st.plan.lo}..{st.plan.hi - 1}")
        lo = st.plan.hi
    if lo != spec.layers:
        raise ValueError(f"stages: cover layers 0..{lo - 1}, the model has {spec.layers}")


def _whole_model_units(spec, units):
    """A per-layer ``units`` (mapping or .json) resolved once against the whole model's layer
    names (a key covering no layer of any stage is the error), as the Assignment each stage
    takes its part of; one spec passes through."""
    from lutcore.pipeline.arch import unit_layer_names
    from lutcore.units import assign
    mapping = assign.as_mapping(units)
    if mapping is None:
        return units
    return assign.assign(mapping, unit_layer_names(spec, attention=True), fill=True, default=None)


def _non_finite(n):
    return ValueError(f"logits: non-finite values predicting position {n} — the model or its input is broken")


class _LocalRing:
    """All stages in this process, called in turn."""

    def __init__(self, stages):
        self.stages = list(stages)
        self.caches = None

    def reset(self):
        self.caches = [s.new_cache() for s in self.stages]

    def forward(self, ids, start, cached, last_only):
        head = self.stages[0]
        x = head.embed(ids, start)
        for k, st in enumerate(self.stages):
            x = st.run_layers(x, self.caches[k] if cached else None)
        if last_only:
            x = x[-1:]
        return head.readout(x)

    def decode(self, tok, pos, budget, sampling, stop):
        """One new token (see ``_decode_plain``)."""
        return _decode_plain(self, tok, pos, sampling)

    def assignments(self):
        return [s.assignment(attention=True) for s in self.stages]

    def set_units(self, a):
        for s in self.stages:
            s.set_units(a)

    def close(self):
        self.stages = []


class Pipeline:
    """A model split into stages, local or on Ray.  Build with ``from_pretrained``."""

    def __init__(self, spec: ArchSpec, plans, ring, transport: str):
        self.spec, self.plans, self._ring, self.transport = spec, list(plans), ring, transport
        self._busy = None                  # what is running on the stages' caches (generate)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_pretrained(cls, path, splits=None, devices=None, units=None, transport: str = "local",
                        threads=None, actor_options=None, call_timeout=None, compile_after=256,
                        decode_chunk=8, startup_timeout=120.0) -> "Pipeline":
        """Load a Hugging Face checkpoint directory split into stages.

        ``splits``: layer counts per stage ([2, 2, 2]); or ``devices``: the
        ``plan_stages`` input; neither: one stage.  ``units``: None (float32) or
        units to run every weight matmul through, or per layer a mapping {Hugging Face
        module name / prefix / glob: spec} or an assignment .json (``layer_names()``; the
        layers no key covers run in float; ``lutcore.units.assign``).  ``transport``: "local" or
        "ray" (one actor per stage; calls ``ray.init()`` if Ray is not running).
        ``threads``: lutcore kernel threads in every stage (the bits do not depend
        on it).  Ray only: ``actor_options``, extra ``ray.remote`` options per actor
        (a dict, or a list of one per stage, e.g. resources to place stages on
        nodes); ``call_timeout``: seconds one call (a pass, a decode chunk, a reset) may take,
        all of it (sending, every hop, the answer), before ``StageFailure`` names the stage
        that does not answer (a stalled one is found within a few more seconds); None: no
        limit; ``startup_timeout`` (default 120 s; None: no limit): seconds the actors may
        take to start (import, load their weights) and a compiled graph to build — a
        loaded machine is slow to start, so start-up has its own, longer limit; while
        the graph builds, a stage that stops answering still fails within ``call_timeout``;
        ``compile_after``: after this many passes the stage calls run as one Ray
        compiled graph (seconds to build once, then hops ~10x cheaper: it pays off
        after a few hundred tokens; a server decoding for long should pass 0); None
        keeps plain actor calls; ``decode_chunk``: tokens one execution of the compiled
        graph decodes (stage 0 picks each token itself and feeds it back, so the driver
        is out of the loop; ``on_token`` then hears of them a chunk at a time; the same
        tokens for any value).
        """
        from lutcore._io import path_arg, read_config
        from lutcore._threads import resolve_threads
        path = path_arg(path)
        if threads is not None:
            resolve_threads(threads)                 # checked now, not at the first pass
        ring_options(compile_after, decode_chunk, call_timeout, actor_options, startup_timeout)
        spec = ArchSpec.from_config(read_config(path))
        if splits is not None and devices is not None:
            raise ValueError("splits, devices: give one of them, not both")
        if devices is not None:
            plans = plan_stages(spec, devices)
        else:
            plans = plan_from_splits(spec, [spec.layers] if splits is None else splits)
        units = _whole_model_units(spec, units)
        if transport == "local":
            stages = [Stage.from_pretrained(path, spec, p, units=units, threads=threads) for p in plans]
            return cls(spec, plans, _LocalRing(stages), "local")
        if transport == "ray":
            from lutcore.pipeline._ray import RayRing
            ring = RayRing(path, spec, plans, units=units, threads=threads, actor_options=actor_options,
                           call_timeout=call_timeout, compile_after=compile_after, decode_chunk=decode_chunk,
                           startup_timeout=startup_timeout)
            return cls(spec, plans, ring, "ray")
        raise ValueError(f"transport: expected 'local' or 'ray', got {transport!r}")

    @classmethod
    def from_stages(cls, stages) -> "Pipeline":
        """A local pipeline from ready ``Stage`` objects (checked: order, coverage, head)."""
        stages = list(stages)
        if not stages or not all(isinstance(s, Stage) for s in stages):
            raise TypeError("stages: expected a non-empty list of Stage objects")
        spec = stages[0].spec
        _validate_ring(spec, stages)
        return cls(spec, [s.plan for s in stages], _LocalRing(stages), "local")

    # ------------------------------------------------------------------ per-layer units
    def layer_names(self, attention: bool = False) -> list:
        """The Hugging Face module names of the model's weight matmuls, "lm_head" last; with
        ``attention``, then the attention products (``<attention module>.qk`` / ``.pv``)."""
        from lutcore.pipeline.arch import unit_layer_names
        return unit_layer_names(self.spec, attention=attention)

    def assignment(self, attention: bool = False) -> dict:
        """{module name: Units or None (float)} over every stage (``attention``: the attention
        products too)."""
        ring = self._ring_or_raise()
        out = {}
        for part in ring.assignments():
            out.update(part)
        return {n: out[n] for n in self.layer_names(attention)}

    def set_units(self, units) -> "Pipeline":
        """Change layers' units on every stage (in place, nothing re-quantized but MX blocks of
        another element format, made from the Q8: see ``Stage.set_units``): one spec for every
        layer, or a mapping {name / prefix / glob: spec} (or an assignment .json) for the layers
        its keys cover, the others keeping theirs.  Every key is checked against the whole model
        before any stage changes."""
        from lutcore.units import assign
        ring = self._ring_or_raise()
        mapping = assign.as_mapping(units)
        names = self.layer_names(attention=True)
        if mapping is None:                        # one spec: the weights; attention's products in float
            u = assign.resolve_spec(units)
            a = assign.one_spec(u, names)
        else:
            a = assign.assign(mapping, names)
        cur = self.assignment(attention=True)
        flips = [n for n in a if not assign.is_attention(n) and (a[n] is None) != (cur[n] is None)]
        if flips:                                  # checked before any stage changes
            raise ValueError(f"units: layer{'s' if len(flips) > 1 else ''} {', '.join(flips[:8])}"
                             f"{' ...' if len(flips) > 8 else ''} would switch between float and units; a stage "
                             f"keeps only the weights it multiplies (float32 or quantized): build the pipeline "
                             f"with units for a layer to switch its units later (from_pretrained(units=...))")
        ring.set_units(a)
        return self

    @property
    def stages(self):
        """The local Stage objects (local transport only)."""
        return getattr(self._ring, "stages", None)

    # ------------------------------------------------------------------ run
    def _ids(self, ids):
        if np.size(ids) == 0:
            raise ValueError("ids: need at least one token")
        return _check.token_ids(ids, "ids", self.spec.vocab)

    def _ring_or_raise(self):
        if self._ring is None:
            raise ValueError("pipeline: closed")
        if self._busy is not None:
            raise ValueError(f"pipeline: busy with {self._busy} (a callback such as on_token may not use "
                             f"the pipeline it is called from: the stages hold that run's caches)")
        return self._ring

    def logits(self, ids, stride=None):
        """Logits (T, V) float32 for every position of ``ids`` (full passes, no cache).

        A model with learned positions (gpt2: P = ``spec.max_pos``) sees at most P tokens, so
        longer text is scored in sliding windows of P tokens, as Hugging Face's perplexity
        recipe does: the first window gives positions 0..P-1, each next window ends ``stride``
        (default P // 2) tokens later and gives the logits of its last ``stride`` positions,
        so every position from P on is predicted from at least P - stride tokens before it.
        Text of at most P tokens (or any text, for rope and Mamba models) is one pass."""
        ids = self._ids(ids)
        ring = self._ring_or_raise()
        P, T = self.spec.max_pos, ids.size
        if stride is not None:
            if P is None:
                raise ValueError(f"stride: only models with learned positions are windowed; "
                                 f"{self.spec.model_type} takes any length in one pass")
            stride = _check.int_arg(stride, "stride", lo=1, hi=P)
        if P is None or T <= P:
            return ring.forward(ids, 0, False, False)
        stride = P // 2 if stride is None else stride
        out = [ring.forward(ids[:P], 0, False, False)]       # (P, V)
        end = P
        while end < T:
            new_end = min(end + stride, T)
            start = new_end - P
            out.append(ring.forward(ids[start:new_end], 0, False, False)[end - start:])   # (new_end - end, V)
            end = new_end
        return np.concatenate(out, axis=0)                    # (T, V)

    def generate(self, ids, max_new_tokens: int, temperature: float = 0.0, top_k=None, top_p=None,
                 seed=None, prompt_len=None, stop_ids=None, on_token=None):
        """Prompt + up to ``max_new_tokens`` new ids (int64, 1-D).

        Greedy for temperature 0; else token n is drawn with
        ``np.random.default_rng((seed, n))``.  ``prompt_len``: resume a run —
        ``ids[:prompt_len]`` was the prompt, the rest was generated (see the
        module docstring).  ``stop_ids``: stop after emitting any of them.
        ``on_token(n, token)``: called after each new token (over a compiled Ray
        graph, which decodes ``decode_chunk`` tokens per execution, for each token of
        a chunk once the chunk is back).
        """
        from lutcore.sampling import check_sampling
        ids = self._ids(ids)
        n_new = _check.int_arg(max_new_tokens, "max_new_tokens", lo=0)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
        seed = _check.seed_arg(seed)
        if on_token is not None and not callable(on_token):
            raise TypeError(f"on_token: expected a callable(n, token) or None, got {type(on_token).__name__}")
        p = ids.size if prompt_len is None else _check.int_arg(prompt_len, "prompt_len")
        if not 1 <= p <= ids.size:
            raise ValueError(f"prompt_len: expected 1..{ids.size}, got {prompt_len}")
        if temperature > 0 and seed is None:
            seed = int(np.random.SeedSequence().entropy % (1 << 63))
        if stop_ids is None:
            stop = set()
        else:
            if isinstance(stop_ids, (set, frozenset)) or (hasattr(stop_ids, "__iter__")
                                                         and not isinstance(stop_ids, (str, bytes, np.ndarray))):
                stop_ids = list(stop_ids)
            stop = {_check.int_arg(s, "stop_ids") for s in np.atleast_1d(np.asarray(stop_ids, dtype=object)).tolist()}
        out = [int(t) for t in ids]
        if n_new == 0:
            return ids.copy()
        ring = self._ring_or_raise()
        sampling = (temperature, top_k, top_p, seed)

        def emit(tok):
            out.append(tok)
            if on_token is not None:
                on_token(len(out) - 1, tok)

        self._busy = "generate"
        try:
            ring.reset()
            logits = ring.forward(ids[:p], 0, True, True)
            for n in range(p, ids.size):                     # replay generated tokens one at a time
                logits = ring.forward(ids[n:n + 1], n, True, True)
            tok = next_token(logits[-1], len(out), sampling)
            if tok is None:
                raise _non_finite(len(out))
            emit(tok)
            # then the ring decodes: one token a call, or (Ray, compiled) a chunk of them
            # picked on stage 0 with the same draws, stopping at a stop id
            while len(out) - ids.size < n_new and tok not in stop:
                new, bad = ring.decode(tok, len(out) - 1, n_new - (len(out) - ids.size), sampling, stop)
                for tok in new:
                    emit(tok)
                if bad:
                    raise _non_finite(len(out))
        except StageFailure as e:
            e.tokens = np.array(out, np.int64)
            e.prompt_len = p
            raise
        finally:
            self._busy = None
        return np.array(out, np.int64)

    # ------------------------------------------------------------------ misc
    def describe(self) -> str:
        lines = [self.spec.describe(), f"transport: {self.transport}"]
        lines += [f"  {p}" for p in self.plans]
        if self._ring is not None and hasattr(self._ring, "info"):
            # Ray: each stage's process and threads (the stages take turns on a host's cores)
            lines += [f"  stage {i['index']}: pid {i['pid']}, {i['threads']} threads" for i in self._ring.info()]
        return "\n".join(lines)

    def close(self):
        """Release the stages (kills the Ray actors)."""
        if self._ring is not None:
            self._ring.close()
            self._ring = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Pipeline({self.spec.model_type}, {len(self.plans)} stages, {self.transport})"
