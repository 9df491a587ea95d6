"""Test-only: lutcore._native.scan's wrappers, linked with the SIMDe copies of the selective scan's AVX-512 body
(build/simde-src/, built with AVX2+FMA flags), so the tests run the zmm bodies on any x86-64
CPU and compare their bits with the generic body.  Pass LC_ISA_AVX512 (2) as ``isa``."""
include "scan.pxd"
include "scan.pyx"
