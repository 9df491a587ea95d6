"""Test-only: lutcore._native.mantgemm's wrappers, linked with the SIMDe copy of the mantissa-product
GEMM's AVX-512 body (csrc/mantgemm/x86/avx512.c compiled against SIMDe, built with AVX2+FMA flags),
so the tests run it on any x86-64 CPU and compare its bits with the generic body.  Pass
LC_ISA_AVX512 (2) as ``isa``."""
include "mantgemm.pxd"
include "mantgemm.pyx"
