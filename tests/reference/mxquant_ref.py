"""numpy oracle of the MX quantizer with round to nearest even (DESIGN.md, "Floating-point element
formats and MX blocks"), built on ml_dtypes (the element formats' library) and the OCP MX spec's
scale rule -- written from the contract, never calling lutcore.

Per block of ``block`` along ``axis`` (zero-padded): shared = floor(log2 max|x|) - emax from the
float64 frexp of the maximum, clamped to [-127, 127] (an all-zero block: -127); scale code shared +
127, or 0xFF where the block holds NaN or +-inf (its codes 0).  Elements: x * 2^-shared in float64
(exact), clamped to +-max normal (saturation), cast by ml_dtypes (int8, MXINT8: rint(v * 64)
clamped to +-127, two's complement).

    x       float32  (..., L, ...)   IN   L along ``axis``
    codes   uint8    (..., Lp, ...)  OUT  Lp = ceil(L / block) * block, 0 past L
    scales  uint8    (..., nb, ...)  OUT  E8M0 codes
"""
import ml_dtypes
import numpy as np

# name: (emax, max normal, ml_dtypes type; None: MXINT8)
FORMATS = {
    "e4m3": (8, 448.0, ml_dtypes.float8_e4m3fn),
    "e5m2": (15, 57344.0, ml_dtypes.float8_e5m2),
    "e3m2": (4, 28.0, ml_dtypes.float6_e3m2fn),
    "e2m3": (2, 7.5, ml_dtypes.float6_e2m3fn),
    "e2m1": (2, 6.0, ml_dtypes.float4_e2m1fn),
    "int8": (0, 127 / 64, None),
}


def mx_quantize_nearest_ref(x, fmt, block, axis):
    """(codes, scales) of float32 x (see the module's docstring)."""
    emax, max_normal, ml = FORMATS[fmt]
    xm = np.moveaxis(np.asarray(x, np.float32).astype(np.float64), axis, -1)         # (..., L)
    L = xm.shape[-1]
    nb = -(-L // block)
    xb = np.concatenate([xm, np.zeros(xm.shape[:-1] + (nb * block - L,))], -1)       # (..., Lp)
    xb = xb.reshape(xm.shape[:-1] + (nb, block))                                      # (..., nb, B)
    amax = np.abs(xb).max(-1)                                                         # (..., nb) NaN / inf kept
    bad = ~np.isfinite(amax)
    _, ex = np.frexp(np.where(bad | (amax == 0), 1.0, amax))                         # amax = m 2^ex, m in [.5, 1)
    floor_log2 = np.where(amax == 0, -127, ex - 1)
    shared = np.clip(floor_log2 - emax, -127, 127)                                    # (..., nb)
    scales = np.where(bad, 0xFF, shared + 127).astype(np.uint8)
    v = np.where(bad[..., None], 0.0, xb) * np.exp2(-shared)[..., None]               # (..., nb, B) exact
    v = np.clip(v, -max_normal, max_normal)
    if ml is None:
        q = np.clip(np.rint(v * 64), -127, 127).astype(np.int8).view(np.uint8)
    else:
        q = v.astype(np.float32).astype(ml).view(np.uint8)                            # exact to float32 above 2^-126
    codes = q.reshape(xm.shape[:-1] + (nb * block,))
    return np.ascontiguousarray(np.moveaxis(codes, -1, axis)), np.ascontiguousarray(np.moveaxis(scales, -1, axis))
