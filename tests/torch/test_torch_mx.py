"""lutcore.torch through MX units ("mxfp8", ...: lutcore.units.mxunits.MXUnits) against the contract,
with the numpy oracle of tests/reference/mxunits_ref.py:

* forward: y = units.matmul(X, W^T) + bias, X the input's rows (linear) or the conv's patches
  (F.unfold(x).transpose(1, 2) per group, columns in (c, i, j) order, padding zeros before the
  quantization), W = weight.reshape(O, -1) per group -- bit for bit, for lut_linear / lut_conv2d /
  lut_conv1d, approximate()'s layers and transformers' Conv1D, on odd shapes (groups 2, stride 2,
  padding, dilation);
* backward "ste": torch's float layer's gradients at the float inputs, bit for bit;
* backward "units": per group dX = units.matmul(dY, W), dW = units.matmul(dY^T, X); "table": the
  gradient tables (dX[m, k] = sum_n dY[m, n] sb Ga[ca, cb], dW likewise), both bit for bit, a conv's
  patch gradients folded with F.fold; db the sum of dY;
* "units" / "table" are differentiable once; the refusals name the layer; the same bits at 1 and 2
  threads; a state_dict goes back into the float model; a tiny model trains through each backward.

Error budgets (named):
    DB_RTOL      db (float32 sum of dY, order unspecified) vs the float64 sum
"""
import numpy as np
import pytest

import torch
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import lutcore.torch as lt  # noqa: E402
from lutcore.mx import mx_quantize  # noqa: E402
from lutcore.units.fpmul import FPUnit  # noqa: E402
from lutcore.units.mxunits import MXUnits  # noqa: E402
from reference import mxunits_ref as R
from reference.mx_values import assert_bits, bits, data, mm_ref, table_of  # noqa: F401, E402

DB_RTOL = 1e-6

SPECS = ["mxfp8", "mxfp4:mitchell", "mxint8:lmul", "mxfp6xfp8:truncated:2"]
T = torch.from_numpy


# ------------------------------------------------------------------ the oracle of the contract


def grads_ref(u, mode, dy, X, W):
    """(dW (O, K), dX (M, K)) of y = X @ W^T through the unit: "units" or "table"."""
    if mode == "units":
        return mm_ref(u, dy.T, X), mm_ref(u, dy, W)
    qx = mx_quantize(X, u.a.name, u.block, axis=1)
    qw = mx_quantize(W, u.b.name, u.block, axis=1)
    Ga, GbT = R.gradient_tables_ref(table_of(u), u.a.values(), u.b.values())
    return R.table_backward_ref(dy, qx.codes, qx.scales, qw.codes, qw.scales, Ga, GbT, X.shape[1], u.block)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class Geo:
    """A conv's geometry as 2-D (a conv1d: height 1)."""

    def __init__(self, dim, ws, stride, padding, dilation, groups):
        self.dim, self.groups = dim, groups
        if dim == 1:
            self.k, self.s, self.p, self.d = (1, ws[2]), (1, stride), (0, padding), (1, dilation)
        else:
            self.k, self.s, self.p, self.d = ws[2:], _pair(stride), _pair(padding), _pair(dilation)

    def as2d(self, x):
        return x[:, :, None, :] if self.dim == 1 else x


def conv_patches(x, geo, g):
    """(N * L, Kg) float32 patches of group g's channels (F.unfold: (c, i, j) columns) and (OH, OW)."""
    x4 = geo.as2d(torch.as_tensor(x))
    Cg = x4.shape[1] // geo.groups
    u = F.unfold(x4[:, g * Cg:(g + 1) * Cg], geo.k, dilation=geo.d, padding=geo.p, stride=geo.s)   # (N, Kg, L)
    N, Kg, L = u.shape
    H, W = x4.shape[2:]
    OH = (H + 2 * geo.p[0] - geo.d[0] * (geo.k[0] - 1) - 1) // geo.s[0] + 1
    OW = (W + 2 * geo.p[1] - geo.d[1] * (geo.k[1] - 1) - 1) // geo.s[1] + 1
    assert OH * OW == L
    return u.transpose(1, 2).reshape(N * L, Kg).numpy().copy(), (OH, OW)


