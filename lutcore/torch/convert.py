"""Whole-model operations: approximate(), set_units(), assignment(), calibrate().

Design: ``approximate`` walks ``named_modules`` of the model (or of a deep copy,
``inplace=False``) and changes the class of every supported float layer to its
approximate subclass (layers.approx_class), so the module objects, their hooks,
parameters and names stay; nothing else in the model changes.  ``skip`` names
modules or module types (either covers the submodules).  ``calibrate`` runs the
layers in float while it records each one's max|input|, then switches them to
static scales.

Per-layer units: ``approximate`` and ``set_units`` take, besides one units spec, a
mapping {layer name / dotted prefix / fnmatch glob: spec} or an assignment JSON file
(semantics in ``lutcore.units.assign``; layer names as in ``named_modules``).
``approximate`` converts every supported layer either way; a layer no key covers, or
whose spec is None / "none", computes in float (units None: the torch layer's own
forward) until ``set_units`` gives it units.  ``set_units(model, mapping)`` changes
only the layers its keys cover.  Setting a layer's units never re-quantizes its weight
(the quantized weight is keyed on the weight, not on the units).
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
from torch import nn

from lutcore.torch import functional as fn
from lutcore.torch.layers import ACTIVATIONS, ApproxLayer, approx_class
from lutcore.units import assign as _assign
from lutcore.units import resolve as resolve_units

__all__ = ["approximate", "set_units", "set_backward", "backward_of", "float_state_dict", "calibrate", "approximate_layers", "assignment", "save_assignment",
           "load_assignment"]


def _skip_arg(skip):
    if isinstance(skip, (str, type)):
        skip = (skip,)
    try:
        items = tuple(skip)
    except TypeError:
        raise TypeError(f"skip: expected module names or types, got {type(skip).__name__}") from None
    names, types = [], []
    for s in items:
        if isinstance(s, str):
            names.append(s)
        elif isinstance(s, type) and issubclass(s, nn.Module):
            types.append(s)
        else:
            raise TypeError(f"skip: expected module names (str) or nn.Module types, got {s!r}")
    return names, tuple(types)


def _under(name: str, prefixes) -> bool:
    return any(p == "" or name == p or name.startswith(p + ".") for p in prefixes)


def approximate(model: nn.Module, units="exact", *, backward: str = "ste", activations: str = "dynamic",
                skip=(), inplace: bool = False, threads=None, grad_h=None, weights: str = "channel",
                attention: bool = False) -> nn.Module:
    """``model`` with every nn.Linear, nn.Conv1d, nn.Conv2d and transformers' Conv1D running
    through ``units`` (a Units, "exact", "mitchell", "truncated:K", "reduced:B" or a directory),
    or per layer: a mapping {name / prefix / glob: spec} or an assignment .json file (the first
    key covering a layer gives its units; a layer no key covers, or mapped to None / "none",
    computes in float; see the module docstring).

    ``backward``: "ste" (the float layer's gradients), "units" (dX and dW through the unit) or
    "table" (through the unit's gradient tables; ``grad_h``: None, an int 1..127 or "supplied",
    see ``lutcore.torch._gradtables``), or per layer a mapping {name / prefix / glob: backward}
    (layers no key covers: "ste"; see ``set_backward``);
    ``activations``: "dynamic" (scale per call) or "static" (``calibrate`` first); ``weights``:
    "channel" (a weight scale — and, for an unsigned weight, zero point — per output channel) or
    "tensor" (one for the whole weight); ``skip``:
    module names (as in ``named_modules``) or types to keep in float, with their submodules; ``inplace=False``
    converts a deep copy and leaves ``model`` untouched.  Layers that are already
    approximate take the new settings.

    ``attention=True`` (a Hugging Face model whose attention modules call transformers'
    attention interface): attention's two products run through units too — the model's
    attention implementation becomes "lutcore" (``lutcore.torch.attention``) and every
    attention module ``<name>`` gets units for ``<name>.qk`` (q k^T) and ``<name>.pv`` (p v):
    one spec's, or a mapping's keys that name them (``lutcore.units.assign.names_attention``:
    ``"*"`` and prefixes cover the weights only; uncovered, or under ``skip``: float); their
    backward "ste" or "table" (one value, or the same mapping keys); their units must give
    0 x b = 0 (``lutcore.quant.check_attention_units``).  Any other model is a ValueError.
    Returns the converted model."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    mapping = _assign.as_mapping(units)
    if mapping is None:
        units = resolve_units(units, mx=True)
    bmap = _backward_map(backward, "approximate") if isinstance(backward, dict) else None
    if bmap is None:
        fn.backward_arg(backward, "approximate")
    from lutcore.torch._gradtables import grad_arg
    grad_arg(grad_h, "approximate")
    if activations not in ACTIVATIONS:
        raise ValueError(f"approximate: activations: expected one of {ACTIVATIONS}, got {activations!r}")
    fn.weights_arg(weights, "approximate")
    names, types = _skip_arg(skip)
    known = {n for n, _ in model.named_modules()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"skip: no module named {unknown} in the model (names as in model.named_modules())")
    if not isinstance(inplace, bool):
        raise TypeError(f"inplace: expected a bool, got {type(inplace).__name__}")
    if not isinstance(attention, bool):
        raise TypeError(f"attention: expected a bool, got {type(attention).__name__}")
    if attention:
        _attention_modules_or_error(model, "approximate")       # before a copy is made
    if not inplace:
        model = copy.deepcopy(model)
    prefixes = list(names)                           # a skipped module's children stay float too
    todo = []
    for name, m in model.named_modules():
        if types and isinstance(m, types):
            prefixes.append(name)
        if isinstance(m, nn.MultiheadAttention) and not _under(name, prefixes):
            # it computes with its projections' weights directly (F.multi_head_attention_forward),
            # never calling their forward: converting them would only look approximate
            warnings.warn(f"approximate: {name or 'model'} is an nn.MultiheadAttention, whose projections "
                          f"do not go through their forward; they stay in float")
            prefixes.append(name)
        if isinstance(m, nn.TransformerEncoderLayer) and not _under(name, prefixes) and \
                torch.backends.mha.get_fastpath_enabled():
            warnings.warn(f"approximate: {name or 'model'} is an nn.TransformerEncoderLayer, whose inference fast "
                          f"path multiplies with linear1/linear2's weights directly (bypassing the approximate "
                          f"layers); call torch.backends.mha.set_fastpath_enabled(False)")
        if _under(name, prefixes):
            continue
        cls = approx_class(type(m))
        if cls is None:
            if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                warnings.warn(f"approximate: {name} ({type(m).__name__}) overrides forward; left in float")
            continue
        todo.append((name, m, cls))
    attn = _attention_products(model, prefixes) if attention else []
    covered = [n for n, _, _ in todo] + [n for n, _, w in attn if w is not None]
    if mapping is not None:                          # every key checked before any layer changes
        per = _assign.assign(mapping, covered, what="units")
    bkeys = _assign.match(bmap, covered, what="backward") if bmap is not None else None
    planned = []                                     # (module, name, which, units, backward), all checked first
    for name, m, which in attn:
        u = None if which is None else units if mapping is None else per.get(name)
        b = backward if bkeys is None else (bmap[bkeys[name]] if name in bkeys else "ste")
        if u is not None:
            from lutcore.torch import attention as _att
            _att.product_backward_arg(b, name)
            _att.check_product(u, b, grad_h, name)
        planned.append((m, name, which, u, b if u is not None and b in ("ste", "table") else "ste"))
    for name, m, cls in todo:
        if not isinstance(m, ApproxLayer):
            m.__class__ = cls
        b = backward if bkeys is None else (bmap[bkeys[name]] if name in bkeys else "ste")
        m._lc_setup(units if mapping is None else per.get(name), b, activations, threads,
                    name=name or type(m).__name__, grad_h=grad_h, weights=weights)
    from lutcore.torch._gradtables import check_layer
    for _, m, _ in todo:
        check_layer(m)
    if attention:
        _attach_products(model, planned, threads, grad_h)
    return model


def _attention_modules_or_error(model, what):
    """The model's attention modules that call transformers' attention interface (a ValueError
    when there are none: attention=True asks for something the model does not have)."""
    from lutcore.torch import attention as _att
    mods = _att.attention_modules(model)
    if not mods:
        raise ValueError(f"{what}: attention=True: {type(model).__name__} has no attention module that calls "
                         f"transformers' attention interface (ALL_ATTENTION_FUNCTIONS); for attention of your own, "
                         f"replace its torch.matmul calls with lutcore.torch.UnitMatmul")
    return mods


def _attention_products(model, prefixes):
    """[(product name, attention module, "qk" | "pv" | None)]: the products of every attention module
    (None: a module under ``skip``, computing in float)."""
    out = []
    for name, m in _attention_modules_or_error(model, "approximate"):
        if _under(name, prefixes):
            out.append((name, m, None))
        else:
            out += [(f"{name}.qk", m, "qk"), (f"{name}.pv", m, "pv")]
    return out


def _attach_products(model, planned, threads, grad_h):
    """Attach the checked settings to every attention module and make "lutcore" the model's
    attention implementation."""
    from lutcore.torch import attention as _att
    _att.register()
    per = {}
    for m, name, which, u, b in planned:
        d = per.setdefault(id(m), {"module": m, "name": name.rsplit(".", 1)[0] if which else name})
        if which is not None:
            d[which], d[which + "_backward"] = u, b
    for d in per.values():
        _att.attach(d["module"], d.get("qk"), d.get("pv"), qk_backward=d.get("qk_backward", "ste"),
                    pv_backward=d.get("pv_backward", "ste"), threads=threads, grad_h=grad_h, name=d["name"],
                    skipped="qk_backward" not in d)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(_att.NAME)
    for d in per.values():                            # a model of modules without set_attn_implementation
        cfg = d["module"].config
        if getattr(cfg, "_attn_implementation", None) != _att.NAME:
            cfg._attn_implementation = _att.NAME


def approximate_layers(model: nn.Module):
    """(name, layer) of every approximate layer of ``model``."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, ApproxLayer)]


def _layers_or_error(model, what):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    layers = approximate_layers(model)
    if not layers:
        raise ValueError(f"{what}: the model has no approximate layers (convert it with approximate() first)")
    return layers


def _targets(model, what):
    """(approximate layers, attention products) of ``model``; a ValueError when it has neither."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    from lutcore.torch import attention as _att
    layers, prods = approximate_layers(model), _att.products(model)
    if not layers and not prods:
        raise ValueError(f"{what}: the model has no approximate layers (convert it with approximate() first)")
    return layers, prods


def set_units(model: nn.Module, units) -> nn.Module:
    """Swap the multiplier of every approximate layer of ``model`` (in place; nothing is
    re-quantized or rebuilt); returns it.  ``units``: one spec for every layer, or a mapping
    {name / prefix / glob: spec} (or an assignment .json file) for the layers its keys cover
    — the others keep their units.  "none" makes a layer compute in float, and so does None
    in a mapping (a lone ``units=None`` is the exact units, as ``lutcore.units.resolve``).
    Attention's products (``approximate(..., attention=True)``: ``<module>.qk`` / ``.pv``) take
    the units of the keys that name them (``lutcore.units.assign.names_attention``), and one
    spec sends them to float, as lutcore's models do; their new units are checked
    (``check_attention_units``, a "table" backward's needs) before anything changes."""
    from lutcore.torch import attention as _att
    layers, prods = _targets(model, "set_units")
    mapping = _assign.as_mapping(units)
    if mapping is None:
        u = None if isinstance(units, str) and _assign.is_float(units) else resolve_units(units, mx=True)
        per = {n: u for n, _ in layers}
        per.update({n: None for n, _, _ in prods})
    else:
        per = _assign.assign(mapping, [n for n, _ in layers] + [n for n, _, _ in prods], what="units")
    for n, m, w in prods:
        if n in per:
            _att.check_product(per[n], m.__dict__[f"lutcore_{w}_backward"], m.lutcore_grad_h, n)
    for n, m in layers:
        if n in per:
            m.units = per[n]
    for n, m, w in prods:
        if n in per:
            setattr(m, f"lutcore_{w}_units", per[n])
    return model


_KEEP = object()


def _backward_map(backward: dict, what: str) -> dict:
    if not backward:
        raise ValueError(f"{what}: backward: an empty mapping sets nothing; give {{layer name or glob: "
                         f"{'|'.join(map(repr, fn.BACKWARDS))}}}")
    for k, v in backward.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: backward: mapping keys must be layer names, prefixes or globs (str), "
                            f"got {type(k).__name__} {k!r}")
        fn.backward_arg(v, f"{what}: backward[{k!r}]")
    return dict(backward)


