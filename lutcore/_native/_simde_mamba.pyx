# cython: language_level=3
"""Test-only: lutcore._native.mamba's wrappers, linked with the SIMDe copies of the
math functions' AVX-512 bodies (src/mathfn/simde_avx512.c, built with AVX2+FMA
flags), so the tests run every AVX-512 math body on any x86-64 CPU and compare
its bits with the generic body.  Pass LC_ISA_AVX512 (2) as ``isa``."""
include "mamba.pyx"
