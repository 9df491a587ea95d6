"""The one door to the compiled kernels (``lutcore._native``).

Design: ``lutcore.ops`` (numpy in, numpy out, every argument checked) is the kernels'
public face.  The few modules that drive a kernel directly because they own its buffers
— ``quant`` (packed panels, reused activation rows), the models' row kernels
(``models._layers``, ``models.gpt``), the optimizer, the pipeline's fused decode, the
PyTorch bridge's im2col — take the native module from here, and nothing outside
``lutcore.ops`` and this package imports ``lutcore._native``.  The names are the native
modules themselves (imported on first use), so ``lutcore._threads.record()`` sees every
call made through them.

    _cpu         CPU features, OpenMP facts          alloc    page-aligned buffers
    gemm         LUT / exact GEMM, Q8 quantizer      sgemm    float32 GEMM (and the decode GEMV)
    mathfn       exp, silu, sigmoid, softplus, GELU  norm     RMSNorm, LayerNorm rows
    softmax      causal softmax rows                 attn     decode attention products
    scan         the selective scan                  conv     causal conv1d
    models       the llama decode layer (fused one-token decode), RoPE
    elementwise  requant, relu8, fp16, scatter-add   optim    AdamW, sum of squares
    im2col       conv patches, direct grouped conv
    gradtables   the gradient-table backward pass (lutcore.torch backward="table")
    exactsum     the exact float32 summation (the data-parallel gradient reduction)
"""
import importlib

MODULES = ("_cpu", "alloc", "attn", "conv", "elementwise", "exactsum", "gemm", "gradtables", "im2col", "mathfn",
           "models", "norm", "optim", "scan", "sgemm", "softmax")

__all__ = list(MODULES)


def __getattr__(name):
    if name in MODULES:
        mod = importlib.import_module(f"lutcore._native.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'lutcore.kernels' has no attribute {name!r}")
