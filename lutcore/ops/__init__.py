"""Numpy-in, numpy-out kernels (the native core's public face)."""
from lutcore.ops.elementwise import fp16_decode, fp16_encode, fp16_round, relu8, requant
from lutcore.ops.gemm import PackedB, lut_gemm, pack_b
from lutcore.ops.mathfn import exp, exp2, gelu_tanh, gelu_tanh_backward, sigmoid, silu, silu_backward, softplus
from lutcore.ops.matmul import matmul
from lutcore.ops.scan import (ScanContext, causal_conv1d, causal_conv1d_backward, causal_conv1d_step,
                              selective_scan, selective_scan_backward, selective_scan_forward)

__all__ = ["lut_gemm", "pack_b", "PackedB", "requant", "relu8", "fp16_round", "fp16_encode",
           "fp16_decode", "matmul", "exp", "exp2", "softplus", "silu", "silu_backward", "sigmoid", "gelu_tanh", "gelu_tanh_backward",
           "selective_scan",
           "selective_scan_forward", "selective_scan_backward", "ScanContext", "causal_conv1d",
           "causal_conv1d_backward", "causal_conv1d_step"]
