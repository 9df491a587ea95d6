"""Gradient tables (issue 27): Units.gradients / with_gradients / units directories, and
backward="table" in lutcore.torch against a separately written numpy reference."""
from _paths import TESTS  # noqa: F401
import os
import warnings

import numpy as np
import pytest

from lutcore.units import Units, approx


def _ref_diff(mul, h):
    """Plain loops over int8 values: Ga[a, b] = (f(min(a+h,127), b) - f(max(a-h,-128), b)) / (hi - lo)."""
    f = lambda a, b: float(mul[(a & 0xff) * 256 + (b & 0xff)])     # noqa: E731
    ga = np.zeros((256, 256), np.float64)
    gb = np.zeros((256, 256), np.float64)
    vals = range(-128, 128)
    for a in vals:
        hi, lo = min(a + h, 127), max(a - h, -128)
        for b in vals:
            ga[a & 0xff, b & 0xff] = (f(hi, b) - f(lo, b)) / (hi - lo)
    for b in vals:
        hi, lo = min(b + h, 127), max(b - h, -128)
        for a in vals:
            gb[a & 0xff, b & 0xff] = (f(a, hi) - f(a, lo)) / (hi - lo)
    return ga.astype(np.float32), gb.astype(np.float32)


@pytest.mark.parametrize("h", [1, 3])
def test_gradients_match_reference(h):
    rng = np.random.default_rng(5)
    u = Units.from_mul(rng.integers(-3000, 3000, 65536))                 # asymmetric, jagged
    Ga, Gb = u.gradients(h)
    assert Ga.dtype == np.float32 and Ga.shape == (256, 256) and Gb.shape == (256, 256)
    ra, rb = _ref_diff(u.mul, h)
    assert np.array_equal(Ga, ra) and np.array_equal(Gb, rb)


def test_gradients_of_exact_table():
    Ga, Gb = Units.exact().gradients()
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.float32)
    assert np.array_equal(Ga, np.broadcast_to(v[None, :], (256, 256)))    # df/da = b
    assert np.array_equal(Gb, np.broadcast_to(v[:, None], (256, 256)))    # df/db = a


@pytest.mark.parametrize("h", [0, 128, -1])
def test_gradients_bad_h(h):
    with pytest.raises(ValueError, match="h: .*1..127"):
        Units.exact().gradients(h)
    with pytest.raises(TypeError, match="h: expected an int"):
        Units.exact().gradients(1.5)


def test_with_gradients_checks():
    u = Units.exact()
    good = np.zeros((256, 256), np.float32)
    with pytest.raises(ValueError, match=r"Ga: expected shape \(256, 256\) or \(65536,\), got \(256, 255\)"):
        u.with_gradients(np.zeros((256, 255), np.float32), good)
    with pytest.raises(TypeError, match="Gb: expected a float array.*int64"):
        u.with_gradients(good, np.zeros((256, 256), np.int64))
    bad = good.copy()
    bad[3, 255] = np.nan
    with pytest.raises(ValueError, match=r"Gb: expected finite.*\[3, 255\] \(a=3, b=-1\)"):
        u.with_gradients(good, bad)
    with pytest.raises(ValueError, match="Ga: expected finite"):
        u.with_gradients(np.full(65536, 1e39), good)                       # inf in float32
    with pytest.raises(TypeError, match="Gb: expected a .* got None"):
        u.with_gradients(good, None)


