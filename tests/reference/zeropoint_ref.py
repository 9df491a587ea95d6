"""Plain numpy oracle for lutcore.torch through units of any operand format
(zero-point quantization; the contract of lutcore/torch/_formats.py's docstring).

Design: written from the contract only, never importing lutcore or torch.  A format is
given as a spec string ("8u x 4u", "4s x 4s -> 8s") or any object with the attributes
a_bits, a_signed, b_bits, b_signed; the activation is the table's row operand (a), the
weight its column (b).  Quantization is float32 with separate numpy operations (a true
division, np.rint = round half to even); the code products and every zero-point term
are exact int64; the forward's dequantization is float32 in the contract's order
(float32(acc) * float32(s_x * s_w[o]) + b[o]).  The table backward is float64 (the
implementation sums in float32: compare with a relative tolerance); the units backward
is exact int64 up to its final scale, applied in float64.  The im2col is the textbook
one by slicing, in torch's unfold order ((c, kh, kw) columns, (n, oh, ow) rows), over a
code array padded with the code zp_x; its adjoint (col2im) adds the patches back by
slicing.

    name      dtype     shape                 meaning
    fmt       str|obj   -                     "8u x 4u": a = 8-bit unsigned, b = 4-bit unsigned
    table     int       (2^a_bits, 2^b_bits)  T[a & (2^a_bits-1), b & (2^b_bits-1)]
    Ga, Gb    float     like table            df/da, df/db (units.gradients(1))

quantize_tensor(v, bits, signed) -> (q, s, zp)
    v         float32   any                   IN
    q         int64     like v                OUT  codes (signed: -qmax..qmax, unsigned: 0..2^w-1)
    s         float32   ()                    OUT  scale (0 for an all-zero v)
    zp        int64     ()                    OUT  zero point (0 for signed)
quantize_rows(w, bits, signed) -> (q, s, zp)  one (s, zp) per row of w.reshape(O, -1)
    w         float32   (O, ...)              IN
    q         int64     (O, ...)              OUT
    s, zp     f32/i64   (O,)                  OUT
code_gemm(qa, qb, table) -> int64 (M, O)      sum_k T[qa[m, k], qb[o, k]];  qa (M, K), qb (O, K)
linear_acc(qx, zp_x, qw, zp_w, table) -> int64 (M, O)   the zero-point corrected accumulator
linear_forward(x, w, b, table, fmt) -> float32 (..., O)   x (..., K) float32, w (O, K), b (O,)|None
im2col(q, KH, KW, stride, padding, dilation, fill) -> (cols (N*OH*OW, C*KH*KW), OH, OW)
col2im(cols, shape, KH, KW, stride, padding, dilation) -> float64 (N, C, H, W)  (the adjoint)
conv2d_forward(x, w, b, table, fmt, stride, padding, dilation, groups) -> float32 (N, O, OH, OW)
    x (N, C, H, W) float32, w (O, C/groups, KH, KW) float32, b (O,) float32 | None
conv1d_forward(x, w, b, table, fmt, stride, padding, dilation, groups) -> float32 (N, O, L)
linear_table_backward(dy, x, w, Ga, Gb, fmt) -> (dx (..., K), dw (O, K), db (O,))   float64
conv2d_table_backward(dy, x, w, Ga, Gb, fmt, stride, padding, dilation, groups) -> (dx, dw, db)
conv1d_table_backward(...)                                                        float64
linear_units_backward(dy, x, w, table, fmt) -> (dx, dw)                           float64
conv2d_units_backward(dy, x, w, table, fmt, stride, padding, dilation, groups) -> (dx, dw)
conv1d_units_backward(...)
"""
import re

import numpy as np

F32 = np.float32


# ------------------------------------------------------------------------------ formats

def parse_format(fmt):
    """(a_bits, a_signed, b_bits, b_signed) of a spec string or a Format-like object."""
    if isinstance(fmt, str):
        m = re.match(r"^\s*(\d+)([us])\s*x\s*(\d+)([us])", fmt)
        assert m, fmt
        return int(m.group(1)), m.group(2) == "s", int(m.group(3)), m.group(4) == "s"
    return int(fmt.a_bits), bool(fmt.a_signed), int(fmt.b_bits), bool(fmt.b_signed)


# --------------------------------------------------------------------------- quantizing

