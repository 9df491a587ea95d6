"""What every lutcore language model shares: parameter-dict checks, token-id
validation and the small accessors the Trainer relies on.  A model subclass
provides ``config`` (with ``vocab_size``), ``dtype`` and ``_params``."""
from __future__ import annotations

import numpy as np

from lutcore import _check


class LanguageModel:
    _kind = "model"

    def _match_params(self, params: dict, want: dict) -> dict:
        """Check ``params`` against {name: shape}; list every missing, unknown and
        misshaped tensor in one ValueError; return contiguous arrays of ``dtype``."""
        missing = sorted(set(want) - set(params))
        unknown = sorted(set(params) - set(want))
        bad = sorted(f"{k}: expected {want[k]}, got {tuple(np.shape(params[k]))}"
                     for k in set(want) & set(params) if tuple(np.shape(params[k])) != want[k])
        if missing or unknown or bad:
            msg = []
            if missing:
                msg.append(f"missing tensors: {missing}")
            if unknown:
                msg.append(f"unknown tensors: {unknown}")
            if bad:
                msg.append(f"misshaped tensors: {bad}")
            raise ValueError(f"params do not match the {self._kind} config — " + "; ".join(msg))
        return {k: np.ascontiguousarray(np.asarray(params[k]), dtype=self.dtype) for k in want}

    def _token_ids(self, ids, name="ids") -> np.ndarray:
        """Integer (batch, L) ids in [0, vocab) (a 1-D sequence becomes one row)."""
        return _check.token_ids(ids, name, self.config.vocab_size, ndim=2)

    def _ids(self, ids, name="ids") -> np.ndarray:
        return self._token_ids(ids, name)

    def _pair(self, ids, targets):
        """(ids, targets) for a loss: token ids of one shape, at least one token."""
        ids = self._ids(ids)
        targets = self._ids(targets, "targets")
        if targets.shape != ids.shape:
            raise ValueError(f"targets: expected shape {ids.shape} like ids, got {targets.shape}")
        if ids.size == 0:
            raise ValueError(f"ids: the loss averages over tokens, got none (shape {ids.shape})")
        return ids, targets

    def _grads(self, grads):
        """The caller's gradient dict checked against the parameters (added into), or a zeroed one."""
        if grads is None:
            return self.zero_grads()
        if not isinstance(grads, dict):
            raise TypeError(f"grads: expected a dict {{name: array}} like parameters(), got {type(grads).__name__}")
        for k, v in self._params.items():
            g = grads.get(k)
            if not isinstance(g, np.ndarray) or g.shape != v.shape or g.dtype != v.dtype or not g.flags.writeable:
                got = "missing" if g is None else (f"{g.dtype} {g.shape}" if isinstance(g, np.ndarray)
                                                   else type(g).__name__)
                raise ValueError(f"grads: {k!r} must be a writeable {v.dtype} array of shape {v.shape}, got {got}")
        return grads

    def parameters(self) -> dict:
        """{name: array} — the live arrays (write-through)."""
        return self._params

    def num_parameters(self) -> int:
        return int(sum(v.size for v in self._params.values()))

    def zero_grads(self) -> dict:
        return {k: np.zeros_like(v) for k, v in self._params.items()}
