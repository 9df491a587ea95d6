"""Test-only: lutcore._native.netlist's wrappers, linked with the SIMDe copies of the netlist
family's AVX-512 bodies (csrc/netlist/x86/avx512.c, avx512_vpopcnt.c compiled against SIMDe,
built with AVX2+FMA flags), so the tests run them on any x86-64 CPU and compare their bits with
the generic body.  Pass LC_ISA_AVX512 (2), or 2 | 16 for the VPOPCNTDQ one, as ``isa``."""
include "netlist.pxd"
include "netlist.pyx"
