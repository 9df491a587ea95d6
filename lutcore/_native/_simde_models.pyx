"""Test-only: lutcore._native.models (the llama decode layer) linked with the SIMDe copies of
every AVX-512 body it calls (norms, attention, sgemm, gemm, math functions), built with
AVX2+FMA flags, so the whole layer runs its zmm bodies on any x86-64 CPU."""
include "models.pxd"
include "models.pyx"
