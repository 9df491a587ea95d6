"""Fused AdamW with a trust region and a whole-step NaN guard; global grad-norm
clipping.  Moments are keyed by parameter NAME, created on first use, and
survive changes of the trainable set (a step updates exactly the parameters
named in its gradient dict).  One global step counter.

Design: a step is one native call (csrc/optim/optim.h lc_adamw_step_multi): the
norm pass over every gradient, the skip/clip decision, the per-element update (the
passes on lutcore's thread team); the global norm is a float64 sum over names in sorted order,
each tensor summed in fixed chunks — the same bits at any thread count, and the
same as ``global_grad_norm``.  The passes are ``lutcore.ops.optim``'s; ``step`` checks
every tensor by name, then calls that room's unchecked fast functions.

Threads: an optimizer inside an entry point (``Trainer``) is built without ``threads``
and its passes take the count of the entry point's ``lutcore._threads.scope``; one used on
its own with ``threads=n`` runs them with n.
"""
from __future__ import annotations

import math

import numpy as np

from lutcore import _check, _threads
from lutcore.ops import optim as _o

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
    if not isinstance(grads, dict):
        raise TypeError(f"grads: expected a dict {{name: array}}, got {type(grads).__name__}")
    names = sorted(grads)
    for n in names:
        g = grads[n]
        if not isinstance(g, np.ndarray) or g.dtype.kind != "f":
            raise TypeError(f"grads[{n!r}]: expected a float numpy array, got "
                            f"{getattr(g, 'dtype', type(g).__name__)}")
    total = 0.0
    for s in _o.sumsq([grads[n] for n in names], threads):
        total = total + s
    return math.sqrt(total) if math.isfinite(total) else float("nan")


def clip_grad_norm(grads: dict, max_norm: float, threads=None) -> float:
    """Scale all gradients in place so their global norm is at most ``max_norm``
    (factor max_norm / (norm + 1e-6), as torch); returns the pre-clip norm."""
    if max_norm is not None:
        max_norm = _check.float_arg(max_norm, "max_norm", lo=0.0, lo_open=True)
    norm = global_grad_norm(grads, threads)
    ro = [n for n, g in grads.items() if not g.flags.writeable]
    if ro:
        raise ValueError(f"grads: clipping scales them in place, but {ro} are read-only")
    if max_norm is not None and math.isfinite(norm) and norm > max_norm:
        c = np.float32(max_norm / (norm + 1e-6))
        for g in grads.values():
            g *= c
    return norm


def _hyper(lr, betas, eps, weight_decay, max_delta, where=""):
    """AdamW's hyperparameters checked: (lr, (b1, b2), eps, weight_decay, max_delta) as floats."""
    lr = _check.float_arg(lr, where + "lr", lo=0.0)
    if not isinstance(betas, (tuple, list, np.ndarray)) or len(betas) != 2:
        raise ValueError(f"{where}betas: expected two numbers (beta1, beta2) in [0, 1), got {betas!r}")
    b = tuple(_check.float_arg(x, f"{where}betas[{i}]", lo=0.0, hi=1.0, hi_open=True) for i, x in enumerate(betas))
    eps = _check.float_arg(eps, where + "eps", lo=0.0, lo_open=True)
    wd = _check.float_arg(weight_decay, where + "weight_decay", lo=0.0)
    md = _check.float_arg(max_delta, where + "max_delta", lo=0.0)
    return lr, b, eps, wd, md


# Below this scaled global norm no element of g * gscale can reach 2**64, so neither m
# nor (g * gscale)**2 in v can overflow float32 (unless v is already near its maximum,
# which only a gradient of this size puts there): the exact check runs only above it.
_SAFE_NORM = 2.0 ** 60