def conv_forward_ref(u, x, w, b, geo):
    N, O = x.shape[0], w.shape[0]
    Og = O // geo.groups
    ys = []
    for g in range(geo.groups):
        X, (OH, OW) = conv_patches(x, geo, g)
        Wg = w[g * Og:(g + 1) * Og].reshape(Og, -1)
        y = mm_ref(u, X, Wg.T)
        if b is not None:
            y = (y + b[g * Og:(g + 1) * Og][None, :]).astype(np.float32)
        ys.append(y.reshape(N, OH * OW, Og).transpose(0, 2, 1))
    y = np.concatenate(ys, axis=1)
    return y.reshape((N, O, OW) if geo.dim == 1 else (N, O, OH, OW))


def conv_backward_ref(u, mode, dy, x, w, geo):
    """(dX, dW) of the conv through the unit, per group; the patch gradients folded with F.fold."""
    N, O = x.shape[0], w.shape[0]
    Og = O // geo.groups
    x4 = geo.as2d(torch.as_tensor(x))
    Cg = x4.shape[1] // geo.groups
    dy2 = dy.reshape(N, O, -1)                                     # (N, O, L)
    dxs, dws = [], []
    for g in range(geo.groups):
        X, _ = conv_patches(x, geo, g)
        Wg = w[g * Og:(g + 1) * Og].reshape(Og, -1)
        dYg = np.ascontiguousarray(dy2[:, g * Og:(g + 1) * Og].transpose(0, 2, 1).reshape(-1, Og))   # (N*L, Og)
        dWg, dXp = grads_ref(u, mode, dYg, X, Wg)
        L = dy2.shape[2]
        cols = torch.from_numpy(np.ascontiguousarray(dXp.reshape(N, L, -1).transpose(0, 2, 1)))
        dxs.append(F.fold(cols, x4.shape[2:], geo.k, dilation=geo.d, padding=geo.p, stride=geo.s).numpy())
        dws.append(dWg.reshape((Og,) + w.shape[1:]))
    dx = np.concatenate(dxs, axis=1)
    if geo.dim == 1:
        dx = dx[:, :, 0, :]
    return dx, np.concatenate(dws, axis=0)


# (name, dim, x shape, w shape, stride, padding, dilation, groups)
CONVS = [
    ("2d_g1_p1", 2, (2, 3, 7, 6), (5, 3, 3, 3), 1, 1, 1, 1),
    ("2d_g2_s2_p1_d2", 2, (1, 4, 9, 8), (6, 2, 3, 3), 2, 1, 2, 2),
    ("2d_g2_rect", 2, (2, 4, 6, 7), (4, 2, 2, 3), (2, 1), (1, 0), 1, 2),
    ("2d_k33", 2, (1, 5, 6, 6), (3, 5, 3, 3), 1, 2, 1, 1),            # K = 45 > 32: two blocks
    ("1d_s2_p3", 1, (2, 5, 17), (7, 5, 5), 2, 3, 1, 1),
    ("1d_g2_p2_d2", 1, (3, 6, 11), (4, 3, 3), 1, 2, 2, 2),
    ("1d_k40", 1, (1, 8, 13), (3, 8, 5), 1, 1, 1, 1),                # K = 40
]
LINEARS = [("1x1", (1, 1), 1), ("7x31", (7, 31), 5), ("33x33", (33, 33), 7), ("3d_65", (2, 3, 65), 33),
           ("1x100", (1, 100), 1)]


def _conv_fn(dim):
    return lt.lut_conv2d if dim == 2 else lt.lut_conv1d


def _float_conv(dim):
    return F.conv2d if dim == 2 else F.conv1d


# ------------------------------------------------------------------ the oracle's pieces, checked
def test_oracle_conv_with_float_units_is_torchs_conv(rng):
    """The patch layout and fold: with float64 "units" (a plain matmul) the oracle's conv and its
    patch-gradient fold are torch's conv and its input gradient."""
    for name, dim, xs, ws, st, p, d, g in CONVS:
        x, w = data(rng, xs), data(rng, ws)
        geo = Geo(dim, ws, st, p, d, g)
        Og = ws[0] // g
        ys = []
        for gi in range(g):
            X, (OH, OW) = conv_patches(x, geo, gi)
            ys.append((X.astype(np.float64) @ w[gi * Og:(gi + 1) * Og].reshape(Og, -1).T.astype(np.float64))
                      .reshape(xs[0], OH * OW, Og).transpose(0, 2, 1))
        y = np.concatenate(ys, 1).reshape(_float_conv(dim)(T(x).double(), T(w).double(), None, st, p, d, g).shape)
        want = _float_conv(dim)(T(x).double(), T(w).double(), None, st, p, d, g).numpy()
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12, err_msg=name)


