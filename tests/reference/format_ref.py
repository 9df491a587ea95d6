"""Plain numpy oracle for units of any operand format (DESIGN.md, "Operand formats").

Design: written from the contract only.  A unit of format a_bits x b_bits has a table of
shape (2^a_bits, 2^b_bits) whose entry [a & (2^a_bits - 1), b & (2^b_bits - 1)] is the
product of the codes a, b (two's-complement low bits for a signed operand).  The GEMM of
codes is the int64 sum of those entries over k; zero-point terms are added exactly outside.

    name    dtype    shape            meaning
    table   int      (2^wa, 2^wb)     the unit's products, natural low-bits index
    a       int      (M, K)           codes of the first operand
    b       int      (K, N)           codes of the second operand
    C       int64    (M, N)           C[m, n] = sum_k table[a[m,k] & ma, b[k,n] & mb]
"""
import numpy as np


def format_gemm_ref(a, b, table):
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    t = np.asarray(table, np.int64)
    ma, mb = t.shape[0] - 1, t.shape[1] - 1
    M, K = a.shape
    N = b.shape[1]
    out = np.zeros((M, N), np.int64)
    for k in range(K):                                   # one k at a time: (M, N) gathers
        out += t[(a[:, k] & ma)[:, None], (b[k, :] & mb)[None, :]]
    return out


def codes_of(rng, bits, signed, shape):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return rng.integers(lo, hi + 1, size=shape)
