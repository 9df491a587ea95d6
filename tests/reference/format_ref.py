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

from reference.accum_ref import accumulate_ref


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


def quantize_ref(v, bits, signed):
    """(q, s, zp) of one block/tensor v (float32) in a bits-bit operand format (DESIGN.md,
    "Zero-point quantization"): signed symmetric, unsigned asymmetric with zero included."""
    v = np.asarray(v, np.float32)
    if signed:
        qmax = 2 ** (bits - 1) - 1
        s = np.float32(np.float32(np.abs(v).max() if v.size else 0) / np.float32(qmax))
        if s == 0:
            return np.zeros(v.shape, np.int64), s, 0
        return np.clip(np.rint((v / s).astype(np.float32)), -qmax, qmax).astype(np.int64), s, 0
    top = 2 ** bits - 1
    lo = np.float32(min(np.float32(v.min()) if v.size else np.float32(0), np.float32(0)))
    hi = np.float32(max(np.float32(v.max()) if v.size else np.float32(0), np.float32(0)))
    s = np.float32(np.float32(hi - lo) / np.float32(top))
    if s == 0:
        return np.zeros(v.shape, np.int64), s, 0
    zp = int(np.clip(np.rint(np.float32(-lo / s)), 0, top))
    return np.clip(np.rint((v / s).astype(np.float32)).astype(np.int64) + zp, 0, top), s, zp


def qmatmul_formats_ref(a, b, table, fmt, block, acc=None):
    """The block-scaled product with zero points: blocks of ``block`` along K (the last one
    shorter), a per (row, block) in the first operand's format, b per (block, column) in the
    second's; I_b exact, Y = sum_b (sa * sb) * float32(I_b) in float32, b increasing.
    fmt = (a_bits, a_signed, b_bits, b_signed).  ``acc``: a declared accumulator as
    accum_ref.accumulate_ref's keywords -- each block's code-product sum is then that
    register's value (the zero-point terms stay exact)."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    M, K = a.shape
    N = b.shape[1]
    ab, asg, bb, bsg = fmt
    t = np.asarray(table, np.int64)
    y = np.zeros((M, N), np.float32)
    for k0 in range(0, K, block):
        k1 = min(K, k0 + block)
        qa, sa, za = zip(*[quantize_ref(a[m, k0:k1], ab, asg) for m in range(M)])
        qb, sb, zb = zip(*[quantize_ref(b[k0:k1, n], bb, bsg) for n in range(N)])
        ia, ib = np.stack(qa), np.stack(qb)              # (M, n), (N, n) codes
        za, zb = np.asarray(za, np.int64), np.asarray(zb, np.int64)   # (M,), (N,)
        p = t[(ia & (t.shape[0] - 1))[:, None, :], (ib & (t.shape[1] - 1))[None, :, :]]   # (M, N, n) k order
        # one lane per output: the register steps through each lane's products in k order
        s = p.sum(axis=2) if acc is None else accumulate_ref(p.reshape(M * N, -1), **acc)[0].reshape(M, N)
        I = (s - zb[None, :] * ia.sum(1)[:, None] - za[:, None] * ib.sum(1)[None, :]
             + (k1 - k0) * za[:, None] * zb[None, :])   # (M, N) the zero-point terms exact
        scale = (np.asarray(sa, np.float32)[:, None] * np.asarray(sb, np.float32)[None, :]).astype(np.float32)
        y = (y + (scale * I.astype(np.float32)).astype(np.float32)).astype(np.float32)
    return y
