"""How long other OpenMP runtimes in lutcore's process spin after their parallel regions.

Design: lutcore's kernels run on its own thread team (csrc/core/team.h), which spins at most
0.1 ms after a call and then sleeps.  torch's bundled libgomp, by default, keeps its threads
spinning for several milliseconds after every parallel region (measured on a 2-core Zen 5:
8.5 ms of CPU burnt in the 50 ms after one 512 x 512 matmul).  In one process that
alternates torch ops with lutcore kernels — ``lutcore.torch``'s layers, a benchmark beside
torch — those spinning threads hold the cores lutcore's team wants: the exact int8 GEMM
1024^3 at 2 threads ran at its 1-thread speed (2.2 ms against 1.1 ms) when it followed a
torch op.  With ``GOMP_SPINCOUNT=10000`` torch burns 0.3 ms after an op, lutcore's kernels
keep their speed, and torch's own steps measured the same (within the machine's noise).

libgomp reads its environment once, when it is loaded, so this works only for runtimes
loaded after lutcore: ``import lutcore`` (or ``lutcore.torch``) before ``import torch``.
A user's own ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is never overridden.  This module
imports nothing of lutcore (it runs before the compiled modules load libgomp).
"""
from __future__ import annotations

import os
import sys

SPINCOUNT = "10000"          # libgomp's spins (pause instructions) before a waiting thread sleeps
_USER_VARS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")

state = "unset"              # "set", "user" or "late" once tame() ran


def tame() -> str:
    """Set ``GOMP_SPINCOUNT`` for the OpenMP runtimes loaded from now on, unless the user chose a
    wait policy ("user") or torch's runtime has already read its environment ("late")."""
    global state
    if any(v in os.environ for v in _USER_VARS):
        state = "user"
    elif "torch" in sys.modules:
        state = "late"
    else:
        os.environ["GOMP_SPINCOUNT"] = SPINCOUNT
        state = "set"
    return state


def describe() -> str:
    """One line for ``show_config``: what torch's OpenMP threads do after an op."""
    if state == "set":
        return f"GOMP_SPINCOUNT={SPINCOUNT} (set by lutcore: torch's threads sleep ~0.3 ms after an op)"
    if state == "user":
        return ", ".join(f"{v}={os.environ[v]}" for v in _USER_VARS if v in os.environ) + " (yours)"
    if state == "late":
        return ("libgomp's default (torch was imported before lutcore: its threads spin ~5 ms after each op, "
                "and lutcore kernels between torch ops get one core; import lutcore first or set "
                f"GOMP_SPINCOUNT={SPINCOUNT})")
    return "not checked"
