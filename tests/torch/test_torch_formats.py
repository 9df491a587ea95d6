"""lutcore.torch through units of other operand formats than signed 8 x 8 (zero-point
quantization), against the numpy oracle of the contract (tests/reference/zeropoint_ref.py):
the forward of lut_linear / lut_conv2d / lut_conv1d and of approximate() bit for bit, for
exact and approximate units of seven formats, at 1 and 2 threads; the "table" and "units"
backward against the oracle, "ste" against torch's float layer; the refusals (backward="units"
for two operand formats, a static input_scale, a second derivative); signed 8 x 8 units
keep their path and the contract reduces to theirs.

Error budgets (named):
    GRAD_REL   table / units backward vs the float64 oracle: the implementation sums in
               float32, so |got - want| <= GRAD_REL * max|want| (the scale of the values)
    DB_RTOL    db (float32 sum of dY) vs the float64 sum
"""
import functools

import numpy as np
import pytest

import torch
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import lutcore.torch as lt  # noqa: E402
from lutcore.units import Units  # noqa: E402
from reference import zeropoint_ref as R  # noqa: E402
from reference.zeropoint_ref import (conv1d_forward, conv1d_table_backward,  # noqa: E402
                                     conv1d_units_backward, conv2d_forward, conv2d_table_backward,
                                     conv2d_units_backward, linear_forward, linear_table_backward,
                                     linear_units_backward)

GRAD_REL = 1e-5
DB_RTOL = 1e-5

FORMATS = ["8u x 8u", "7u x 7u", "8u x 4u", "8u x 2u", "8s x 4u", "4s x 4s", "6u x 6u"]
SAME_FORMATS = ["8u x 8u", "7u x 7u", "4s x 4s", "6u x 6u"]      # one format for both operands
KINDS = ["exact", "approx"]


def _approx_mul(a, b):
    return (a * b) - ((a * b) & 0x15)


@functools.lru_cache(maxsize=None)
def units_of(spec, kind):
    if kind == "exact":
        return Units.exact(spec)
    return Units.from_mul(_approx_mul, format=spec)


def _bits(a):
    a = np.ascontiguousarray(a, np.float32)
    return a.view(np.int32)


def assert_bits(got, want, what=""):
    got = np.asarray(got)
    assert got.dtype == np.float32 and got.shape == want.shape, (what, got.dtype, got.shape, want.shape)
    same = _bits(got) == _bits(want)
    if not same.all():
        i = np.unravel_index(np.argmin(same), got.shape)
        raise AssertionError(f"{what}: {np.count_nonzero(~same)} of {same.size} differ, first at {i}: "
                             f"{got[i]!r} vs {want[i]!r}")


def assert_scaled_close(got, want, what="", rel=GRAD_REL):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
    err = float(np.abs(got - want).max(initial=0.0))
    assert err <= rel * scale, f"{what}: max |diff| {err:.3g} > {rel} * {scale:.3g}"


def _input(rng, kind, shape):
    """float32 inputs: 'normal' (negative values), 'positive' (all > 0: zero point 0), 'zero'."""
    if kind == "zero":
        return np.zeros(shape, np.float32)
    v = rng.standard_normal(shape).astype(np.float32)
    if kind == "positive":
        v = (np.abs(v) + np.float32(0.01)).astype(np.float32)
    return v


def _weight(rng, shape):
    """Mixed-sign rows, plus (when there are enough) an all-zero, an all-positive and an
    all-negative row: s_w 0, zp_w 0 and zp_w at the top for unsigned weights."""
    w = rng.standard_normal(shape).astype(np.float32)
    if shape[0] >= 4:
        w[1] = 0
        w[2] = np.abs(w[2])
        w[3] = -np.abs(w[3])
    return w


T = torch.from_numpy


# ------------------------------------------------------------------ the oracle itself

def test_units_tables_are_indexed_as_the_oracle_reads_them():
    """table()[a & (2^wa-1), b & (2^wb-1)] is the product of the codes a, b (two's complement
    low bits for a signed operand): what the oracle gathers."""
    for spec in FORMATS + ["8s x 8s"]:
        ab, asg, bb, bsg = R.parse_format(spec)
        a = np.arange(-(1 << (ab - 1)), 1 << (ab - 1)) if asg else np.arange(1 << ab)
        b = np.arange(-(1 << (bb - 1)), 1 << (bb - 1)) if bsg else np.arange(1 << bb)
        A, B = np.meshgrid(a, b, indexing="ij")
        for kind in KINDS:
            u = units_of(spec, kind) if spec != "8s x 8s" else (Units.exact() if kind == "exact"
                                                                 else Units.from_mul(_approx_mul))
            assert R.parse_format(u.format) == (ab, asg, bb, bsg), (spec, u.format)
            t = u.table()
            assert t.shape == (1 << ab, 1 << bb)
            want = A * B if kind == "exact" else _approx_mul(A, B)
            assert np.array_equal(t[A & ((1 << ab) - 1), B & ((1 << bb) - 1)], want), (spec, kind)


