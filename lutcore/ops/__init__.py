"""Numpy-in, numpy-out kernels: the native core's one door.

Design: one module (a "room") per kernel family, the only modules of lutcore that import
``lutcore._native`` (with ``_threads``, ``_simd``, ``_alloc`` and ``_workspace``, which
describe the build).  A room takes numpy arrays and ``threads`` (None: the count of the
enclosing ``lutcore._threads.scope``, else lutcore's default), checks what a caller can get
wrong, reads the SIMD path (``lutcore._simd.isa()``: never the callers) and calls C.
Models, the trainer, the PyTorch bridge and the pipeline call these rooms only.  Where a hot
caller builds every buffer itself, a room offers an unchecked private fast function, named
and documented in that room (``quant``, ``optim``).

    gemm         lut_gemm, pack_b / PackedB: the int8 LUT GEMM (exact and any table)
    quant        the Q8 quantizer, the block-scaled product (under lutcore.quant)
    matmul       the deterministic float32 matmul, PackedMatrix
    elementwise  requant, relu8, fp16 rounding, the embedding's scatter-add
    mathfn       exp, exp2, softplus, silu (+ backward), sigmoid, GELU (+ backward)
    rows         RMSNorm, LayerNorm (+ backwards), causal softmax rows (+ backward)
    attn         causal attention (+ backward), the decode attention products
    scan         the selective scan (S6) and the causal depthwise conv1d
    optim        AdamW over many tensors, sums of squares
    exactsum     the exact float32 summation's element passes
    gradtables   the gradient-table pass (backward="table")
    netlist      GEMM and products through a multiplier's gate netlist (bit-sliced)
    mxgemm       mx_gemm: MX (FP8/FP6/FP4/INT8 block-scaled) operands through any product table
    mantgemm     mant_gemm, mant_round: bf16 / fp16 operands through a significand-product table
    mxquant      the MX quantizer (nearest even), which lutcore.mx.mx_quantize calls
    im2col       per-tensor NHWC quantization, patches, direct convs, dequant, same_bytes
    decode       the llama decode layer (one token through a stage), RoPE rows
"""
from lutcore.ops.elementwise import fp16_decode, fp16_encode, fp16_round, relu8, requant
from lutcore.ops.gemm import PackedB, lut_gemm, pack_b
from lutcore.ops.mathfn import exp, exp2, gelu_tanh, gelu_tanh_backward, sigmoid, silu, silu_backward, softplus
from lutcore.ops.matmul import matmul
from lutcore.ops.mantgemm import mant_gemm, mant_round
from lutcore.ops.mxgemm import MXProducts, Narrow, mx_gemm
from lutcore.ops.scan import (ScanContext, causal_conv1d, causal_conv1d_backward, causal_conv1d_step,
                              selective_scan, selective_scan_backward, selective_scan_forward)

__all__ = ["lut_gemm", "pack_b", "PackedB", "requant", "relu8", "fp16_round", "fp16_encode",
           "fp16_decode", "matmul", "mx_gemm", "MXProducts", "Narrow", "mant_gemm", "mant_round",
           "exp", "exp2", "softplus", "silu", "silu_backward", "sigmoid", "gelu_tanh", "gelu_tanh_backward",
           "selective_scan",
           "selective_scan_forward", "selective_scan_backward", "ScanContext", "causal_conv1d",
           "causal_conv1d_backward", "causal_conv1d_step"]
