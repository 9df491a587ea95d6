"""A gradient that may be differentiated only once: backward="units" and "table" of lutcore.torch.

Design: those gradients come from the unit's table or its gradient tables, which have no
derivative.  Under ``create_graph=True`` each is passed on through ``_DelayedError``, a graph
edge whose own backward raises naming the layer and the mode — a second differentiation (a
gradient penalty) fails loudly instead of treating the gradient as a constant.  The layers'
Functions (``functional``) and the zero-point path (``_formats``) both use it.
"""
from __future__ import annotations

import torch

__all__ = ["_DelayedError", "_double_backward_error", "_once_differentiable"]


_ONCE_FROM = {"units": "the unit's table, which has no derivative",
              "table": "the unit's gradient tables, which have no derivative"}


def _double_backward_error(layer: str, mode: str = "units") -> RuntimeError:
    """The error of a second differentiation through ``backward=mode`` ("units" or "table")."""
    return RuntimeError(f"{layer}: backward={mode!r} is differentiable once: its gradients come from "
                        f"{_ONCE_FROM[mode]}, so they cannot be differentiated again "
                        f"(create_graph=True, e.g. a gradient penalty); use backward='ste' for that")


class _DelayedError(torch.autograd.Function):
    """Passes a unit-backward gradient on with a graph edge to what it depends on, whose
    backward raises: a second differentiation fails loudly instead of treating the
    gradient as a constant (what ``once_differentiable`` does, for every input)."""

    @staticmethod
    def forward(ctx, layer, mode, g, *deps):
        ctx.layer, ctx.mode = layer, mode
        return g.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise _double_backward_error(ctx.layer, ctx.mode)


def _once_differentiable(layer: str, grads: tuple, deps: tuple, mode: str = "units") -> tuple:
    """grads as they are, or under create_graph=True (grad mode on in a backward) with a
    graph edge that refuses a second backward (_DelayedError) naming ``backward=mode``."""
    live = [t for t in deps if t is not None and t.requires_grad]
    if not torch.is_grad_enabled() or not live:
        return grads
    return tuple(None if g is None else _DelayedError.apply(layer, mode, g, *live) for g in grads)