def set_backward(model: nn.Module, backward, *, grad_h=_KEEP) -> nn.Module:
    """Set the backward of every approximate layer of ``model`` (in place; returns it):
    "ste", "units" or "table", or a mapping {layer name / dotted prefix / fnmatch glob:
    backward} for the layers its keys cover (the first covering key wins; the others keep
    theirs; a key covering no layer is a ValueError).  ``grad_h`` (None, an int 1..127 or
    "supplied"; given: set on the same layers) chooses backward="table"'s gradient tables.
    Attention's products ("ste" or "table") take the value of a mapping key that names them
    (``<module>.qk`` / ``.pv``, ``"*.qk"``); one value is the layers'.  Every value is checked
    before any layer changes."""
    from lutcore.torch import attention as _att
    from lutcore.torch._gradtables import grad_arg
    layers, prods = _targets(model, "set_backward")
    if isinstance(backward, dict):
        bmap = _backward_map(backward, "set_backward")
        keys = _assign.match(bmap, [n for n, _ in layers] + [n for n, _, _ in prods], what="backward")
        per = {n: bmap[k] for n, k in keys.items()}
    else:                                            # one value: the layers (products keep theirs)
        fn.backward_arg(backward, "set_backward")
        per = {n: backward for n, _ in layers}
    if grad_h is not _KEEP:
        grad_arg(grad_h, "set_backward")
    from lutcore.torch._gradtables import check_layer, tables_for
    for n, m in layers:                              # checked before any layer changes
        if n in per and per[n] == "table" and m.units is not None:
            tables_for(m.units, m.grad_h if grad_h is _KEEP else grad_h, m._lc_name)
    for n, m, w in prods:
        if n in per:
            _att.product_backward_arg(per[n], n)
            _att.check_product(m.__dict__[f"lutcore_{w}_units"], per[n],
                               m.lutcore_grad_h if grad_h is _KEEP else grad_h, n)
    for n, m in layers:
        if n in per:
            m.backward = per[n]
            if grad_h is not _KEEP:
                m.grad_h = grad_h
            check_layer(m)
    for n, m, w in prods:
        if n in per:
            setattr(m, f"lutcore_{w}_backward", per[n])
            if grad_h is not _KEEP:
                m.lutcore_grad_h = grad_h
    return model