def test_with_gradients_copy_and_round_trip(tmp_path):
    m = approx.by_name("mitchell").with_cost(power_mw=0.5)
    rng = np.random.default_rng(1)
    Ga, Gb = rng.normal(size=(256, 256)), rng.normal(size=65536)
    v = m.with_gradients(Ga, Gb)
    assert m.grad_tables is None and v.digest == m.digest and v.cost == m.cost
    assert np.array_equal(v.grad_tables[0], Ga.astype(np.float32))
    assert np.array_equal(v.grad_tables[1], Gb.astype(np.float32).reshape(256, 256))
    assert not v.grad_tables[0].flags.writeable
    d = tmp_path / "u"
    v.save(d)
    assert sorted(os.listdir(d)) == ["cost.json", "grad_a.bin", "grad_b.bin", "mul_lut.bin", "relu_lut.bin",
                                     "requant_lut.bin"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                    # no "unknown file" warning
        w = Units.load(d)
    assert w == v and np.array_equal(w.grad_tables[0], v.grad_tables[0])
    assert np.array_equal(w.grad_tables[1], v.grad_tables[1]) and w.cost["power_mw"] == 0.5
    v.with_gradients(None, None).save(d)                                  # dropped: the files go
    assert "grad_a.bin" not in os.listdir(d) and Units.load(d).grad_tables is None


def test_load_bad_gradient_files(tmp_path):
    d = tmp_path / "u"
    Units.exact().with_gradients(*Units.exact().gradients()).save(d)
    os.remove(d / "grad_b.bin")
    with pytest.raises(ValueError, match="grad_b.bin: missing.*grad_a.bin is there"):
        Units.load(d)
    (d / "grad_b.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=r"grad_b.bin: expected 262144 bytes"):
        Units.load(d)
    t = np.zeros(65536, "<f4")
    t[7] = np.inf
    (d / "grad_b.bin").write_bytes(t.tobytes())
    with pytest.raises(ValueError, match="grad_b.bin: 1 non-finite"):
        Units.load(d)


# ------------------------------------------------------------------ backward="table"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import lutcore.torch as lt  # noqa: E402
from lutcore.torch import _gradtables  # noqa: E402


def _q(v, s):
    """Reference symmetric quantization: clamp(round_half_even(v / s), -127, 127), float32 division."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.rint(v.astype(np.float32) / np.float32(s)) if s else np.zeros_like(v)
    return np.clip(r, -127, 127).astype(np.int64)


def _scale(v):
    return np.float32(np.float32(np.abs(v).max()) / np.float32(127))


def _qw(w2):
    s = np.array([_scale(r) for r in w2], np.float32)
    return np.stack([_q(r, si) for r, si in zip(w2, s)]), s


def _ref_conv_grads(x, w, dy, Ga, Gb, stride, padding, dilation, groups, s_x=None):
    """dX, dW of the contract by direct patch loops (float64): x (N, C, H, W), w (O, Cg, KH, KW)."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    Og = O // groups
    s_x = _scale(x) if s_x is None else np.float32(s_x)
    qx = _q(x, s_x)
    qw, s_w = _qw(w.reshape(O, -1))
    qw = qw.reshape(w.shape)
    (sh, sw), (ph, pw), (dh, dw_) = stride, padding, dilation
    OH, OW = dy.shape[2], dy.shape[3]
    Xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), np.int64)
    Xp[:, :, ph:ph + H, pw:pw + W] = qx
    dXp = np.zeros(Xp.shape, np.float64)
    dW = np.zeros(w.shape, np.float64)
    g = dy.astype(np.float64) * s_w.astype(np.float64)[None, :, None, None]
    ga, gb = Ga.astype(np.float64), Gb.astype(np.float64)
    for i in range(KH):
        for j in range(KW):
            hs = slice(i * dh, i * dh + sh * (OH - 1) + 1, sh)
            ws = slice(j * dw_, j * dw_ + sw * (OW - 1) + 1, sw)
            for gi in range(groups):
                cs, os_ = slice(gi * Cg, (gi + 1) * Cg), slice(gi * Og, (gi + 1) * Og)
                a = Xp[:, cs, hs, ws] & 0xff                              # (N, Cg, OH, OW)
                b = qw[os_, :, i, j] & 0xff                               # (Og, Cg)
                A = ga[a[:, None], b[None, :, :, None, None]]             # (N, Og, Cg, OH, OW)
                B = gb[a[:, None], b[None, :, :, None, None]]
                dXp[:, cs, hs, ws] += np.einsum("nocyx,noyx->ncyx", A, g[:, os_])
                dW[os_, :, i, j] += np.einsum("nocyx,noyx->oc", B, dy[:, os_].astype(np.float64))
    dX = dXp[:, :, ph:ph + H, pw:pw + W]
    dX = np.where(np.abs(np.rint(x.astype(np.float32) / s_x)) > 127, 0.0, dX)
    return dX, dW * np.float64(s_x)


def _ref_linear_grads(x, w, dy, Ga, Gb, s_x=None):
    dX, dW = _ref_conv_grads(x.T[None, :, None, :], w[:, :, None, None],
                             dy.T[None, :, None, :], Ga, Gb, (1, 1), (0, 0), (1, 1), 1, s_x)
    return dX[0, :, 0, :].T, dW[:, :, 0, 0]


def _rand_units(seed):
    rng = np.random.default_rng(seed)
    u = Units.from_mul(rng.integers(-2000, 2000, 65536))
    return u, rng


def _close(got, ref, what):
    got = got.detach().double().numpy() if isinstance(got, torch.Tensor) else got
    tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=tol, err_msg=what)


