"""PyTorch models through lutcore's units (optional extra: ``pip install lutcore[torch]``).

Design: this package is the bridge and nothing else — the contract (docs/DESIGN.md,
"Approximate PyTorch layers") is computed by lutcore's native im2col and LUT GEMM
(functional.py); layers.py holds the approximate subclasses of nn.Linear,
nn.Conv1d, nn.Conv2d and transformers' Conv1D; convert.py the whole-model
operations.  Tensors are float32 on the CPU; anything else is a TypeError naming
the layer.

    approximate(model, units, *, backward="ste"|"units", activations="dynamic"|"static",
                skip=(), inplace=False)                      -> nn.Module
    set_units(model, units)                                   swap the multiplier, no reconversion
    set_backward(model, backward, *, grad_h=...)              "ste" | "units" | "table", or per layer
    (units: one spec, or per layer {name / prefix / glob: spec} or an assignment .json)
    assignment(model) -> {layer: Units | None}; save_assignment(a_or_model, path) / load_assignment(path)
    calibrate(model, batches)                                 static input scales (kept in state_dict;
                                                              float_state_dict(sd) for the float model)
    sensitivity(model, units, evaluate)                       one layer at a time through each unit
    search(model, units, evaluate, example_input, budget=...) per-layer units: the energy/metric front
    lut_linear(x, weight, bias, units, ...), lut_conv1d / lut_conv2d(x, weight, bias, units,
                stride, padding, dilation, groups, ...)      autograd Functions for custom layers
    approximate(model, units, attention=True)                 + attention's q k^T and p v (transformers'
                                                              attention implementation "lutcore", attention.py)
    lut_attention(q, k, v, mask, scaling, qk_units=, pv_units=) / float_attention(...)   functional forms
    UnitMatmul(units, backward="ste"|"table"), unit_matmul(a, b, units)   torch.matmul through a unit
"""
try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("lutcore.torch needs PyTorch, which is not installed: "
                      "pip install 'lutcore[torch]' (torch==2.13.0)") from e

from lutcore.torch.convert import (approximate, approximate_layers, assignment, backward_of, calibrate,
                                   float_state_dict, load_assignment, save_assignment, set_backward, set_units)
from lutcore.torch.functional import LutConvFunction, LutLinearFunction, lut_conv1d, lut_conv2d, lut_linear
from lutcore.torch.layers import ApproxConv1d, ApproxConv2d, ApproxLayer, ApproxLinear
from lutcore.torch._search import count_products, search, sensitivity
from lutcore.torch.attention import UnitMatmul, float_attention, lut_attention, unit_matmul

__all__ = ["approximate", "set_units", "set_backward", "backward_of", "float_state_dict", "assignment", "save_assignment", "load_assignment", "calibrate",
           "approximate_layers", "lut_linear", "lut_conv1d",
           "lut_conv2d", "LutLinearFunction", "LutConvFunction", "ApproxLayer", "ApproxLinear",
           "ApproxConv1d", "ApproxConv2d", "count_products", "sensitivity", "search", "UnitMatmul", "unit_matmul",
           "lut_attention", "float_attention"]

try:
    from lutcore.torch.layers import ApproxConv1D  # noqa: F401  (needs transformers)
    __all__.append("ApproxConv1D")
except ImportError:
    pass