def test_oracle_quantize_contract(rng):
    v = rng.standard_normal((5, 9)).astype(np.float32)
    for spec in FORMATS:
        ab, asg, _, _ = R.parse_format(spec)
        q, s, zp = R.quantize_tensor(v, ab, asg)
        lo, hi = (-(2 ** (ab - 1) - 1), 2 ** (ab - 1) - 1) if asg else (0, 2 ** ab - 1)
        assert q.min() >= lo and q.max() <= hi and s > 0 and lo <= zp <= hi
        assert R.quantize_tensor(np.zeros(3, np.float32), ab, asg)[0].tolist() == [0, 0, 0]
        q01, _, zp01 = R.quantize_tensor(np.float32([-0.5, 0, 1]), ab, asg)
        assert q01[1] == zp01                                                # zero is the zero point
        err = np.abs((q - zp) * np.float64(s) - v)
        assert err.max() <= 0.5001 * s
        if not asg:                                                          # all >= 0: zero point 0
            assert R.quantize_tensor(np.abs(v), ab, asg)[2] == 0


def test_oracle_im2col_and_fold_against_torch(rng):
    x = rng.standard_normal((2, 3, 8, 9))
    for st, p, d in [(1, 0, 1), (2, 1, 2), ((2, 1), (1, 0), 1)]:
        cols, OH, OW = R.im2col(x, 3, 2, st, p, d, 0.0)
        u = F.unfold(T(x), (3, 2), dilation=d, padding=p, stride=st).numpy()  # (N, C*KH*KW, L)
        assert np.array_equal(cols, u.transpose(0, 2, 1).reshape(cols.shape))
        g = rng.standard_normal(cols.shape)
        want = F.fold(T(g.reshape(2, OH * OW, -1).transpose(0, 2, 1).copy()), (8, 9), (3, 2),
                      dilation=d, padding=p, stride=st).numpy()
        np.testing.assert_allclose(R.col2im(g, x.shape, 3, 2, st, p, d), want, rtol=1e-12, atol=1e-12)


def test_oracle_exact_units_approximate_the_float_layer(rng):
    x = rng.standard_normal((6, 40)).astype(np.float32)
    w = rng.standard_normal((5, 40)).astype(np.float32)
    t = Units.exact("8u x 8u").table()
    y = linear_forward(x, w, None, t, "8u x 8u")
    rel = np.linalg.norm(y - x @ w.T) / np.linalg.norm(x @ w.T)
    assert rel < 0.02


# --------------------------------------------------------------------------- forward bits

LIN_M = (1, 7, 33)
LIN_K = (1, 7, 33, 130)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spec", FORMATS)
def test_linear_forward_bits(rng, spec, kind):
    u = units_of(spec, kind)
    t = u.table()
    for M in LIN_M:
        for K in LIN_K:
            for inp in ("normal", "positive", "zero"):
                x = _input(rng, inp, (M, K))
                w = _weight(rng, (6, K))
                b = rng.standard_normal(6).astype(np.float32) if K != 7 else None
                got = lt.lut_linear(T(x), T(w), None if b is None else T(b), u).numpy()
                assert_bits(got, linear_forward(x, w, b, t, spec), f"{spec} {kind} M{M} K{K} {inp}")
    x = _input(rng, "normal", (2, 3, 33))                                   # leading shape (2, 3)
    w = _weight(rng, (5, 33))
    b = rng.standard_normal(5).astype(np.float32)
    got = lt.lut_linear(T(x), T(w), T(b), u).numpy()
    assert_bits(got, linear_forward(x, w, b, t, spec), f"{spec} {kind} 3-D")


# (name, input shape, weight shape, stride, padding, dilation, groups)
CONV2D_CASES = [
    ("g1_p1", (2, 3, 7, 6), (5, 3, 3, 3), 1, 1, 1, 1),
    ("g1_s2_p1_d2", (1, 3, 8, 9), (4, 3, 3, 3), 2, 1, 2, 1),
    ("g2_s2_p1_d2", (1, 4, 9, 8), (6, 2, 3, 3), 2, 1, 2, 2),
    ("g2_rect", (2, 4, 6, 7), (4, 2, 2, 3), (2, 1), (1, 0), 1, 2),
]
CONV1D_CASES = [
    ("s2_p3", (2, 5, 17), (7, 5, 5), 2, 3, 1, 1),
    ("g2_p2_d2", (3, 6, 11), (4, 3, 3), 1, 2, 2, 2),
]


