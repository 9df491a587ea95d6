"""The approximate PyTorch layers' operands: per-tensor quantization of a dense float32
tensor into NHWC codes, conv patches (im2col), direct grouped and small-K convolutions from
the codes, the dequantization of int32 products, and the weight check's memcmp
(csrc/im2col/im2col.h, csrc/conv2d/conv2d.h).

Design: the room of the ``im2col`` family.  ``lutcore.torch.functional`` owns the tensors,
the geometry (``geo``: an object with ``nhwc`` = the input's (N, H, W, C) and ``window`` =
(KH, KW, OH, OW, stride h, w, padding h, w, dilation h, w), made once per geometry) and the
scratch buffers; these functions read the
SIMD path, resolve ``threads`` (None: the enclosing ``lutcore._threads.scope``) and call C.
The native wrappers check every buffer's size against the geometry (C never reads or
writes out of bounds); every pass is integer or one float32 rounding per element, so the
same bits at any thread count and on every SIMD path.  Each public function has a private
fast twin (``_absmax``, ``_quantize_nhwc``, ...) taking a thread count already resolved: a
layer call runs four or five of these passes, and ``lutcore.torch.functional`` resolves its
count once per call (a resolve of a number costs about a microsecond, 10-15 % of a small
layer's call), so it calls the twins.

    base     float32 flat             a dense tensor's elements in memory order
    q        int8    (N*H*W*C,)       NHWC codes
    A        int8    (G, N*OH*OW, Kg) patches, Kg = KH*KW*C/G in (i, j, c) order
    Wt       int8    (KH*KW*C/G, O)   the weight's codes, transposed
    mul      int32   (65536,)         the table, entry a*256 + b (``exact``: a*b)
    acc      int32   (N*OH*OW, O)
    y        float32 (N, O, OH, OW) flat (conv2d_direct) / (N, O, P) flat (dequant)
    qc       int8    (N*C*H*W,)       NCHW codes (quantize_nhwc of the view (N, C, H, W))
    AT       int8    (Kg, N*OH*OW)    the patches k-major (one group: A[0] transposed)
    colT     float32 (Kg, N*OH*OW)    patch gradients k-major; fold_kmajor -> dx (N, C, H, W) flat
    rows     float32 (N*P, C)         chw_rows of x (N, C, P): a gradient's NHWC rows (times a power of two)
    gT       float32 (O, N*P)         scaled_om of x (N, O, P): float32(x * sw[o]) * scale, transposed
    dw       float32 (O, C, T)        dw_layout of sT (T, C, O) and s: float32(sT * s) transposed
"""
from __future__ import annotations

from lutcore import _simd
from lutcore._native import im2col as _im
from lutcore._threads import resolve_threads

__all__ = ["KMAX", "absmax", "quantize_nhwc", "im2col", "grouped_direct", "direct_fast", "conv2d_direct",
           "dequant", "same_bytes", "im2col_kmajor", "fold_kmajor", "chw_rows", "scaled_om", "dw_layout"]

KMAX = _im.KMAX                   # the longest reduction (C*KH*KW) conv2d_direct takes


def absmax(base, threads=None):
    """(max|x|, count of NaN/Inf) of a flat float32 buffer."""
    return _absmax(base, resolve_threads(threads))


def quantize_nhwc(q, base, shape, strides, scale, threads=None, offset: int = 0) -> int:
    """q (N*H*W*C,) = clamp(round_half_even(x / scale), -127, 127) over the (N, H, W, C) view of
    ``base`` at element ``offset`` with element ``strides``; returns the count of NaN/Inf."""
    return _quantize_nhwc(q, base, shape, strides, scale, resolve_threads(threads), offset)


def im2col(A, q, geo, threads=None) -> None:
    """A (G, N*OH*OW, Kg) <- the patches of the NHWC codes q (padding: the code 0)."""
    _im2col(A, q, geo, resolve_threads(threads))


def grouped_direct(acc, q, geo, groups: int, Wt, mul, exact: bool, threads=None) -> None:
    """acc (N*OH*OW, O) = sum_k mul[patch, w] per group, straight from the codes q (no patches):
    for groups too narrow for a GEMM each (depthwise and the like)."""
    _grouped_direct(acc, q, geo, groups, Wt, mul, exact, resolve_threads(threads))


def direct_fast(exact: bool) -> bool:
    """Whether ``conv2d_direct`` beats im2col + the LUT GEMM on the current SIMD path for this
    kind of table (the exact table on the AVX-512 bodies)."""
    return _im.direct_fast(_simd.isa(), bool(exact))