def backward_of(model: nn.Module) -> dict:
    """{layer name: (backward, grad_h)} of every approximate layer of ``model``, in model order, then of
    its attention products."""
    layers, prods = _targets(model, "backward_of")
    out = {n: (m.backward, m.grad_h) for n, m in layers}
    out.update({n: (m.__dict__[f"lutcore_{w}_backward"], m.lutcore_grad_h) for n, m, w in prods})
    return out


def float_state_dict(state_dict) -> dict:
    """A copy of an approximate model's ``state_dict`` without lutcore's entries (each layer's
    calibrated ``lutcore_input_scale`` and ``lutcore_grad_h``), which the original float model
    loads with ``strict=True``.  The approximate model loads the full one back (its static
    input scales and gradient-table options restored)."""
    from lutcore.torch.layers import STATE_KEYS
    if not hasattr(state_dict, "items"):
        raise TypeError(f"state_dict: expected a mapping (model.state_dict()), got {type(state_dict).__name__}")
    out = type(state_dict)() if isinstance(state_dict, dict) else {}
    for k, v in state_dict.items():
        if not (isinstance(k, str) and k.rsplit(".", 1)[-1] in STATE_KEYS):
            out[k] = v
    return out


def assignment(model: nn.Module) -> dict:
    """{layer name: Units, or None for a layer computing in float} of every approximate
    layer of ``model``, in model order, then of its attention products (``<module>.qk`` /
    ``.pv``) — a mapping ``set_units`` / ``approximate`` (with ``attention=True`` when it
    names products) take back, and ``save_assignment`` writes."""
    layers, prods = _targets(model, "assignment")
    out = {n: m.units for n, m in layers}
    out.update({n: m.__dict__[f"lutcore_{w}_units"] for n, m, w in prods})
    return out


