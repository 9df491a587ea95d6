"""Test-only: lutcore._native.mxquant's wrappers, linked with the SIMDe copies of the MX quantizer's
bodies (csrc/mxquant/x86/avx512.c compiled against SIMDe with AVX2+FMA flags, x86/avx2.c with the
baseline flags), so the tests run them on any x86-64 CPU and compare their bits with the generic
body.  Pass LC_ISA_AVX512 (2) or LC_ISA_AVX2 (1) as ``isa``."""
include "mxquant.pxd"
include "mxquant.pyx"
