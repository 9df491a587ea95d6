"""Oracle for the mantissa-product GEMM (docs/DESIGN.md, "Mantissa-product units (bf16 / fp16)";
lutcore.ops.mantgemm's docstring: the contract).

Design: written from the contract only, never calling lutcore, by values rather than bits: bf16
rounding as a float64 quotient by the value's spacing rounded with np.rint (ties to even), fp16
as numpy's astype(np.float16) (the contract's definition), subnormals flushed; each operand split
by np.frexp into sign, exponent and mantissa index; every product formed exactly in float64
(T[ma, mb] * 2^(ea + eb) by np.ldexp; specials as IEEE products of the values) and rounded to
float32 by numpy's conversion (IEEE nearest even, subnormals, overflow to inf); y accumulated in
numpy float32, k after k.  Vectorised over (M, K, N): small shapes.

    name    dtype    shape        IN/OUT
    a       float32  (M, K)       IN
    b       float32  (K, N)       IN
    table   float32  (2^m, 2^m)   IN   T[ma, mb], m = 7 (bf16) or 10 (fp16)
    fmt     "bf16" | "fp16"       IN
    y       float32  (M, N)       OUT  NaN outputs 0x7fc00000, zeros +0
"""
import numpy as np

MBITS = {"bf16": 7, "fp16": 10}
EMIN = {"bf16": -126, "fp16": -14}                 # the smallest normal exponent
QNAN = np.array([0x7FC00000], np.uint32).view(np.float32)[0]
BF16_MAX = (2.0 - 2.0 ** -7) * 2.0 ** 127


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 x -> float64 values of x rounded to bf16 (8 significant bits, exponent >= -126 with
    bf16's subnormal spacing 2^-133 below), ties to even, past the largest finite to inf."""
    v = np.asarray(x, np.float32).astype(np.float64)                       # (...)
    fin = np.isfinite(v) & (v != 0)
    _, e = np.frexp(np.where(fin, v, 1.0))                                # |v| in [2^(e-1), 2^e)
    step = np.ldexp(1.0, np.maximum(e - 1, EMIN["bf16"]) - 7)              # spacing of bf16 at |v|
    r = np.rint(v / step) * step                                          # exact: |v| / step < 2^9
    with np.errstate(over="ignore"):
        r = np.where(np.abs(r) > BF16_MAX, np.copysign(np.inf, v), r)
    return np.where(fin, r, v)


def round_fmt(x: np.ndarray, fmt: str) -> np.ndarray:
    """float32 x -> float64 values rounded to fmt, then subnormals flushed to zero of their sign."""
    if fmt == "bf16":
        v = round_bf16(x)
    else:
        with np.errstate(over="ignore"):
            v = np.asarray(x, np.float32).astype(np.float16).astype(np.float64)
    tiny = np.isfinite(v) & (np.abs(v) < 2.0 ** EMIN[fmt])
    return np.where(tiny, np.copysign(0.0, v), v)


def split(v: np.ndarray, fmt: str):
    """float64 values of fmt (normal, zero, inf, NaN) -> (sign bool, exponent int64, mantissa index
    int64, normal bool): v = (-1)^s 2^e (1 + i / 2^m) where normal."""
    m = MBITS[fmt]
    normal = np.isfinite(v) & (v != 0)
    f, e = np.frexp(np.where(normal, np.abs(v), 1.0))                     # f in [0.5, 1)
    idx = np.ldexp(2.0 * f - 1.0, m)                                      # exact integers
    return np.signbit(v), (e - 1).astype(np.int64), idx.astype(np.int64), normal


def products(a: np.ndarray, b: np.ndarray, table: np.ndarray, fmt: str) -> np.ndarray:
    """float32 (M, K, N): every product p[m, k, n] of the contract."""
    va, vb = round_fmt(a, fmt), round_fmt(b, fmt)                          # (M, K), (K, N)
    sa, ea, ia, na = split(va, fmt)
    sb, eb, ib, nb = split(vb, fmt)
    T = np.asarray(table, np.float32).astype(np.float64)
    t = T[ia[:, :, None], ib[None, :, :]]                                 # (M, K, N)
    mag = np.ldexp(t, ea[:, :, None] + eb[None, :, :])                    # exact in float64
    neg = sa[:, :, None] ^ sb[None, :, :]
    normal = na[:, :, None] & nb[None, :, :]
    with np.errstate(invalid="ignore"):
        ieee = va[:, :, None] * vb[None, :, :]                            # specials: inf x 0 = NaN
    special = ~(np.isfinite(va)[:, :, None] & np.isfinite(vb)[None, :, :])
    p = np.where(normal, np.where(neg, -mag, mag), 0.0)
    p = np.where(special, ieee, p)
    with np.errstate(over="ignore"):
        return p.astype(np.float32)                                       # one rounding each


def mant_gemm_ref(a: np.ndarray, b: np.ndarray, table: np.ndarray, fmt: str) -> np.ndarray:
    """y float32 (M, N): y = 0; for k: y = fl32(y + p[:, k, :])."""
    p = products(a, b, table, fmt)                                        # (M, K, N)
    y = np.zeros((p.shape[0], p.shape[2]), np.float32)                    # (M, N)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(p.shape[1]):
            y = y + p[:, k, :]                                            # float32 + float32
    return np.where(np.isnan(y), QNAN, y).astype(np.float32)


def exact_table(fmt: str) -> np.ndarray:
    """float32 (2^m, 2^m): (1 + i/2^m)(1 + j/2^m)."""
    m = MBITS[fmt]
    s = 1.0 + np.arange(1 << m) / 2.0 ** m
    return np.multiply.outer(s, s).astype(np.float32)