def quantize_tensor(v, bits, signed):
    """One (s, zp) for the whole of v."""
    v = np.asarray(v, F32)
    if v.size == 0:
        return np.zeros(v.shape, np.int64), F32(0), np.int64(0)
    if signed:
        qmax = 2 ** (bits - 1) - 1
        amax = F32(np.max(np.abs(v)))
        s = F32(amax / F32(qmax))                                  # float32 true division
        if s == 0:
            return np.zeros(v.shape, np.int64), F32(0), np.int64(0)
        r = (v / s).astype(F32)
        q = np.clip(np.rint(r), -qmax, qmax).astype(np.int64)
        return q, s, np.int64(0)
    top = 2 ** bits - 1
    lo = F32(min(F32(np.min(v)), F32(0)))
    hi = F32(max(F32(np.max(v)), F32(0)))
    s = F32(F32(hi - lo) / F32(top))
    if s == 0:
        return np.zeros(v.shape, np.int64), F32(0), np.int64(0)
    zp = np.int64(np.clip(np.rint(F32(F32(-lo) / s)), 0, top))
    r = (v / s).astype(F32)
    q = np.clip(np.rint(r).astype(np.int64) + zp, 0, top).astype(np.int64)
    return q, s, zp


def quantize_rows(w, bits, signed):
    """One (s, zp) per output channel: row o of w.reshape(O, -1)."""
    w = np.asarray(w, F32)
    O = w.shape[0]
    w2 = w.reshape(O, -1)
    q = np.zeros(w2.shape, np.int64)
    s = np.zeros(O, F32)
    zp = np.zeros(O, np.int64)
    for o in range(O):
        q[o], s[o], zp[o] = quantize_tensor(w2[o], bits, signed)
    return q.reshape(w.shape), s, zp


# ------------------------------------------------------------------------------ products

def _gather(table, a, b):
    """table at [a & ma, b & mb] (broadcast a against b)."""
    t = np.asarray(table)
    ma, mb = t.shape[0] - 1, t.shape[1] - 1
    return t[np.asarray(a, np.int64) & ma, np.asarray(b, np.int64) & mb]


def code_gemm(qa, qb, table, acc=None):
    """C[m, o] = sum_k T[qa[m, k], qb[o, k]] in int64; qa (M, K), qb (O, K).  ``acc``: a declared
    accumulator (accum_ref.accumulate_ref's keywords): each sum is then that register's value."""
    qa = np.asarray(qa, np.int64)
    qb = np.asarray(qb, np.int64)
    t = np.asarray(table, np.int64)
    M, K = qa.shape
    O = qb.shape[0]
    if acc is not None:
        from reference.accum_ref import accumulate_ref
        p = _gather(t, qa[:, None, :], qb[None, :, :])                  # (M, O, K)
        return accumulate_ref(p.reshape(M * O, K), **acc)[0].reshape(M, O)
    out = np.zeros((M, O), np.int64)
    for k in range(K):
        out += _gather(t, qa[:, k][:, None], qb[:, k][None, :])        # (M, O)
    return out


def linear_acc(qx, zp_x, qw, zp_w, table, acc=None):
    """acc[m, o] = sum_k T[qx, qw] - zp_w[o] sum_k qx - zp_x sum_k qw + K zp_x zp_w[o] (int64)."""
    qx = np.asarray(qx, np.int64)                                      # (M, K)
    qw = np.asarray(qw, np.int64)                                      # (O, K)
    zp_w = np.asarray(zp_w, np.int64)                                  # (O,)
    zp_x = np.int64(zp_x)
    K = qx.shape[1]
    out = code_gemm(qx, qw, table, acc)
    out -= zp_w[None, :] * qx.sum(axis=1)[:, None]
    out -= zp_x * qw.sum(axis=1)[None, :]
    out += np.int64(K) * zp_x * zp_w[None, :]
    return out


def dequantize(acc, s_x, s_w, b):
    """float32(acc) * float32(s_x * s_w[o]) + b[o], float32, in that order."""
    scale = (F32(s_x) * np.asarray(s_w, F32)).astype(F32)              # (O,)
    y = (np.asarray(acc).astype(F32) * scale[None, :]).astype(F32)     # (M, O)
    if b is not None:
        y = (y + np.asarray(b, F32)[None, :]).astype(F32)
    return y