CONV_CASES = [("2d",) + c for c in CONV2D_CASES] + [("1d",) + c for c in CONV1D_CASES]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spec", FORMATS)
@pytest.mark.parametrize("dim,name,xs,ws,st,p,d,g", CONV_CASES, ids=[c[0] + "_" + c[1] for c in CONV_CASES])
def test_conv_forward_bits(rng, dim, name, xs, ws, st, p, d, g, spec, kind):
    u = units_of(spec, kind)
    t = u.table()
    fn, ref = (lt.lut_conv2d, conv2d_forward) if dim == "2d" else (lt.lut_conv1d, conv1d_forward)
    for inp in ("normal", "positive", "zero"):
        x = _input(rng, inp, xs)
        w = _weight(rng, ws)
        b = rng.standard_normal(ws[0]).astype(np.float32)
        got = fn(T(x), T(w), T(b), u, st, p, d, g).numpy()
        assert_bits(got, ref(x, w, b, t, spec, st, p, d, g), f"{spec} {kind} {name} {inp}")
    got = fn(T(x), T(w), None, u, stride=st, padding=p, dilation=d, groups=g).numpy()   # no bias
    assert_bits(got, ref(x, w, None, t, spec, st, p, d, g), f"{spec} {kind} {name} no bias")


def test_conv_activation_scale_is_from_x_not_from_the_patches():
    """The smallest case: a stride-2 1x1 conv1d reads x[0] only; the activation's (s, zp)
    come from all of x (the contract: s = 2/255, y = 0.99607855), not from the values read
    (s = 1/255, y = 1.0000001)."""
    x = np.float32([[[1.0, 2.0]]])                                       # (N=1, C=1, L=2)
    w = np.float32([[[1.0]]])                                            # (O=1, C=1, K=1)
    u = units_of("8u x 8u", "exact")
    want = conv1d_forward(x, w, None, u.table(), "8u x 8u", 2, 0, 1, 1)
    got = lt.lut_conv1d(T(x), T(w), None, u, stride=2).numpy()
    assert_bits(got, want, "1x1 stride 2")


@pytest.mark.parametrize("spec", FORMATS)
def test_threads_same_bits(rng, spec):
    u = units_of(spec, "approx")
    t = u.table()
    x = _input(rng, "normal", (200, 130))
    w = _weight(rng, (64, 130))
    b = rng.standard_normal(64).astype(np.float32)
    want = linear_forward(x, w, b, t, spec)
    got = [lt.lut_linear(T(x), T(w), T(b), u, threads=n).numpy() for n in (1, 2)]
    assert np.array_equal(_bits(got[0]), _bits(got[1]))
    assert_bits(got[0], want, f"{spec} linear threads")
    xc = _input(rng, "normal", (2, 4, 16, 15))
    wc = _weight(rng, (8, 2, 3, 3))
    want = conv2d_forward(xc, wc, None, t, spec, 2, 1, 1, 2)
    got = [lt.lut_conv2d(T(xc), T(wc), None, u, 2, 1, 1, 2, threads=n).numpy() for n in (1, 2)]
    assert np.array_equal(_bits(got[0]), _bits(got[1]))
    assert_bits(got[0], want, f"{spec} conv threads")


def _small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 6))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spec", FORMATS)
def test_approximate_model_equals_reference_chain(rng, spec, kind):
    u = units_of(spec, kind)
    t = u.table()
    net = _small_net()
    a = lt.approximate(net, u)
    assert isinstance(a[0], lt.ApproxConv2d) and isinstance(a[3], lt.ApproxLinear)
    conv, lin = net[0], net[3]
    for inp in ("normal", "positive", "zero"):
        x = _input(rng, inp, (2, 3, 5, 5))
        h = conv2d_forward(x, conv.weight.detach().numpy(), conv.bias.detach().numpy(), t, spec, 1, 1, 1, 1)
        h = np.maximum(h, np.float32(0)).reshape(2, -1)
        want = linear_forward(h, lin.weight.detach().numpy(), lin.bias.detach().numpy(), t, spec)
        assert_bits(a(T(x)).detach().numpy(), want, f"{spec} {kind} {inp} (grad)")
        with torch.no_grad():
            assert_bits(a(T(x)).numpy(), want, f"{spec} {kind} {inp} (no_grad)")


# ------------------------------------------------------------ signed 8 x 8: the old path