@pytest.mark.parametrize("M,K,O", [(1, 1, 1), (7, 33, 5), (33, 7, 1), (1, 33, 7)])
@pytest.mark.parametrize("supplied", [False, True])
def test_linear_table_matches_reference(M, K, O, supplied):
    u, rng = _rand_units(M * 100 + K * 10 + O)
    if supplied:
        Ga, Gb = rng.normal(size=(256, 256)).astype(np.float32), rng.normal(size=(256, 256)).astype(np.float32)
        u, grad_h = u.with_gradients(Ga, Gb), "supplied"
    else:
        Ga, Gb = u.gradients(2)
        grad_h = 2
    x = torch.from_numpy(rng.normal(size=(M, K)).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.normal(size=(O, K)).astype(np.float32)).requires_grad_()
    b = torch.from_numpy(rng.normal(size=O).astype(np.float32)).requires_grad_()
    dy = rng.normal(size=(M, O)).astype(np.float32)
    y = lt.lut_linear(x, w, b, u, backward="table", grad_h=grad_h)
    ref_y = lt.lut_linear(x, w, b, u)                                    # the forward is the contract's
    assert torch.equal(y, ref_y)
    y.backward(torch.from_numpy(dy))
    rx, rw = _ref_linear_grads(x.detach().numpy(), w.detach().numpy(), dy, Ga, Gb)
    _close(x.grad, rx, "dX")
    _close(w.grad, rw, "dW")
    assert torch.equal(b.grad, torch.from_numpy(dy).sum(0))


CONVS = [  # (N, C, H, W, O, KH, KW, stride, padding, dilation, groups)
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1),
    (2, 3, 7, 5, 7, 3, 2, 1, 1, 1, 1),
    (1, 6, 9, 7, 4, 3, 3, 2, 2, 2, 2),           # groups, stride, dilation
    (2, 7, 5, 6, 7, 3, 3, 1, 1, 1, 7),           # depthwise (the narrow direct forward)
    (3, 4, 1, 33, 8, 1, 3, 1, 1, 1, 4),          # Conv1d-like
]