def save_assignment(assignment_or_model, path, *, units_dir=None) -> str:
    """Write an assignment ({layer: Units or None}, or a converted model's ``assignment``) to a
    JSON file, atomically: built-in units by name, units from a directory or a circuit file by
    path, each with its digest; a unit built in memory needs ``units_dir=`` (its tables are
    saved there).  Returns the path.  Format: ``lutcore.units.assign``."""
    a = assignment_or_model
    if isinstance(a, nn.Module):
        a = assignment(a)
    return _assign.save_assignment(a, path, units_dir=units_dir)


def load_assignment(path) -> dict:
    """{layer: Units or None} from a file ``save_assignment`` wrote; every unit's digest is
    checked (a mismatch is a ValueError naming the layer and the path)."""
    return _assign.load_assignment(path)


def _run(model, batch):
    if isinstance(batch, torch.Tensor):
        return model(batch)
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)) and batch:
        return model(batch[0])                       # (inputs, targets), as a DataLoader yields
    raise TypeError(f"batches: expected tensors, (inputs, ...) tuples or keyword dicts, got {type(batch).__name__}")


def calibrate(model: nn.Module, batches) -> nn.Module:
    """Run float ``batches`` through ``model`` (each a tensor -> ``model(x)``, a dict ->
    ``model(**d)``, a tuple/list -> ``model(b[0])``), with every approximate layer
    computing in float while it records max|input| (and its range); then each layer uses the
    static scale max|input| / 127 (``activations="static"``) — or, for units of another format,
    the scale and zero point of the recorded range in the unit's activation format
    (``input_zero_point``).  Returns the model."""
    layers = _layers_or_error(model, "calibrate")
    for name, m in layers:                           # refused before anything changes
        if getattr(m.units, "kind", None) in ("mx", "mantissa"):
            raise ValueError(f"{name}: MX units {m.units.name!r} quantize the input in blocks with their own "
                             f"power-of-two scales each call: there is no static input scale to calibrate")
    for _, m in layers:
        m._lc_calib = 0.0
        m._lc_calib_range = None
    n = 0
    try:
        with torch.no_grad():
            for batch in batches:
                _run(model, batch)
                n += 1
        if n == 0:
            raise ValueError("batches: no batch to calibrate with")
        unseen = [name for name, m in layers if m._lc_calib == 0.0]
        for name, m in layers:
            m.activations = "static"
            u = m.units
            if u is not None and not u.plain:              # the unit's activation format: scale and zero point
                from lutcore.torch._formats import quantize
                lo, hi = m._lc_calib_range or (0.0, 0.0)
                _, s_x, zp = quantize(np.array([lo, hi], np.float32), u.format.a_bits, u.format.a_signed)
                m._lc_scale, m._lc_zp = float(s_x), int(zp) if not u.format.a_signed else None
                continue
            m._lc_zp = None
            m._lc_scale = float(np.float32(m._lc_calib) / np.float32(127.0))   # float32 value, a Python float
        if unseen:
            warnings.warn(f"calibrate: layers {unseen} saw no non-zero input; their scale is 0 (all codes 0)")
    finally:
        for _, m in layers:
            m._lc_calib = None
            m._lc_calib_range = None
    return model