def conv2d_direct(y, q, geo, Wt, mul, exact: bool, scale, bias=None, threads=None) -> None:
    """y (N, O, OH, OW) flat = float32(sum_k mul[x, w]) * scale[o] (+ bias[o]) over one group's
    patches of the codes q, with K = KH*KW*C <= KMAX and no patch matrix."""
    _conv2d_direct(y, q, geo, Wt, mul, exact, scale, bias, resolve_threads(threads))


def dequant(y, acc, scale, bias, N: int, P: int, threads=None) -> None:
    """y (N, O, P) flat = float32(acc (N*P, O)) * scale[o] + bias[o] (bias None: none)."""
    _dequant(y, acc, scale, bias, N, P, resolve_threads(threads))


def same_bytes(a, b, threads=None) -> bool:
    """Whether the uint8 buffers a and b hold the same bytes (a threaded memcmp; unequal
    lengths are not the same)."""
    return _im.same_bytes(a, b, resolve_threads(threads))


def im2col_kmajor(AT, qc, geo, threads=None) -> None:
    """AT (Kg, N*OH*OW) <- the patches of the NCHW codes qc, k-major (one group: A[0].T of im2col)."""
    _im2col_kmajor(AT, qc, geo, resolve_threads(threads))


def fold_kmajor(dx, colT, geo, threads=None) -> None:
    """dx (N, C, H, W) flat = the fold of k-major patch gradients colT (Kg, N*OH*OW), one group: the
    bits of torch.nn.functional.fold of the same columns in (c, i, j) order."""
    _fold_kmajor(dx, colT, geo, resolve_threads(threads))


def chw_rows(rows, x, threads=None, scale=1.0) -> bool:
    """rows (N*P, C) float32 = x (N, C, P) float32 * scale transposed per image (C-contiguous both;
    scale a power of two); whether every product is exact."""
    return _chw_rows(rows, x, resolve_threads(threads), scale)


def scaled_om(gT, x, sw, scale, threads=None) -> bool:
    """gT (O, N*P) float32 (rows contiguous) = float32(x (N, O, P) * sw[o]) * scale, sw None: x * scale
    (scale a power of two); whether every scaling is exact."""
    return _scaled_om(gT, x, sw, scale, resolve_threads(threads))


def dw_layout(dw, sT, s, threads=None) -> None:
    """dw (O, C, T) float32 = float32(sT (T, C, O) * s) (C-contiguous both): a conv's weight gradient
    from the planes pass's k-major sums (k = t*C + c) to the weight's layout."""
    _dw_layout(dw, sT, s, resolve_threads(threads))


# ---------------------------------------------------------------- the fast twins (nt: a number)

def _absmax(base, nt):
    return _im.absmax(base, _simd.isa(), nt)


def _quantize_nhwc(q, base, shape, strides, scale, nt, offset=0):
    return _im.quantize_nhwc(q, base, offset, shape, strides, float(scale), _simd.isa(), nt)


def _im2col(A, q, geo, nt):
    _im.im2col_nhwc(A, q, geo.nhwc, *geo.window, nt)


def _grouped_direct(acc, q, geo, groups, Wt, mul, exact, nt):
    _im.grouped_direct(acc, q, geo.nhwc, groups, *geo.window, Wt, mul, exact, _simd.isa(), nt)


def _conv2d_direct(y, q, geo, Wt, mul, exact, scale, bias, nt):
    _im.conv2d_direct(y, q, geo.nhwc, *geo.window, Wt, mul, exact, scale, bias, _simd.isa(), nt)


def _dequant(y, acc, scale, bias, N, P, nt):
    _im.dequant(y, acc, scale, bias, N, P, nt)


def _im2col_kmajor(AT, qc, geo, nt):
    _im.im2col_kmajor(AT, qc, geo.nhwc, *geo.window, nt)


def _fold_kmajor(dx, colT, geo, nt, images=None):
    """(images: the fold of that many images' columns, dx and colT theirs alone)"""
    shape = geo.nhwc if images is None else (images,) + tuple(geo.nhwc[1:])
    _im.fold_kmajor(dx, colT, shape, *geo.window, nt)


def _chw_rows(rows, x, nt, scale=1.0):
    return _im.chw_rows(rows, x, nt, float(scale))


def _scaled_om(gT, x, sw, scale, nt):
    return _im.scaled_om(gT, x, sw, float(scale), nt)


def _dw_layout(dw, sT, s, nt):
    _im.dw_layout(dw, sT, float(s), nt)
