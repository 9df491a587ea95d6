"""Mixed precision (AMP) numerics on the CPU: fp32 master weights with an fp16
view for compute, and dynamic loss scaling (init 2^14, x2 after 200 clean
steps, x0.5 on overflow with the step skipped, floor 1)."""
from __future__ import annotations

import math

import numpy as np

from lutcore import _check
from lutcore.ops.elementwise import fp16_round

__all__ = ["DynamicLossScaler", "fp16_view", "has_overflow"]


def _scaler_args(init_scale, growth_factor, backoff_factor, growth_interval, min_scale, where=""):
    """The scaler's settings checked: (scale, growth, backoff, interval, floor)."""
    scale = _check.float_arg(init_scale, where + "init_scale", lo=0.0, lo_open=True)
    gf = _check.float_arg(growth_factor, where + "growth_factor", lo=1.0)
    bf = _check.float_arg(backoff_factor, where + "backoff_factor", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    gi = _check.int_arg(growth_interval, where + "growth_interval", lo=1)
    ms = _check.float_arg(min_scale, where + "min_scale", lo=0.0, lo_open=True)
    if ms > scale:
        raise ValueError(f"{where}min_scale: expected <= init_scale ({scale}), got {ms}")
    return scale, gf, bf, gi, ms


def has_overflow(grads) -> bool:
    """Whether any gradient (a dict or a sequence of float arrays) holds a NaN or Inf."""
    vals = list(grads.values() if isinstance(grads, dict) else grads)
    for g in vals:
        if not isinstance(g, np.ndarray) or g.dtype.kind != "f":
            raise TypeError(f"grads: expected float arrays, got {getattr(g, 'dtype', type(g).__name__)}")
    return any(not np.isfinite(g).all() for g in vals)


def fp16_view(params: dict) -> dict:
    """{name: fp16-rounded float32 copy} — what fp16 storage of the weights keeps."""
    if not isinstance(params, dict):
        raise TypeError(f"params: expected a dict {{name: array}}, got {type(params).__name__}")
    return {k: fp16_round(np.ascontiguousarray(v, np.float32)) for k, v in params.items()}


class DynamicLossScaler:
    def __init__(self, init_scale=2.0 ** 14, growth_factor=2.0, backoff_factor=0.5, growth_interval=200,
                 min_scale=1.0):
        self.scale, self.growth_factor, self.backoff_factor, self.growth_interval, self.min_scale = _scaler_args(
            init_scale, growth_factor, backoff_factor, growth_interval, min_scale)
        self.overflows = 0
        self.skipped = 0
        self._clean = 0

    def check(self, grads) -> bool:
        """True when any gradient holds inf/nan (an overflow)."""
        return has_overflow(grads)

    def unscale(self, grads, factor: float = 1.0) -> None:
        """Divide gradients by the scale (and by ``factor``, e.g. the number of
        accumulated micro-batches), in place."""
        factor = _check.float_arg(factor, "factor", lo=0.0, lo_open=True)
        inv = np.float32(1.0 / (self.scale * factor))
        for g in (grads.values() if isinstance(grads, dict) else grads):
            g *= inv

    def update(self, overflow: bool) -> bool:
        """Advance the controller; returns whether the optimizer step should proceed."""
        if overflow:
            self.overflows += 1
            self.skipped += 1
            self.scale = max(self.min_scale, self.scale * self.backoff_factor)
            self._clean = 0
            return False
        self._clean += 1
        if self._clean >= self.growth_interval:
            self.scale = self.scale * self.growth_factor
            if not math.isfinite(self.scale):
                self.scale = float(np.finfo(np.float32).max)
            self._clean = 0
        return True

    def state_dict(self) -> dict:
        return {"scale": self.scale, "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "min_scale": self.min_scale,
                "overflows": self.overflows, "skipped": self.skipped, "clean": self._clean}

    def load_state_dict(self, sd: dict) -> None:
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "min_scale", "overflows", "skipped",
                "clean")
        if not isinstance(sd, dict) or any(k not in sd for k in keys):
            raise ValueError(f"state_dict: expected a dict with {list(keys)} (from state_dict()), got "
                             f"{sorted(sd) if isinstance(sd, dict) else type(sd).__name__}")
        scale, gf, bf, gi, ms = _scaler_args(sd["scale"], sd["growth_factor"], sd["backoff_factor"],
                                             sd["growth_interval"], sd["min_scale"], "state_dict: ")
        counts = [_check.int_arg(sd[k], f"state_dict: {k}", lo=0) for k in ("overflows", "skipped", "clean")]
        self.scale, self.growth_factor, self.backoff_factor, self.growth_interval, self.min_scale = scale, gf, bf, gi, ms
        self.overflows, self.skipped, self._clean = counts
