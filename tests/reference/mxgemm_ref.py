"""Oracle for the MX GEMM (docs/DESIGN.md, "MX GEMM"; lutcore.ops.mxgemm's docstring: the contract).

Design: written from the contract only, never calling lutcore, in exact integer arithmetic: every
finite float32 is an integer number of 2^-149, every scaled product T * 2^(xa + xb) an integer
number of 2^-403 (xa + xb >= -254).  Exact mode sums a block's products as Python integers (object
arrays) and rounds with ``round_bits`` (nearest even, float32's precision and exponent range);
the scaling rounds again the same way; y accumulates in numpy float32 (IEEE additions).  Narrow
mode walks k in order per output with an exact integer register rounded by ``round_bits`` to
mbits + 1 bits.  Specials per IEEE: a block's sum with a NaN, or +inf and -inf, is NaN, else an
infinite product's inf; a NaN scale is NaN.  Every NaN output is 0x7fc00000.  Slow: small shapes.

    name       dtype    shape        IN/OUT
    ac         uint8    (M, Kp)      IN   a's element codes
    sa         uint8    (M, nblk)    IN   a's E8M0 scales (0xFF NaN)
    bc         uint8    (Kp, N)      IN   b's element codes
    sb         uint8    (nblk, N)    IN   b's E8M0 scales
    table      float32  (NA, NB)     IN   T[ca, cb]
    K, block   int                   IN   k < K only (the padding past K is never a product)
    mbits, promote (None: never), rounding ("nearest" | "truncate")   narrow mode
    y          float32  (M, N)       OUT
"""
import math

import numpy as np

F32_PREC, F32_EMIN = 24, -126
QNAN = np.array([0x7FC00000], np.uint32).view(np.float32)[0]


def round_bits(n: int, e: int, prec: int, mode: str = "nearest"):
    """n * 2^e rounded to prec significant bits with float32's exponent range (quantum 2^(max(E,
    -126) - prec + 1), E = floor(log2 |x|)): (m, q) with the result m * 2^q (m a signed int), or
    +-inf (a float) on overflow to nearest; toward zero saturates at the largest value."""
    if n == 0:
        return 0, 0
    s, n = (-1 if n < 0 else 1), abs(n)
    E = n.bit_length() - 1 + e
    q = max(E, F32_EMIN) - (prec - 1)
    if e >= q:
        m = n << (e - q)
    else:
        sh = q - e
        m, rem = n >> sh, n & ((1 << sh) - 1)
        if mode == "nearest" and (rem > 1 << (sh - 1) or (rem == 1 << (sh - 1) and m & 1)):
            m += 1
    top = ((1 << prec) - 1) << (127 - (prec - 1))           # the largest finite value, as an integer
    if m * 2 ** q > top if q >= 0 else m > top * 2 ** -q:
        if mode == "nearest":
            return s * math.inf, 0
        return s * ((1 << prec) - 1), 127 - (prec - 1)
    return s * m, q


def _f32(mq) -> np.float32:
    m, q = mq
    return np.float32(m) if isinstance(m, float) else np.float32(math.ldexp(m, q))   # exact


def _ints(table):
    """(finite values as ints of 2^-149 (object), specials float64 (NaN / +-inf, 0 where finite))"""
    t = np.asarray(table, np.float32)
    fin = np.isfinite(t)
    n = np.zeros(t.shape, object)
    for idx in zip(*np.nonzero(fin)):
        num, den = float(t[idx]).as_integer_ratio()
        n[idx] = num * (2 ** 149 // den)
    return n, np.where(fin, 0.0, t.astype(np.float64))


def _scale(s: int):
    return None if s == 0xFF else int(s) - 127


def _special_sum(vals):
    """IEEE sum of the non-finite values among vals (at least one)."""
    with np.errstate(invalid="ignore"):
        return float(np.sum(np.array([v for v in vals if not math.isfinite(v)], np.float64)))


def _canon(y):
    return np.where(np.isnan(y), QNAN, y).astype(np.float32)


def mx_gemm_exact_ref(ac, sa, bc, sb, table, K, block):
    M, N = ac.shape[0], bc.shape[1]
    tn, ts = _ints(table)
    y = np.zeros((M, N), np.float32)
    for b in range(-(-K // block)):
        ks = range(b * block, min((b + 1) * block, K))
        S = np.zeros((M, N), object)
        spec = [[[] for _ in range(N)] for _ in range(M)]
        for k in ks:
            ia, ib = ac[:, k][:, None], bc[k][None, :]
            S = S + tn[ia, ib]                                           # (M, N) exact sums
            sp = ts[ia, ib]                                              # (M, N) specials
            for m, n in zip(*np.nonzero(sp)):
                spec[m][n].append(sp[m, n])
        for m in range(M):
            for n in range(N):
                if spec[m][n]:
                    f = np.float32(_special_sum(spec[m][n]))
                else:
                    f = _f32(round_bits(S[m, n], -149, F32_PREC))       # fl32 of the exact sum
                xa, xb = _scale(sa[m, b]), _scale(sb[b, n])
                if xa is None or xb is None:
                    t = np.float32(np.nan)
                elif not math.isfinite(f) or f == 0:
                    t = np.float32(f)                                    # inf * 2^e, 0 * 2^e
                else:
                    num, den = float(f).as_integer_ratio()
                    t = _f32(round_bits(num * (2 ** 149 // den), xa + xb - 149, F32_PREC))
                with np.errstate(invalid="ignore", over="ignore"):
                    y[m, n] = np.float32(y[m, n] + t)                        # IEEE float32 addition
    return _canon(y)


def mx_gemm_narrow_ref(ac, sa, bc, sb, table, K, block, mbits, promote=None, rounding="nearest"):
    M, N = ac.shape[0], bc.shape[1]
    tn, ts = _ints(table)
    prec = mbits + 1
    y = np.zeros((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            acc, yy = 0, np.float32(0)                                  # acc: int of 2^-403, or a float special
            for k in range(K):
                b = k // block
                xa, xb = _scale(sa[m, b]), _scale(sb[b, n])
                a_, b_ = ac[m, k], bc[k, n]
                if xa is None or xb is None:
                    p = math.nan
                elif ts[a_, b_] != 0:
                    p = ts[a_, b_]                                       # inf * 2^e, NaN
                else:
                    p = tn[a_, b_] << (xa + xb + 254)                    # exact, ints of 2^-403
                if isinstance(acc, float) or isinstance(p, float):
                    av = acc if isinstance(acc, float) else math.ldexp(acc, -403) if acc else 0.0
                    pv = p if isinstance(p, float) else 0.0              # a finite p beside a special: no matter
                    with np.errstate(invalid="ignore"):
                        acc = float(np.float64(av) + np.float64(pv))
                else:
                    mm, q = round_bits(acc + p, -403, prec, rounding)
                    acc = mm if isinstance(mm, float) else mm << (q + 403)
                if (promote and (k + 1) % promote == 0) or k == K - 1:
                    av = acc if isinstance(acc, float) else (math.ldexp(acc, -403) if acc else 0.0)
                    with np.errstate(invalid="ignore", over="ignore"):
                        yy = np.float32(yy + np.float32(av))             # acc is a float32 value
                    acc = 0
            y[m, n] = yy
    return _canon(y)
