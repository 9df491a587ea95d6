"""What every x86 body test of this room runs: the SIMDe twin of a family's AVX-512 bodies
(built on every x86-64: a missing one is an error, not a skip), the twin's AVX2 bodies where the
family builds them (setup.py ``simde_avx2``) and the native bodies this CPU has."""
import importlib
import platform

from lutcore import _simd

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")


def twin(name):
    """lutcore._native.<name> (a SIMDe twin) on x86-64, else None."""
    return importlib.import_module(f"lutcore._native.{name}") if IS_X86 else None


def runners(native, twin_mod, avx2=True, avx2_twin=False):
    """[(id, module, isa)]: the twin's AVX-512 body, the native AVX-512 one where the CPU has
    it, (avx2) the native AVX2 one, and (avx2_twin) the twin's AVX2 body (SIMDe at the baseline
    flags: any x86-64)."""
    return ([("avx512-simde", twin_mod, 2)] if twin_mod is not None else []) + \
           ([("avx512-native", native, 2)] if _simd._features & 2 else []) + \
           ([("avx2-native", native, 1)] if avx2 and _simd._features & 1 else []) + \
           ([("avx2-simde", twin_mod, 1)] if avx2_twin and twin_mod is not None else [])