class AdamW:
    """``AdamW(params, lr, betas, eps, weight_decay, max_delta)``; ``step(grads)`` -> info.

    ``params``: {name: float32 array} updated in place (the model's live arrays).
    ``max_delta > 0`` clamps each element's step to [-max_delta, max_delta]
    (the trust region; decay is applied outside it).  With ``max_delta = 0``
    the update is torch.optim.AdamW's.  ``threads``: None runs each step with the
    enclosing scope's count (the Trainer's; lutcore's default outside any), a number with it.
    """

    def __init__(self, params: dict, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 max_delta=0.0, threads=None):
        if not isinstance(params, dict):
            raise TypeError(f"params: expected a dict {{name: array}}, got {type(params).__name__}")
        for k, v in params.items():
            _f32(v, f"params[{k!r}]")
        self.params = params
        self.lr, self.betas, self.eps, self.weight_decay, self.max_delta = _hyper(
            lr, betas, eps, weight_decay, max_delta)
        self.threads = threads
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0
        self.skipped = 0

    def step(self, grads: dict, max_grad_norm: float | None = None, grad_scale: float = 1.0) -> dict:
        """One update of the parameters named in ``grads``.

        ``grad_scale`` multiplies every gradient first (e.g. 1/loss_scale);
        ``max_grad_norm`` clips the (scaled) global norm, fused into the pass.
        A step whose gradients hold any NaN/Inf, or whose scaled gradients would
        overflow float32 in the moments, changes nothing and is counted in
        ``skipped``.  Each step checks the parameters it writes (the dict may
        have been rebound since construction): a ValueError/TypeError names one
        that is read-only, not float32, not C-contiguous or no longer the size
        of its moments.  Returns {step, skipped, grad_norm, clip_factor}."""
        if not isinstance(grads, dict):
            raise TypeError(f"grads: expected a dict {{name: array}}, got {type(grads).__name__}")
        if max_grad_norm is not None:
            max_grad_norm = _check.float_arg(max_grad_norm, "max_grad_norm", lo=0.0, lo_open=True)
        grad_scale = _check.float_arg(grad_scale, "grad_scale", lo=0.0, lo_open=True)
        self.lr = _check.float_arg(self.lr, "lr", lo=0.0)
        for k, g in grads.items():
            if k not in self.params:
                raise ValueError(f"grads: {k!r} is not a parameter of this optimizer")
            self._writable(k)
            _f32(g, f"grads[{k!r}]")
            if g.shape != self.params[k].shape:
                raise ValueError(f"grads[{k!r}]: expected shape {self.params[k].shape}, got {g.shape}")
        b1, b2 = self.betas
        t = self.t + 1
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        nt = _threads.resolve_threads(self.threads)      # None: the enclosing scope's (the Trainer's)
        names = sorted(grads)
        new = [n for n in names if n not in self.m]
        for name in new:
            self.m[name] = np.zeros_like(self.params[name])
            self.v[name] = np.zeros_like(self.params[name])
        ps, gs = [self.params[n] for n in names], [grads[n] for n in names]
        ms, vs = [self.m[n] for n in names], [self.v[n] for n in names]
        # one native call: the norm pass, the decision below, the update (csrc/optim/optim.h
        # lc_adamw_step_multi does this method's double arithmetic in its order); every tensor
        # was checked above (and by _writable), so the room's unchecked pass
        done, norm, clip, _ = _o._adamw_step(ps, gs, ms, vs, b1, b2, self.eps, self.lr, self.weight_decay,
                                             self.max_delta, bc1, bc2, grad_scale,
                                             0.0 if max_grad_norm is None else max_grad_norm, _SAFE_NORM, nt)
        if not done:                                     # a norm not finite or >= _SAFE_NORM: nothing written
            if not math.isfinite(norm) or self._would_overflow(grads, grad_scale, norm, max_grad_norm):
                for name in new:                         # moments are created by a step that updates
                    del self.m[name], self.v[name]
                self.skipped += 1
                return {"step": self.t, "skipped": True, "grad_norm": norm, "clip_factor": 1.0}
            clip = 1.0
            if max_grad_norm is not None and norm > max_grad_norm:
                clip = max_grad_norm / (norm + 1e-6)
            # one rounding of the double product: a huge grad_scale clipped by a tiny factor (each
            # alone beyond float32's range) is the factor the pair means, not 0 or inf
            gscale = float(np.float32(grad_scale * clip))
            _o._adamw_update(ps, gs, ms, vs, b1, b2, self.eps, self.lr, self.weight_decay, self.max_delta,
                             bc1, bc2, gscale, nt)
        self.t = t
        return {"step": self.t, "skipped": False, "grad_norm": norm, "clip_factor": clip}

    def _writable(self, name):
        """What the native pass will write for ``name``, checked now (the parameter dict
        is the caller's and may have been rebound since construction): the parameter a
        writeable C-contiguous float32 array, its moments (if any) of its size."""
        p = self.params[name]
        _f32(p, f"params[{name!r}]")
        if not p.flags.writeable:
            raise ValueError(f"params[{name!r}]: is read-only (memory-mapped, or a view of immutable bytes), but "
                             f"the optimizer updates it in place; give the model writeable float32 arrays")
        for which, mom in (("m", self.m), ("v", self.v)):
            a = mom.get(name)
            if a is not None and (not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.size != p.size
                                  or not a.flags.c_contiguous or not a.flags.writeable):
                got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                raise ValueError(f"params[{name!r}]: its moment {which} is {got}, but the parameter is now "
                                 f"float32 {p.shape} (the parameter was rebound; reset the optimizer's state)")

    def _would_overflow(self, grads, grad_scale, norm, max_grad_norm) -> bool:
        """A large (but finite) gradient norm: would the update overflow float32 in
        m or v?  Evaluated as the kernel does (csrc/optim/optim.h)."""
        clip = max_grad_norm / (norm + 1e-6) if (max_grad_norm is not None and norm > max_grad_norm) else 1.0
        gs = np.float32(grad_scale * clip)
        b1, b2 = np.float32(self.betas[0]), np.float32(self.betas[1])
        c1, c2 = np.float32(1.0 - self.betas[0]), np.float32(1.0 - self.betas[1])
        with np.errstate(over="ignore", invalid="ignore"):
            for k, g in grads.items():
                gg = g * gs
                m = self.m.get(k, np.float32(0))
                v = self.v.get(k, np.float32(0))
                if not (np.isfinite(b1 * m + c1 * gg).all() and np.isfinite(b2 * v + c2 * (gg * gg)).all()):
                    return True
        return False

    def state_dict(self) -> dict:
        return {"t": self.t, "skipped": self.skipped, "lr": self.lr, "betas": list(self.betas),
                "eps": self.eps, "weight_decay": self.weight_decay, "max_delta": self.max_delta,
                "m": {k: v.copy() for k, v in self.m.items()}, "v": {k: v.copy() for k, v in self.v.items()}}

    def load_state_dict(self, sd: dict) -> None:
        if not isinstance(sd, dict):
            raise TypeError(f"state_dict: expected a dict (from state_dict()), got {type(sd).__name__}")
        missing = [k for k in ("t", "lr", "betas", "eps", "weight_decay", "max_delta", "m", "v") if k not in sd]
        if missing:
            raise ValueError(f"state_dict: missing {missing} (expected what state_dict() returns)")
        for k in ("m", "v"):
            if not isinstance(sd[k], dict):
                raise TypeError(f"state_dict: {k} must be a dict {{name: array}}, got {type(sd[k]).__name__}")
            for name, arr in sd[k].items():
                if name not in self.params or np.shape(arr) != self.params[name].shape:
                    raise ValueError(f"state_dict: moment {k}[{name!r}] does not match the parameters")
        hyper = _hyper(sd["lr"], sd["betas"], sd["eps"], sd["weight_decay"], sd["max_delta"], "state_dict: ")
        t = _check.int_arg(sd["t"], "state_dict: t", lo=0)
        skipped = _check.int_arg(sd.get("skipped", 0), "state_dict: skipped", lo=0)
        self.t, self.skipped = t, skipped
        self.lr, self.betas, self.eps, self.weight_decay, self.max_delta = hyper
        self.m = {k: np.array(v, np.float32) for k, v in sd["m"].items()}
        self.v = {k: np.array(v, np.float32) for k, v in sd["v"].items()}
