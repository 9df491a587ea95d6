"""Test-only: lutcore._native.gemm's wrappers, linked with the SIMDe copies of the
AVX-512 bodies (csrc/gemm/x86/*.c compiled against SIMDe, built with AVX2+FMA flags), so the tests run
every AVX-512 body on any x86-64 CPU and compare its bits with the generic body.
Pass the ISA bits to test (LC_ISA_AVX512 | LC_ISA_VNNI ...) as ``isa``."""
include "gemm.pxd"
include "gemm.pyx"