def test_signed_8x8_units_unchanged_and_the_contract_reduces_to_them(rng):
    """Units.exact() and a signed 8 x 8 approximate table keep their path; the zero-point
    contract with a = b = 8s (qmax 127, zp 0) gives their bits."""
    for u in (Units.exact(), Units.from_mul(_approx_mul)):
        assert R.parse_format(u.format) == (8, True, 8, True)
        t = u.table()
        for M, K in ((1, 1), (7, 33), (33, 130)):
            x, w = _input(rng, "normal", (M, K)), _weight(rng, (6, K))
            b = rng.standard_normal(6).astype(np.float32)
            assert_bits(lt.lut_linear(T(x), T(w), T(b), u).numpy(), linear_forward(x, w, b, t, "8s x 8s"),
                        f"8s linear M{M} K{K}")
        for name, xs, ws, st, p, d, g in CONV2D_CASES:
            x, w = _input(rng, "normal", xs), _weight(rng, ws)
            assert_bits(lt.lut_conv2d(T(x), T(w), None, u, st, p, d, g).numpy(),
                        conv2d_forward(x, w, None, t, "8s x 8s", st, p, d, g), f"8s {name}")
        for name, xs, ws, st, p, d, g in CONV1D_CASES:
            x, w = _input(rng, "normal", xs), _weight(rng, ws)
            assert_bits(lt.lut_conv1d(T(x), T(w), None, u, st, p, d, g).numpy(),
                        conv1d_forward(x, w, None, t, "8s x 8s", st, p, d, g), f"8s {name}")
    # the old path still accepts a static input_scale (the format path refuses it)
    x = T(_input(rng, "normal", (4, 9)))
    assert lt.lut_linear(x, T(_weight(rng, (3, 9))), None, Units.exact(), input_scale=0.01).shape == (4, 3)


# ------------------------------------------------------------------------------- backward

def _run_backward(fn, x, w, b, dy, **kw):
    xr = T(x).requires_grad_(True)
    wr = T(w).requires_grad_(True)
    br = T(b).requires_grad_(True)
    y = fn(xr, wr, br, **kw)
    y.backward(T(dy))
    return xr.grad.numpy(), wr.grad.numpy(), br.grad.numpy(), y


BWD_CASES = [  # (name, functional, ref-args builder, x shape, w shape, conv geometry)
    ("linear", "linear", (7, 9), (5, 9), None),
    ("linear3d", "linear", (2, 3, 9), (5, 9), None),
    ("conv2d_g2_s2", "conv2d", (2, 4, 7, 6), (6, 2, 3, 3), (2, 1, 1, 2)),
    ("conv2d_g2_d2", "conv2d", (1, 4, 7, 8), (4, 2, 3, 3), (1, 1, 2, 2)),
    ("conv2d_g1", "conv2d", (1, 3, 6, 5), (4, 3, 3, 3), (1, 1, 1, 1)),
    ("conv1d_g2", "conv1d", (2, 6, 11), (4, 3, 3), (1, 2, 2, 2)),
]
_FN = {"linear": lambda x, w, b, units, backward, geo: lt.lut_linear(x, w, b, units, backward=backward),
       "conv2d": lambda x, w, b, units, backward, geo: lt.lut_conv2d(x, w, b, units, *geo, backward=backward),
       "conv1d": lambda x, w, b, units, backward, geo: lt.lut_conv1d(x, w, b, units, *geo, backward=backward)}


def _case_data(rng, xs, ws, inp="normal"):
    x = _input(rng, inp, xs)
    w = _weight(rng, ws)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    return x, w, b


def _grads(kind_fn, x, w, b, dy, units, backward, geo):
    fn = _FN[kind_fn]
    return _run_backward(lambda xr, wr, br: fn(xr, wr, br, units, backward, geo), x, w, b, dy)


def _db_ref(f, dy):
    """sum of dY over everything but the output channel, float64."""
    d = dy.astype(np.float64)
    if f == "linear":
        return d.reshape(-1, d.shape[-1]).sum(axis=0)
    return d.sum(axis=tuple(i for i in range(d.ndim) if i != 1))


def _dy_for(rng, y):
    return rng.standard_normal(tuple(y.shape)).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spec", FORMATS)
def test_table_backward(rng, spec, kind):
    u = units_of(spec, kind)
    Ga, Gb = u.gradients(1)
    for what, f, x, w, b, geo, dy, (dx, dw, db, y) in _backward_runs(rng, u, "table", spec, kind):
        if f == "linear":
            rx, rw, rb = linear_table_backward(dy, x, w, Ga, Gb, spec)
            assert_bits(y.detach().numpy(), linear_forward(x, w, b, u.table(), spec), what)
        elif f == "conv2d":
            rx, rw, rb = conv2d_table_backward(dy, x, w, Ga, Gb, spec, *geo)
        else:
            rx, rw, rb = conv1d_table_backward(dy, x, w, Ga, Gb, spec, *geo)
        assert_scaled_close(dx, rx, what + " dX")
        assert_scaled_close(dw, rw, what + " dW")
        np.testing.assert_allclose(db, rb, rtol=DB_RTOL, atol=DB_RTOL * np.abs(rb).max(), err_msg=what + " db")


