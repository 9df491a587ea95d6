"""Test-only: lutcore._native.sgemm's wrappers, linked with the SIMDe copy of the
AVX-512 tile (build/simde-src/sgemm/avx512.c, built with AVX2+FMA flags), so the
tests run the zmm body on any x86-64 CPU and compare its bits with the generic
body.  Pass LC_ISA_AVX512 (2) as ``isa``."""
include "sgemm.pxd"
include "sgemm.pyx"
