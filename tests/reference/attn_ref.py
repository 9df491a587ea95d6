"""Plain numpy oracle for attention's two products through a unit (lutcore.quant.attn_scores and
attn_values: their docstrings are the contract, with DESIGN.md "Block-scaled int8 (Q8 blocks)",
"Zero-point quantization", "Operand formats" and lutcore/units/accumulator.py's docstring).

Design: written from those contracts only, never importing lutcore.  The scores are the
block-scaled product of q and k^T, so they reuse the oracles of that product: quant_ref's Q8 one
for a signed 8 x 8 unit without a declared register (lutcore's int8 path) and format_ref's
zero-point one for every other unit (the two coincide for signed 8-bit codes when T[0, b] =
T[a, 0] = 0: the tests check it).  The values' product is its own contract (each value row
quantized on its own, its scale folded into the probabilities, per-position zero points), so it
is written out below with plain loops over rows and blocks, vectorised over the output columns
only; quantization reuses format_ref.quantize_ref and a declared register accum_ref's
accumulate_ref.  The softmax is not lutcore's kernel: ``causal_softmax_ref`` is float64 cast to
float32, for end-to-end checks with a tolerance or to feed one p to both sides.

Arguments shared by every function:
    table  int      (2^wa, 2^wb)   the unit's products, entry [a & (2^wa-1), b & (2^wb-1)]
    fmt    tuple    (a_bits, a_signed, b_bits, b_signed)
    block  int      >= 1, blocks along the reduction axis, aligned to index 0, the last shorter
    acc    dict     accum_ref.accumulate_ref's keywords (a declared register) or None (exact sums)

scores_ref(q, k, table, fmt, block, acc=None):
    name  dtype    shape    IN/OUT
    q     float32  (R, D)   IN   queries (first operand), quantized per row, blocks along D
    k     float32  (S, D)   IN   keys (second operand), quantized per position, blocks along D
    Y     float32  (R, S)   OUT  Y[r, s] = sum_b (sq[r,b] * sk[s,b]) * float32(I_b[r, s]), b increasing

values_ref(p, v, table, fmt, block, acc=None):
    p     float32  (R, S)   IN   probabilities >= 0 (0 where masked)
    v     float32  (S, D)   IN   values, each row quantized over D in the second operand's format
    qv    int64    (S, D)        codes;  sv float32 (S,), zv int64 (S,) its scale and zero point
    pp    float32  (R, S)        p' = p * sv  (float32)
    qp    int64    (R, S)        p' quantized per (row, block along S) in the first operand's
                                 format, sp float32 (R, nb), zero point 0 (p' >= 0)
    I_b   int64    (R, D)        sum_{s in b} T[qp[r,s], qv[s,c]] (through acc) - sum_{s in b} qp[r,s] zv[s]
    Y     float32  (R, D)   OUT  Y[r, c] = sum_b float32(sp[r,b]) * float32(I_b[r,c]), b increasing

causal_softmax_ref(s, causal=True):
    s     float32  (R, S)   IN   scores; query r sits at position S - R + r (the last R positions)
    P     float32  (R, S)   OUT  softmax over the visible keys in float64, cast; masked keys exactly 0

attention_ref(q, k, v, table, fmt, block, causal=True, acc=None):
    q (R, D), k (S, D), v (S, D) float32 IN -> Y float32 (R, D) OUT
    = values_ref(causal_softmax_ref(scores_ref(q, k, ...), causal), v, ...)
"""
import numpy as np

from reference.accum_ref import accumulate_ref
from reference.format_ref import qmatmul_formats_ref, quantize_ref as codes_ref
from reference.quant_ref import qmatmul_ref, quantize_ref as q8_ref

_SIGNED_8X8 = (8, True, 8, True)


def _f32_2d(x, name):
    x = np.asarray(x, np.float32)
    assert x.ndim == 2, (name, x.shape)
    return x


