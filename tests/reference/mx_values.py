"""The MX units' products by the MX oracle (tests/reference/mxunits_ref.py), shared by the units,
model, lutcore.torch and attention tests: ``mm_ref`` (units.matmul), attention's causal p v
(``MXUnits.values``: each position's values in blocks along D, their scales folded into p, one
product per D-block) and its "table" backward, and the bit-for-bit assertions.  The operands are
quantized with ``lutcore.mx.mx_quantize`` (tested on its own); the products of a built-in
multiplier come from ``FPUnit``'s own builders, not the unit's copy; the sums, scalings and
gradient sums are the oracle's."""
import numpy as np

from lutcore.mx import mx_quantize
from lutcore.units.fpmul import FPUnit
from reference import mxunits_ref as R


def bits(y):
    return np.ascontiguousarray(y, np.float32).view(np.uint32)


def assert_bits(got, want, what=""):
    got = np.asarray(got.detach().numpy() if hasattr(got, "detach") else got)
    want = np.asarray(want)
    assert got.dtype == np.float32 and got.shape == want.shape, (what, got.dtype, got.shape, want.shape)
    bad = np.argwhere(bits(got) != bits(want))
    assert not len(bad), (what, len(bad), [(tuple(map(int, i)), got[tuple(i)], want[tuple(i)]) for i in bad[:4]])


def data(rng, shape, spread=4):
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    v.reshape(-1)[::17] = 0
    return v.astype(np.float32)


def table_of(u):
    """The multiplier's products: a built-in's from FPUnit's own builders, else the unit's table."""
    n = u.mul.name
    if n.startswith("truncated:"):
        return FPUnit.truncated(u.a.name, u.b.name, int(n.split(":")[1])).products
    if n in ("exact", "mitchell", "lmul"):
        return getattr(FPUnit, n)(u.a.name, u.b.name).products
    return u.mul.products


def mm_ref(u, a, b):
    """units.matmul(a (M, K), b (K, N)) by the oracle: a's rows and b's columns in MX blocks along
    K, the unit's table, its accumulation."""
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    qa = mx_quantize(a, u.a.name, u.block, axis=1)
    qb = mx_quantize(b, u.b.name, u.block, axis=0)
    return mm_q(u, qa.codes, qa.scales, qb.codes, qb.scales, a.shape[1])


def mm_q(u, ca, sa, cb, sb, K):
    T = table_of(u)
    if u.accumulate == "exact":
        return R.exact_matmul_ref(ca, sa, cb, sb, T, K, u.block)
    acc = u.accumulate
    return R.narrow_matmul_ref(ca, sa, cb, sb, T, K, u.block, acc.mbits, acc.promote, acc.rounding)


def _values_parts(u, p, v):
    """Per D-block j: (p'_j's MX, v's codes of block j padded along S, the scale-1 block scales),
    and sv: v's rows in blocks along D, sv their scales, p'_j = float32(p * sv[:, j])."""
    blk = u.block
    S, D = v.shape
    qv = mx_quantize(np.ascontiguousarray(v, np.float32), u.b.name, blk, axis=1)
    sv = R.scales_f32(qv.scales)
    nbs = -(-S // blk)
    parts = []
    for j in range(qv.scales.shape[1]):
        qa = mx_quantize((np.asarray(p, np.float32) * sv[:, j][None, :]).astype(np.float32), u.a.name, blk, axis=1)
        cb = np.zeros((nbs * blk, blk), np.uint8)
        cb[:S] = qv.codes[:, j * blk:(j + 1) * blk]
        parts.append((qa, cb, np.full((nbs, blk), 127, np.uint8)))
    return parts, sv


def values_ref(u, p, v):
    """The causal MX p v (MXUnits.values' contract) by the oracle."""
    (R_, S), D, blk = p.shape, v.shape[1], u.block
    parts, _ = _values_parts(u, p, v)
    out = np.empty((R_, D), np.float32)
    for j, (qa, cb, sb) in enumerate(parts):
        c0, c1 = j * blk, min(D, (j + 1) * blk)
        out[:, c0:c1] = mm_q(u, qa.codes, qa.scales, cb, sb, S)[:, :c1 - c0]
    return out


def values_grads_ref(u, dy, p, v):
    """(dP, dV) of values_ref through the gradient tables: per D-block j ascending, dP += sv[:, j] *
    dX_j (float32), dV[:, j] = dW_j^T / sv[:, j]."""
    (R_, S), D, blk = p.shape, v.shape[1], u.block
    parts, sv = _values_parts(u, p, v)
    Ga, GbT = R.gradient_tables_ref(u.mul.products, u.a.values(), u.b.values())
    dP = np.zeros((R_, S), np.float32)
    dV = np.empty((S, D), np.float32)
    for j, (qa, cb, sb) in enumerate(parts):
        c0, c1 = j * blk, min(D, (j + 1) * blk)
        w = np.ascontiguousarray(cb[:, :c1 - c0].T)
        dW, dX = R.table_backward_ref(np.ascontiguousarray(dy[:, c0:c1], np.float32), qa.codes, qa.scales, w,
                                      np.full((c1 - c0, sb.shape[0]), 127, np.uint8), Ga, GbT, S, blk)
        dP = (dP + (dX * sv[:, j][None, :]).astype(np.float32)).astype(np.float32)
        dV[:, c0:c1] = (dW.T / sv[:, j][:, None]).astype(np.float32)
    return dP, dV
