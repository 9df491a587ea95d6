"""What every lutcore language model shares: parameter-dict checks, token-id
validation, the small accessors the Trainer relies on and per-layer units.  A
model subclass provides ``config`` (with ``vocab_size``), ``dtype``, ``_params``
and ``_unit_layers()`` (its matmul layers' names, Hugging Face parameter-module
names); ``_link_units()`` when its layers read the ``UnitMatmul`` objects from
elsewhere than ``self._mms``.

Per-layer units: ``self._mms`` maps each layer name to its ``UnitMatmul`` (None:
the layer multiplies in float).  ``set_units`` replaces a layer's units on its
``UnitMatmul`` (a ``UnitMatmul`` quantizes per call: nothing is re-quantized or
rebuilt).  ``units`` is the one Units every layer runs when they agree, else None;
``mixed_units`` says they do not (some float, or several units)."""
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

    # ---------------------------------------------------------------- per-layer units
    def _init_units(self, units) -> None:
        """The constructor's ``units``: None (float), one spec for every layer, or a mapping
        (the layers no key covers run in float)."""
        self._mms = {n: None for n in self._unit_layers()}
        self._attn = {n: None for n in self._attn_layers()}      # attention's own products: Units or None
        self.units, self.mixed_units = None, False
        if units is not None:
            self.set_units(units)
        else:
            self._link_units()

    def _link_units(self) -> None:
        pass

    def _attn_layers(self) -> list:
        """The names of attention's own products (``<attention>.qk``, ``.pv``) a model can run
        through units; none by default."""
        return []

    def _attn_counts(self, ids) -> dict:
        """{attention product: multiplications} of one forward over ``ids`` (a model with some)."""
        return {}

    def layer_names(self, attention: bool = False) -> list:
        """The names of the layers whose matmuls can run through units, in forward order; with
        ``attention``, then attention's own products (``.qk`` / ``.pv``: only keys that name them
        cover them, ``lutcore.units.assign.names_attention``)."""
        return list(self._mms) + (list(self._attn) if attention else [])

    def assignment(self, attention: bool = False) -> dict:
        """{layer name: Units, or None for a layer multiplying in float} (``attention``: attention's
        products too)."""
        out = {n: None if mm is None else mm.units for n, mm in self._mms.items()}
        return {**out, **self._attn} if attention else out

    def set_units(self, units):
        """Units for the layers (in place; returns the model): one spec (None / "none": float)
        for every layer, or a mapping {layer name / dotted prefix / fnmatch glob: spec} (or an
        assignment .json file) for the layers its keys cover — the others keep theirs
        (``lutcore.units.assign``)."""
        from lutcore.models.unitmm import UnitMatmul
        from lutcore.units import assign
        mapping = assign.as_mapping(units)
        if mapping is None:                  # one spec: the weight matmuls; attention's products in float
            u = assign.resolve_spec(units)
            per = assign.one_spec(u, list(self._mms) + list(self._attn))
        else:
            per = assign.assign(mapping, list(self._mms) + list(self._attn), what="units")
        from lutcore.models.mxmm import FloatMatmul, MXMatmul, matmul_for
        for n, u in per.items():
            if n in self._attn:                       # attention's q k^T / p v: checked, no weights
                from lutcore.quant import check_attention_units
                self._attn[n] = None if u is None else check_attention_units(u, n)
                continue
            mm = self._mms[n]
            float_units = getattr(u, "kind", None) in ("mx", "mantissa")
            kind = (FloatMatmul if u.kind == "mantissa" else MXMatmul) if float_units else UnitMatmul
            if float_units and getattr(self, "two_pass", False):
                raise ValueError(f"units[{n!r}]: two_pass adds a second int8 pass for the quantization residual; "
                                 f"units {u.name!r} are floating point: use two_pass=False")
            if u is None:
                self._mms[n] = None
            elif mm is None or type(mm) is not kind:
                self._mms[n] = (matmul_for(u, self.unit_backward) if float_units else
                                UnitMatmul(u, unit_backward=self.unit_backward,
                                           two_pass=getattr(self, "two_pass", False)))
            else:
                mm.units = u
            if self._mms[n] is not None:
                self._mms[n].label = n
        used = [mm.units for mm in self._mms.values() if mm is not None]
        uniform = len(used) == len(self._mms) and all(u.digest == used[0].digest for u in used)
        self.units = used[0] if used and uniform else None
        self.mixed_units = bool(used) and not uniform
        self._link_units()
        return self

    def count_products(self, ids, attention: bool = False) -> dict:
        """{layer name: multiplications its matmul performs on ``ids``} — a dry run of one
        forward (every layer counted, float or not, as it would run through a unit: rows x
        in x out of each product it computes)."""
        counts = {n: 0 for n in self._mms}
        saved = dict(self._mms)

        class _Count:                     # stands in for a layer's UnitMatmul for one forward
            def __init__(self, name, mm):
                self.name, self.mm = name, mm
                self.units = None if mm is None else mm.units

            def forward(self, x2, w):
                from lutcore.ops.matmul import matmul
                counts[self.name] += int(x2.shape[0]) * int(w.shape[1]) * int(w.shape[0])
                return matmul(x2, w.T) if self.mm is None else self.mm.forward(x2, w)
        try:
            self._mms = {n: _Count(n, mm) for n, mm in saved.items()}
            self._link_units()
            self.forward(ids)
        finally:
            self._mms = saved
            self._link_units()
        if attention:
            counts.update(self._attn_counts(ids))
        return counts

    def parameters(self) -> dict:
        """{name: array} — the live arrays (write-through)."""
        return self._params

    def num_parameters(self) -> int:
        return int(sum(v.size for v in self._params.values()))

    def zero_grads(self) -> dict:
        return {k: np.zeros_like(v) for k, v in self._params.items()}
