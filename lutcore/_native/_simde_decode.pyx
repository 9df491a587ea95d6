# cython: language_level=3
"""Test-only: lutcore._native.decode's wrappers (norms, decode attention, softmax), linked
with the SIMDe copies of the AVX-512 bodies they call (norm, attn, and the sgemm and math-
function ones), built with AVX2+FMA flags, so the tests run the zmm bodies on any x86-64
CPU and compare their bits with the generic bodies.  Pass LC_ISA_AVX512 (2) as ``isa``."""
include "decode.pyx"
