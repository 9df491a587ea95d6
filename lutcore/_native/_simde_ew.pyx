"""Test-only: lutcore._native.elementwise's wrappers, linked with the SIMDe copies of
the element-wise family's AVX-512 bodies (csrc/elementwise/x86/*.c compiled against SIMDe, built with
AVX2+FMA flags), so the tests run every AVX-512 element-wise body on any x86-64
CPU and compare its bits with the generic body.  Pass the ISA bits to test
(LC_ISA_AVX512 | LC_ISA_VBMI ...) as ``isa``."""
include "elementwise.pxd"
include "elementwise.pyx"
