"""Numpy-in, numpy-out kernels (the native core's public face)."""
from lutcore.ops.elementwise import fp16_decode, fp16_encode, fp16_round, relu8, requant
from lutcore.ops.gemm import PackedB, lut_gemm, pack_b

__all__ = ["lut_gemm", "pack_b", "PackedB", "requant", "relu8", "fp16_round", "fp16_encode",
           "fp16_decode"]
