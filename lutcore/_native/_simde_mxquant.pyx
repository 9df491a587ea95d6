"""Test-only: lutcore._native.mxquant's wrappers, linked with the SIMDe copy of the MX quantizer's
AVX-512 body (csrc/mxquant/x86/avx512.c compiled against SIMDe, built with AVX2+FMA flags), so the
tests run it on any x86-64 CPU and compare its bits with the generic body.  Pass LC_ISA_AVX512
(2) as ``isa``."""
include "mxquant.pxd"
include "mxquant.pyx"