def scores_ref(q, k, table, fmt, block, acc=None):
    q = _f32_2d(q, "q")                                       # (R, D)
    k = _f32_2d(k, "k")                                       # (S, D)
    assert q.shape[1] == k.shape[1] and block >= 1, (q.shape, k.shape, block)
    t = np.asarray(table)                                     # (2^wa, 2^wb)
    if tuple(fmt) == _SIGNED_8X8 and acc is None:             # the Q8 contract (zero padded blocks)
        qq, sq = q8_ref(q, block)                             # (R, Dp) int8, (R, nb) float32
        qk, sk = q8_ref(k, block)                             # (S, Dp) int8, (S, nb) float32
        mul = t.astype(np.int16).reshape(65536)               # entry (a & 0xff) * 256 + (b & 0xff)
        return qmatmul_ref(qq, sq, qk.T, sk.T, mul, block)    # (R, S) float32
    return qmatmul_formats_ref(q, k.T, t, fmt, block, acc=acc)   # (R, S) float32, zero points exact


def values_ref(p, v, table, fmt, block, acc=None):
    p = _f32_2d(p, "p")                                       # (R, S)
    v = _f32_2d(v, "v")                                       # (S, D)
    R, S = p.shape
    D = v.shape[1]
    assert v.shape[0] == S and block >= 1, (p.shape, v.shape, block)
    assert np.all(p >= 0), "p: probabilities are >= 0"
    ab, asg, bb, bsg = fmt
    t = np.asarray(table, np.int64)                           # (2^wa, 2^wb)
    ma, mb = t.shape[0] - 1, t.shape[1] - 1
    qv = np.zeros((S, D), np.int64)                           # (S, D) value codes
    sv = np.zeros(S, np.float32)                              # (S,)   per-position scale
    zv = np.zeros(S, np.int64)                                # (S,)   per-position zero point
    for s in range(S):                                        # each position on its own, over D
        qv[s], sv[s], zv[s] = codes_ref(v[s], bb, bsg)
    pp = (p * sv[None, :]).astype(np.float32)                 # (R, S) p' = p * s_v, float32
    y = np.zeros((R, D), np.float32)                          # (R, D)
    for r in range(R):
        for b0 in range(0, S, block):                         # blocks aligned to position 0
            b1 = min(S, b0 + block)
            qp, sp, zp = codes_ref(pp[r, b0:b1], ab, asg)     # (n,) int64, float32, 0
            assert zp == 0, zp                                # p' >= 0: no zero point
            prods = t[(qp & ma)[None, :], (qv[b0:b1, :].T & mb)]   # (D, n) T[qp[s], qv[s, c]], s order
            if acc is None:
                code = prods.sum(axis=1)                      # (D,) exact
            else:
                code = accumulate_ref(prods, **acc)[0]        # (D,) the register after the block
            I = code - (qp * zv[b0:b1]).sum()                 # (D,) the zero-point term exact
            term = (np.float32(sp) * I.astype(np.float32)).astype(np.float32)   # (D,)
            y[r] = (y[r] + term).astype(np.float32)           # (D,) b increasing
    return y


def causal_softmax_ref(s, causal=True):
    s = _f32_2d(s, "s")                                       # (R, S)
    R, S = s.shape
    x = s.astype(np.float64)                                  # (R, S)
    if causal:
        assert R <= S, "causal: the R queries are the last R of S positions"
        qpos = S - R + np.arange(R)                           # (R,)
        x[np.arange(S)[None, :] > qpos[:, None]] = -np.inf    # (R, S) keys past the query
    x = np.exp(x - x.max(axis=1, keepdims=True))              # (R, S) masked -> 0
    return (x / x.sum(axis=1, keepdims=True)).astype(np.float32)   # (R, S)


def attention_ref(q, k, v, table, fmt, block, causal=True, acc=None):
    s = scores_ref(q, k, table, fmt, block, acc=acc)          # (R, S)
    P = causal_softmax_ref(s, causal)                         # (R, S)
    return values_ref(P, v, table, fmt, block, acc=acc)       # (R, D)
