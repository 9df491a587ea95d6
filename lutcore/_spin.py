"""How long the other thread pools in lutcore's process spin after their work.

Design: lutcore's kernels run on its own thread team (csrc/core/team.h), which spins at most
0.5 ms after a call and then sleeps.  Two pools that share lutcore's processes spin far longer
by default, and while they spin they hold the cores lutcore's team wants (measured on a
2-core Zen 5, BENCHMARKS.md "Shared cores"):

  torch's bundled libgomp   8.5 ms of CPU in the 50 ms after one 512 x 512 matmul; the exact
                            int8 GEMM 1024^3 at 2 threads right after a torch op ran at its
                            1-thread time (2.2 ms against 1.1 ms).  GOMP_SPINCOUNT=10000: 0.3 ms,
                            and torch's own steps measured the same.
  numpy's OpenBLAS          104 ms of CPU in the 200 ms after one numpy matmul (and after
                            ``import numpy``).  OPENBLAS_THREAD_TIMEOUT=20 (2^20 cycles): 0.7 ms.

Both read their environment once, when they are loaded, so lutcore sets these only for pools
not loaded yet: ``import lutcore`` (or ``lutcore.torch``) before ``import torch`` / numpy.
A user's own setting is never overridden; ``show_config()`` says what happened.  This module
imports nothing (it runs before lutcore's modules load numpy or libgomp).
"""
from __future__ import annotations

import os
import sys

# pool: (the variable lutcore sets, its value, the user's variables that mean "leave it",
#        the module whose import has loaded the pool, what the setting does)
POOLS = {
    "libgomp": ("GOMP_SPINCOUNT", "10000", ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"), "torch",
                "torch's threads sleep ~0.3 ms after an op"),
    "OpenBLAS": ("OPENBLAS_THREAD_TIMEOUT", "20", ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT"), "numpy",
                 "numpy's BLAS threads sleep ~0.3 ms after a call"),
}

state: dict = {}             # pool -> "set", "user" or "late", once tame() ran


def tame() -> dict:
    """Set each pool's spin limit for the pools loaded from now on, unless the user chose one
    ("user") or the pool has already read its environment ("late")."""
    for pool, (var, value, user_vars, module, _) in POOLS.items():
        if any(v in os.environ for v in user_vars):
            state[pool] = "user"
        elif module in sys.modules:
            state[pool] = "late"
        else:
            os.environ[var] = value
            state[pool] = "set"
    return state


def describe() -> str:
    """One line for ``show_config``: each pool's spinning after its work."""
    parts = []
    for pool, (var, value, user_vars, module, effect) in POOLS.items():
        s = state.get(pool)
        if s == "set":
            parts.append(f"{pool}: {var}={value} (set by lutcore: {effect})")
        elif s == "user":
            parts.append(f"{pool}: " + ", ".join(f"{v}={os.environ[v]}" for v in user_vars if v in os.environ)
                         + " (yours)")
        elif s == "late":
            parts.append(f"{pool}: its default ({module} was imported before lutcore: its threads spin for "
                         f"milliseconds after each call and hold a core lutcore's kernels want; import lutcore "
                         f"first or set {var}={value})")
    return "; ".join(parts) or "not checked"
