"""Choosing the next token from logits: greedy, temperature, top-k, top-p."""
from __future__ import annotations

import numpy as np

from lutcore import _check


def check_sampling(temperature=0.0, top_k=None, top_p=None):
    """The sampling arguments, checked: -> (temperature, top_k, top_p) as float / int / float.
    temperature >= 0 (None: 0, greedy); top_k a positive int or None; top_p in (0, 1] or None."""
    t = 0.0 if temperature is None else _check.float_arg(temperature, "temperature", lo=0.0)
    k = None if top_k is None else _check.int_arg(top_k, "top_k", lo=1)
    p = None if top_p is None else _check.float_arg(top_p, "top_p", lo=0.0, hi=1.0, lo_open=True)
    return t, k, p


def pick_token(logits, temperature: float = 0.0, top_k=None, top_p=None, rng=None) -> int:
    """Greedy for temperature 0 (ties to the lowest id); else sample from the
    softmax of logits/temperature restricted to the top_k ids and the smallest
    set whose probability reaches top_p.  ``logits`` is one 1-D row; -inf masks an
    id, NaN or +inf is refused."""
    return draw(logits, *check_sampling(temperature, top_k, top_p), rng)


def draw(logits, temperature: float, top_k, top_p, rng=None) -> int:
    """``pick_token`` with sampling arguments already checked (``check_sampling``):
    generation loops check them once, not once a token."""
    lg = np.asarray(logits, dtype=np.float64)
    if lg.ndim != 1 or lg.size == 0:
        raise ValueError(f"logits: expected one non-empty row (V,), got shape {lg.shape}")
    if np.isnan(lg).any() or np.isposinf(lg).any():
        raise ValueError("logits: NaN or +inf values (the model's output is not finite)")
    if np.isneginf(lg).all():
        raise ValueError("logits: every id is masked (-inf)")
    if temperature == 0:
        return int(np.argmax(lg))
    if rng is None:
        rng = np.random.default_rng()
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    z = lg / temperature
    order = np.argsort(-z, kind="stable")
    if top_k is not None:
        order = order[:top_k]
    zz = z[order]
    p = np.exp(zz - zz.max())
    p /= p.sum()
    if top_p is not None:
        keep = int(np.searchsorted(np.cumsum(p), top_p) + 1)
        order, p = order[:keep], p[:keep]
        p = p / p.sum()
    return int(order[rng.choice(len(order), p=p)])


def seeded_draw(logits, temperature: float, top_k, top_p, seed=None) -> int:
    """``draw`` with a generator made from ``seed`` (any ``np.random.default_rng`` seed)
    when it samples: the pipelines draw token n with seed (seed, n)."""
    return draw(logits, temperature, top_k, top_p, None if temperature == 0 else np.random.default_rng(seed))