def _backward_runs(rng, u, mode, spec, kind):
    """Every backward case (BWD_CASES x a normal and an all-positive input): (what, f, x, w, b, geo,
    dy, (dx, dw, db, y)) of the layer through ``u`` with backward=``mode``."""
    for name, f, xs, ws, geo in BWD_CASES:
        for inp in ("normal", "positive"):
            x, w, b = _case_data(rng, xs, ws, inp)
            with torch.no_grad():
                y0 = _FN[f](T(x), T(w), T(b), u, mode, geo)
            dy = _dy_for(rng, y0)
            yield f"{spec} {kind} {name} {inp}", f, x, w, b, geo, dy, _grads(f, x, w, b, dy, u, mode, geo)


def test_table_backward_at_a_clamped_code():
    """6u: x = +-31.5 gives s = 1, zp = rint(31.5) = 32 and rint(31.5) + 32 = 64, clamped to 63;
    the clamped element's dX follows the same formula (the brief's contract has no exception)."""
    spec = "6u x 6u"
    u = units_of(spec, "exact")
    Ga, Gb = u.gradients(1)
    x = np.float32([[-31.5, 31.5, 3.0], [1.0, -2.0, 0.5]])
    w = np.float32([[1.0, -0.5, 0.25], [0.3, 0.2, -1.0]])
    q, s, zp = R.quantize_tensor(x, 6, False)
    assert (s, zp, q[0, 1]) == (1.0, 32, 63)
    b = np.zeros(2, np.float32)
    dy = np.float32([[1.0, -0.5], [0.25, 2.0]])
    dx, dw, db, y = _grads("linear", x, w, b, dy, u, "table", None)
    assert_bits(y.detach().numpy(), linear_forward(x, w, b, u.table(), spec), "forward")
    rx, rw, rb = linear_table_backward(dy, x, w, Ga, Gb, spec)
    assert_scaled_close(dx, rx, "dX")
    assert_scaled_close(dw, rw, "dW")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spec", SAME_FORMATS)
def test_units_backward(rng, spec, kind):
    u = units_of(spec, kind)
    t = u.table()
    for what, f, x, w, b, geo, dy, (dx, dw, db, _) in _backward_runs(rng, u, "units", spec, kind):
        if f == "linear":
            rx, rw = linear_units_backward(dy, x, w, t, spec)
        elif f == "conv2d":
            rx, rw = conv2d_units_backward(dy, x, w, t, spec, *geo)
        else:
            rx, rw = conv1d_units_backward(dy, x, w, t, spec, *geo)
        assert_scaled_close(dx, rx, what + " dX")
        assert_scaled_close(dw, rw, what + " dW")
        rb = _db_ref(f, dy)
        np.testing.assert_allclose(db, rb, rtol=DB_RTOL, atol=DB_RTOL * np.abs(rb).max(), err_msg=what + " db")


def _float_grads(f, x, w, b, dy, geo):
    xr, wr, br = (T(v).requires_grad_(True) for v in (x, w, b))
    if f == "linear":
        y = F.linear(xr, wr, br)
    elif f == "conv2d":
        s, p, d, g = geo
        y = F.conv2d(xr, wr, br, s, p, d, g)
    else:
        s, p, d, g = geo
        y = F.conv1d(xr, wr, br, s, p, d, g)
    y.backward(T(dy))
    return xr.grad.numpy(), wr.grad.numpy(), br.grad.numpy()


def _ste_pair(rng, spec, f, xs, ws, geo):
    u = units_of(spec, "approx")
    x, w, b = _case_data(rng, xs, ws)
    with torch.no_grad():
        y0 = _FN[f](T(x), T(w), T(b), u, "ste", geo)
    dy = _dy_for(rng, y0)
    return _grads(f, x, w, b, dy, u, "ste", geo)[:3], _float_grads(f, x, w, b, dy, geo)


@pytest.mark.parametrize("spec", FORMATS)
@pytest.mark.parametrize("name,f,xs,ws,geo", BWD_CASES, ids=[c[0] for c in BWD_CASES])
def test_ste_backward_is_the_float_layers(rng, name, f, xs, ws, geo, spec):
    """dX and dW of "ste": torch's float layer's, bit for bit."""
    got, want = _ste_pair(rng, spec, f, xs, ws, geo)
    assert_bits(got[0], want[0], f"{spec} {name} dX")
    assert_bits(got[1], want[1], f"{spec} {name} dW")