@pytest.mark.parametrize("case", CONVS)
def test_conv_table_matches_reference(case):
    N, C, H, W, O, KH, KW, st, pd, dl, G = case
    u, rng = _rand_units(sum(case))
    Ga, Gb = u.gradients()
    x = torch.from_numpy(rng.normal(size=(N, C, H, W)).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.normal(size=(O, C // G, KH, KW)).astype(np.float32)).requires_grad_()
    b = torch.zeros(O, requires_grad=True)
    y = lt.lut_conv2d(x, w, b, u, st, pd, dl, G, backward="table")
    assert torch.equal(y, lt.lut_conv2d(x, w, b, u, st, pd, dl, G))
    dy = rng.normal(size=tuple(y.shape)).astype(np.float32)
    y.backward(torch.from_numpy(dy))
    rx, rw = _ref_conv_grads(x.detach().numpy(), w.detach().numpy(), dy, Ga, Gb, (st, st), (pd, pd), (dl, dl), G)
    _close(x.grad, rx, "dX")
    _close(w.grad, rw, "dW")
    _close(b.grad, dy.sum((0, 2, 3)).astype(np.float64), "db")


def test_conv1d_and_static_scale_clamp():
    """Conv1d through lut_conv1d; a static input scale zeroes dX where x saturated."""
    u, rng = _rand_units(11)
    Ga, Gb = u.gradients()
    x = torch.from_numpy(rng.normal(size=(2, 3, 33)).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.normal(size=(5, 3, 3)).astype(np.float32)).requires_grad_()
    s = float(np.float32(0.6 / 127))                                     # |x| > ~0.6 saturates
    y = lt.lut_conv1d(x, w, None, u, 1, 1, backward="table", input_scale=s)
    dy = rng.normal(size=tuple(y.shape)).astype(np.float32)
    y.backward(torch.from_numpy(dy))
    rx, rw = _ref_conv_grads(x.detach().numpy()[:, :, None], w.detach().numpy()[:, :, None], dy[:, :, None], Ga, Gb,
                             (1, 1), (0, 1), (1, 1), 1, s_x=s)
    clamped = np.abs(x.detach().numpy()) > 0.61
    assert clamped.sum() > 10 and not x.grad.numpy()[clamped].any()
    _close(x.grad, rx[:, :, 0], "dX")
    _close(w.grad, rw[:, :, 0], "dW")


def test_exact_table_equals_float_gradients_at_dequantized_values():
    """For the exact unit Ga[a, b] = b, Gb[a, b] = a: backward="table" = the float layer's gradients
    at the dequantized weight and input."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.normal(size=(2, 4, 7, 7)).astype(np.float32)).requires_grad_()
    conv = lt.approximate(nn.Conv2d(4, 6, 3, padding=1, groups=2), "exact", backward="table")
    y = conv(x)
    dy = torch.from_numpy(rng.normal(size=tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    s_x = _scale(x.detach().numpy())
    xh = torch.from_numpy(_q(x.detach().numpy(), s_x).astype(np.float32) * s_x).requires_grad_()
    wh = (conv.qweight.float() * conv.weight_scale[:, None, None, None]).requires_grad_()
    F.conv2d(xh, wh, None, 1, 1, 1, 2).backward(dy)
    torch.testing.assert_close(x.grad, xh.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(conv.weight.grad, wh.grad, rtol=1e-5, atol=1e-5)


def test_gradcheck_on_a_smooth_interpolant():
    """Finite differences (float64) of the contract's interpolant L(x, w) = s_x * sum s_w[o] F(x/s_x, w/s_w)
    (scales held fixed) against backward="table" with Ga, Gb = F's partials on the grid."""
    from reference.smooth_table import F as F_, smooth_units
    u = smooth_units()
    rng = np.random.default_rng(8)
    M, K, O = 3, 7, 4
    s_x, s_w = np.float32(0.01), (rng.uniform(0.5, 2, O) / 127).astype(np.float32)
    qx = rng.integers(-127, 128, (M, K)).astype(np.float64)
    qx[0, 0] = 127
    qw = rng.integers(-127, 128, (O, K)).astype(np.float64)
    qw[:, 0] = 127
    x = torch.tensor(qx * s_x, dtype=torch.float32, requires_grad=True)
    w = torch.tensor(qw * s_w[:, None], dtype=torch.float32, requires_grad=True)
    lin = lt.approximate(nn.Linear(K, O, bias=False), u, backward="table", grad_h="supplied")
    lin.weight.data.copy_(w.detach())
    lin.activations, lin.input_scale = "static", float(s_x)
    xx = x.detach().clone().requires_grad_()
    dy = rng.normal(size=(M, O))
    lin(xx).backward(torch.tensor(dy, dtype=torch.float32))
    sw = lin.weight_scale.double().numpy()

    def L(xv, wv):
        return float((dy * (s_x * sw[None, :] * F_(xv[:, None, :] / s_x, (wv / sw[:, None])[None]).sum(-1))).sum())

    x0, w0 = x.detach().double().numpy(), lin.weight.detach().double().numpy()
    fx, fw = np.zeros_like(x0), np.zeros_like(w0)
    for arr, out, f in ((x0, fx, lambda t: L(t, w0)), (w0, fw, lambda t: L(x0, t))):
        for idx in np.ndindex(arr.shape):
            e = 1e-3 * (s_x if arr is x0 else sw[idx[0]])
            p, m = arr.copy(), arr.copy()
            p[idx] += e
            m[idx] -= e
            out[idx] = (f(p) - f(m)) / (2 * e)
    np.testing.assert_allclose(xx.grad.double().numpy(), fx, rtol=1e-4, atol=1e-4 * np.abs(fx).max())
    np.testing.assert_allclose(lin.weight.grad.double().numpy(), fw, rtol=1e-4, atol=1e-4 * np.abs(fw).max())


def _bits(t):
    return t.detach().numpy().view(np.int32)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("kind", ["linear", "conv", "depthwise"])
def test_same_bits_at_1_and_2_threads(kind, native, monkeypatch):
    monkeypatch.setattr(_gradtables, "BLOCK_ELEMS", 97)                  # many blocks on small shapes
    monkeypatch.setattr(_gradtables, "USE_NATIVE", native)
    u, rng = _rand_units(21)
    if kind == "linear":
        x0, w0 = rng.normal(size=(33, 7)), rng.normal(size=(9, 7))
        f = lambda x, w, t: lt.lut_linear(x, w, None, u, backward="table", threads=t)       # noqa: E731
    else:
        G = 1 if kind == "conv" else 6
        x0, w0 = rng.normal(size=(2, 6, 7, 9)), rng.normal(size=(6, 6 // G, 3, 3))
        f = lambda x, w, t: lt.lut_conv2d(x, w, None, u, 1, 1, 1, G, backward="table", threads=t)  # noqa: E731
    out = []
    for t in (1, 2):
        x = torch.tensor(x0, dtype=torch.float32, requires_grad=True)
        w = torch.tensor(w0, dtype=torch.float32, requires_grad=True)
        y = f(x, w, t)
        y.backward(torch.ones_like(y) * 0.37 + torch.arange(y.numel()).reshape(y.shape) % 5)
        out.append((_bits(x.grad), _bits(w.grad)))
    assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])


def test_every_layer_kind_through_approximate_and_set_backward():
    from transformers.pytorch_utils import Conv1D
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 4, 3, groups=4, padding=1),
                          nn.Flatten(2), nn.Conv1d(4, 3, 3), nn.Flatten(), Conv1D(5, 3 * 14), nn.Linear(5, 2))
    x = torch.randn(2, 2, 4, 4)
    u, _ = _rand_units(4)
    m = lt.approximate(model, u, backward={"0": "table", "1": "table", "3": "table", "5": "table", "6": "units"})
    assert [b for b, _ in lt.backward_of(m).values()] == ["table", "table", "table", "table", "units"]
    m(x).sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    lt.set_backward(m, "table", grad_h=3)
    assert all(v == ("table", 3) for v in lt.backward_of(m).values())
    lt.set_backward(m, {"6": "ste"})
    assert lt.backward_of(m)["6"] == ("ste", 3) and lt.backward_of(m)["0"] == ("table", 3)
    m.zero_grad()
    m(x).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters()) and len(got) == 10
    assert "backward=table, grad_h=3" in repr(m[0])