# ------------------------------------------------------------------ forward
@pytest.mark.parametrize("spec", SPECS)
def test_linear_forward_bits(rng, spec):
    u = MXUnits.parse(spec)
    for name, xs, O in LINEARS:
        x, w = data(rng, xs), data(rng, (O, xs[-1]))
        b = data(rng, (O,)) if O != 5 else None
        got = lt.lut_linear(T(x), T(w), None if b is None else T(b), spec)
        want = mm_ref(u, x.reshape(-1, xs[-1]), w.T)
        if b is not None:
            want = (want + b[None, :]).astype(np.float32)
        assert_bits(got, want.reshape(*xs[:-1], O), f"{spec} {name}")
        assert_bits(lt.lut_linear(T(x), T(w), None if b is None else T(b), u), want.reshape(*xs[:-1], O),
                    f"{spec} {name} (an MXUnits)")


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("name,dim,xs,ws,st,p,d,g", CONVS, ids=[c[0] for c in CONVS])
def test_conv_forward_bits(rng, name, dim, xs, ws, st, p, d, g, spec):
    u = MXUnits.parse(spec)
    x, w, b = data(rng, xs), data(rng, ws), data(rng, (ws[0],))
    geo = Geo(dim, ws, st, p, d, g)
    got = _conv_fn(dim)(T(x), T(w), T(b), spec, st, p, d, g)
    assert_bits(got, conv_forward_ref(u, x, w, b, geo), f"{spec} {name}")
    got = _conv_fn(dim)(T(x), T(w), None, spec, stride=st, padding=p, dilation=d, groups=g)
    assert_bits(got, conv_forward_ref(u, x, w, None, geo), f"{spec} {name} no bias")


