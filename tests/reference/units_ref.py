"""Plain numpy oracle for the requantizer, the ReLU unit and the default tables
(DESIGN.md, "mul8 table", "Requant").

    requant_ref(acc, shift, lut)  acc int32 (...) IN, lut int8 (65536,) IN -> int8 (...) OUT
        t = (acc + (1 << (shift-1))) >> shift  in int64, arithmetic shift (shift 0: t = acc)
        t = clip(t, -32768, 32767); out = lut[t & 0xffff]
    relu8_ref(x, lut)             x int8 (...) IN, lut int8 (256,) IN -> lut[x & 0xff]
    default_requant_lut()         int8 (65536,): clip(int16(i), -127, 127)
    default_relu_lut()            int8 (256,):   max(int8(i), 0)
    exact_mul_lut()               int16 (65536,): entry (a&0xff)*256 + (b&0xff) = a*b
"""
import numpy as np


def requant_ref(acc, shift, requant_lut):
    acc = np.asarray(acc).astype(np.int64)                    # (...) widened
    lut = np.asarray(requant_lut)                             # (65536,) int8
    assert lut.shape == (65536,)
    shift = int(shift)
    if shift == 0:
        t = acc
    else:
        t = (acc + (np.int64(1) << np.int64(shift - 1))) >> np.int64(shift)  # arithmetic
    t = np.clip(t, -32768, 32767)                             # (...) saturate to int16
    return lut[t & 0xFFFF].astype(np.int8)                    # (...)


def relu8_ref(x, relu_lut):
    x = np.asarray(x)                                         # (...) int8
    return np.asarray(relu_lut)[x.astype(np.int64) & 0xFF].astype(np.int8)


def default_requant_lut():
    i16 = np.arange(65536, dtype=np.int64).astype(np.uint16).view(np.int16)
    return np.clip(i16.astype(np.int64), -127, 127).astype(np.int8)


def default_relu_lut():
    i8 = np.arange(256, dtype=np.int64).astype(np.uint8).view(np.int8)
    return np.maximum(i8.astype(np.int64), 0).astype(np.int8)


def exact_mul_lut():
    idx = np.arange(65536, dtype=np.int64)
    a = (idx >> 8).astype(np.uint8).view(np.int8).astype(np.int64)
    b = (idx & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)
    return (a * b).astype(np.int16)
