"""Plain numpy oracle for IEEE binary16 encode/decode (DESIGN.md, "fp16").

Design: "nearest" is numpy's own cast (the contract says identical to
x.astype(np.float16)); "truncate" (round toward zero) and the decoder are
written by hand from the bit fields, with integer arithmetic only for the
encoder and exact float arithmetic for the decoder.

    fp16_encode_ref(x, mode)  x float32 (...)  IN  -> uint16 (...) OUT
    fp16_decode_ref(bits)     bits uint16 (...) IN  -> float32 (...) OUT
    fp16_round_ref(x, mode)   decode(encode(x))     -> float32 (...) OUT

Truncate: sign kept; finite |x| >= 65504 -> 65504 (0x7bff); inf -> inf;
NaN -> a quiet NaN; values below the subnormal grid -> (signed) zero.
"""
import numpy as np


def _encode_truncate(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)  # (...)
    sign = (u >> 16) & 0x8000                                 # (...) fp16 sign bit
    exp = (u >> 23) & 0xFF                                    # (...) float32 biased exponent
    mant = u & 0x7FFFFF                                       # (...) float32 mantissa
    e16 = exp - 112                                           # (...) fp16 biased exponent (127-15)
    out = np.zeros(u.shape, dtype=np.int64)                   # (...) magnitude bits
    is_nan = (exp == 0xFF) & (mant != 0)
    is_inf = (exp == 0xFF) & (mant == 0)
    finite = exp != 0xFF
    over = finite & (e16 >= 31)                               # |x| >= 65536 -> max finite
    normal = finite & (e16 >= 1) & (e16 < 31)
    sub = finite & (e16 < 1) & (exp != 0)                     # float32 subnormals -> 0
    out = np.where(is_nan, 0x7C00 | 0x0200 | (mant >> 13), out)
    out = np.where(is_inf, 0x7C00, out)
    out = np.where(over, 0x7BFF, out)
    out = np.where(normal, (e16 << 10) | (mant >> 13), out)   # drop 13 mantissa bits
    # subnormal: |x| = (2^23 | mant) * 2^(exp-150); m = floor(|x| * 2^24)
    shift = np.clip(126 - exp, 0, 63)                         # >= 14 on this branch
    out = np.where(sub, ((0x800000 | mant) >> shift) & 0x3FF, out)
    return (sign | out).astype(np.uint16)


def fp16_encode_ref(x, mode="nearest"):
    x = np.asarray(x, dtype=np.float32)
    if mode == "nearest":
        with np.errstate(all="ignore"):
            return x.astype(np.float16).view(np.uint16)
    if mode == "truncate":
        return _encode_truncate(x)
    raise ValueError(f"unknown mode {mode!r}")


def fp16_decode_ref(bits):
    h = np.asarray(bits, dtype=np.uint16).astype(np.int64)   # (...)
    sign = (h >> 15) & 1
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    sub = np.ldexp(m.astype(np.float64) / 1024.0, -14)        # mant/1024 * 2^-14
    nrm = np.ldexp(1.0 + m.astype(np.float64) / 1024.0, (e - 15).astype(np.int32))
    mag = np.where(e == 0, sub, nrm)
    mag = np.where((e == 31) & (m == 0), np.inf, mag)
    mag = np.where((e == 31) & (m != 0), np.nan, mag)
    val = np.where(sign == 1, -mag, mag)                      # -0.0 for sign 1, mag 0
    return val.astype(np.float32)


def fp16_round_ref(x, mode="nearest"):
    return fp16_decode_ref(fp16_encode_ref(x, mode))
