"""Plain numpy oracle for the LUT GEMM (DESIGN.md, "Numeric contracts").

Design: written from the contract only, never calling lutcore.  The mul8 table
is gathered with numpy fancy indexing over (M-chunk, K-chunk, N) index cubes so
that memory stays bounded; the sum is accumulated in int64 and cast to int32 at
the end (the cast wraps modulo 2**32, as a 32-bit accumulator would; the tests
choose K small enough that no overflow happens).

    name   dtype   shape      IN/OUT
    a      int8    (M, K)     IN
    b      int8    (K, N)     IN
    mul    int16   (65536,)   IN   entry (a & 0xff) * 256 + (b & 0xff)
    C      int32   (M, N)     OUT  C[m, n] = sum_k mul[idx(a[m, k], b[k, n])]
"""
import numpy as np

# Elements of one gathered (mc, kc, N) cube; ~2**22 int64 values = 32 MiB.
_CUBE_ELEMS = 1 << 22


def lut_gemm_ref(a, b, mul):
    a = np.asarray(a)                                         # (M, K) int8
    b = np.asarray(b)                                         # (K, N) int8
    mul = np.asarray(mul)                                     # (65536,) int16
    assert a.dtype == np.int8 and b.dtype == np.int8, (a.dtype, b.dtype)
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], (a.shape, b.shape)
    assert mul.shape == (65536,), mul.shape
    M, K = a.shape
    N = b.shape[1]
    mul64 = mul.astype(np.int64)                              # (65536,)
    ia = (a.astype(np.int64) & 0xFF) * 256                    # (M, K) row part of the index
    ib = b.astype(np.int64) & 0xFF                            # (K, N) column part of the index
    acc = np.zeros((M, N), dtype=np.int64)                    # (M, N)
    if M == 0 or N == 0 or K == 0:
        return acc.astype(np.int32)
    kc = max(1, min(K, _CUBE_ELEMS // max(1, N)))
    mc = max(1, min(M, _CUBE_ELEMS // max(1, kc * N)))
    for m0 in range(0, M, mc):
        m1 = min(M, m0 + mc)
        for k0 in range(0, K, kc):
            k1 = min(K, k0 + kc)
            idx = ia[m0:m1, k0:k1, None] + ib[None, k0:k1, :]  # (mc, kc, N)
            acc[m0:m1] += mul64[idx].sum(axis=1)               # (mc, N)
    return acc.astype(np.int32)                               # (M, N)