def test_hf_conv1d_table_matches_reference():
    from transformers.pytorch_utils import Conv1D
    u, rng = _rand_units(6)
    Ga, Gb = u.gradients()
    layer = Conv1D(5, 33)                                               # W (33, 5): y = x @ W + b
    layer.weight.data = torch.from_numpy(rng.normal(size=(33, 5)).astype(np.float32))
    m = lt.approximate(layer, u, backward="table")
    x = torch.from_numpy(rng.normal(size=(2, 7, 33)).astype(np.float32)).requires_grad_()
    y = m(x)
    dy = rng.normal(size=(2, 7, 5)).astype(np.float32)
    y.backward(torch.from_numpy(dy))
    rx, rw = _ref_linear_grads(x.detach().numpy().reshape(14, 33), m.weight.detach().numpy().T, dy.reshape(14, 5),
                               Ga, Gb)
    _close(x.grad.reshape(14, 33), rx, "dX")
    _close(m.weight.grad, rw.T, "dW")


# ------------------------------------------------------------------ bad input

def test_supplied_tables_missing_names_the_layer():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    with pytest.raises(ValueError, match=r"^0: grad_h='supplied' .*units 'mitchell'.*carry none"):
        lt.approximate(model, "mitchell", backward="table", grad_h="supplied")
    m = lt.approximate(model, {"0": "mitchell", "1": "exact"}, backward={"1": "table"})
    with pytest.raises(ValueError, match=r"^1: grad_h='supplied'.*units 'exact'"):
        lt.set_backward(m, {"1": "table"}, grad_h="supplied")
    assert lt.backward_of(m)["1"] == ("table", None)                    # nothing changed
    u = Units.exact().with_gradients(*Units.exact().gradients())
    lt.set_units(m, {"1": u})
    lt.set_backward(m, {"1": "table"}, grad_h="supplied")
    m(torch.randn(2, 4)).sum().backward()
    m[1].units = "exact"                                                # swapped later: the forward says so
    with pytest.raises(ValueError, match=r"^1: grad_h='supplied'"):
        m(torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"^lut_conv2d: grad_h='supplied'"):
        lt.lut_conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1), backward="table", grad_h="supplied")


def test_bad_grad_h_and_backward_values():
    m = lt.approximate(nn.Sequential(nn.Linear(4, 3)), "exact")
    with pytest.raises(ValueError, match=r"^0: grad_h: expected None, an int 1..127 or 'supplied', got 0"):
        m[0].grad_h = 0
    with pytest.raises(TypeError, match=r"^set_backward: grad_h: .*got 1.5"):
        lt.set_backward(m, "table", grad_h=1.5)
    with pytest.raises(ValueError, match=r"set_backward: backward\['0'\]: backward: expected one of"):
        lt.set_backward(m, {"0": "tabel"})
    with pytest.raises(ValueError, match=r"backward: key 'nope' matches no layer"):
        lt.set_backward(m, {"nope": "table"})
    with pytest.raises(ValueError, match=r"approximate: backward: expected one of \('ste', 'units', 'table'\)"):
        lt.approximate(nn.Linear(2, 2), "exact", backward="tables")
    with pytest.raises(ValueError, match=r"lut_linear: grad_h: .*got 200"):
        lt.lut_linear(torch.randn(2, 2), torch.randn(2, 2), backward="table", grad_h=200)


