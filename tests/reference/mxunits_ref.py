"""Numpy oracles of the MX units' contracts (lutcore.units.mxunits.MXUnits, the models' MXMatmul,
lutcore.torch's MX layers), written from the contracts alone: on element codes, E8M0 scales and a
product table (T[code_a, code_b], float32) -- the block quantization itself is lutcore.mx's
(tested on its own in tests/units/test_mx.py), so the callers quantize and pass codes here.

    exact_matmul_ref    y = sum over blocks, in block order, in float32, of
                        fl32(fl32(exact block sum of T[ca, cb]) * 2^(xa + xb)); y starts at +0
    narrow_matmul_ref   the narrow register: acc = round_{mbits+1}(acc + T * 2^(xa + xb)) per
                        product (exact rationals), promoted into the float32 y every ``promote``
    gradient_tables_ref (Ga, GbT): value-order differences of the table, float64 -> float32
    table_backward_ref  dX / dW through the gradient tables, each sum in index order in float32
    index_order_sum     sum_j a[..., j] in float32, j ascending, from +0

Exact block sums: every float32 product is an integer multiple of 2^e0 (e0 the lowest set bit of
all entries); when block * max|T| <= 2^(53 + e0) every partial sum is exact in float64 (one numpy
sum); otherwise the sums are Python integers.  Either way the sum is rounded ONCE to float32
(``round_f32``: nearest even, subnormals, overflow to inf).

Nothing here imports lutcore."""
import math
from fractions import Fraction

import numpy as np

E8M0_NAN = 0xFF
QNAN = 0x7FC00000


# ------------------------------------------------------------------ rounding of exact values
def round_f32(n: int, e: int) -> np.float32:
    """float32 nearest (ties to even) of the exact n * 2^e (n a Python int): subnormals, +-inf
    beyond the top, +0 for 0."""
    if n == 0:
        return np.float32(0.0)
    sign = -1.0 if n < 0 else 1.0
    a = abs(n)
    top = a.bit_length() - 1 + e                      # floor(log2 |value|)
    q = max(top, -126) - 23                           # float32's quantum at that binade
    shift = q - e
    if shift > 0:
        r = a >> shift
        rem = a - (r << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and r & 1):
            r += 1
    else:
        r = a << -shift
    if r.bit_length() + q > 128:                      # >= 2^128: overflow
        return np.float32(sign * np.inf)
    return np.float32(sign * math.ldexp(float(r), q))  # r <= 2^24: exact in float64 and float32


def _int_parts(x64):
    """Each finite float64 in x64 as (int64 mantissa, exponent): x = m * 2^ex exactly (m odd or 0)."""
    mant, ex = np.frexp(x64)
    m = np.ldexp(mant, 53).astype(np.int64)           # exact: 53-bit integers
    ex = ex.astype(np.int64) - 53
    nz = m != 0
    low = np.zeros_like(m)
    low[nz] = np.log2((m[nz] & -m[nz]).astype(np.float64)).astype(np.int64)   # trailing zero bits
    m[nz] >>= low[nz]
    ex[nz] += low[nz]
    return m, ex


