"""AdamW over many tensors in one native call, and sums of squares (csrc/optim/optim.h).

Design: the room of the ``optim`` family.  The native passes take raw pointers to lists of
tensors (parameters, gradients, first and second moments, in one order), so everything is
checked here: C-contiguous float32, matching sizes, the written ones writeable.
``lutcore.train.optim.AdamW`` checks each tensor by name before it steps (its messages
name the parameter), then calls the unchecked ``_adamw_step`` / ``_adamw_update`` — the
private fast functions of this room, for callers that have made those same checks.  The
hyperparameters arrive in double; csrc/optim/optim.h forms 1 - beta, lr / bc1,
1 / sqrt(bc2) and 1 - lr * wd in double before rounding to float32.  Every pass partitions
each tensor in fixed chunks summed in a fixed order: the same bits at any thread count.
``threads``: None reads the enclosing ``lutcore._threads.scope`` (or lutcore's default).

    ps, ms, vs   [float32 (n_i,)-sized arrays]   IN/OUT  parameters, moments (updated in place)
    gs           [float32 (n_i,)-sized arrays]   IN      gradients
"""
from __future__ import annotations

import numpy as np

from lutcore import _simd
from lutcore._native import optim as _o
from lutcore._threads import resolve_threads

__all__ = ["adamw_step", "adamw_update", "sumsq"]

_F32 = np.dtype(np.float32)


def _lists(ps, gs, ms, vs):
    """The four tensor lists checked for the native pass (see the module docstring)."""
    lists = {"ps": ps, "gs": gs, "ms": ms, "vs": vs}
    for name, xs in lists.items():
        if not isinstance(xs, list):
            raise TypeError(f"{name}: expected a list of float32 arrays, got {type(xs).__name__}")
        if len(xs) != len(ps):
            raise ValueError(f"{name}: expected {len(ps)} arrays like ps, got {len(xs)}")
    for i, p in enumerate(ps):
        for name, xs in lists.items():
            a = xs[i]
            if not (isinstance(a, np.ndarray) and a.dtype == _F32 and a.flags.c_contiguous):
                got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                raise ValueError(f"{name}[{i}]: expected a C-contiguous float32 array, got {got}")
            if a.size != p.size:
                raise ValueError(f"{name}[{i}]: expected {p.size} values like ps[{i}], got {a.size}")
            if name != "gs" and not a.flags.writeable:
                raise ValueError(f"{name}[{i}]: is read-only, but the pass updates it in place")


def adamw_step(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, grad_scale, max_grad_norm,
               safe_norm, threads=None):
    """One AdamW step over every tensor: the global norm of the gradients times ``grad_scale``
    (a float64 sum over the lists' order), the clip decision (``max_grad_norm`` 0: none), and
    the per-element update, in one native call (two team jobs).  Returns ``(updated, norm, clip, gscale)``:
    ``updated`` False when the scaled norm is not finite or >= ``safe_norm`` (nothing written;
    the caller decides)."""
    _lists(ps, gs, ms, vs)
    return _adamw_step(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, grad_scale, max_grad_norm,
                       safe_norm, resolve_threads(threads))


def adamw_update(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale, threads=None):
    """The per-element AdamW update of every tensor with the gradients times ``gscale`` (no norm pass)."""
    _lists(ps, gs, ms, vs)
    _adamw_update(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale, resolve_threads(threads))


def _adamw_step(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, grad_scale, max_grad_norm, safe_norm,
                nt):
    """``adamw_step`` unchecked, on ``nt`` threads (a number): for a caller that has checked every
    tensor as ``_lists`` does (AdamW.step)."""
    return _o.adamw_step_multi(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, grad_scale,
                               max_grad_norm, safe_norm, _simd.isa(), nt)


def _adamw_update(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale, nt):
    """``adamw_update`` unchecked, on ``nt`` threads (see ``_adamw_step``)."""
    _o.adamw_multi(ps, gs, ms, vs, b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale, _simd.isa(), nt)


def sumsq(xs, threads=None) -> list:
    """[float64 sum of squares of each array of ``xs``] (any float arrays: taken as float32,
    C-contiguous; each summed in fixed chunks in a fixed order)."""
    xs = [np.ascontiguousarray(x, dtype=np.float32) for x in xs]
    return _o.sumsq_multi(xs, _simd.isa(), resolve_threads(threads))