def linear_forward(x, w, b, table, fmt, acc=None):
    ab, asg, bb, bsg = parse_format(fmt)
    x = np.asarray(x, F32)
    w = np.asarray(w, F32)
    K = x.shape[-1]
    O = w.shape[0]
    x2 = x.reshape(-1, K)
    qx, s_x, zp_x = quantize_tensor(x2, ab, asg)
    qw, s_w, zp_w = quantize_rows(w, bb, bsg)
    y = dequantize(linear_acc(qx, zp_x, qw, zp_w, table, acc), s_x, s_w, b)
    return y.reshape(x.shape[:-1] + (O,))


# -------------------------------------------------------------------------------- im2col

def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def im2col(q, KH, KW, stride, padding, dilation, fill):
    """q (N, C, H, W) -> cols (N*OH*OW, C*KH*KW): rows (n, oh, ow), columns (c, kh, kw);
    the padding holds ``fill``."""
    q = np.asarray(q)
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    N, C, H, W = q.shape
    OH, OW = _out_size(H, KH, sh, ph, dh), _out_size(W, KW, sw, pw, dw)
    qp = np.full((N, C, H + 2 * ph, W + 2 * pw), fill, q.dtype)
    qp[:, :, ph:ph + H, pw:pw + W] = q
    cols = np.zeros((N, OH, OW, C, KH, KW), q.dtype)
    for i in range(KH):
        for j in range(KW):
            patch = qp[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh, j * dw: j * dw + sw * (OW - 1) + 1: sw]
            cols[:, :, :, :, i, j] = patch.transpose(0, 2, 3, 1)       # (N, OH, OW, C)
    return cols.reshape(N * OH * OW, C * KH * KW), OH, OW


def col2im(cols, shape, KH, KW, stride, padding, dilation):
    """The adjoint of im2col: patch gradients (N*OH*OW, C*KH*KW) added back into (N, C, H, W)
    (the padding dropped), float64."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    N, C, H, W = shape
    OH, OW = _out_size(H, KH, sh, ph, dh), _out_size(W, KW, sw, pw, dw)
    c6 = np.asarray(cols, np.float64).reshape(N, OH, OW, C, KH, KW)
    xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), np.float64)
    for i in range(KH):
        for j in range(KW):
            xp[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh,
               j * dw: j * dw + sw * (OW - 1) + 1: sw] += c6[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return xp[:, :, ph:ph + H, pw:pw + W]


class _ConvSetup:
    """Quantized input and weight, the patches and the group slices of a conv2d."""

    def __init__(self, x, w, fmt, stride, padding, dilation, groups):
        ab, asg, bb, bsg = parse_format(fmt)
        self.x = np.asarray(x, F32)
        self.w = np.asarray(w, F32)
        N, C, H, W = self.x.shape
        O, Cg, KH, KW = self.w.shape
        assert C == Cg * groups and O % groups == 0
        self.N, self.C, self.O, self.Cg, self.KH, self.KW, self.G = N, C, O, Cg, KH, KW, groups
        self.Og = O // groups
        self.geo = (stride, padding, dilation)
        self.qx, self.s_x, self.zp_x = quantize_tensor(self.x, ab, asg)     # from x itself
        qw, self.s_w, self.zp_w = quantize_rows(self.w, bb, bsg)
        self.qw = qw.reshape(O, -1)                                         # (O, Cg*KH*KW)
        self.cols, self.OH, self.OW = im2col(self.qx, KH, KW, stride, padding, dilation, self.zp_x)
        self.M = self.cols.shape[0]                                         # N*OH*OW
        self.K = Cg * KH * KW

    def group(self, g):
        """(patch columns of group g (M, Kg), output channel slice)."""
        return self.cols[:, g * self.K:(g + 1) * self.K], slice(g * self.Og, (g + 1) * self.Og)

    def rows(self, dy):
        """dY (N, O, OH, OW) as (M, O) in the patches' row order."""
        return np.asarray(dy).reshape(self.N, self.O, -1).transpose(0, 2, 1).reshape(-1, self.O)

    def fold(self, dcols_groups):
        """per-group patch gradients (M, K) -> dX (N, C, H, W), float64."""
        cols = np.concatenate(dcols_groups, axis=1)                         # (M, C*KH*KW)
        return col2im(cols, self.x.shape, self.KH, self.KW, *self.geo)