@pytest.mark.parametrize("name,f,xs,ws,geo", BWD_CASES, ids=[c[0] for c in BWD_CASES])
def test_ste_bias_grad_is_the_float_layers(rng, name, f, xs, ws, geo):
    """db of "ste": torch's float layer's db (aten's own reduction), bit for bit."""
    for spec in FORMATS:
        got, want = _ste_pair(rng, spec, f, xs, ws, geo)
        assert_bits(got[2], want[2], f"{spec} {name} db")


def test_ste_bias_grad_smallest_case():
    """The smallest case found: a grouped 1x1 conv1d, L = 5."""
    r = np.random.default_rng(0)
    x, w = r.standard_normal((1, 2, 5)).astype(np.float32), r.standard_normal((2, 1, 1)).astype(np.float32)
    dy = np.float32([[[-1.9201782941818237, -0.7692868113517761, -0.06174393370747566, -0.5070600509643555,
                       -0.07557284086942673],
                      [0.08365797996520996, 0.8965755105018616, 2.203824043273926, 0.7317788600921631,
                       -1.4043285846710205]]])
    b = np.zeros(2, np.float32)
    got = _grads("conv1d", x, w, b, dy, units_of("8u x 8u", "exact"), "ste", (1, 0, 1, 2))[2]
    want = _float_grads("conv1d", x, w, b, dy, (1, 0, 1, 2))[2]
    assert_bits(got, want, "db")


# ------------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("spec", ["8u x 4u", "8s x 4u", "8u x 2u"])
def test_units_backward_refused_for_two_operand_formats(rng, spec):
    u = units_of(spec, "exact")
    x, w, b = _case_data(rng, (3, 5), (2, 5))
    for layer, call in (("lut_linear", lambda xr, wr: lt.lut_linear(xr, wr, None, u, backward="units")),
                        ("lut_conv2d", lambda xr, wr: lt.lut_conv2d(xr.t()[None, :, :, None], wr[:, :, None, None],
                                                                    None, u, backward="units"))):
        xr, wr = T(x).requires_grad_(True), T(w).requires_grad_(True)
        with pytest.raises(ValueError) as e:                       # at the call or at backward
            call(xr, wr).sum().backward()
        msg = str(e.value)
        assert layer in msg and "'table'" in msg and "'ste'" in msg, msg
    a = lt.approximate(_small_net(), u, backward="units")
    with pytest.raises(ValueError) as e:
        a(T(_input(rng, "normal", (2, 3, 5, 5)))).sum().backward()
    msg = str(e.value)
    assert msg.split(":")[0] in ("0", "3") and "'table'" in msg and "'ste'" in msg, msg


@pytest.mark.parametrize("spec", ["8u x 8u", "8u x 4u"])
def test_a_static_scale_of_an_unsigned_activation_needs_its_zero_point(rng, spec):
    u = units_of(spec, "exact")
    x = T(_input(rng, "normal", (2, 4, 6, 6)))
    msg = r"input_zero_point: .* take unsigned activation codes: a static input_scale needs its zero point too"
    with pytest.raises(ValueError, match="^lut_linear: " + msg):
        lt.lut_linear(x[0, 0], T(_weight(rng, (3, 6))), None, u, input_scale=0.05)
    with pytest.raises(ValueError, match="^lut_conv2d: " + msg):
        lt.lut_conv2d(x, T(_weight(rng, (3, 4, 3, 3))), None, u, input_scale=0.05)
    with pytest.raises(ValueError, match="^lut_conv1d: " + msg):
        lt.lut_conv1d(x[:, :, 0], T(_weight(rng, (3, 4, 3))), None, u, input_scale=0.05)
    a = lt.approximate(_small_net(), u, activations="static")
    a[0].input_scale = 0.05
    a[3].input_scale = 0.05
    with pytest.raises(ValueError, match=r"^0: " + msg):
        a(T(_input(rng, "normal", (2, 3, 5, 5))))


def test_a_static_scale_of_a_signed_narrow_activation_saturates_symmetrically(rng):
    from reference.zeropoint_ref import code_gemm, quantize_rows
    u = units_of("4s x 4s", "exact")
    x, w = _input(rng, "normal", (5, 6)), _weight(rng, (3, 6))
    s = np.float32(0.05)
    got = lt.lut_linear(T(x), T(w), None, u, input_scale=float(s)).numpy()
    qx = np.clip(np.rint((x / s).astype(np.float32)), -7, 7).astype(np.int64)
    qw, s_w, zp_w = quantize_rows(w, 4, True)
    want = code_gemm(qx, qw, u.table()).astype(np.float32) * (s * s_w).astype(np.float32)[None, :]
    assert np.array_equal(got.view(np.int32), want.astype(np.float32).view(np.int32))