def test_broken_attached_tables_name_the_layer():
    u = Units.exact().with_gradients(np.zeros((256, 256)), np.zeros((256, 256)))
    u.grad_tables = (np.zeros((256, 256), np.float64), u.grad_tables[1])      # bypassing with_gradients
    with pytest.raises(ValueError, match=r"^lut_linear: units 'exact': gradient table Ga: expected float32"):
        lt.lut_linear(torch.randn(2, 2), torch.randn(2, 2), None, u, backward="table")
    bad = np.zeros((256, 256), np.float32)
    bad[0, 0] = np.inf
    u.grad_tables = (bad, bad)
    with pytest.raises(ValueError, match=r"^lut_linear: units 'exact': gradient table Ga holds non-finite"):
        lt.lut_linear(torch.randn(2, 2), torch.randn(2, 2), None, u, backward="table")


def test_table_backward_is_differentiable_once():
    # the error names the mode the layer runs, backward='table' (issue 38: it said 'units')
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(2, 4, requires_grad=True)
    y = lt.lut_linear(x, w, None, "mitchell", backward="table")
    gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"^lut_linear: backward='table' is differentiable once: its "
                                           r"gradients come from the unit's gradient tables"):
        gx.sum().backward()
    xc = torch.randn(1, 2, 5, 5, requires_grad=True)
    y = lt.lut_conv2d(xc, torch.randn(3, 2, 3, 3), None, "mitchell", backward="table")
    gx, = torch.autograd.grad(y.sum(), xc, create_graph=True)
    with pytest.raises(RuntimeError, match=r"^lut_conv2d: backward='table' is differentiable once"):
        gx.sum().backward()


# ------------------------------------------------------------------ calibration state

def test_calibrated_state_round_trip_and_float_model(tmp_path):
    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 16, 4))
    a = lt.approximate(net, "mitchell", backward="table", grad_h=3)
    a[3].grad_h = None
    x = torch.randn(5, 1, 6, 6)
    lt.calibrate(a, [x])
    sd = a.state_dict()
    assert set(sd) - set(net.state_dict()) == {"0.lutcore_input_scale", "0.lutcore_grad_h",
                                               "3.lutcore_input_scale"}
    assert int(sd["0.lutcore_grad_h"]) == 3
    torch.save(sd, tmp_path / "sd.pt")
    b = lt.approximate(net, "mitchell")                                   # dynamic, grad_h None
    b.load_state_dict(torch.load(tmp_path / "sd.pt"), strict=True)
    assert b[0].activations == "static" and torch.equal(b[0].input_scale, a[0].input_scale)
    assert b[0].grad_h == 3 and b[3].grad_h is None
    assert torch.equal(b(x), a(x))
    fresh = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 16, 4))
    with pytest.raises(RuntimeError, match="Unexpected key.*lutcore_input_scale"):
        fresh.load_state_dict(sd)
    fresh.load_state_dict(lt.float_state_dict(sd), strict=True)
    assert torch.equal(fresh(x), net(x))
    c = lt.approximate(fresh, "mitchell")
    c.load_state_dict(net.state_dict(), strict=True)                      # a float state dict: no scales, fine
    assert c[0].activations == "dynamic"
    a[0].grad_h = "supplied"
    assert int(a.state_dict()["0.lutcore_grad_h"]) == -1


def test_bad_state_entries_name_the_layer():
    a = lt.approximate(nn.Sequential(nn.Linear(3, 2)), "exact")
    sd = {**a.state_dict(), "0.lutcore_input_scale": torch.tensor(-1.0)}
    with pytest.raises(ValueError, match=r"^0: input_scale"):
        a.load_state_dict(sd)
    sd = {**a.state_dict(), "0.lutcore_grad_h": torch.tensor(500)}
    with pytest.raises(ValueError, match=r"^0: grad_h"):
        a.load_state_dict(sd)
    sd = {**a.state_dict(), "0.lutcore_grad_h": torch.tensor([1, 2])}
    with pytest.raises(ValueError, match=r"^0: state_dict entry 0.lutcore_grad_h: expected a one-element"):
        a.load_state_dict(sd)


