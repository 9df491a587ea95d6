"""Which SIMD bodies the kernels run.

The CPU's features are read once at import; ``LUTCORE_SIMD=generic|avx2|avx512``
caps the choice (a cap above what the CPU has is refused with a warning and
ignored), and ``set_simd`` changes it at run time so one machine can test every
path it has.  Kernels receive the chosen ISA as an argument; there is no global
state in C.  A family without a body for the chosen ISA runs the best lower one
(``show_config`` lists which bodies exist).
"""
from __future__ import annotations

import os
import warnings

from lutcore._native import _cpu

NAMES = ("generic", "avx2", "avx512")
_features = _cpu.cpu_features()


def available_simd() -> list[str]:
    out = ["generic"]
    if _features & 1:
        out.append("avx2")
    if _features & 2:
        out.append("avx512")
    return out


def _initial() -> str:
    best = available_simd()[-1]
    cap = os.environ.get("LUTCORE_SIMD", "").strip().lower()
    if not cap:
        return best
    if cap not in NAMES:
        warnings.warn(f"LUTCORE_SIMD: expected one of {NAMES}, got {cap!r}; using {best}")
        return best
    if cap not in available_simd():
        warnings.warn(f"LUTCORE_SIMD={cap}: this CPU supports only {available_simd()}; using {best}")
        return best
    return cap


_current = _initial()


def set_simd(name: str) -> None:
    """Run kernels with the bodies for ``name`` (one of ``available_simd()``)."""
    global _current
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type(name).__name__}")
    name = name.lower()
    if name not in NAMES:
        raise ValueError(f"name: expected one of {NAMES}, got {name!r}")
    if name not in available_simd():
        raise ValueError(f"name: this CPU supports {available_simd()}, not {name!r}")
    _current = name


def get_simd() -> str:
    return _current


def isa() -> int:
    """The chosen ISA as the C enum (0 generic, 1 avx2, 2 avx512)."""
    return NAMES.index(_current)


def cpu_flags() -> list[str]:
    names = [(1, "avx2+fma"), (2, "avx512f/bw/vl/dq"), (4, "avx512-vnni"), (8, "avx512-vbmi")]
    return [n for bit, n in names if _features & bit]
