"""Plain numpy oracle for block-scaled int8 (Q8 blocks) and the block-scaled
matmul (DESIGN.md, "Numeric contracts").

Design: everything in float32 with separate numpy elementwise operations (no
fused multiply-add); rounding by np.rint (half to even).  An all-zero block has
scale 0 and q 0 and is never divided by (STYLE habit 11).

quantize_ref(x, block) -- along the last axis:
    name   dtype    shape              IN/OUT
    x      float32  (..., K)           IN
    q      int8     (..., Kp)          OUT  Kp = ceil(K / block) * block, zero padded
    scale  float32  (..., Kp // block) OUT  max|x| / 127 per block (0 for all-zero)

qmatmul_ref(qa, sa, qb, sb, mul, block):
    qa     int8     (M, Kp)            IN   blocks along axis 1
    sa     float32  (M, nb)            IN   nb = Kp // block
    qb     int8     (Kp, N)            IN   blocks along axis 0
    sb     float32  (nb, N)            IN
    mul    int16    (65536,)           IN
    Y      float32  (M, N)             OUT  acc = 0; for b: acc = acc + (sa*sb) * float(I_b)
"""
import numpy as np

from .gemm_ref import lut_gemm_ref

_127 = np.float32(127.0)


def quantize_ref(x, block=32):
    x = np.asarray(x, dtype=np.float32)                       # (..., K)
    assert block >= 1
    K = x.shape[-1]
    nb = -(-K // block)
    Kp = nb * block
    pad = [(0, 0)] * (x.ndim - 1) + [(0, Kp - K)]
    xp = np.pad(x, pad)                                       # (..., Kp) zero padded
    xb = xp.reshape(x.shape[:-1] + (nb, block))               # (..., nb, block)
    amax = np.max(np.abs(xb), axis=-1, initial=np.float32(0))  # (..., nb) float32
    amax = amax.astype(np.float32)
    scale = (amax / _127).astype(np.float32)                  # (..., nb) float32 division
    nz = scale != 0                                           # (..., nb)
    safe = np.where(nz, scale, np.float32(1)).astype(np.float32)  # (..., nb) never 0
    r = (xb / safe[..., None]).astype(np.float32)             # (..., nb, block) float32 x / scale
    q = np.clip(np.rint(r), -127, 127)                        # (..., nb, block) half to even
    q = np.where(nz[..., None], q, 0).astype(np.int8)         # all-zero block -> 0
    scale = np.where(nz, scale, np.float32(0)).astype(np.float32)
    return q.reshape(x.shape[:-1] + (Kp,)), scale             # (..., Kp), (..., nb)


def qmatmul_ref(qa, sa, qb, sb, mul, block):
    qa = np.asarray(qa)                                       # (M, Kp) int8
    qb = np.asarray(qb)                                       # (Kp, N) int8
    sa = np.asarray(sa, dtype=np.float32)                     # (M, nb)
    sb = np.asarray(sb, dtype=np.float32)                     # (nb, N)
    M, Kp = qa.shape
    N = qb.shape[1]
    assert qb.shape[0] == Kp and Kp % block == 0
    nb = Kp // block
    assert sa.shape == (M, nb) and sb.shape == (nb, N), (sa.shape, sb.shape)
    acc = np.zeros((M, N), dtype=np.float32)                  # (M, N)
    for b in range(nb):
        s = slice(b * block, (b + 1) * block)
        I = lut_gemm_ref(qa[:, s], qb[s, :], mul)              # (M, N) int32
        ss = sa[:, b:b + 1] * sb[b:b + 1, :]                  # (M, N) float32 sa*sb
        term = ss * I.astype(np.float32)                      # (M, N) float32 (sa*sb)*I
        acc = (acc + term).astype(np.float32)                 # (M, N) increasing b
    return acc