def test_native_pass_matches_numpy_on_every_isa(monkeypatch):
    """The native pass: dX the numpy fallback's bits, dW within rounding of it; the same bits on
    every SIMD path this CPU has; the wrapper refuses mismatched buffers."""
    from lutcore import _simd
    from lutcore._native import gradtables as native
    rng = np.random.default_rng(17)
    u, _ = _rand_units(17)
    ga, gb, gbt = _gradtables.tables_for(u, 2, "t")
    for M, K, O in [(1, 1, 1), (7, 33, 5), (33, 17, 16), (40, 48, 3)]:
        qx = rng.integers(-128, 128, (M, K)).astype(np.int8)
        qw = rng.integers(-127, 128, (O, K)).astype(np.int8)
        g = rng.normal(size=(M, O)).astype(np.float32)
        dy = rng.normal(size=(M, O)).astype(np.float32)
        monkeypatch.setattr(_gradtables, "USE_NATIVE", False)
        nx, nw = _gradtables.table_grads(qx, qw, g, dy, ga, gb, 1, gbt)
        monkeypatch.setattr(_gradtables, "USE_NATIVE", True)
        got = []
        before = _simd.get_simd()
        try:
            for isa in _simd.available_simd():
                _simd.set_simd(isa)
                for t in (1, 2):
                    got.append(_gradtables.table_grads(qx, qw, g, dy, ga, gb, t, gbt))
        finally:
            _simd.set_simd(before)
        for dx, dw in got:
            assert np.array_equal(dx.view(np.int32), got[0][0].view(np.int32))
            assert np.array_equal(dw.view(np.int32), got[0][1].view(np.int32))
        assert np.array_equal(got[0][0].view(np.int32), nx.view(np.int32))
        np.testing.assert_allclose(got[0][1], nw, rtol=1e-5, atol=1e-5 * np.abs(nw).max())
        # a separately written sequential reference of dW's order (m = 0, 1, ...): the same bits
        ref = np.zeros((O, K), np.float32)
        for m in range(M):
            ref += dy[m][:, None] * gb[(qx[m].astype(np.int64) & 0xff)[None, :] * 256 + (qw.astype(np.int64) & 0xff)]
        assert np.array_equal(got[0][1].view(np.int32), ref.view(np.int32))
    with pytest.raises(ValueError, match="shapes disagree"):
        native.table_pass(0, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int8), np.zeros((4, 2), np.uint8),
                          np.zeros((2, 4), np.float32), ga, 0, 1)
    with pytest.raises(ValueError, match="out has the wrong shape"):
        native.table_pass(1, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int8), np.zeros((4, 3), np.uint8),
                          np.zeros((2, 4), np.float32), ga, 0, 1)