def conv2d_forward(x, w, b, table, fmt, stride=1, padding=0, dilation=1, groups=1, acc=None):
    """``acc``: a declared accumulator (accum_ref's keywords): a patch's products enter it in the
    weight's (c, kh, kw) order."""
    c = _ConvSetup(x, w, fmt, stride, padding, dilation, groups)
    out = np.zeros((c.M, c.O), np.int64)
    for g in range(c.G):
        A, osl = c.group(g)
        out[:, osl] = linear_acc(A, c.zp_x, c.qw[osl], c.zp_w[osl], table, acc)
    y = dequantize(out, c.s_x, c.s_w, b)                                    # (M, O)
    return np.ascontiguousarray(y.reshape(c.N, c.OH, c.OW, c.O).transpose(0, 3, 1, 2))


def _as2d(x, w, stride, padding, dilation):
    return (np.asarray(x)[:, :, None, :], np.asarray(w)[:, :, None, :], (1, stride), (0, padding), (1, dilation))


def conv1d_forward(x, w, b, table, fmt, stride=1, padding=0, dilation=1, groups=1, acc=None):
    x4, w4, s, p, d = _as2d(x, w, stride, padding, dilation)
    return conv2d_forward(x4, w4, b, table, fmt, s, p, d, groups, acc)[:, :, 0, :]


# --------------------------------------------------------------------- table backward

def _table_grads(dy, qx, s_x, zp_x, qw, s_w, zp_w, Ga, Gb):
    """dX (M, K), dW (O, K) of one linear product through the gradient tables, float64."""
    dy = np.asarray(dy, np.float64)                                         # (M, O)
    Ga = np.asarray(Ga, np.float64)
    Gb = np.asarray(Gb, np.float64)
    sw = np.asarray(s_w, np.float64)
    zw = np.asarray(zp_w, np.float64)
    M, K = qx.shape
    O = qw.shape[0]
    dx = np.zeros((M, K))
    dw = np.zeros((O, K))
    for k in range(K):
        a, bcol = qx[:, k][:, None], qw[:, k][None, :]                     # (M, 1), (1, O)
        dx[:, k] = (dy * sw[None, :] * (_gather(Ga, a, bcol) - zw[None, :])).sum(axis=1)
        dw[:, k] = np.float64(s_x) * (dy * (_gather(Gb, a, bcol) - np.float64(zp_x))).sum(axis=0)
    return dx, dw


def linear_table_backward(dy, x, w, Ga, Gb, fmt):
    ab, asg, bb, bsg = parse_format(fmt)
    x = np.asarray(x, F32)
    K = x.shape[-1]
    O = np.asarray(w).shape[0]
    qx, s_x, zp_x = quantize_tensor(x.reshape(-1, K), ab, asg)
    qw, s_w, zp_w = quantize_rows(w, bb, bsg)
    d2 = np.asarray(dy, np.float64).reshape(-1, O)
    dx, dw = _table_grads(d2, qx, s_x, zp_x, qw, s_w, zp_w, Ga, Gb)
    return dx.reshape(x.shape), dw, d2.sum(axis=0)


def conv2d_table_backward(dy, x, w, Ga, Gb, fmt, stride=1, padding=0, dilation=1, groups=1):
    c = _ConvSetup(x, w, fmt, stride, padding, dilation, groups)
    d2 = c.rows(np.asarray(dy, np.float64))                                 # (M, O)
    dcols, dws = [], []
    for g in range(c.G):
        A, osl = c.group(g)
        dx, dw = _table_grads(d2[:, osl], A, c.s_x, c.zp_x, c.qw[osl], c.s_w[osl], c.zp_w[osl], Ga, Gb)
        dcols.append(dx)
        dws.append(dw)
    return c.fold(dcols), np.concatenate(dws).reshape(c.w.shape), d2.sum(axis=0)


def conv1d_table_backward(dy, x, w, Ga, Gb, fmt, stride=1, padding=0, dilation=1, groups=1):
    x4, w4, s, p, d = _as2d(x, w, stride, padding, dilation)
    dx, dw, db = conv2d_table_backward(np.asarray(dy)[:, :, None, :], x4, w4, Ga, Gb, fmt, s, p, d, groups)
    return dx[:, :, 0, :], dw[:, :, 0, :], db


# --------------------------------------------------------------------- units backward

