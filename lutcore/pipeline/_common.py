"""The pipeline's shared pieces: its errors, the token picker and the ring options.

Design: the pipeline (``pipeline.py``) and each transport (the local ring there, the Ray
ring in ``_ray.py``) import these from here and not from each other; this module
imports neither.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check
from lutcore.sampling import seeded_draw

__all__ = ["StageFailure", "HopChecksumError", "ring_options", "next_token", "decode_plain"]


class StageFailure(RuntimeError):
    """A stage (Ray actor) died or failed during a pipeline call.

    ``stage``: its index; ``plan``: its StagePlan; ``tokens``: the sequence so far
    (prompt + generated, as int64) and ``prompt_len`` — pass both back to
    ``generate`` on a rebuilt pipeline to resume with identical output."""

    def __init__(self, msg, stage=None, plan=None, tokens=None, prompt_len=None):
        super().__init__(msg)
        self.stage, self.plan, self.tokens, self.prompt_len = stage, plan, tokens, prompt_len


class HopChecksumError(RuntimeError):
    """A hidden state arrived at a stage with a crc32 other than the one it left with."""


def ring_options(compile_after, decode_chunk, call_timeout, actor_options, startup_timeout=120.0):
    """The Ray ring's options, checked (also for a local pipeline, which ignores them)."""
    if compile_after is not None and (isinstance(compile_after, bool) or not isinstance(compile_after, int)
                                      or compile_after < 0):
        raise ValueError(f"compile_after: expected None or an int >= 0, got {compile_after!r}")
    if isinstance(decode_chunk, bool) or not isinstance(decode_chunk, int) or decode_chunk < 1:
        raise ValueError(f"decode_chunk: expected an int >= 1, got {decode_chunk!r}")
    if call_timeout is not None:
        _check.float_arg(call_timeout, "call_timeout", lo=0.0, lo_open=True)
    if startup_timeout is not None:
        _check.float_arg(startup_timeout, "startup_timeout", lo=0.0, lo_open=True)
    if actor_options is not None and not isinstance(actor_options, (dict, list, tuple)):
        raise TypeError(f"actor_options: expected ray.remote options (a dict, or one per stage), got "
                        f"{type(actor_options).__name__}")


def next_token(logits_row, n, sampling):
    """Token ``n`` of the sequence from the logits predicting it, or None when they are
    not all finite.  ``sampling``: (temperature, top_k, top_p, seed); a draw uses
    ``np.random.default_rng((seed, n))``, so where it runs (driver or stage 0) and in
    which chunk changes nothing."""
    if not np.all(np.isfinite(logits_row)):
        return None
    temperature, top_k, top_p, seed = sampling             # checked once, by generate
    return seeded_draw(logits_row, temperature, top_k, top_p, None if seed is None else (int(seed), n))


def decode_plain(ring, tok, pos, sampling):
    """The decode step of a ring that hands logits back: one pass for ``tok`` at
    ``pos``, the next token picked here.  -> (new tokens, non-finite logits?)."""
    logits = ring.forward(np.array([tok], np.int64), pos, True, True)
    nxt = next_token(logits[-1], pos + 1, sampling)
    return ([], True) if nxt is None else ([nxt], False)
