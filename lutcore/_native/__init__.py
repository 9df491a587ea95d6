"""The native modules (``lutcore._native``): the one list of them, and the door to them.

Design: ``MODULES`` below is the one list of the compiled modules — setup.py builds one
extension per name (read as text; a ``.pyx`` the list does not name stops the build),
``lutcore._threads.record`` wraps every function of theirs that takes a thread count, and
``lutcore._simd.bodies`` (so ``show_config``) asks each one that has ``body_names(isa)``.
``lutcore.ops`` (one room per family: numpy in, numpy out, arguments checked, the body
chosen) is the only package that calls them; ``_threads``, ``_simd``, ``_alloc`` and
``lutcore/__init__`` describe the build through ``_cpu`` and ``alloc``.  The names are the
modules themselves (imported on first use), so ``record()`` sees every call.

    _cpu         CPU features, OpenMP facts          alloc    page-aligned buffers
    gemm         LUT / exact GEMM, Q8 quantizer      sgemm    float32 GEMM (and the decode GEMV)
    mathfn       exp, silu, sigmoid, softplus, GELU  norm     RMSNorm, LayerNorm rows
    softmax      causal softmax rows                 attn     decode attention products
    scan         the selective scan                  conv     causal conv1d
    models       the llama decode layer (fused one-token decode), RoPE
    elementwise  requant, relu8, fp16, scatter-add   optim    AdamW, sum of squares
    im2col       conv patches, the direct small-K conv2d
    gradtables   the gradient-table backward pass (lutcore.torch backward="table")
    exactsum     the exact float32 summation (the data-parallel gradient reduction)
    netlist      GEMM and products through a multiplier's gate netlist, bit-sliced
    mxgemm       the MX GEMM: block-scaled FP8/FP6/FP4/INT8 codes through any product table
    mantgemm     bf16 / fp16 operands through a table of significand products (ApproxTrain's form)
    mxquant      the MX quantizer: float32 to E8M0 scales + FP8/FP6/FP4/INT8 codes (nearest even)
"""
import importlib

MODULES = ("_cpu", "alloc", "attn", "conv", "elementwise", "exactsum", "gemm", "gradtables", "im2col", "mantgemm",
           "mathfn", "models", "mxgemm", "mxquant", "netlist", "norm", "optim", "scan", "sgemm", "softmax")

__all__ = list(MODULES)


def __getattr__(name):
    if name in MODULES:
        mod = importlib.import_module(f"lutcore._native.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'lutcore._native' has no attribute {name!r}")