def block_sums(P, block):
    """P float32 (..., K) products -> float32 (..., nb): per block of ``block`` consecutive k,
    fl32 of the exact sum of the block's products.  Non-finite products: the IEEE sum (NaN / inf)."""
    P = np.asarray(P, np.float32)
    K = P.shape[-1]
    nb = -(-K // block)
    lead = P.shape[:-1]
    Pp = np.zeros(lead + (nb * block,), np.float64)
    Pp[..., :K] = P
    Pp = Pp.reshape(lead + (nb, block))
    fin = np.isfinite(Pp)
    out = np.empty(lead + (nb,), np.float32)
    bad = ~fin.all(axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        out[bad] = Pp[bad].sum(axis=-1).astype(np.float32)           # NaN / inf per IEEE
    good = ~bad
    G = Pp[good]                                                       # (n, block) finite
    if G.size == 0:
        return out
    m, ex = _int_parts(G)
    nz = m != 0
    if not nz.any():
        out[good] = 0.0
        return out
    e0 = int(ex[nz].min())
    mx = float(np.abs(G).max())
    if block * mx <= 2.0 ** (53 + e0):                                 # every partial sum exact
        out[good] = G.sum(axis=-1).astype(np.float32)
        return out
    # Python integers: n_i = x_i / 2^e0 exactly
    rows = []
    for mi, ei in zip(m.tolist(), ex.tolist()):
        s = 0
        for mm, ee in zip(mi, ei):
            if mm:
                s += mm << (ee - e0)
        rows.append(round_f32(s, e0))
    out[good] = np.array(rows, np.float32)
    return out


def _scale_exps(s):
    """E8M0 codes -> int exponents (NaN code: 0, flagged separately)."""
    s = np.asarray(s)
    return np.where(s == E8M0_NAN, 0, s.astype(np.int64) - 127)


def exact_matmul_ref(ca, sa, cb, sb, T, K, block):
    """ca uint8 (M, Kp), sa uint8 (M, nb), cb uint8 (Kp, N), sb uint8 (nb, N), T float32 table
    -> float32 (M, N): the "exact" accumulation (module docstring).  NaN outputs canonical."""
    T = np.asarray(T, np.float32)
    M, N = ca.shape[0], cb.shape[1]
    nb = -(-K // block)
    P = T[ca[:, None, :K].astype(np.intp), cb.T[None, :, :K].astype(np.intp)]     # (M, N, K)
    S = block_sums(P, block)                                                     # (M, N, nb)
    xa, xb = _scale_exps(sa), _scale_exps(sb)
    nan = (np.asarray(sa) == E8M0_NAN)[:, None, :] | (np.asarray(sb) == E8M0_NAN).T[None, :, :]
    e = xa[:, None, :] + xb.T[None, :, :]                                          # (M, N, nb)
    with np.errstate(over="ignore", invalid="ignore"):
        t = (S.astype(np.float64) * np.ldexp(1.0, e)).astype(np.float32)         # exact, then one rounding
    t[nan] = np.nan
    y = np.zeros((M, N), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for b in range(nb):
            y = (y + t[:, :, b]).astype(np.float32)
    y.view(np.uint32)[np.isnan(y)] = QNAN
    return y


# ------------------------------------------------------------------ the narrow register
def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e


def round_narrow(v: Fraction, mbits: int, rounding: str):
    """v rounded to mbits + 1 significant bits, float32's exponent range (quantum never below
    2^(-126 - mbits)); nearest even (beyond the top: inf) or toward zero (beyond: the top)."""
    if v == 0:
        return Fraction(0)
    sign = -1 if v < 0 else 1
    a = abs(v)
    q = max(_floor_log2(a), -126) - mbits
    unit = Fraction(2) ** q
    scaled = a / unit
    r = scaled.numerator // scaled.denominator
    rem = scaled - r
    if rounding == "nearest" and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r % 2)):
        r += 1
    res = r * unit
    top = (2 - Fraction(1, 2 ** mbits)) * Fraction(2) ** 127
    if res > top:
        return sign * math.inf if rounding == "nearest" else sign * top
    return sign * res


def narrow_matmul_ref(ca, sa, cb, sb, T, K, block, mbits, promote, rounding):
    """The Narrow accumulation (finite operands only): per output, acc over k = 0 .. K-1 of
    T * 2^(xa + xb) in the register, y = fl32(y + acc) every ``promote`` products and at the end."""
    T = np.asarray(T, np.float32)
    M, N = ca.shape[0], cb.shape[1]
    xa, xb = _scale_exps(sa), _scale_exps(sb)
    y = np.zeros((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            acc, yy = Fraction(0), np.float32(0)
            for k in range(K):
                blk = k // block
                p = Fraction(float(T[ca[m, k], cb[k, n]])) * Fraction(2) ** int(xa[m, blk] + xb[blk, n])
                acc = round_narrow(acc + p, mbits, rounding)
                if (promote is not None and (k + 1) % promote == 0) or k == K - 1:
                    yy = np.float32(yy + np.float32(float(acc)))
                    acc = Fraction(0)
            y[m, n] = yy
    return y


# ------------------------------------------------------------------ gradient tables
def value_order_derivative(T, v):
    """float32 (len(v), T.shape[1]): dT/dv along axis 0 by value-order differences (the
    MXUnits.gradients contract); NaN/inf codes and non-finite quotients 0."""
    T = np.asarray(T, np.float64)
    v = np.asarray(v, np.float64)
    fin = np.isfinite(v)
    U = np.unique(v[fin])                      # distinct finite values, -0 and +0 one value
    code_of = {}
    for c in np.flatnonzero(fin):              # one code per distinct value (either zero: same value)
        code_of.setdefault(float(v[c]), int(c))
    G = np.zeros(T.shape, np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for i in np.flatnonzero(fin):
            j = int(np.searchsorted(U, v[i]))
            assert U[j] == v[i]
            p = i if j == 0 else code_of[float(U[j - 1])]
            n = i if j == len(U) - 1 else code_of[float(U[j + 1])]
            q = (T[n] - T[p]) / (v[n] - v[p])
            G[i] = np.where(np.isfinite(q), q, 0.0)
    out = G.astype(np.float32)
    out[~np.isfinite(out)] = 0
    return out


def gradient_tables_ref(T, va, vb):
    """(Ga, GbT) float32 (65536,): Ga[ca * 256 + cb] = dT/dva, GbT[cb * 256 + ca] = dT/dvb."""
    T = np.asarray(T, np.float32)
    na, nbv = T.shape
    Ga = np.zeros((256, 256), np.float32)
    GbT = np.zeros((256, 256), np.float32)
    Ga[:na, :nbv] = value_order_derivative(T, va)
    GbT[:nbv, :na] = value_order_derivative(T.T, vb)
    return Ga.reshape(-1), GbT.reshape(-1)


# ------------------------------------------------------------------ float32 index-order sums
def index_order_sum(terms, axis):
    """float32 sum of ``terms`` along ``axis``, index ascending, starting from +0."""
    t = np.moveaxis(np.asarray(terms, np.float32), axis, 0)
    s = np.zeros(t.shape[1:], np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(t.shape[0]):
            s = (s + t[j]).astype(np.float32)
    return s


def scales_f32(s):
    """E8M0 codes -> float32 2^(s - 127) (0xFF: NaN)."""
    s = np.asarray(s)
    with np.errstate(over="ignore"):
        out = np.ldexp(np.float32(1), s.astype(np.int32) - 127).astype(np.float32)
    out[s == E8M0_NAN] = np.nan
    return out


def table_backward_ref(dy, ca, sa, cw, sw, Ga, GbT, K, block):
    """The "table" backward of y = x @ w.T through MX units: dy float32 (M, N); ca uint8 (M, Kp) /
    sa (M, nb) the codes and scales of x (blocks along K); cw uint8 (N, Kp) / sw (N, nb) those of
    w (blocks along K, per output row); Ga, GbT the (65536,) tables.

        dX[m, k] = sum_n dY[m, n] * sw[n, b(k)] * Ga[ca[m, k], cw[n, k]]
        dW[n, k] = sum_m dY[m, n] * sa[m, b(k)] * Gb[ca[m, k], cw[n, k]]

    each product formed left to right in float32, each sum in index order from +0."""
    dy = np.asarray(dy, np.float32)
    M, N = dy.shape
    ca = np.asarray(ca)[:, :K].astype(np.intp)
    cw = np.asarray(cw)[:, :K].astype(np.intp)
    blk = np.arange(K) // block
    sa_k = scales_f32(sa)[:, blk]                        # (M, K)
    sw_k = scales_f32(sw)[:, blk]                        # (N, K)
    Ga2 = np.asarray(Ga, np.float32).reshape(256, 256)   # [ca, cb]
    Gb2 = np.asarray(GbT, np.float32).reshape(256, 256)  # [cb, ca]
    dX = np.zeros((M, K), np.float32)
    dW = np.zeros((N, K), np.float32)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        for n in range(N):                               # dX: n ascending
            p = (dy[:, n:n + 1] * sw_k[n][None, :]).astype(np.float32) * Ga2[ca, cw[n][None, :]]
            dX = (dX + p.astype(np.float32)).astype(np.float32)
        for m in range(M):                               # dW: m ascending
            p = (dy[m][:, None] * sa_k[m][None, :]).astype(np.float32) * Gb2[cw, ca[m][None, :]]
            dW = (dW + p.astype(np.float32)).astype(np.float32)
    return dW, dX
