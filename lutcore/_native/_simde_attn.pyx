"""Test-only: lutcore._native.attn's wrappers, linked with the SIMDe copies of decode attention's AVX-512 bodies
(build/simde-src/, built with AVX2+FMA flags), so the tests run the zmm bodies on any x86-64
CPU and compare their bits with the generic body.  Pass LC_ISA_AVX512 (2) as ``isa``."""
include "attn.pxd"
include "attn.pyx"