def _units_dx(qg, s_g, zp_g, qw, zp_w, table):
    """dX (M, K) = s_g (sum_o T[qg[m,o], qw[o,k]] - sum_o zp_w[o] qg[m,o] - zp_g sum_o qw[o,k]
    + zp_g sum_o zp_w[o]); the integer part exact, the scale in float64."""
    qg = np.asarray(qg, np.int64)                                           # (M, O)
    qw = np.asarray(qw, np.int64)                                           # (O, K)
    zp_w = np.asarray(zp_w, np.int64)
    ints = code_gemm(qg, qw.T, table)                                       # sum over o
    ints -= (qg * zp_w[None, :]).sum(axis=1)[:, None]
    ints -= np.int64(zp_g) * qw.sum(axis=0)[None, :]
    ints += np.int64(zp_g) * zp_w.sum()
    return np.float64(s_g) * ints.astype(np.float64)


def _units_dw(qd, s_d, zp_d, qx, s_x, zp_x, table):
    """dW (O, K) = float32(s_d s_x) (sum_m T[qd[m,o], qx[m,k]] - zp_x sum_m qd[m,o]
    - zp_d sum_m qx[m,k] + M zp_d zp_x)."""
    qd = np.asarray(qd, np.int64)                                           # (M, O)
    qx = np.asarray(qx, np.int64)                                           # (M, K)
    M = qd.shape[0]
    ints = code_gemm(qd.T, qx.T, table)                                     # (O, K), sum over m
    ints -= np.int64(zp_x) * qd.sum(axis=0)[:, None]
    ints -= np.int64(zp_d) * qx.sum(axis=0)[None, :]
    ints += np.int64(M) * np.int64(zp_d) * np.int64(zp_x)
    return np.float64(F32(F32(s_d) * F32(s_x))) * ints.astype(np.float64)


def _same_operand_format(fmt):
    ab, asg, bb, bsg = parse_format(fmt)
    assert (ab, asg) == (bb, bsg), "the units backward needs one format for both operands"
    return ab, asg


def linear_units_backward(dy, x, w, table, fmt):
    ab, asg = _same_operand_format(fmt)
    x = np.asarray(x, F32)
    K = x.shape[-1]
    O = np.asarray(w).shape[0]
    qx, s_x, zp_x = quantize_tensor(x.reshape(-1, K), ab, asg)
    qw, s_w, zp_w = quantize_rows(w, ab, asg)
    d2 = np.asarray(dy, F32).reshape(-1, O)
    g = (d2 * s_w[None, :]).astype(F32)                                     # float32 dY * s_w[o]
    qg, s_g, zp_g = quantize_tensor(g, ab, asg)
    qd, s_d, zp_d = quantize_tensor(d2, ab, asg)
    dx = _units_dx(qg, s_g, zp_g, qw, zp_w, table)
    dw = _units_dw(qd, s_d, zp_d, qx, s_x, zp_x, table)
    return dx.reshape(x.shape), dw


def conv2d_units_backward(dy, x, w, table, fmt, stride=1, padding=0, dilation=1, groups=1):
    ab, asg = _same_operand_format(fmt)
    c = _ConvSetup(x, w, fmt, stride, padding, dilation, groups)
    d2 = c.rows(np.asarray(dy, F32))                                        # (M, O) float32
    g = (d2 * c.s_w[None, :]).astype(F32)
    qg, s_g, zp_g = quantize_tensor(g, ab, asg)                             # per tensor (all groups)
    qd, s_d, zp_d = quantize_tensor(d2, ab, asg)
    dcols, dws = [], []
    for gi in range(c.G):
        A, osl = c.group(gi)
        dcols.append(_units_dx(qg[:, osl], s_g, zp_g, c.qw[osl], c.zp_w[osl], table))
        dws.append(_units_dw(qd[:, osl], s_d, zp_d, A, c.s_x, c.zp_x, table))
    return c.fold(dcols), np.concatenate(dws).reshape(c.w.shape)


def conv1d_units_backward(dy, x, w, table, fmt, stride=1, padding=0, dilation=1, groups=1):
    x4, w4, s, p, d = _as2d(x, w, stride, padding, dilation)
    dx, dw = conv2d_units_backward(np.asarray(dy)[:, :, None, :], x4, w4, table, fmt, s, p, d, groups)
    return dx[:, :, 0, :], dw[:, :, 0, :]
