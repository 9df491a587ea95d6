"""What every lutcore language model shares: parameter-dict checks, token-id
validation and the small accessors the Trainer relies on.  A model subclass
provides ``config`` (with ``vocab_size``), ``dtype`` and ``_params``."""
from __future__ import annotations

import numpy as np


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
        vocab = self.config.vocab_size
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integer token ids, got dtype {ids.dtype}")
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2:
            raise ValueError(f"{name}: expected (batch, L) token ids, got shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise ValueError(f"{name}: token ids must lie in [0, {vocab}), got [{ids.min()}, {ids.max()}]")
        return ids.astype(np.int64)

    def parameters(self) -> dict:
        """{name: array} — the live arrays (write-through)."""
        return self._params

    def num_parameters(self) -> int:
        return int(sum(v.size for v in self._params.values()))

    def zero_grads(self) -> dict:
        return {k: np.zeros_like(v) for k, v in self._params.items()}
