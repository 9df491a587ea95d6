"""Plain numpy oracle for the approximate PyTorch layers (DESIGN.md, "Approximate
PyTorch layers"; README, "PyTorch models through the units").

Design: written from the contract only, never calling lutcore: float32 numpy
arithmetic with separate operations (no FMA), np.rint (half to even), a true
division; the im2col is the textbook one in PyTorch's (c, i, j) patch order over
a zero-padded code array; the products go through gemm_ref's LUT GEMM.

quantize_weight_ref(w):
    w      float32  (O, ...)          IN
    q      int8     (O, ...)          OUT  clamp(rint(w / s[o]), -127, 127), 0 where s[o] = 0
    s      float32  (O,)              OUT  max|w[o]| / 127
quantize_tensor_ref(x, s=None):      one scale for the whole tensor (max|x| / 127 when s is None)
conv2d_ref(x, w, b, mul, stride, padding, dilation, groups, padding_mode="zeros", input_scale=None):
    x      float32  (N, C, H, W)      IN
    w      float32  (O, C/G, KH, KW)  IN
    b      float32  (O,) or None      IN
    mul    int16    (65536,)          IN   the table, activation = row (first index)
    y      float32  (N, O, OH, OW)    OUT  float32(acc) * (s_x * s_w[o]) + b[o]
conv1d_ref: the same with H = 1.   linear_ref(x (M, K), w (O, K), b, mul) -> (M, O).
linear_units_backward_ref(dy, x, w, mul): (dx, dw) through the unit (the README's formulas).
"""
import numpy as np

from .gemm_ref import lut_gemm_ref

_127 = np.float32(127.0)


def _codes(v, s):
    v = np.asarray(v, np.float32)
    s = np.asarray(s, np.float32)
    safe = np.where(s != 0, s, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint((v / safe).astype(np.float32)), -127, 127)
    return np.where(s != 0, q, 0).astype(np.int8)


def quantize_weight_ref(w):
    w = np.asarray(w, np.float32)                                           # (O, ...)
    O = w.shape[0]
    s = (np.abs(w.reshape(O, -1)).max(axis=1, initial=np.float32(0)) / _127).astype(np.float32)   # (O,)
    q = _codes(w, s.reshape((O,) + (1,) * (w.ndim - 1)))                    # (O, ...)
    return q, s


def quantize_tensor_ref(x, s=None):
    x = np.asarray(x, np.float32)
    if s is None:
        s = np.float32(np.abs(x).max(initial=np.float32(0))) / _127
    s = np.float32(s)
    return _codes(x, s), s


def _dequant(acc, s_x, s_w, b):
    scale = (np.float32(s_x) * s_w).astype(np.float32)                      # (O,)
    y = (acc.astype(np.float32) * scale).astype(np.float32)
    if b is not None:
        y = (y + np.asarray(b, np.float32)).astype(np.float32)
    return y


def linear_ref(x, w, b, mul, input_scale=None):
    qx, s_x = quantize_tensor_ref(x, input_scale)                           # (M, K)
    qw, s_w = quantize_weight_ref(w)                                        # (O, K)
    acc = lut_gemm_ref(qx, qw.T.copy(), mul)                                # (M, O)
    return _dequant(acc, s_x, s_w, b)


_NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def conv2d_ref(x, w, b, mul, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros",
               input_scale=None):
    x = np.asarray(x, np.float32)
    pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    if padding_mode != "zeros":                                             # pad in float first
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), mode=_NP_MODE[padding_mode])
        ph = pw = 0
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    G = groups
    qx, s_x = quantize_tensor_ref(x, input_scale)                           # (N, C, H, W)
    qw, s_w = quantize_weight_ref(w)                                        # (O, Cg, KH, KW)
    qp = np.pad(qx, ((0, 0), (0, 0), (ph, ph), (pw, pw)))                   # padding = code 0
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    acc = np.zeros((N, OH, OW, O), np.int32)
    Og = O // G
    for g in range(G):
        cols = np.zeros((N, OH, OW, Cg, KH, KW), np.int8)                   # patches, (c, i, j) order
        for i in range(KH):
            for j in range(KW):
                cols[..., i, j] = qp[:, g * Cg:(g + 1) * Cg, i * dh: i * dh + sh * (OH - 1) + 1: sh,
                                     j * dw: j * dw + sw * (OW - 1) + 1: sw].transpose(0, 2, 3, 1)
        A = cols.reshape(N * OH * OW, Cg * KH * KW)                         # (M, Kg)
        B = qw[g * Og:(g + 1) * Og].reshape(Og, -1).T.copy()                # (Kg, Og)
        acc[..., g * Og:(g + 1) * Og] = lut_gemm_ref(A, B, mul).reshape(N, OH, OW, Og)
    y = _dequant(acc.reshape(-1, O), s_x, s_w, b).reshape(N, OH, OW, O)
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2))                    # (N, O, OH, OW)


def conv1d_ref(x, w, b, mul, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros",
               input_scale=None):
    y = conv2d_ref(np.asarray(x)[:, :, None, :], np.asarray(w)[:, :, None, :], b, mul, (1, stride),
                   (0, padding), (1, dilation), groups, padding_mode, input_scale)
    return y[:, :, 0, :]


def linear_units_backward_ref(dy, x, w, mul, input_scale=None):
    """dX = s_g * float32(sum_o mul[q_g, q_w]) with g = dy * s_w[o] quantized per tensor;
    dW = (s_dy * s_x) * float32(sum_m mul[q_dy, q_x]); the gradient is the table's row."""
    dy = np.asarray(dy, np.float32)                                         # (M, O)
    qw, s_w = quantize_weight_ref(w)                                        # (O, K), (O,)
    qx, s_x = quantize_tensor_ref(x, input_scale)                           # (M, K)
    g = (dy * s_w[None, :]).astype(np.float32)
    qg, s_g = quantize_tensor_ref(g)
    dx = (lut_gemm_ref(qg, qw, mul).astype(np.float32) * s_g).astype(np.float32)          # (M, K)
    qdy, s_dy = quantize_tensor_ref(dy)
    dw = (lut_gemm_ref(qdy.T.copy(), qx, mul).astype(np.float32) * np.float32(s_dy * s_x)).astype(np.float32)
    return dx, dw
