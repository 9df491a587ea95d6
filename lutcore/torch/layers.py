"""The approximate layers: nn.Linear, nn.Conv1d, nn.Conv2d and Hugging Face's Conv1D
running their products through a unit.

Design: each class subclasses the float layer it replaces and adds only state
that is not a parameter (the units, the backward and activation modes, the
calibrated input scale, a cached ``QWeight``), so ``isinstance``, parameter names,
``state_dict()`` and ``load_state_dict()`` into the float model all hold; a
calibrated static scale and a ``grad_h`` option add one 0-d tensor each to the state
dict (``STATE_KEYS``; restored by ``load_state_dict``; ``float_state_dict`` removes them
for the float model).  The weight is quantized again whenever its values
change (an optimizer step, or an in-place edit through ``.data``: every call compares
the weight with the float copy it quantized, functional.WeightCache).  The arithmetic
lives in functional.py.

``approximate`` (convert.py) changes a float layer's class in place of a copy;
the constructors here build a fresh approximate layer with the float one's
arguments plus ``units``, ``backward``, ``activations`` and ``threads``.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lutcore._threads import resolve_threads
from lutcore.torch import functional as fn
from lutcore.units import Units, assign
from lutcore.units import resolve as resolve_units

__all__ = ["ApproxLayer", "ApproxLinear", "ApproxConv1d", "ApproxConv2d", "ACTIVATIONS", "approx_class"]

ACTIVATIONS = ("dynamic", "static")
STATE_KEYS = ("lutcore_input_scale", "lutcore_grad_h", "lutcore_input_zero_point")  # a layer's extra state_dict entries


class ApproxLayer:
    """What every approximate layer adds to its float class (a mixin, first in the MRO).

    Attributes: ``units`` (a lutcore ``Units``; assign a name, a directory or a Units
    to swap the multiplier — no re-quantization; None or "none": the layer computes in
    float exactly as its torch class), ``backward`` ("ste" | "units" | "table"), ``grad_h`` (backward="table"'s gradient
    tables), ``activations``
    ("dynamic" | "static"), ``threads`` (None: lutcore's default); read-only views
    ``qweight`` (int8, the weight's shape), ``weight_scale`` (float32, per output
    channel) and ``input_scale`` (float32 0-d tensor, or None when dynamic; assignable:
    a number > 0 that is finite in float32).  ``backward="units"`` is differentiable
    once (a second differentiation, ``create_graph=True``, raises); a zero-size
    dimension gives the float layer's result.  Each layer keeps a float copy of the
    weight it quantized (``_lc_cache``: 4 bytes a weight) to see in-place edits."""

    # ------------------------------------------------------- state_dict entries
    # A calibrated static input scale and a grad_h option are kept in the state dict as 0-d
    # tensors (STATE_KEYS; only when set, so an uncalibrated model's keys are the float
    # model's); load_state_dict restores them (a scale makes the layer static).  A float model
    # takes such a state dict after lutcore.torch.float_state_dict removes them.
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.__dict__.get("activations") == "static" and self.__dict__.get("_lc_scale") is not None:
            destination[prefix + STATE_KEYS[0]] = torch.tensor(float(self._lc_scale), dtype=torch.float32)
        gh = self.__dict__.get("_lc_grad_h")
        if gh is not None:
            destination[prefix + STATE_KEYS[1]] = torch.tensor(-1 if gh == "supplied" else int(gh),
                                                               dtype=torch.int32)
        if self.__dict__.get("activations") == "static" and self.__dict__.get("_lc_zp") is not None:
            destination[prefix + STATE_KEYS[2]] = torch.tensor(int(self._lc_zp), dtype=torch.int32)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        got = {k: state_dict.pop(prefix + k) for k in STATE_KEYS if prefix + k in state_dict}
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        name = self.__dict__.get("_lc_name", type(self).__name__)
        for k, v in got.items():
            if not isinstance(v, torch.Tensor) or v.numel() != 1:
                raise ValueError(f"{name}: state_dict entry {prefix + k}: expected a one-element tensor, got "
                                 f"{type(v).__name__} {tuple(getattr(v, 'shape', ()))}")
        if STATE_KEYS[0] in got:
            self.input_scale = got[STATE_KEYS[0]].float()       # checked: > 0, finite in float32
            self.activations = "static"
        if STATE_KEYS[1] in got:
            v = got[STATE_KEYS[1]]
            if v.is_floating_point():
                raise ValueError(f"{name}: state_dict entry {prefix + STATE_KEYS[1]}: expected an integer "
                                 f"tensor (h 1..127, or -1 for 'supplied'), got dtype {v.dtype}")
            v = int(v)
            self.grad_h = "supplied" if v == -1 else v
        if STATE_KEYS[2] in got:
            v = got[STATE_KEYS[2]]
            if v.is_floating_point():
                raise ValueError(f"{name}: state_dict entry {prefix + STATE_KEYS[2]}: expected an integer tensor "
                                 f"(the input's zero point), got dtype {v.dtype}")
            self._lc_zp = int(v)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_lc_cache" not in self.__dict__ and "_lc_name" in self.__dict__:   # pickled before the WeightCache
            self.__dict__.pop("_lc_qw", None)
            self.__dict__.pop("_lc_qw_key", None)
            self._lc_cache = fn.WeightCache()

    def _lc_setup(self, units="exact", backward="ste", activations="dynamic", threads=None, name=None,
                  grad_h=None, weights="channel"):
        self._lc_name = name or type(self).__name__
        self.weights = fn.weights_arg(weights, self._lc_name)
        self.units = units
        self.backward = fn.backward_arg(backward, self._lc_name)
        self.grad_h = grad_h
        if activations not in ACTIVATIONS:
            raise ValueError(f"{self._lc_name}: activations: expected one of {ACTIVATIONS}, got {activations!r}")
        self.activations = activations
        if threads is not None:
            resolve_threads(threads)                     # checks it
        self.threads = threads
        self._lc_scale = None
        self._lc_zp = None                               # a static input's zero point (units of another format)
        self._lc_cache = fn.WeightCache()              # the QWeight of the weight's current values
        self._lc_calib = None                            # running max|x| while calibrating

    # ------------------------------------------------------------- properties
    @property
    def units(self):
        return self._lc_units

    @units.setter
    def units(self, units):
        # None / "none": float, as the torch layer (forward checks _lc_units is None); a
        # Units is taken as it is (the search sets it on every layer, per assignment)
        self._lc_units = units if isinstance(units, Units) else \
            None if assign.is_float(units) else resolve_units(units, mx=True)

    @property
    def grad_h(self):
        """backward="table"'s gradient tables: None (the unit's attached ones if any, else central
        differences over +-1 code), an int h 1..127 (differences over +-h codes) or "supplied"."""
        return self.__dict__.get("_lc_grad_h")

    @grad_h.setter
    def grad_h(self, v):
        from lutcore.torch._gradtables import grad_arg
        self._lc_grad_h = grad_arg(v, self._lc_name)

    @property
    def input_scale(self):
        if self.activations == "dynamic" or self._lc_scale is None:
            return None
        return torch.tensor(float(self._lc_scale), dtype=torch.float32)

    @input_scale.setter
    def input_scale(self, value):
        self._lc_scale = fn.scale_arg(value, self._lc_name)

    @property
    def input_zero_point(self):
        """The static input's zero point (an int; units whose activation operand is unsigned), or
        None (dynamic, or a symmetric activation).  Checked against the units at each call."""
        if self.activations == "dynamic":
            return None
        return self.__dict__.get("_lc_zp")

    @input_zero_point.setter
    def input_zero_point(self, value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise TypeError(f"{self._lc_name}: input_zero_point: expected an int or None, got {type(value).__name__}")
        self._lc_zp = None if value is None else int(value)

    @property
    def qweight(self) -> torch.Tensor:
        return self._lc_qweight_layout(torch.from_numpy(self._lc_weight().q.copy()))

    @property
    def weight_scale(self) -> torch.Tensor:
        return torch.from_numpy(self._lc_weight().scale.copy())

    # ---------------------------------------------------------------- helpers
    def _lc_weight(self) -> fn.QWeight:
        fn.check_tensor(self.weight, "weight", self._lc_name)
        if getattr(self.units, "kind", None) in ("mx", "mantissa"):
            raise ValueError(f"{self._lc_name}: units {self.units.name!r} are floating point (MX units: "
                             f"units.quantize(weight, 1, 'b')), the weight is not quantized to int8 per channel")
        w, groups = self._lc_weight_of()
        return self._lc_cache.get(w, groups, self._lc_name, self.threads)

    def _lc_input_scale(self):
        if self.activations == "dynamic":
            return None
        if self._lc_scale is None:
            if getattr(self.units, "kind", None) in ("mx", "mantissa"):   # an MX block has no static scale to calibrate
                raise ValueError(f"{self._lc_name}: MX units {self.units.name!r} quantize the input in blocks with "
                                 f"their own power-of-two scales each call: activations='static' does not apply; "
                                 f"use activations='dynamic'")
            raise RuntimeError(f"{self._lc_name}: activations='static' but this layer was never calibrated: "
                               f"run lutcore.torch.calibrate(model, batches) first, or set its input_scale")
        return self._lc_scale

    def _lc_observe(self, x) -> None:
        """Calibration: record max|x| (and the range, for units of another format) of a float input."""
        fn.check_tensor(x, "input", self._lc_name)
        x = x.detach()
        if x.numel():
            m = float(x.abs().max())
            if not np.isfinite(m):
                raise ValueError(f"{self._lc_name}: calibration input holds non-finite values (NaN/Inf)")
            self._lc_calib = max(self._lc_calib, m)
            lo, hi = self.__dict__.get("_lc_calib_range") or (0.0, 0.0)
            self._lc_calib_range = (min(lo, float(x.min())), max(hi, float(x.max())))

    def _lc_weights(self):
        return self.__dict__.get("weights", "channel")          # (layers pickled before the option)

    def _lc_input_zero_point(self):
        return None if self.activations == "dynamic" else self.__dict__.get("_lc_zp")

    def _lc_extra(self) -> str:
        u = self.units
        uu = "units=none (float)" if u is None else f"units={u.name}@{u.digest[:16]}"
        gh = f", grad_h={self.grad_h!r}" if self.backward == "table" and self.grad_h is not None else ""
        return (f"{uu}, backward={self.backward}{gh}, activations={self.activations}"
                + (f", input_scale={float(self._lc_scale):.6g}" if self.input_scale is not None else ""))

    def extra_repr(self) -> str:
        base = super().extra_repr()
        return f"{base}, {self._lc_extra()}" if base else self._lc_extra()


class ApproxLinear(ApproxLayer, nn.Linear):
    """nn.Linear through a unit: ``ApproxLinear(in_features, out_features, bias=True, *, units=...)``."""

    def __init__(self, *args, units="exact", backward="ste", activations="dynamic", threads=None, grad_h=None,
                 **kwargs):
        nn.Linear.__init__(self, *args, **kwargs)
        self._lc_setup(units, backward, activations, threads, grad_h=grad_h)

    def _lc_weight_of(self):
        return self.weight, None                         # what forward passes, and its groups (None: linear)

    def _lc_qweight_layout(self, q):
        return q

    def forward(self, x):
        if self._lc_calib is not None:
            self._lc_observe(x)
            return F.linear(x, self.weight, self.bias)
        if self._lc_units is None:
            return F.linear(x, self.weight, self.bias)
        return fn.linear(x, self.weight, self.bias, self.units, self.backward, self._lc_input_scale(),
                         self.threads, self._lc_name, qw=self._lc_cache, grad_h=self.grad_h,
                         input_zero_point=self._lc_input_zero_point(), weights=self._lc_weights())


class _ApproxConvNd(ApproxLayer):
    def _lc_weight_of(self):
        return self.weight, self.groups

    def _lc_qweight_layout(self, q):
        w = self.weight
        O, Cg, k = w.shape[0], w.shape[1], tuple(w.shape[2:])
        if len(k) == 1:
            return q.reshape(O, k[0], Cg).permute(0, 2, 1).contiguous()
        return q.reshape(O, k[0], k[1], Cg).permute(0, 3, 1, 2).contiguous()

    def forward(self, x):
        if self._lc_calib is not None:
            self._lc_observe(x)
            return self._conv_forward(x, self.weight, self.bias)          # the float layer's
        if self._lc_units is None:
            return self._conv_forward(x, self.weight, self.bias)
        fn.check_tensor(x, "input", self._lc_name)
        padding = self.padding
        if self.padding_mode != "zeros":
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return fn.conv(x, self.weight, self.bias, self.units, self.stride, padding, self.dilation, self.groups,
                       self.backward, self._lc_input_scale(), self.threads, self._lc_name, qw=self._lc_cache,
                       grad_h=self.grad_h, input_zero_point=self._lc_input_zero_point(),
                       weights=self._lc_weights())


class ApproxConv1d(_ApproxConvNd, nn.Conv1d):
    """nn.Conv1d through a unit (every padding mode, groups, stride, dilation)."""

    def __init__(self, *args, units="exact", backward="ste", activations="dynamic", threads=None, grad_h=None,
                 **kwargs):
        nn.Conv1d.__init__(self, *args, **kwargs)
        self._lc_setup(units, backward, activations, threads, grad_h=grad_h)


class ApproxConv2d(_ApproxConvNd, nn.Conv2d):
    """nn.Conv2d through a unit (every padding mode, groups incl. depthwise, stride, dilation)."""

    def __init__(self, *args, units="exact", backward="ste", activations="dynamic", threads=None, grad_h=None,
                 **kwargs):
        nn.Conv2d.__init__(self, *args, **kwargs)
        self._lc_setup(units, backward, activations, threads, grad_h=grad_h)


def _hf_conv1d():
    try:
        from transformers.pytorch_utils import Conv1D
    except Exception:  # noqa: BLE001 - transformers is optional
        return None
    return Conv1D


_HF = _hf_conv1d()
if _HF is not None:
    class ApproxConv1D(ApproxLayer, _HF):
        """Hugging Face's Conv1D (GPT-2: y = x @ W + b, W (in, out)) through a unit;
        ``qweight`` has W's (in, out) shape, ``weight_scale`` one scale per output column."""

        def __init__(self, nf, nx, *, units="exact", backward="ste", activations="dynamic", threads=None,
                     grad_h=None):
            _HF.__init__(self, nf, nx)
            self._lc_setup(units, backward, activations, threads, grad_h=grad_h)

        def _lc_weight_of(self):
            return self.weight.t(), None

        def _lc_qweight_layout(self, q):
            return q.t().contiguous()

        def forward(self, x):
            if self._lc_calib is not None:
                self._lc_observe(x)
                return _HF.forward(self, x)
            if self._lc_units is None:
                return _HF.forward(self, x)
            return fn.linear(x, self.weight.t(), self.bias, self.units, self.backward, self._lc_input_scale(),
                             self.threads, self._lc_name, qw=self._lc_cache, grad_h=self.grad_h,
                             input_zero_point=self._lc_input_zero_point(), weights=self._lc_weights())

        def __repr__(self):
            return f"ApproxConv1D(nf={self.nf}, nx={self.nx}, {self._lc_extra()})"

    __all__.append("ApproxConv1D")

# float class -> its approximate class (subclasses that keep the float forward get their own, see approx_class)
_BASES = [(nn.Linear, ApproxLinear), (nn.Conv1d, ApproxConv1d), (nn.Conv2d, ApproxConv2d)]
if _HF is not None:
    _BASES.append((_HF, ApproxConv1D))
_MADE: dict = {}


def approx_class(cls):
    """The approximate class for a float layer class, or None if it has none.  A subclass of
    a supported layer that does not override ``forward`` (e.g. torch's
    NonDynamicallyQuantizableLinear) gets an approximate subclass of its own; one that
    overrides ``forward`` computes something else and is not converted."""
    if issubclass(cls, ApproxLayer):
        return cls
    for base, approx in _BASES:
        if cls is base:
            return approx
    for base, approx in _BASES:
        if issubclass(cls, base) and cls.forward is base.forward:
            if cls not in _MADE:
                _MADE[cls] = type(f"Approx{cls.__name__}", (approx, cls), {"__module__": __name__})
            return _MADE[cls]
    return None
