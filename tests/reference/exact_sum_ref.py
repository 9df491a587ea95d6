"""Reference for lutcore.train.exactsum, written from its contract with Python integers:
each float32 term is converted to the exact integer count of 2**-149 it is, the integers
summed, and the sum rounded to float32 by hand (24 significant bits, ties to even).
Slow (one Python int per element), for small arrays only."""
import math

import numpy as np


def _units(v: np.float32) -> int:
    """A finite float32 as an exact integer multiple of 2**-149 (Python int)."""
    m, e = math.frexp(float(v))              # v = m * 2**e, 0.5 <= |m| < 1, exact for float32
    return int(m * 2 ** 53) * 2 ** (e - 53 + 149) if e - 53 + 149 >= 0 else int(m * 2 ** 53) >> (53 - e - 149)


def _round(S: int) -> np.float32:
    """The integer S (units of 2**-149) rounded to float32, nearest, ties to even."""
    if S == 0:
        return np.float32(0.0)
    sign, A = (-1 if S < 0 else 1), abs(S)
    if A.bit_length() <= 24:
        mant, shift = A, 0
    else:
        shift = A.bit_length() - 24
        mant, rem = A >> shift, A & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and mant & 1):
            mant += 1
    if mant * 2.0 ** (shift - 149) >= 2.0 ** 128:
        return np.float32(sign * np.inf)
    return np.float32(sign * math.ldexp(mant, shift - 149))


def exact_sum_ref(arrays) -> np.ndarray:
    """Element-wise exact sum (contract of lutcore.train.exactsum), flat loop over elements."""
    arrays = [np.asarray(a, np.float32).reshape(-1) for a in arrays]
    n = arrays[0].size
    out = np.zeros(n, np.float32)
    for i in range(n):
        vals = [a[i] for a in arrays]
        if any(np.isnan(v) for v in vals) or (np.inf in vals and -np.inf in vals):
            out[i] = np.nan
        elif np.inf in vals:
            out[i] = np.inf
        elif -np.inf in vals:
            out[i] = -np.inf
        else:
            out[i] = _round(sum(_units(v) for v in vals))
    return out