def _second_derivative(f, x, w, u, mode, geo, loss):
    """A gradient penalty: loss(y) + |dloss/dx|^2, differentiated again."""
    xr, wr = T(x).requires_grad_(True), T(w).requires_grad_(True)
    y = _FN[f](xr, wr, None, u, mode, geo)
    first = loss(y)
    gx, = torch.autograd.grad(first, xr, create_graph=True)
    (first + (gx ** 2).sum()).backward()


DOUBLE_CASES = [BWD_CASES[0], BWD_CASES[2]]


@pytest.mark.parametrize("mode", ["table", "units"])
@pytest.mark.parametrize("name,f,xs,ws,geo", DOUBLE_CASES, ids=[c[0] for c in DOUBLE_CASES])
def test_double_backward_raises_when_dy_depends_on_the_input(rng, name, f, xs, ws, geo, mode):
    u = units_of("8u x 8u", "approx")
    x, w, _ = _case_data(rng, xs, ws)
    with pytest.raises(RuntimeError):
        _second_derivative(f, x, w, u, mode, geo, lambda y: (y ** 2).sum())


@pytest.mark.parametrize("mode", ["table", "units"])
@pytest.mark.parametrize("name,f,xs,ws,geo", DOUBLE_CASES, ids=[c[0] for c in DOUBLE_CASES])
def test_double_backward_raises_with_a_constant_dy(rng, name, f, xs, ws, geo, mode):
    """loss = y.sum(): dY is a constant, yet dL/dx = dY W depends on W, so the penalty's
    second derivative is not zero: "table" and "units" raise (not: treated as a constant)."""
    u = units_of("8u x 8u", "approx")
    x, w, _ = _case_data(rng, xs, ws)
    with pytest.raises(RuntimeError):
        _second_derivative(f, x, w, u, mode, geo, lambda y: y.sum())


def test_ste_is_twice_differentiable_as_the_float_layer():
    """1 x 1 linear, loss = y + (dy/dx)^2 = x w + w^2: d/dw = x + 2 w = 4.5, as the float layer
    (the STE's gradients are the float layer's, graph and all)."""
    x = T(np.float32([[0.5]])).requires_grad_(True)
    w = T(np.float32([[2.0]])).requires_grad_(True)
    y = lt.lut_linear(x, w, None, units_of("8u x 8u", "exact"), backward="ste")
    gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
    (y.sum() + (gx ** 2).sum()).backward()
    assert w.grad.item() == pytest.approx(4.5)


# ------------------------------------------------------------------ static quantization (calibrate)
def test_calibrate_sets_the_ranges_scale_and_zero_point_and_static_calls_follow_them():
    """calibrate records each layer's input range; a layer of an unsigned unit then quantizes with
    the scale and zero point of that range (the reference's quantizer on [lo, hi]), saturating beyond
    it, and the pair survives a state_dict round trip."""
    import copy
    from reference.zeropoint_ref import code_gemm, quantize_rows, quantize_tensor
    torch.manual_seed(3)
    lin = torch.nn.Linear(9, 4)
    u = units_of("8u x 8u", "approx")
    m = lt.approximate(torch.nn.Sequential(copy.deepcopy(lin)), u)
    calib = torch.randn(16, 9)
    lt.calibrate(m, [calib])
    layer = m[0]
    lo, hi = float(calib.min()), float(calib.max())
    _, s_ref, zp_ref = quantize_tensor(np.array([lo, hi], np.float32), 8, False)
    assert np.float32(layer.input_scale) == s_ref and layer.input_zero_point == int(zp_ref)
    x = torch.randn(5, 9) * 1.5                                     # beyond the calibrated range: saturates
    s, zp = np.float32(s_ref), int(zp_ref)
    qx = np.clip(np.rint((x.numpy() / s).astype(np.float32)).astype(np.int64) + zp, 0, 255)
    qw, s_w, zp_w = quantize_rows(lin.weight.detach().numpy(), 8, False)
    acc = code_gemm(qx, qw, u.table()) - qx.sum(1)[:, None] * zp_w[None, :] - zp * qw.sum(1)[None, :] \
        + 9 * zp * zp_w[None, :]
    want = acc.astype(np.float32) * (s * s_w).astype(np.float32)[None, :] + lin.bias.detach().numpy()[None, :]
    got = m(x).detach().numpy()
    assert np.array_equal(got.view(np.int32), want.astype(np.float32).view(np.int32))
    m2 = lt.approximate(torch.nn.Sequential(copy.deepcopy(lin)), u)
    m2.load_state_dict(m.state_dict())
    assert m2[0].input_zero_point == zp and torch.equal(m2(x), m(x))


