# cython: language_level=3
"""Test-only: lutcore._native.mamba's wrappers, linked with the SIMDe copies of the
math functions', conv1d's and the selective scan's AVX-512 bodies
(build/simde-src/mathfn/avx512.c, build/simde-src/conv/avx512.c, build/simde-src/scan/avx512.c, built
with AVX2+FMA flags), so the tests run them on any
x86-64 CPU and compare their bits with the generic body.  Pass LC_ISA_AVX512 (2)
as ``isa``."""
include "mamba.pyx"
