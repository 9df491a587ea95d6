"""Fused AdamW with a trust region and a whole-step NaN guard; global grad-norm
clipping.  Moments are keyed by parameter NAME, created on first use, and
survive changes of the trainable set (a step updates exactly the parameters
named in its gradient dict).  One global step counter.

Design: the per-element update is one native pass (include/lutcore/optim.h);
the global norm is a float64 sum over names in sorted order, each tensor
summed in fixed chunks — the same bits at any thread count.
"""
from __future__ import annotations

import math

import numpy as np

from lutcore import _simd
from lutcore._native import optim as _o
from lutcore._threads import resolve_threads

__all__ = ["AdamW", "global_grad_norm", "clip_grad_norm"]


def _f32(a, name):
    if not isinstance(a, np.ndarray) or a.dtype != np.float32:
        raise TypeError(f"{name}: expected a float32 numpy array, got "
                        f"{getattr(a, 'dtype', type(a).__name__)}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous array")
    return a


def global_grad_norm(grads: dict, threads=None) -> float:
    """L2 norm over every gradient (float64 sum, names in sorted order; each
    tensor summed in fixed chunks — one native call for all of them)."""
    names = sorted(grads)
    xs = [np.ascontiguousarray(grads[n], dtype=np.float32) for n in names]
    total = 0.0
    for s in _o.sumsq_multi(xs, _simd.isa(), resolve_threads(threads)):
        total = total + s
    return math.sqrt(total) if math.isfinite(total) else float("nan")


def clip_grad_norm(grads: dict, max_norm: float, threads=None) -> float:
    """Scale all gradients in place so their global norm is at most ``max_norm``
    (factor max_norm / (norm + 1e-6), as torch); returns the pre-clip norm."""
    norm = global_grad_norm(grads, threads)
    if max_norm is not None and math.isfinite(norm) and norm > max_norm:
        c = np.float32(max_norm / (norm + 1e-6))
        for g in grads.values():
            g *= c
    return norm


class AdamW:
    """``AdamW(params, lr, betas, eps, weight_decay, max_delta)``; ``step(grads)`` -> info.

    ``params``: {name: float32 array} updated in place (the model's live arrays).
    ``max_delta > 0`` clamps each element's step to [-max_delta, max_delta]
    (the trust region; decay is applied outside it).  With ``max_delta = 0``
    the update is torch.optim.AdamW's.
    """

    def __init__(self, params: dict, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 max_delta=0.0, threads=None):
        if not isinstance(params, dict):
            raise TypeError(f"params: expected a dict {{name: array}}, got {type(params).__name__}")
        for k, v in params.items():
            _f32(v, f"params[{k!r}]")
        self.params = params
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.weight_decay, self.max_delta = float(weight_decay), float(max_delta)
        if not (0 <= self.betas[0] < 1 and 0 <= self.betas[1] < 1):
            raise ValueError(f"betas: expected values in [0, 1), got {betas}")
        if self.lr < 0 or self.eps <= 0 or self.max_delta < 0:
            raise ValueError("lr >= 0, eps > 0 and max_delta >= 0 are required")
        self.threads = threads
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0
        self.skipped = 0

    def step(self, grads: dict, max_grad_norm: float | None = None, grad_scale: float = 1.0) -> dict:
        """One update of the parameters named in ``grads``.

        ``grad_scale`` multiplies every gradient first (e.g. 1/loss_scale);
        ``max_grad_norm`` clips the (scaled) global norm, fused into the pass.
        A step whose gradients hold any NaN/Inf changes nothing and is counted
        in ``skipped``.  Returns {step, skipped, grad_norm, clip_factor}."""
        for k, g in grads.items():
            if k not in self.params:
                raise KeyError(f"grads: {k!r} is not a parameter of this optimizer")
            _f32(g, f"grads[{k!r}]")
            if g.shape != self.params[k].shape:
                raise ValueError(f"grads[{k!r}]: expected shape {self.params[k].shape}, got {g.shape}")
        norm = global_grad_norm(grads, self.threads) * abs(float(grad_scale))
        if not math.isfinite(norm):
            self.skipped += 1
            return {"step": self.t, "skipped": True, "grad_norm": norm, "clip_factor": 1.0}
        clip = 1.0
        if max_grad_norm is not None and norm > max_grad_norm:
            clip = max_grad_norm / (norm + 1e-6)
        self.t += 1
        b1, b2 = self.betas
        bc1, bc2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        gscale = float(np.float32(grad_scale) * np.float32(clip)) if (grad_scale != 1.0 or clip != 1.0) else 1.0
        isa, nt = _simd.isa(), resolve_threads(self.threads)
        names = sorted(grads)
        for name in names:
            if name not in self.m:
                self.m[name] = np.zeros_like(self.params[name])
                self.v[name] = np.zeros_like(self.params[name])
        _o.adamw_multi([self.params[n] for n in names], [grads[n] for n in names], [self.m[n] for n in names],
                       [self.v[n] for n in names], b1, b2, self.eps, self.lr, self.weight_decay, self.max_delta,
                       bc1, bc2, gscale, isa, nt)
        return {"step": self.t, "skipped": False, "grad_norm": norm, "clip_factor": clip}

    def state_dict(self) -> dict:
        return {"t": self.t, "skipped": self.skipped, "lr": self.lr, "betas": list(self.betas),
                "eps": self.eps, "weight_decay": self.weight_decay, "max_delta": self.max_delta,
                "m": {k: v.copy() for k, v in self.m.items()}, "v": {k: v.copy() for k, v in self.v.items()}}

    def load_state_dict(self, sd: dict) -> None:
        for k in ("m", "v"):
            for name, arr in sd[k].items():
                if name not in self.params or np.shape(arr) != self.params[name].shape:
                    raise ValueError(f"state_dict: moment {k}[{name!r}] does not match the parameters")
        self.t, self.skipped = int(sd["t"]), int(sd.get("skipped", 0))
        self.lr, self.betas = float(sd["lr"]), tuple(float(b) for b in sd["betas"])
        self.eps, self.weight_decay = float(sd["eps"]), float(sd["weight_decay"])
        self.max_delta = float(sd["max_delta"])
        self.m = {k: np.array(v, np.float32) for k, v in sd["m"].items()}
        self.v = {k: np.array(v, np.float32) for k, v in sd["v"].items()}
