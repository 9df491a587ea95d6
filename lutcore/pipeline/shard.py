"""Cutting a model into stages: the plan, the weight layout, and loading one
stage's tensors (and only those).

Design: a plan is a list of ``StagePlan`` — contiguous layer ranges
``[lo, hi)`` that cover every layer exactly once, in order; stage 0 is the
*head* (embedding and readout live together, so a tied readout reuses the
embedding and nothing is copied).  ``plan_stages`` cuts proportionally to the
devices' capacities with exact rational arithmetic (largest remainder, ties to
the lower index), so the same devices always give the same plan.
``load_stage_weights`` reads only the tensors a stage needs through
``lutcore._io.read_safetensors`` (one file or a sharded index; fp16/bf16
widened to float32) and checks every shape before anything is built from it.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
from fractions import Fraction

import numpy as np

from lutcore.pipeline.arch import ArchSpec, _nbytes, tensor_shapes

__all__ = ["StagePlan", "to_kn", "plan_stages", "plan_from_splits", "load_stage_weights",
           "stage_tensor_names"]


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """Stage ``index`` (on device ``id``) runs layers ``lo .. hi-1``; ``head``: it also
    embeds and reads out."""
    id: str
    index: int
    lo: int
    hi: int
    head: bool

    @property
    def n_layers(self) -> int:
        return self.hi - self.lo

    def __str__(self):
        rng = f"layers {self.lo}..{self.hi - 1}" if self.hi > self.lo else "no layers"
        return f"stage {self.index} ({self.id}): {rng}" + (" + head" if self.head else "")


def _as_plan(stage) -> StagePlan:
    if isinstance(stage, StagePlan):
        return stage
    if isinstance(stage, dict):
        try:
            return StagePlan(id=str(stage.get("id", f"stage{stage['index']}")), index=int(stage["index"]),
                             lo=int(stage["lo"]), hi=int(stage["hi"]), head=bool(stage.get("head", False)))
        except KeyError as e:
            raise ValueError(f"stage: a stage dict needs 'index', 'lo', 'hi' (missing {e})") from None
    raise TypeError(f"stage: expected a StagePlan or a dict, got {type(stage).__name__}")


# --------------------------------------------------------------------- layout
def to_kn(w, out: int, in_: int, layout: str):
    """A weight matrix as (in, out) — the (K, N) right operand of ``x @ W``.

    ``"out_in"`` (``nn.Linear``): a real transpose, returned as a new C-contiguous
    (in, out) array (a flat input is read as (out, in)).  ``"in_out"`` (GPT-2's
    ``Conv1D``): already (K, N) — the very same array object comes back.
    """
    if layout not in ("out_in", "in_out"):
        raise ValueError(f"layout: expected 'out_in' or 'in_out', got {layout!r}")
    w_arr = np.asarray(w)
    if w_arr.size != out * in_:
        raise ValueError(f"w: expected {out} x {in_} = {out * in_} values, got shape {w_arr.shape}")
    if layout == "in_out":
        if w_arr.ndim == 2 and w_arr.shape != (in_, out):
            raise ValueError(f"w: an in_out matrix must have shape {(in_, out)}, got {w_arr.shape}")
        return w
    if w_arr.ndim == 2 and w_arr.shape != (out, in_):
        raise ValueError(f"w: an out_in matrix must have shape {(out, in_)}, got {w_arr.shape}")
    return np.ascontiguousarray(w_arr.reshape(out, in_).T)


# ---------------------------------------------------------------------- plans
def plan_from_splits(spec: ArchSpec, splits) -> list:
    """Explicit layer counts per stage, e.g. [2, 2, 2]; zeros are allowed."""
    if isinstance(splits, (str, bytes)) or not hasattr(splits, "__iter__"):
        raise TypeError(f"splits: expected a list of layer counts, got {splits!r}")
    splits = list(splits)
    if not splits:
        raise ValueError("splits: need at least one stage")
    if any(isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0 for n in splits):
        raise ValueError(f"splits: layer counts must be non-negative ints, got {splits}")
    counts = [int(n) for n in splits]
    if sum(counts) != spec.layers:
        raise ValueError(f"splits: {counts} covers {sum(counts)} layers, the model has {spec.layers}")
    return _contiguous([f"stage{i}" for i in range(len(counts))], counts)


def _contiguous(ids, counts):
    plans, lo = [], 0
    for i, (d, n) in enumerate(zip(ids, counts)):
        plans.append(StagePlan(id=str(d), index=i, lo=lo, hi=lo + n, head=(i == 0)))
        lo += n
    return plans


def _largest_remainder(total: int, weights: list) -> list:
    """Split ``total`` in proportion to ``weights`` (Fractions, sum > 0): floors, then
    one more to the largest remainders, ties to the lower index."""
    s = sum(weights)
    quotas = [Fraction(total) * w / s for w in weights]
    base = [math.floor(q) for q in quotas]
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - base[i]), i))
    for i in order[: total - sum(base)]:
        base[i] += 1
    return base


def _number(v, name, i):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
        raise ValueError(f"devices[{i}].{name}: expected a finite number >= 0, got {v!r}")
    return v


def plan_stages(spec: ArchSpec, devices) -> list:
    """Contiguous stages in device order, layers proportional to ``capacity``.

    ``devices``: ``[{"id", "capacity", "memory_bytes"?}, ...]``.  A missing or zero
    capacity counts as 0; if every capacity is 0 the layers are shared equally.
    ``memory_bytes`` caps a device at the layers whose float32 weights fit (the
    head's on device 0); the layers a capped device cannot take go to the others
    by the same rule.  Deterministic; empty stages are allowed; stage 0 is the head.
    """
    if not isinstance(devices, (list, tuple)) or not devices:
        raise ValueError("devices: expected a non-empty list of {'id', 'capacity', 'memory_bytes'?} dicts")
    n, L = len(devices), spec.layers
    ids, caps, mems = [], [], []
    for i, d in enumerate(devices):
        if not isinstance(d, dict):
            raise TypeError(f"devices[{i}]: expected a dict, got {type(d).__name__}")
        unknown = sorted(set(d) - {"id", "capacity", "memory_bytes"})
        if unknown:
            raise ValueError(f"devices[{i}]: unknown key(s) {unknown}; expected 'id', 'capacity', 'memory_bytes'")
        ids.append(str(d.get("id", f"device{i}")))
        c = _number(d.get("capacity"), "capacity", i)
        caps.append(Fraction(0) if c is None else Fraction(c))
        mems.append(_number(d.get("memory_bytes"), "memory_bytes", i))
    if len(set(ids)) != n:
        raise ValueError(f"devices: ids must be unique, got {ids}")
    head_b = _nbytes(tensor_shapes(spec, [], head=True))
    layer_b = _nbytes(tensor_shapes(spec, [0], head=False)) if L else 0
    limits = []
    for i, m in enumerate(mems):
        if m is None:
            limits.append(L)
            continue
        room = m - (head_b if i == 0 else 0)
        if room < 0:
            raise ValueError(f"devices[0] ({ids[0]}): memory_bytes {m} cannot hold the head "
                             f"(embedding and readout, {head_b} bytes)")
        limits.append(min(L, int(room // layer_b) if layer_b else L))
    if sum(limits) < L:
        raise ValueError(f"devices: their memory holds at most {sum(limits)} of {L} layers "
                         f"({layer_b} bytes per layer, {head_b} for the head on device 0)")
    fixed: dict = {}
    while True:                      # water-filling: cap the devices that overflow, re-split the rest
        act = [i for i in range(n) if i not in fixed]
        rest = L - sum(fixed.values())
        w = [caps[i] for i in act]
        if sum(w) == 0:
            w = [Fraction(1)] * len(act)
        alloc = _largest_remainder(rest, w)
        over = [i for i, a in zip(act, alloc) if a > limits[i]]
        if not over:
            counts = [fixed.get(i, 0) for i in range(n)]
            for i, a in zip(act, alloc):
                counts[i] = a
            break
        for i in over:
            fixed[i] = limits[i]
    return _contiguous(ids, counts)


# ---------------------------------------------------------------------- loading
def stage_tensor_names(spec: ArchSpec, stage) -> dict:
    """{name: shape} of the tensors stage ``stage`` needs (its layers, plus the head on stage 0)."""
    st = _as_plan(stage)
    if not 0 <= st.lo <= st.hi <= spec.layers:
        raise ValueError(f"stage: layers [{st.lo}, {st.hi}) outside the model's [0, {spec.layers})")
    return tensor_shapes(spec, range(st.lo, st.hi), head=st.head)


def _aliases(files, name):
    """Names a checkpoint may use instead of save_pretrained's: the original GPT-2
    checkpoints omit the ``transformer.`` prefix."""
    if name in files:
        return name
    if name.startswith("transformer.") and name[len("transformer."):] in files:
        return name[len("transformer."):]
    return None


def load_stage_weights(path, spec: ArchSpec | None, stage) -> dict:
    """{name: float32 array} for one stage, read from ``path`` (config.json +
    model.safetensors or a sharded index), nothing else.  Missing or misshaped
    tensors -> ValueError listing all of them."""
    from lutcore._io import read_config, read_safetensors, safetensors_files
    path = os.fspath(path)
    if spec is None:
        spec = ArchSpec.from_config(read_config(path))
    elif not os.path.isfile(os.path.join(path, "config.json")):
        read_config(path)                               # the clear "no config.json" error
    want = stage_tensor_names(spec, stage)
    files = safetensors_files(path)
    resolved, missing = {}, []
    for name in want:
        real = _aliases(files, name)
        if real is None:
            missing.append(name)
        else:
            resolved[name] = real
    raw = read_safetensors(path, list(resolved.values()), dtype=np.float32) if resolved else {}
    out, bad = {}, []
    for name, real in resolved.items():
        arr = raw[real]
        if tuple(arr.shape) != tuple(want[name]):
            bad.append(f"{name}: expected {tuple(want[name])}, got {tuple(arr.shape)}")
        out[name] = arr
    if missing or bad:
        parts = []
        if missing:
            parts.append(f"missing tensors: {missing}")
        if bad:
            parts.append(f"misshaped tensors: {bad}")
        raise ValueError(f"checkpoint {path!r} does not match the {spec.model_type} config for "
                         f"{_as_plan(stage)} — " + "; ".join(parts))
    return out
