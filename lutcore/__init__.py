"""lutcore — neural networks on the CPU through declared 8-bit arithmetic units.

Layering (dependencies point one way): C kernels (csrc/) <- Cython
wrappers (lutcore._native) <- numpy-facing core (units, quant, ops) <- models,
trainer, pipeline <- CLI.  See docs/DESIGN.md for the numeric contracts.
"""
from __future__ import annotations

__version__ = "0.1.0"


def _native_missing(err: ImportError) -> ImportError:
    """Why ``import lutcore`` failed before its compiled extensions loaded, and what to do
    (numpy says the same when imported from its source tree)."""
    import os
    pkg = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(pkg)
    if os.path.isfile(os.path.join(root, "setup.py")) and os.path.isfile(os.path.join(root, "pyproject.toml")):
        return ImportError(
            f"Error importing lutcore: its compiled extensions (lutcore._native) are not built in the "
            f"source tree {root}, which you are importing from (it shadows an installed lutcore). "
            f"Leave the source directory and relaunch Python there to use the installed package, or build "
            f"the extensions in place: `python setup.py build_ext --inplace` (or `pip install -e .`). "
            f"[{err}]")
    return ImportError(f"Error importing lutcore: its compiled extensions (lutcore._native) are missing or "
                       f"broken in {pkg}; reinstall it (`pip install --force-reinstall lutcore`). [{err}]")


from lutcore import _spin

_spin.tame()                 # before any OpenMP runtime loads (ours below, torch's later): see _spin

try:
    from lutcore._native import _cpu as _cpu, alloc as _alloc_native  # noqa: F401
except ImportError as _e:
    raise _native_missing(_e) from None

from lutcore._alloc import cache_info, empty_cache, set_cache_limit
from lutcore._simd import available_simd, get_simd, set_simd
from lutcore._threads import get_num_threads, set_num_threads
from lutcore.audit import AuditError, get_audit, set_audit
from lutcore.ops import (PackedB, fp16_decode, fp16_encode, fp16_round, lut_gemm, pack_b, relu8,
                         requant)
from lutcore.mx import MX, mx_quantize
from lutcore.ops.mxgemm import MXProducts, Narrow, mx_gemm
from lutcore.quant import Q8, qmatmul, quantize
from lutcore.units import Units


def evaluate_units(model_or_path, data, units=("none",), seq_len=None, **kw):
    """The damage table: ``model_or_path`` (a Hugging Face or lutcore checkpoint directory, or a
    MambaLM / GPT) scored on ``data`` through each units spec; see ``lutcore.evaluate``."""
    from lutcore.evaluate import evaluate_units as run
    return run(model_or_path, data, units=units, seq_len=seq_len, **kw)


__all__ = [
    "Units", "lut_gemm", "pack_b", "PackedB", "quantize", "Q8", "qmatmul", "mx_quantize", "MX", "mx_gemm",
    "MXProducts", "Narrow", "requant", "relu8", "fp16_round", "fp16_encode", "fp16_decode", "set_audit",
    "get_audit", "AuditError",
    "set_num_threads", "get_num_threads", "set_simd", "get_simd", "available_simd",
    "show_config", "config", "cache_info", "empty_cache", "set_cache_limit", "evaluate_units",
]


# PEP 562: the heavier submodules load on first use, so ``import lutcore`` never imports
# torch, transformers or ray.  ``lutcore.torch`` is the optional PyTorch bridge.
_LAZY = ("models", "train", "pipeline", "torch", "experiment", "tokenizer", "sampling", "cli")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        try:
            mod = importlib.import_module(f"lutcore.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"lutcore.{name}":        # the submodule itself is absent from this build
                raise AttributeError(f"module 'lutcore' has no attribute {name!r} (lutcore.{name} is not "
                                     f"part of this installation)") from None
            raise
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'lutcore' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def config() -> dict:
    """Build and runtime facts as a dict (what ``show_config`` prints)."""
    from lutcore import _alloc, _simd
    from lutcore._native import _cpu
    return {
        "version": __version__,
        "openmp": _cpu.openmp_enabled(),
        "default_threads": get_num_threads(),
        "simd": get_simd(),
        "simd_available": available_simd(),
        "cpu_flags": _simd.cpu_flags(),
        "kernel_bodies": _simd.bodies(),
        "audit_rate": get_audit(),
        "memory_reuse": _alloc.ENABLED,
        "openmp_spin": _spin.describe(),
    }


def show_config() -> None:
    """Print version, OpenMP on/off, default threads, and the SIMD paths."""
    c = config()
    print(f"lutcore {c['version']}")
    print(f"  OpenMP:          {'on' if c['openmp'] else 'off (serial build)'}")
    print(f"  default threads: {c['default_threads']}")
    print(f"  SIMD path:       {c['simd']}  (available: {', '.join(c['simd_available'])})")
    print(f"  CPU features:    {', '.join(c['cpu_flags']) or 'none detected'}")
    w = max(len(f) for f in c["kernel_bodies"]) + 1
    for fam, bodies in c["kernel_bodies"].items():
        print(f"  body {fam + ':':<{w}} {bodies}")
    print(f"  audit rate:      {c['audit_rate']}")
    print(f"  memory reuse:    {'on' if c['memory_reuse'] else 'off (LUTCORE_REUSE_MEMORY=0)'}")
    print(f"  OpenMP spinning: {c['openmp_spin']}")
