"""Which SIMD bodies the kernels run.

The CPU's features are read once at import; ``LUTCORE_SIMD=generic|avx2|avx512bw|avx512``
caps the choice (a cap above what the CPU has is refused with a warning and
ignored), and ``set_simd`` changes it at run time so one machine can test every
path it has.  ``avx512`` is AVX-512 F/BW/VL/DQ with the extensions this CPU has
(VNNI, VBMI, VPOPCNTDQ, detected separately); ``avx512bw`` is AVX-512 without them, so an
AVX-512 CPU also runs the bodies meant for AVX-512 CPUs that lack VNNI/VBMI/VPOPCNTDQ.
Kernels receive the chosen ISA as an argument (level plus extension bits, as
the C enum in common.h); there is no global state in C.  Each family picks its
body from that argument; one without a body for the chosen ISA runs the best
lower one (``show_config`` lists the body each family runs).
"""
from __future__ import annotations

import os
import warnings

from lutcore._native import _cpu

NAMES = ("generic", "avx2", "avx512bw", "avx512")
_features = _cpu.cpu_features()
VNNI, VBMI, VPOPCNT = 4, 8, 16    # the extension bits of _cpu.cpu_features() and of the C isa argument


def available_simd() -> list[str]:
    """The paths this CPU runs, lowest first (on an AVX-512 CPU without VNNI and VBMI,
    ``avx512bw`` and ``avx512`` run the same bodies)."""
    out = ["generic"]
    if _features & 1:
        out.append("avx2")
    if _features & 2:
        out += ["avx512bw", "avx512"]
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


def isa_of(name: str) -> int:
    """The C isa argument of path ``name``: 0 generic, 1 avx2, 2 AVX-512, plus VNNI (4),
    VBMI (8) and VPOPCNTDQ (16) where ``name`` is ``avx512`` and the CPU has them."""
    if name == "avx512":
        return 2 | (_features & (VNNI | VBMI | VPOPCNT))
    return min(NAMES.index(name), 2)


def isa() -> int:
    """The chosen ISA as the C argument (see ``isa_of``)."""
    return isa_of(_current)


def cpu_flags() -> list[str]:
    names = [(1, "avx2+fma"), (2, "avx512f/bw/vl/dq"), (4, "avx512-vnni"), (8, "avx512-vbmi"),
             (16, "avx512-vpopcntdq")]
    return [n for bit, n in names if _features & bit]


def bodies(name: str | None = None) -> dict[str, str]:
    """The body each kernel family runs on path ``name`` (default: the current one), from every
    native module that names its bodies (``body_names(isa)``, read from its C body table).
    Families without a body for an ISA run their best lower one, named here."""
    import lutcore._native as native
    isa_arg = isa_of(_current if name is None else name)
    out = {}
    for mod_name in native.MODULES:
        f = getattr(getattr(native, mod_name), "body_names", None)
        if f is not None:
            out.update(f(isa_arg))
    return out