class _Net(nn.Module):
    """conv2d (groups 2, stride 2) -> conv1d over the rows -> linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c2 = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
        self.c1 = nn.Conv1d(6, 4, 3, padding=1, dilation=1)
        self.fc = nn.Linear(4 * 9, 5)

    def forward(self, x):
        h = torch.relu(self.c2(x))                   # (N, 6, 3, 3)
        h = torch.relu(self.c1(h.flatten(2)))         # (N, 4, 9)
        return self.fc(h.flatten(1))


@pytest.mark.parametrize("spec", ["mxfp8", "mxfp4:lmul"])
def test_approximate_model_equals_the_reference_chain(rng, spec):
    u = MXUnits.parse(spec)
    net = _Net()
    a = lt.approximate(net, spec)
    assert isinstance(a.c2, lt.ApproxConv2d) and isinstance(a.c1, lt.ApproxConv1d) and isinstance(a.fc, lt.ApproxLinear)
    assert all(isinstance(v, MXUnits) and v == u for v in lt.assignment(a).values())
    x = data(rng, (2, 4, 6, 6))
    p = {k: v.detach().numpy() for k, v in net.named_parameters()}
    h = conv_forward_ref(u, x, p["c2.weight"], p["c2.bias"], Geo(2, (6, 2, 3, 3), 2, 1, 1, 2))
    h = np.maximum(h, np.float32(0)).reshape(2, 6, 9)
    h = conv_forward_ref(u, h, p["c1.weight"], p["c1.bias"], Geo(1, (4, 6, 3), 1, 1, 1, 1))
    h = np.maximum(h, np.float32(0)).reshape(2, 36)
    want = (mm_ref(u, h, p["fc.weight"].T) + p["fc.bias"][None, :]).astype(np.float32)
    assert_bits(a(T(x)), want, "grad")
    with torch.no_grad():
        assert_bits(a(T(x)), want, "no_grad")


@pytest.mark.parametrize("mode", ["ste", "units", "table"])
def test_hf_conv1d(rng, mode):
    """transformers' Conv1D (weight (K, N), y = x W + b): forward units.matmul(X, W) + b; "ste" the
    float module's gradients; "units" / "table" the contract's with W^T (N, K) as the weight rows."""
    import copy

    from transformers import pytorch_utils
    torch.manual_seed(3)
    m = pytorch_utils.Conv1D(13, 40)                        # nf=13 outputs, nx=40 inputs; weight (40, 13)
    nn.init.normal_(m.bias)
    u = MXUnits.parse("mxfp8:mitchell")
    a = lt.approximate(m, u, backward=mode)
    assert isinstance(a, pytorch_utils.Conv1D) and type(a).__name__ == "ApproxConv1D"
    x = data(rng, (2, 5, 40))
    W = m.weight.detach().numpy()                           # (K, N): x @ W
    want = (mm_ref(u, x.reshape(-1, 40), W) + m.bias.detach().numpy()[None, :]).astype(np.float32)
    xr = T(x).requires_grad_(True)
    y = a(xr)
    assert_bits(y, want.reshape(2, 5, 13), "forward")
    dy = data(rng, (2, 5, 13))
    y.backward(T(dy))
    if mode == "ste":
        f = copy.deepcopy(m)
        xf = T(x).requires_grad_(True)
        f(xf).backward(T(dy))
        rX, rWT = xf.grad.numpy(), f.weight.grad.numpy()
    else:
        rW, rX = grads_ref(u, mode, dy.reshape(-1, 13), x.reshape(-1, 40), np.ascontiguousarray(W.T))
        rWT = np.ascontiguousarray(rW.T)
    assert_bits(xr.grad, rX.reshape(2, 5, 40), "dX")
    assert_bits(a.weight.grad, rWT, "dW (K, N)")
    np.testing.assert_allclose(a.bias.grad.numpy(), dy.reshape(-1, 13).astype(np.float64).sum(0), rtol=DB_RTOL,
                               atol=DB_RTOL * np.abs(dy).sum())


# ------------------------------------------------------------------ backward
def _run(fn, x, w, b, dy):
    xr, wr, br = (T(v).requires_grad_(True) for v in (x, w, b))
    y = fn(xr, wr, br)
    y.backward(T(dy))
    return y, xr.grad, wr.grad, br.grad


def _float_grads(kind, x, w, b, dy, geo_args=None):
    if kind == "linear":
        return _run(lambda xr, wr, br: F.linear(xr, wr, br), x, w, b, dy)[1:]
    dim, st, p, d, g = geo_args
    return _run(lambda xr, wr, br: _float_conv(dim)(xr, wr, br, st, p, d, g), x, w, b, dy)[1:]


@pytest.mark.parametrize("mode", ["units", "table"])
@pytest.mark.parametrize("spec", SPECS)
def test_linear_backward_bits(rng, spec, mode):
    u = MXUnits.parse(spec)
    for name, xs, O in LINEARS:
        x, w, b = data(rng, xs), data(rng, (O, xs[-1])), data(rng, (O,))
        dy = data(rng, xs[:-1] + (O,))
        y, dx, dw, db = _run(lambda xr, wr, br: lt.lut_linear(xr, wr, br, spec, backward=mode), x, w, b, dy)
        rW, rX = grads_ref(u, mode, dy.reshape(-1, O), x.reshape(-1, xs[-1]), w)
        assert_bits(dx, rX.reshape(xs), f"{spec} {mode} {name} dX")
        assert_bits(dw, rW, f"{spec} {mode} {name} dW")
        fdb = _float_grads("linear", x, w, b, dy)[2]
        np.testing.assert_allclose(db.numpy(), dy.reshape(-1, O).astype(np.float64).sum(0), rtol=DB_RTOL,
                                   atol=DB_RTOL * np.abs(dy).sum(), err_msg=f"{spec} {name} db")
        assert_bits(db, fdb.numpy(), f"{spec} {mode} {name} db: torch's sum")


@pytest.mark.parametrize("mode", ["units", "table"])
@pytest.mark.parametrize("spec", ["mxfp8", "mxfp4:mitchell", "mxfp6xfp8:truncated:2"])
@pytest.mark.parametrize("name,dim,xs,ws,st,p,d,g", CONVS, ids=[c[0] for c in CONVS])
def test_conv_backward_bits(rng, name, dim, xs, ws, st, p, d, g, spec, mode):
    u = MXUnits.parse(spec)
    x, w, b = data(rng, xs), data(rng, ws), data(rng, (ws[0],))
    geo = Geo(dim, ws, st, p, d, g)
    with torch.no_grad():
        y0 = _conv_fn(dim)(T(x), T(w), T(b), spec, st, p, d, g)
    dy = data(rng, tuple(y0.shape))
    y, dx, dw, db = _run(lambda xr, wr, br: _conv_fn(dim)(xr, wr, br, spec, st, p, d, g, backward=mode), x, w, b, dy)
    assert_bits(y, y0.numpy(), "forward")
    rX, rW = conv_backward_ref(u, mode, dy, x, w, geo)
    assert_bits(dx, rX, f"{spec} {mode} {name} dX")
    assert_bits(dw, rW, f"{spec} {mode} {name} dW")
    rb = dy.astype(np.float64).sum(axis=tuple(i for i in range(dy.ndim) if i != 1))
    np.testing.assert_allclose(db.numpy(), rb, rtol=DB_RTOL, atol=DB_RTOL * np.abs(dy).sum(), err_msg="db")
    fdb = _float_grads("conv", x, w, b, dy, (dim, st, p, d, g))[2]
    assert_bits(db, fdb.numpy(), f"{spec} {mode} {name} db: torch's sum")


@pytest.mark.parametrize("spec", ["mxfp8", "mxfp4:mitchell"])
def test_ste_backward_is_the_float_layers(rng, spec):
    for name, xs, O in LINEARS:
        x, w, b = data(rng, xs), data(rng, (O, xs[-1])), data(rng, (O,))
        dy = data(rng, xs[:-1] + (O,))
        got = _run(lambda xr, wr, br: lt.lut_linear(xr, wr, br, spec, backward="ste"), x, w, b, dy)[1:]
        want = _float_grads("linear", x, w, b, dy)
        for gg, ww, what in zip(got, want, ("dX", "dW", "db")):
            assert_bits(gg, ww.numpy(), f"{spec} {name} {what}")
    for name, dim, xs, ws, st, p, d, g in CONVS:
        x, w, b = data(rng, xs), data(rng, ws), data(rng, (ws[0],))
        with torch.no_grad():
            dy = data(rng, tuple(_conv_fn(dim)(T(x), T(w), T(b), spec, st, p, d, g).shape))
        got = _run(lambda xr, wr, br: _conv_fn(dim)(xr, wr, br, spec, st, p, d, g, backward="ste"), x, w, b, dy)[1:]
        want = _float_grads("conv", x, w, b, dy, (dim, st, p, d, g))
        for gg, ww, what in zip(got, want, ("dX", "dW", "db")):
            assert_bits(gg, ww.numpy(), f"{spec} {name} {what}")


def test_exact_table_backward_is_the_ste_at_the_quantized_operands(rng):
    """The exact multiplier's tables: dX = sum_n dY[m, n] Wq[n, k], dW = sum_m dY[m, n] Xq[m, k], in
    index order in float32 (Xq, Wq dequantized)."""
    x, w, b, dy = data(rng, (7, 70)), data(rng, (9, 70)), data(rng, (9,)), data(rng, (7, 9))
    _, dx, dw, _ = _run(lambda xr, wr, br: lt.lut_linear(xr, wr, br, "mxfp8", backward="table"), x, w, b, dy)
    xq = mx_quantize(x, "e4m3", 32, axis=1).dequantize()
    wq = mx_quantize(w, "e4m3", 32, axis=1).dequantize()
    assert_bits(dx, R.index_order_sum(dy[:, :, None] * wq[None], axis=1), "dX")
    assert_bits(dw, R.index_order_sum(dy[:, :, None] * xq[:, None, :], axis=0), "dW")


def _second_derivative(fn, x, w):
    xr, wr = T(x).requires_grad_(True), T(w).requires_grad_(True)
    y = fn(xr, wr)
    first = (y ** 2).sum()
    gx, = torch.autograd.grad(first, xr, create_graph=True)
    (first + (gx ** 2).sum()).backward()


@pytest.mark.parametrize("mode", ["units", "table"])
def test_units_and_table_are_differentiable_once(rng, mode):
    x, w = data(rng, (3, 40)), data(rng, (4, 40))
    with pytest.raises(RuntimeError):
        _second_derivative(lambda xr, wr: lt.lut_linear(xr, wr, None, "mxfp8", backward=mode), x, w)
    xc, wc = data(rng, (1, 4, 6, 6)), data(rng, (2, 2, 3, 3))
    with pytest.raises(RuntimeError):
        _second_derivative(lambda xr, wr: lt.lut_conv2d(xr, wr, None, "mxfp8", 1, 1, 1, 2, backward=mode), xc, wc)


def test_ste_is_twice_differentiable_as_the_float_layer():
    """1 x 1 linear, loss = y + (dy/dx)^2 = x w + w^2: d/dw = x + 2 w = 4.5."""
    x = T(np.float32([[0.5]])).requires_grad_(True)
    w = T(np.float32([[2.0]])).requires_grad_(True)
    y = lt.lut_linear(x, w, None, "mxfp8", backward="ste")
    gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
    (y.sum() + (gx ** 2).sum()).backward()
    assert w.grad.item() == pytest.approx(4.5)


# ------------------------------------------------------------------ threads
@pytest.mark.parametrize("mode", ["ste", "units", "table"])
def test_same_bits_at_1_and_2_threads(rng, mode):
    x, w, b = data(rng, (70, 130)), data(rng, (45, 130)), data(rng, (45,))
    dy = data(rng, (70, 45))
    out = [_run(lambda xr, wr, br: lt.lut_linear(xr, wr, br, "mxfp8:lmul", backward=mode, threads=n), x, w, b, dy)
           for n in (1, 2)]
    for a, c in zip(*out):
        assert_bits(a, c.detach().numpy(), f"linear {mode}")
    xc, wc, bc = data(rng, (2, 4, 11, 10)), data(rng, (6, 2, 3, 3)), data(rng, (6,))
    with torch.no_grad():
        dyc = data(rng, tuple(lt.lut_conv2d(T(xc), T(wc), T(bc), "mxfp8", 2, 1, 1, 2).shape))
    out = [_run(lambda xr, wr, br: lt.lut_conv2d(xr, wr, br, "mxfp8", 2, 1, 1, 2, backward=mode, threads=n),
                xc, wc, bc, dyc) for n in (1, 2)]
    for a, c in zip(*out):
        assert_bits(a, c.detach().numpy(), f"conv {mode}")
    net = _Net()
    xs = T(data(rng, (2, 4, 6, 6)))
    ys = [lt.approximate(net, "mxfp4", backward=mode, threads=n)(xs) for n in (1, 2)]
    assert_bits(ys[0], ys[1].detach().numpy(), "model")


# ------------------------------------------------------------------ refusals
def test_refusals_name_the_layer(rng):
    x, w = T(data(rng, (3, 40))), T(data(rng, (4, 40)))
    with pytest.raises(ValueError, match=r"^lut_linear: .*static input_scale"):
        lt.lut_linear(x, w, None, "mxfp8", input_scale=0.1)
    with pytest.raises(ValueError, match=r"^lut_linear: .*weights='tensor'"):
        lt.lut_linear(x, w, None, "mxfp8", weights="tensor")
    with pytest.raises(ValueError, match=r"^lut_linear: .*grad_h=3"):
        lt.lut_linear(x, w, None, "mxfp8", backward="table", grad_h=3)
    with pytest.raises(TypeError, match=r"^lut_linear: .*float64"):
        lt.lut_linear(x.double(), w, None, "mxfp8")
    xc, wc = T(data(rng, (1, 4, 6, 6))), T(data(rng, (2, 4, 3, 3)))
    with pytest.raises(ValueError, match=r"^lut_conv2d: .*static input_scale"):
        lt.lut_conv2d(xc, wc, None, "mxfp8", input_scale=0.1)
    with pytest.raises(TypeError, match=r"^lut_conv2d: .*float64"):
        lt.lut_conv2d(xc.double(), wc, None, "mxfp8")
    with pytest.raises(TypeError, match=r"^lut_conv1d: .*float64"):
        lt.lut_conv1d(xc[:, :, 0].double(), wc[:, :, 0], None, "mxfp8")
    with pytest.raises(ValueError, match=r"^lut_conv1d: .*weights='tensor'"):
        lt.lut_conv1d(xc[:, :, 0], wc[:, :, 0], None, "mxfp8", weights="tensor")
    with pytest.raises(ValueError, match=r"mxfp9"):
        lt.lut_linear(x, w, None, "mxfp9")


def test_model_refusals_name_the_layer(rng):
    net = _Net()
    x = T(data(rng, (2, 4, 6, 6)))
    with pytest.raises(ValueError, match=r"^c2: .*weights='tensor'"):         # at the conversion or the call
        lt.approximate(net, "mxfp8", weights="tensor")(x)
    with pytest.raises(ValueError, match=r"^c2: .*grad_h=3"):
        lt.approximate(net, "mxfp8", backward="table", grad_h=3)(x)
    a = lt.approximate(net, "mxfp8")
    with pytest.raises(TypeError, match=r"^c2: .*float64"):
        a(x.double())


def test_static_activations_are_refused_naming_the_layer(rng):
    """An MX block has no static scale: activations="static", a static input_scale set by hand, or
    calibrate -- each a ValueError naming the layer (not a crash, nor a silently ignored scale)."""
    net = _Net()
    x = T(data(rng, (2, 4, 6, 6)))
    a = lt.approximate(net, "mxfp8", activations="static")
    a.c2.input_scale = 0.05
    a.c1.input_scale = 0.05
    a.fc.input_scale = 0.05
    with pytest.raises(ValueError, match=r"^c2: .*static input_scale"):
        a(x)
    b = lt.approximate(net, "mxfp8", activations="static")           # not calibrated yet
    with pytest.raises(ValueError, match=r"^c2: .*MX units"):
        b(x)
    c = lt.approximate(net, "mxfp8")
    y = c(x)
    with pytest.raises(ValueError, match=r"c2.*MX units"):
        lt.calibrate(c, [x])
    assert torch.equal(c(x), y)                                       # the refused calibrate changed nothing


# ------------------------------------------------------------------ state and training
def test_state_dict_round_trip(rng):
    net = _Net()
    a = lt.approximate(net, "mxfp8", backward="table")
    sd = a.state_dict()
    assert list(lt.float_state_dict(sd)) == list(net.state_dict())
    fresh = _Net()
    with torch.no_grad():
        for p in fresh.parameters():
            p.add_(1.0)
    fresh.load_state_dict(lt.float_state_dict(sd))                   # into the float model, strictly
    x = T(data(rng, (2, 4, 6, 6)))
    assert torch.equal(fresh(x), net(x))
    b = lt.approximate(fresh, "mxfp4")
    b.load_state_dict(a.state_dict())
    lt.set_units(b, "mxfp8")
    assert torch.equal(b(x), a(x))
    lt.set_units(a, "mxfp4:mitchell")
    assert torch.equal(a(x), lt.approximate(net, "mxfp4:mitchell")(x))


def test_units_per_layer_and_a_saved_directory(rng, tmp_path):
    """A mapping: MX, integer and float layers side by side; a saved MXUnits directory as units."""
    net = _Net()
    u = MXUnits.parse("mxfp6:mitchell")
    d = str(tmp_path / "u")
    u.save(d)
    a = lt.approximate(net, {"c2": d, "fc": "exact"}, backward="table")
    got = lt.assignment(a)
    assert got["c2"] == u and not isinstance(got["fc"], MXUnits) and got["c1"] is None
    x = data(rng, (2, 4, 6, 6))
    p = {k: v.detach().numpy() for k, v in net.named_parameters()}
    h = conv_forward_ref(u, x, p["c2.weight"], p["c2.bias"], Geo(2, (6, 2, 3, 3), 2, 1, 1, 2))
    with torch.no_grad():
        assert_bits(a.c2(T(x)), h, "c2 through the saved unit")
    a(T(x)).sum().backward()
    assert all(torch.isfinite(q.grad).all() for q in a.parameters())


@pytest.mark.parametrize("mode", ["ste", "units", "table"])
def test_training_steps_through_mxfp8(rng, mode):
    net = _Net()
    a = lt.approximate(net, "mxfp8", backward=mode)
    opt = torch.optim.SGD(a.parameters(), lr=0.05)
    x = T(data(rng, (8, 4, 6, 6), spread=1))
    target = torch.from_numpy(rng.integers(0, 5, 8))
    before = [p.detach().clone() for p in a.parameters()]
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(a(x), target)
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in a.parameters())
        opt.step()
        losses.append(float(loss.detach()))
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses
    assert all(not torch.equal(p, q) for p, q in zip(a.parameters(), before))
