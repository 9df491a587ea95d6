"""numpy oracles of lutcore's norms (DESIGN.md, csrc/norm/norm.h's contract),
written from the contract, never calling the kernels.

float32, step by step: every row sum is one chain s = s + t over the columns in order
(a loop over columns, all rows at once), every other step one float32 operation in the
contract's order, so the results are the contract's bits.  The float64 versions are
the plain formulas (for finite differences and a loose check of the float32 ones).

    x, dy, xhat    (R, C)      w, b, dw, db    (C,)      rstd    (R,)
"""
import numpy as np

F = np.float32


def _chain(terms):
    """(R,) the in-order float32 sum over axis 1 of terms (R, C)."""
    s = np.zeros(terms.shape[0], F)                      # (R,)
    for j in range(terms.shape[1]):
        s = s + terms[:, j]
    return s


def _col_chunks(terms, rows):
    """(C,) sum over rows of terms (R, C): rows in order within chunks of `rows`, chunks in order."""
    R, C = terms.shape
    tot = None
    for r0 in range(0, R, rows):
        part = np.zeros(C, F)                            # (C,)
        for r in range(r0, min(R, r0 + rows)):
            part = part + terms[r]
        tot = part if tot is None else tot + part
    return np.zeros(C, F) if tot is None else tot


def rmsnorm_fwd32(x, w, eps):
    """y (R, C), rstd (R,)"""
    C = x.shape[1]
    ms = _chain(x * x) / F(C)                            # (R,)
    r = F(1) / np.sqrt(ms + F(eps))                      # (R,)
    return (x * r[:, None]) * w, r


def rmsnorm_bwd32(dy, x, w, rstd, dw, rows=64):
    """dx (R, C); dw + the weight's gradient (C,)"""
    C = x.shape[1]
    g = dy * w                                           # (R, C)
    dot = _chain(g * x)                                  # (R,)
    q = rstd[:, None]
    q3 = (q * q) * q
    dx = q * g - ((x * q3) * dot[:, None]) / F(C)
    return dx, dw + _col_chunks((dy * x) * q, rows)


def layernorm_fwd32(x, w, b, eps):
    """y, xhat (R, C), rstd (R,)"""
    C = x.shape[1]
    mu = _chain(x) / F(C)                                # (R,)
    xc = x - mu[:, None]                                 # (R, C)
    var = _chain(xc * xc) / F(C)                         # (R,)
    r = F(1) / np.sqrt(var + F(eps))                     # (R,)
    xhat = xc * r[:, None]
    return xhat * w + b, xhat, r


def layernorm_bwd32(dy, xhat, w, rstd, dw, db, rows=64):
    """dx (R, C); dw, db + their gradients (C,)"""
    C = xhat.shape[1]
    g = dy * w                                           # (R, C)
    m1 = _chain(g) / F(C)                                # (R,)
    m2 = _chain(g * xhat) / F(C)                         # (R,)
    dx = rstd[:, None] * ((g - m1[:, None]) - xhat * m2[:, None])
    # dw's and db's chunks are summed the same way, dw then db per element
    return dx, dw + _col_chunks(dy * xhat, rows), db + _col_chunks(dy, rows)


def rmsnorm64(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * w


def layernorm64(x, w, b, eps):
    xc = x - x.mean(axis=1, keepdims=True)
    return xc / np.sqrt(np.mean(xc * xc, axis=1, keepdims=True) + eps) * w + b
