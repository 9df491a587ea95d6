"""Test-only: lutcore._native.im2col's wrappers, linked with the SIMDe copies of the direct
small-K convolution's AVX-512 bodies (csrc/conv2d/x86/avx512.c, avx512_vnni.c, built with
AVX2+FMA flags), so the tests run them on any x86-64 CPU and compare their bits with the
generic body.  Pass 2 (AVX-512) or 2 | 4 (AVX-512 + VNNI) as ``isa``."""
include "im2col.pxd"
include "im2col.pyx"
