"""Test-only: lutcore._native.optim's wrappers, linked with the SIMDe copy of AdamW's
AVX-512 body (build/simde-src/optim/avx512.c, built with AVX2+FMA flags), so the tests
run it on any x86-64 CPU and compare its bits with the generic body.  Pass
LC_ISA_AVX512 (2) as ``isa``."""
include "optim.pxd"
include "optim.pyx"