@pytest.mark.parametrize("zp,msg", [
    (300, r"expected a code of the 8-bit unsigned activation .* in \[0, 255\], got 300"),
    (-1, r"in \[0, 255\], got -1"),
    (None, r"a static input_scale needs its zero point too"),
    (2.5, r"expected an int or None, got float"),
])
def test_a_static_zero_point_outside_the_code_range_is_refused(zp, msg):
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    with pytest.raises((ValueError, TypeError), match=r"^lut_linear: input_zero_point: .*" + msg):
        lt.lut_linear(x, w, None, units_of("8u x 8u", "exact"), input_scale=0.1, input_zero_point=zp)


def test_zero_points_are_refused_where_the_activation_is_symmetric():
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"^lut_linear: input_zero_point: 4s x 4s -> 8s units quantize the input "
                                         r"symmetrically \(zero point 0\), got 3"):
        lt.lut_linear(x, w, None, units_of("4s x 4s", "exact"), input_scale=0.1, input_zero_point=3)
    with pytest.raises(ValueError, match=r"input_zero_point=3 without a static input_scale"):
        lt.lut_linear(x, w, None, units_of("8u x 8u", "exact"), input_zero_point=3)


@pytest.mark.parametrize("spec", ["8u x 8u", "8u x 4u", "8s x 8s"])
def test_one_weight_scale_per_tensor(spec):
    """weights="tensor": one scale (and zero point) for the whole weight, the rest of the contract
    unchanged — against the reference with the weight quantized as one tensor."""
    from reference.zeropoint_ref import code_gemm, quantize_tensor
    u = Units.exact(spec) if spec == "8s x 8s" else units_of(spec, "approx")
    f = u.format
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 11)).astype(np.float32)
    w = rng.standard_normal((4, 11)).astype(np.float32)
    w[1] *= 5.0                                              # a channel far larger than the others
    got = lt.lut_linear(T(x), T(w), None, u, weights="tensor").numpy()
    qx, s_x, zp_x = quantize_tensor(x, f.a_bits, f.a_signed)
    qw, s_w, zp_w = quantize_tensor(w, f.b_bits, f.b_signed)
    acc = code_gemm(qx, qw, u.table()) - int(zp_w) * qx.sum(1)[:, None] - int(zp_x) * qw.sum(1)[None, :] \
        + 11 * int(zp_x) * int(zp_w)
    want = acc.astype(np.float32) * np.float32(s_x * s_w)
    assert np.array_equal(got.view(np.int32), want.astype(np.float32).view(np.int32))
    m = lt.approximate(torch.nn.Sequential(torch.nn.Linear(11, 4, bias=False)), u, weights="tensor")
    with torch.no_grad():
        m[0].weight.copy_(T(w))
        assert np.array_equal(m(T(x)).numpy().view(np.int32), want.astype(np.float32).view(np.int32))
    with pytest.raises(ValueError, match=r"^lut_linear: weights: expected one of \('channel', 'tensor'\)"):
        lt.lut_linear(T(x), T(w), None, u, weights="row")


def test_signed_8x8_through_the_zero_point_path_has_the_int8_paths_bits():
    from lutcore.torch import _formats
    rng = np.random.default_rng(2)
    x, w = T(rng.standard_normal((7, 33)).astype(np.float32)), T(rng.standard_normal((5, 33)).astype(np.float32))
    for u in (Units.exact(), Units.from_mul(lambda a, b: (a * b) & ~7)):
        assert torch.equal(lt.lut_linear(x, w, None, u), _formats.linear(x, w, None, u, "ste", None, "t", 2))


def test_the_cached_weight_codes_follow_in_place_edits():
    """A layer's weight codes are kept between calls, and re-made when the values change — an
    optimizer step or an in-place ``.data`` edit — so every call computes with the current weight."""
    u = units_of("8u x 8u", "approx")
    torch.manual_seed(1)
    lin = torch.nn.Linear(9, 4)
    m = lt.approximate(torch.nn.Sequential(lin), u)
    x = torch.randn(3, 9)
    with torch.no_grad():
        y0 = m(x)
        assert torch.equal(m(x), y0)
        m[0].weight.data[1, 2] += 0.75
        fresh = lt.lut_linear(x, m[0].weight.detach().clone(), m[0].bias, u)
        assert torch.equal(m(x), fresh) and not torch.equal(fresh, y0)