def test_retrain_digits_example_runs(tmp_path, capsys):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "retrain_digits", os.path.join(TESTS, "..", "examples", "retrain_digits.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    png = tmp_path / "c.png"
    assert mod.main(["--epochs", "1", "--steps", "2", "--every", "2", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert all(f"truncated:10, {arm} x2" in out for arm in ("ste", "units", "table")) and png.stat().st_size > 0
    assert mod.main(["--units", "no-such-unit"]) == 2


def test_table_backward_refuses_tracing():
    m = lt.approximate(nn.Linear(3, 2), "exact", backward="table")
    with pytest.raises(ValueError, match=r"backward='table' does not run under torch.compile"):
        torch.jit.trace(m, torch.randn(2, 3))


def test_assignment_file_keeps_attached_tables(tmp_path):
    from lutcore.units import assign
    u = approx.by_name("mitchell")
    v = u.with_gradients(*u.gradients(5))
    with pytest.raises(ValueError, match="built in memory.*units_dir="):
        assign.save_assignment({"fc": v}, tmp_path / "a.json")
    assign.save_assignment({"fc": v, "c": u}, tmp_path / "a.json", units_dir=tmp_path / "units")
    back = assign.load_assignment(tmp_path / "a.json")
    assert back["c"].grad_tables is None
    assert np.array_equal(back["fc"].grad_tables[0], v.grad_tables[0])
    assert np.array_equal(back["fc"].grad_tables[1], v.grad_tables[1])


# ------------------------------------------------------- the planes path (csrc/gradtables/planes.h)
# Where the SIMD path has the planes pass's vector body (AVX-512 VBMI) and the tables are int16 multiples of
# a power of two, backward="table" of a one-group conv or a linear layer runs the planes pass (k-major
# patches, the native fold); it must give the gathers' bits.  planes_fast is forced on here, so a CPU
# without VBMI runs the planes pass's generic body.

PLANE_CASES = [  # (kind, x shape, w shape, stride, padding, dilation)
    ("conv", (2, 5, 9, 7), (6, 5, 3, 3), 1, 1, 1),
    ("conv", (3, 8, 11, 10), (130, 8, 3, 3), 2, 1, 1),
    ("conv", (2, 16, 8, 8), (32, 16, 1, 1), 2, 0, 1),
    ("conv", (1, 4, 13, 12), (70, 4, 3, 2), (2, 3), (2, 1), (2, 1)),
    ("conv", (4, 64, 4, 4), (64, 64, 3, 3), 1, 1, 1),
    ("conv1d", (3, 4, 33), (5, 4, 3), 1, 1, 1),
    ("linear", (33, 70), (10, 70), None, None, None),
    ("linear", (130, 7), (200, 7), None, None, None),
]


def _plane_grads(case, u, nt, dy_inf=False, static=None, dy_tiny=False):
    kind, xs, ws, st, pd, dl = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = torch.tensor(np.maximum(rng.normal(size=xs), 0) * 3, dtype=torch.float32, requires_grad=True)  # ReLU'd: codes 0
    w = torch.tensor(rng.normal(size=ws), dtype=torch.float32, requires_grad=True)
    if kind == "linear":
        y = lt.lut_linear(x, w, None, u, backward="table", threads=nt, input_scale=static)
    else:
        f = lt.lut_conv2d if kind == "conv" else lt.lut_conv1d
        y = f(x, w, None, u, st, pd, dl, backward="table", threads=nt, input_scale=static)
    dy = rng.normal(size=tuple(y.shape)).astype(np.float32)
    if dy_inf:
        dy.flat[3] = np.inf
    if dy_tiny:                                                       # scaled by 2^-17: subnormal, inexact
        dy.flat[1] = np.float32(3e-35)
    y.backward(torch.from_numpy(dy))
    return _bits(x.grad), _bits(w.grad)


@pytest.mark.parametrize("case", PLANE_CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2][0]}" for c in PLANE_CASES])
@pytest.mark.parametrize("extra", ["", "dy-inf", "static", "dy-tiny"])
def test_planes_path_has_the_gathers_bits(case, extra, monkeypatch):
    monkeypatch.setattr(_gradtables._room, "planes_fast", lambda: True)
    u = approx.by_name("mitchell")
    assert _gradtables.planes_for(_gradtables.tables_for(u, None, "t")) is not None
    kw = dict(dy_inf=extra == "dy-inf", static=float(np.float32(4.0 / 127)) if extra == "static" else None,
              dy_tiny=extra == "dy-tiny")
    monkeypatch.setattr(_gradtables, "USE_PLANES", False)
    want = _plane_grads(case, u, 1, **kw)
    monkeypatch.setattr(_gradtables, "USE_PLANES", True)
    calls = []
    orig = _gradtables._room.planes_pass
    monkeypatch.setattr(_gradtables._room, "planes_pass", lambda *a, **k: calls.append(1) or orig(*a, **k))
    import lutcore.torch.functional as fn
    for nt, chunk in ((1, fn.FOLD_CHUNK), (2, fn.FOLD_CHUNK), (2, 1)):   # chunk 1: dX image by image
        monkeypatch.setattr(fn, "FOLD_CHUNK", chunk)
        calls.clear()
        got = _plane_grads(case, u, nt, **kw)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (nt, chunk)
        images = 1 if case[0] == "linear" or chunk > 1 else case[1][0]
        assert len(calls) == 1 + images                               # dW, and dX per chunk of images


def test_planes_form_of_tables():
    """planes_for: int16 multiples of one power of two (2^(e - 16) a normal float32) get planes that give the
    table back exactly; any other table runs the gathers (None)."""
    from lutcore.torch._gradtables import _int16_form, planes_for, tables_for

    def back(form):
        planes, scale = form
        p = planes.reshape(256, 4, 128).astype(np.int64)
        lo, hi = np.concatenate([p[:, 0], p[:, 2]], 1), np.concatenate([p[:, 1], p[:, 3]], 1)
        v = ((hi << 8) | lo).astype(np.uint16).view(np.int16).astype(np.float64)
        return (v * 65536 * float(scale)).astype(np.float32)

    for t, e in [(Units.exact().gradients()[0], 0), (approx.by_name("mitchell").gradients()[0], -1),
                 (np.zeros((256, 256), np.float32), 0), (np.full((256, 256), 3.0 * 2 ** -90, np.float32), -90),
                 (np.full((256, 256), 32767 * 2.0 ** 20, np.float32), 20)]:
        form = _int16_form(t)
        assert form is not None and form[1] == np.float32(2.0 ** (e - 16)), e
        assert np.array_equal(back(form), t)
    bad = np.zeros((256, 256), np.float32)
    for v in (40001.0, 1.0 / 3, 1.5 * 2 ** -120, 0.5 + 2 ** -20):
        bad[7, 9] = v
        assert _int16_form(bad) is None, v
    jagged, _ = _rand_units(3)
    assert planes_for(tables_for(jagged, 2, "t")) is None             # near the edges: differences / 3
    assert planes_for(tables_for(jagged, 1, "t")) is not None          # / 2 (and / 1 at the edges)
