"""Choosing the next token from logits: greedy, temperature, top-k, top-p."""
from __future__ import annotations

import numpy as np


def pick_token(logits, temperature: float = 0.0, top_k=None, top_p=None, rng=None) -> int:
    """Greedy for temperature 0 (ties to the lowest id); else sample from the
    softmax of logits/temperature restricted to the top_k ids and the smallest
    set whose probability reaches top_p."""
    lg = np.asarray(logits, dtype=np.float64).reshape(-1)
    if lg.size == 0:
        raise ValueError("logits: empty")
    if temperature is None or temperature <= 0:
        return int(np.argmax(lg))
    rng = rng if rng is not None else np.random.default_rng()
    z = lg / float(temperature)
    order = np.argsort(-z, kind="stable")
    if top_k is not None:
        if int(top_k) <= 0:
            raise ValueError(f"top_k: expected a positive int, got {top_k}")
        order = order[: int(top_k)]
    zz = z[order]
    p = np.exp(zz - zz.max())
    p /= p.sum()
    if top_p is not None:
        if not 0 < float(top_p) <= 1:
            raise ValueError(f"top_p: expected a value in (0, 1], got {top_p}")
        keep = int(np.searchsorted(np.cumsum(p), float(top_p)) + 1)
        order, p = order[:keep], p[:keep]
        p = p / p.sum()
    return int(order[rng.choice(len(order), p=p)])
