"""lutcore.torch: every approximate layer kind against the numpy oracle of the contract
(tests/reference/torch_layers_ref.py), bit for bit, for the exact, a shipped
approximate (Mitchell) and a random asymmetric table, at 1 and 2 threads and on every
SIMD path; gradients (STE against torch's float layer, the unit backward against its
oracle and a named bound, gradcheck of the STE backward in float64); conversion,
state_dict, set_units, calibrate; bad input.

Error budgets (named, STYLE habit 10):
    STE_RTOL / STE_ATOL   STE gradients vs torch autograd of the float layer (the same
                          aten kernels; only linear's 3-D batch fold may sum differently)
    UNITS_GRAD_REL        exact-table unit backward vs the float gradient, relative L2
    FOLD_RTOL             the conv unit backward's dX (F.fold sums in float) vs the oracle
"""
import subprocess
import sys

import numpy as np
import pytest

# the test extra installs it (pyproject [test]): a missing one is an error, not a skip
import torch
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.units import Units, approx  # noqa: E402
from reference.torch_layers_ref import (conv1d_ref, conv2d_ref, linear_ref,  # noqa: E402
                                        linear_units_backward_ref, quantize_weight_ref)

STE_RTOL, STE_ATOL = 1e-5, 1e-6
UNITS_GRAD_REL = 0.05
FOLD_RTOL = 1e-5


def _random_units():
    r = np.random.default_rng(1234)
    return Units.from_mul(r.integers(-20000, 20000, (256, 256)), name="random")   # asymmetric


UNITS = {"exact": Units.exact(), "mitchell": approx.mitchell(), "random": _random_units()}


def _x(rng, *shape, scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))


# One line per case: (name, float module builder, input shape)
CONV_CASES = [
    ("odd_channels", lambda: nn.Conv2d(3, 7, 3, padding=1), (2, 3, 9, 11)),
    ("stride2", lambda: nn.Conv2d(5, 6, 3, stride=2), (1, 5, 10, 7)),
    ("pad2_dil2", lambda: nn.Conv2d(4, 5, 3, padding=2, dilation=2), (2, 4, 7, 9)),
    ("groups4", lambda: nn.Conv2d(8, 12, 3, padding=1, groups=4), (2, 8, 6, 5)),
    ("depthwise", lambda: nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), (2, 6, 7, 7)),
    ("depthwise_x2", lambda: nn.Conv2d(5, 10, 3, stride=2, padding=1, groups=5), (1, 5, 9, 8)),
    ("groups2_wide", lambda: nn.Conv2d(4, 18, 3, padding=1, groups=2), (2, 4, 5, 6)),   # Og 9: a GEMM per group
    ("batch1_wide", lambda: nn.Conv2d(6, 260, 3, stride=2, padding=1), (1, 6, 7, 7)),  # M 16: transposed
    ("groups2_batch1_wide", lambda: nn.Conv2d(4, 512, 1, groups=2), (1, 4, 3, 3)),        # M 9, Og 256
    ("1x1", lambda: nn.Conv2d(33, 7, 1), (1, 33, 5, 3)),
    ("rect_kernel", lambda: nn.Conv2d(3, 4, (3, 5), stride=(2, 1), padding=(1, 2)), (1, 3, 8, 9)),
    ("reflect", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (1, 3, 6, 7)),
    ("replicate", lambda: nn.Conv2d(3, 4, 3, padding=2, padding_mode="replicate"), (1, 3, 6, 7)),
    ("circular", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (1, 3, 6, 7)),
    ("same", lambda: nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 6, 7)),
    ("conv1d", lambda: nn.Conv1d(5, 7, 5, stride=2, padding=3), (2, 5, 17)),
    ("conv1d_groups", lambda: nn.Conv1d(6, 4, 3, padding=2, dilation=2, groups=2), (3, 6, 11)),
    ("conv1d_reflect", lambda: nn.Conv1d(3, 2, 3, padding=1, padding_mode="reflect"), (1, 3, 9)),
]


def _conv_ref(m, x, mul, input_scale=None):
    w = m.weight.detach().numpy()
    b = None if m.bias is None else m.bias.detach().numpy()
    xn = x.detach().numpy()
    padding = m.padding
    if padding == "same":                          # the oracle pads in float: asymmetric for even kernels
        tot = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
        xn = np.pad(xn, [(0, 0), (0, 0)] + [(t // 2, t - t // 2) for t in tot])
        padding = 0
    if isinstance(m, nn.Conv1d):
        return conv1d_ref(xn, w, b, mul, m.stride[0], padding if padding == 0 else padding[0], m.dilation[0],
                          m.groups, m.padding_mode, input_scale)
    return conv2d_ref(xn, w, b, mul, m.stride, padding, m.dilation, m.groups, m.padding_mode, input_scale)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("units", list(UNITS))
@pytest.mark.parametrize("name,build,shape", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_bits(rng, name, build, shape, units, threads):
    torch.manual_seed(0)
    m = build()
    x = _x(rng, *shape)
    a = lt.approximate(m, UNITS[units], threads=threads)
    got = a(x).detach().numpy()
    want = _conv_ref(m, x, UNITS[units].mul)
    print("max diff", np.abs(got - want).max())
    assert got.shape == want.shape and np.array_equal(got, want)


# A first conv (groups 1, C*KH*KW <= the direct kernel's KMAX) through the exact table on AVX-512
# runs the direct pass (csrc/conv2d); elsewhere im2col + the GEMM.  Either way: the bits of the
# im2col + GEMM path (forced by LUTCORE_CONV_IM2COL, test-only) and of the reference, and the
# direct pass runs exactly where direct_fast says.
DIRECT_CASES = [(3, 16, s, p, n) for s in (1, 2) for p in (0, 1) for n in (1, 3)] + [(2, 5, 1, 1, 2)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("units", list(UNITS))
@pytest.mark.parametrize("C,O,stride,pad,n", DIRECT_CASES)
def test_direct_conv_equals_im2col(rng, monkeypatch, C, O, stride, pad, n, units, threads):
    torch.manual_seed(0)
    m = nn.Conv2d(C, O, 3, stride=stride, padding=pad)
    x = _x(rng, n, C, 13, 11)
    a = lt.approximate(m, UNITS[units], threads=threads)
    from lutcore.ops import im2col as room
    calls = []
    direct = room._conv2d_direct                   # the layers call the room's fast twin
    monkeypatch.setattr(room, "_conv2d_direct", lambda *args: calls.append(1) or direct(*args))
    got = a(x).detach().numpy()
    assert len(calls) == int(room.direct_fast(UNITS[units].kernel_path == "exact"))
    monkeypatch.setenv("LUTCORE_CONV_IM2COL", "1")
    via = a(x).detach().numpy()
    assert len(calls) <= 1
    want = _conv_ref(m, x, UNITS[units].mul)
    assert np.array_equal(got.view(np.uint32), via.view(np.uint32))
    assert np.array_equal(got, want)


def test_direct_conv_only_where_it_is_faster():
    """The direct pass runs only for the exact table on the AVX-512 bodies (any table, or the
    generic / AVX2 levels: im2col + the LUT GEMM, several times faster, BENCHMARKS.md)."""
    from lutcore import _simd
    from lutcore._native import im2col
    for name in lutcore.available_simd():
        isa = _simd.isa_of(name)
        assert not im2col.direct_fast(isa, False)
        assert im2col.direct_fast(isa, True) == name.startswith("avx512"), name


# Inference (no grad or nothing requiring it) skips the autograd Function; the geometry is kept per
# shapes and arguments; the float32 s_x * s_w[o] is kept per input scale (a static scale: every call).
@pytest.mark.parametrize("width", [1, 7, 33])
@pytest.mark.parametrize("n", [1, 3])
def test_conv_inference_paths_same_bits(rng, n, width):
    torch.manual_seed(2)
    m = nn.Conv2d(3, 17, 3, padding=1)
    a = lt.approximate(m, "exact")
    x = _x(rng, n, 3, 5, width)
    want = _conv_ref(m, x, UNITS["exact"].mul)
    y_grad = a(x)                                         # the weight requires grad: the Function
    assert y_grad.grad_fn is not None and np.array_equal(y_grad.detach().numpy(), want)
    with torch.no_grad():
        for _ in range(2):                               # the second call: the kept geometry and scale
            y = a(x)
            assert y.grad_fn is None and np.array_equal(y.numpy(), want)
    a.requires_grad_(False)
    assert np.array_equal(a(x).numpy(), want)            # grad enabled, nothing requires it
    x2 = _x(rng, n, 3, 5, width, scale=3.0)               # another dynamic scale: the kept product replaced
    with torch.no_grad():
        assert np.array_equal(a(x2).numpy(), _conv_ref(m, x2, UNITS["exact"].mul))
        assert np.array_equal(a(x).numpy(), want)
    s = lt.approximate(m, "exact", activations="static")
    s.input_scale = 0.02
    with torch.no_grad():
        for _ in range(2):
            assert np.array_equal(s(x).numpy(), _conv_ref(m, x, UNITS["exact"].mul, input_scale=np.float32(0.02)))


def test_conv_kept_geometry_still_checks(rng):
    w = torch.randn(4, 3, 3, 3)
    x = _x(rng, 1, 3, 6, 6)
    y1 = lt.lut_conv2d(x, w, stride=1, padding=1)
    y2 = lt.lut_conv2d(x, w, stride=2, padding=1)        # same shapes, another stride: its own geometry
    assert y1.shape == (1, 4, 6, 6) and y2.shape == (1, 4, 3, 3)
    assert lt.lut_conv2d(x, w, stride=(1, 1), padding=[1, 1]).shape == (1, 4, 6, 6)
    for _ in range(2):                                   # a failing geometry fails every call
        with pytest.raises(ValueError, match="groups"):
            lt.lut_conv2d(x, w, padding=1, groups=2)
        with pytest.raises((ValueError, TypeError), match="groups"):
            lt.lut_conv2d(x, w, padding=1, groups=1.0)


@pytest.mark.parametrize("groups", [1, 5, 36], ids=["dense", "narrow_groups", "depthwise"])
@pytest.mark.parametrize("units", list(UNITS))
def test_conv_bits_every_simd_and_layout(rng, simd, units, groups):
    torch.manual_seed(1)
    C, O = {1: (5, 9), 5: (10, 15), 36: (36, 36)}[groups]
    m = nn.Conv2d(C, O, 3, stride=2, padding=1, groups=groups)
    x = _x(rng, 3, C, 13, 11)
    want = _conv_ref(m, x, UNITS[units].mul)
    a = lt.approximate(m, UNITS[units])
    for xin in (x, x.contiguous(memory_format=torch.channels_last), x.transpose(2, 3).contiguous().transpose(2, 3)):
        for t in (1, 2):
            a.threads = t
            assert np.array_equal(a(xin).detach().numpy(), want)


@pytest.mark.parametrize("M,O", [(1, 257), (9, 300), (63, 256), (100, 40), (5, 7)])
def test_table_product_packed_weight_every_simd(rng, simd, M, O):
    """functional.product on a QWeight: the packed weight (the table body's staged form, or the
    plain one and TRANSPOSE_ROWS on AVX2 / generic) gives the reference's bits and those of
    lut_gemm on the unpacked weight, at 1 and 2 threads, for Mitchell and a random table."""
    from lutcore.torch import functional as fn
    from reference.gemm_ref import lut_gemm_ref
    K = 77
    w = rng.standard_normal((O, K)).astype(np.float32)
    qw = fn.QWeight(w, 1, "t")
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    for name in ("mitchell", "random"):
        u = UNITS[name]
        want = lut_gemm_ref(a, np.ascontiguousarray(qw.q.T), u.mul)
        for t in (1, 2):
            got = fn.product(a, qw, 0, u, t, np.full((M, O), -7, np.int32))
            assert np.array_equal(got, want), (name, t)
            assert np.array_equal(got, lutcore.lut_gemm(a, np.ascontiguousarray(qw.q.T), u, threads=t))


LINEAR_CASES = [((1, 7), 33), ((7, 33), 5), ((3, 5, 7), 1), ((33,), 7), ((4, 64), 48),
                ((2, 9, 19), 257), ((63, 5), 256)]       # few rows, many columns: the transposed product


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("units", list(UNITS))
@pytest.mark.parametrize("xshape,out", LINEAR_CASES)
def test_linear_bits(rng, xshape, out, units, threads):
    torch.manual_seed(2)
    m = nn.Linear(xshape[-1], out, bias=out != 5)
    x = _x(rng, *xshape)
    got = lt.approximate(m, UNITS[units], threads=threads)(x).detach().numpy()
    b = None if m.bias is None else m.bias.detach().numpy()
    want = linear_ref(x.numpy().reshape(-1, xshape[-1]), m.weight.detach().numpy(), b,
                      UNITS[units].mul).reshape(*xshape[:-1], out)
    print("max diff", np.abs(got - want).max())
    assert np.array_equal(got, want)


@pytest.mark.parametrize("units", list(UNITS))
def test_hf_conv1d_bits(rng, units, simd):
    from transformers import pytorch_utils
    torch.manual_seed(3)
    m = pytorch_utils.Conv1D(13, 7)                     # nf=13 outputs, nx=7 inputs; weight (7, 13)
    nn.init.normal_(m.bias)
    x = _x(rng, 2, 5, 7)
    a = lt.approximate(m, UNITS[units])
    assert isinstance(a, pytorch_utils.Conv1D) and a.qweight.shape == (7, 13)
    want = linear_ref(x.numpy().reshape(-1, 7), m.weight.detach().numpy().T, m.bias.detach().numpy(),
                      UNITS[units].mul).reshape(2, 5, 13)
    for t in (1, 2):
        a.threads = t
        assert np.array_equal(a(x).detach().numpy(), want)


def test_functional_forms_match_layers(rng):
    torch.manual_seed(4)
    x, w, b = _x(rng, 2, 4, 9, 8), _x(rng, 6, 2, 3, 3), _x(rng, 6)
    got = lt.lut_conv2d(x, w, b, "mitchell", 2, 1, 1, 2)
    want = conv2d_ref(x.numpy(), w.numpy(), b.numpy(), UNITS["mitchell"].mul, 2, 1, 1, 2)
    assert np.array_equal(got.numpy(), want)
    x1, w1 = _x(rng, 2, 4, 10), _x(rng, 3, 4, 3)
    assert np.array_equal(lt.lut_conv1d(x1, w1, None, "exact", padding=1).numpy(),
                          conv1d_ref(x1.numpy(), w1.numpy(), None, UNITS["exact"].mul, 1, 1))
    xl, wl = _x(rng, 5, 9), _x(rng, 4, 9)
    assert np.array_equal(lt.lut_linear(xl, wl, None, "truncated:6").numpy(),
                          linear_ref(xl.numpy(), wl.numpy(), None, approx.truncated(6).mul))
    y = lt.lut_conv2d(x[0], w, b, "mitchell", 2, 1, 1, 2)            # unbatched, as F.conv2d
    assert np.array_equal(y.numpy(), want[0])


def test_static_scale_saturates(rng):
    torch.manual_seed(5)
    x, w = _x(rng, 6, 11, scale=3.0), _x(rng, 4, 11)
    s = float(np.abs(x.numpy()).max()) / 127 / 4                    # a quarter of the range: saturation
    got = lt.lut_linear(x, w, None, "mitchell", input_scale=s)
    assert np.array_equal(got.numpy(), linear_ref(x.numpy(), w.numpy(), None, UNITS["mitchell"].mul,
                                                  input_scale=np.float32(s)))


def test_weight_contract_and_attributes(rng):
    torch.manual_seed(6)
    m = nn.Conv2d(3, 5, 3)
    with torch.no_grad():
        m.weight[2] = 0                                                 # an all-zero channel: s 0, q 0
    a = lt.approximate(m, "mitchell")
    q, s = quantize_weight_ref(m.weight.detach().numpy())
    assert a.qweight.dtype == torch.int8 and np.array_equal(a.qweight.numpy(), q)
    assert a.weight_scale.dtype == torch.float32 and np.array_equal(a.weight_scale.numpy(), s)
    assert s[2] == 0 and not q[2].any()
    assert a.input_scale is None and a.units == approx.mitchell()
    assert approx.mitchell().digest[:16] in repr(a) and "mitchell" in repr(a)


# ------------------------------------------------------------------------------ gradients

def _float_grads(m, x):
    x = x.clone().requires_grad_(True)
    y = m(x)
    g = torch.from_numpy(np.random.default_rng(0).standard_normal(y.shape).astype(np.float32))
    y.backward(g)
    out = [x.grad] + [p.grad for p in m.parameters()]
    m.zero_grad()
    return out, g


GRAD_CASES = [c for c in CONV_CASES if c[0] in ("odd_channels", "groups4", "pad2_dil2", "depthwise", "conv1d",
                                                "reflect")]
GRAD_CASES.append(("linear3d", lambda: nn.Linear(7, 5), (3, 4, 7)))


def _grads_both_ways(rng, seed, build, shape, units, backward):
    """(approximate layer's gradients, the float layer's) for the same input and dY:
    [dX, then each parameter's]."""
    torch.manual_seed(seed)
    m = build()
    x = _x(rng, *shape)
    want, g = _float_grads(m, x)
    a = lt.approximate(m, units, backward=backward)
    xa = x.clone().requires_grad_(True)
    a(xa).backward(g)
    return [xa.grad] + [p.grad for p in a.parameters()], want


@pytest.mark.parametrize("name,build,shape", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_ste_grads_equal_float(rng, name, build, shape):
    got, want = _grads_both_ways(rng, 7, build, shape, "mitchell", "ste")
    for u, v in zip(got, want):
        if name == "linear3d":           # dY W over a folded batch: another summation order than autograd's
            torch.testing.assert_close(u, v, rtol=STE_RTOL, atol=STE_ATOL)
        else:                            # a conv's STE is aten.convolution_backward itself: the same bits
            assert torch.equal(u, v)


@pytest.mark.parametrize("name,build,shape", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_units_backward_differs_and_is_close(rng, name, build, shape):
    got, want = _grads_both_ways(rng, 8, build, shape, "exact", "units")
    for u, v in zip(got[:2], want[:2]):                  # dX, dW (db is the float sum in both)
        rel = float((u - v).norm() / v.norm())
        print("relative L2", rel)
        assert 0 < rel < UNITS_GRAD_REL
    if len(want) > 2:                                    # the bias
        torch.testing.assert_close(got[2], want[2], rtol=STE_RTOL, atol=STE_ATOL)


@pytest.mark.parametrize("units", ["exact", "random"])
def test_linear_units_backward_bits(rng, units):
    torch.manual_seed(9)
    x, w = _x(rng, 7, 9), _x(rng, 5, 9)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    y = lt.lut_linear(xr, wr, None, UNITS[units], backward="units")
    dy = _x(rng, 7, 5)
    y.backward(dy)
    dx, dw = linear_units_backward_ref(dy.numpy(), x.numpy(), w.numpy(), UNITS[units].mul)
    assert np.array_equal(xr.grad.numpy(), dx) and np.array_equal(wr.grad.numpy(), dw)


def test_conv_units_backward_against_linear_oracle(rng):
    """A 1x1 stride-1 conv is the linear layer over pixels: its unit backward must agree."""
    torch.manual_seed(10)
    x, w = _x(rng, 2, 6, 3, 4), _x(rng, 5, 6, 1, 1)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    y = lt.lut_conv2d(xr, wr, None, UNITS["random"], backward="units")
    dy = _x(rng, *y.shape)
    y.backward(dy)
    rows = lambda t: t.permute(0, 2, 3, 1).reshape(-1, t.shape[1]).numpy()  # noqa: E731
    dx, dw = linear_units_backward_ref(rows(dy), rows(x), w.numpy()[:, :, 0, 0], UNITS["random"].mul)
    assert np.array_equal(wr.grad.numpy()[:, :, 0, 0], dw)
    np.testing.assert_allclose(rows(xr.grad), dx, rtol=FOLD_RTOL, atol=0)


class _SteFloat64(torch.autograd.Function):
    """The float conv/linear forward in float64 with lutcore's STE backward: gradcheck
    compares that backward with finite differences of the float layer."""

    @staticmethod
    def forward(ctx, x, w, b, geo):
        ctx.save_for_backward(x, w, b)
        ctx.geo = geo
        if geo is None:
            return F.linear(x, w, b)
        return F.conv2d(x, w, b, geo.stride, geo.padding, geo.dilation, geo.groups)

    @staticmethod
    def backward(ctx, dy):
        x, w, b = ctx.saved_tensors
        fnm = lt.functional
        if ctx.geo is None:
            fake = type("C", (), {"saved_tensors": (x, w, b), "needs_input_grad": (True, True, True),
                                  "lc": (None, None, "ste", None, "t", 1, None)})
            return fnm.LutLinearFunction.backward(fake, dy)[:3] + (None,)
        fake = type("C", (), {"saved_tensors": (x, w, b), "needs_input_grad": (True, True, True),
                              "lc": (None, None, ctx.geo, "ste", None, "t", 1, None)})
        return fnm.LutConvFunction.backward(fake, dy)[:3] + (None,)


def test_gradcheck_ste_float64(rng):
    x = torch.randn(2, 4, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    geo = lt.functional._Conv(x, w, 2, 1, 1, 2, "t")
    assert torch.autograd.gradcheck(lambda *a: _SteFloat64.apply(*a, geo), (x, w, b))
    xl = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    wl = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    bl = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: _SteFloat64.apply(*a, None), (xl, wl, bl))


# ----------------------------------------------------------------------------- conversion

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(), nn.Conv1d(8, 8, 1))
        self.head = nn.Linear(8 * 5 * 5, 4)

    def forward(self, x):
        x = self.body[1](self.body[0](self.stem(x)))
        n, c, h, w = x.shape
        x = self.body[2](x.reshape(n, c, h * w)).reshape(n, c, h, w)
        return self.head(x.flatten(1))


def test_approximate_converts_copies_and_skips(rng):
    torch.manual_seed(11)
    net = _Net()
    x = _x(rng, 2, 3, 5, 5)
    y0 = net(x)
    a = lt.approximate(net, "mitchell", skip=("stem", nn.Linear))
    assert type(net.stem) is nn.Conv2d and type(net.head) is nn.Linear          # inplace=False: untouched
    assert torch.equal(net(x), y0)
    assert type(a.stem) is nn.Conv2d and type(a.head) is nn.Linear               # skipped
    assert isinstance(a.body[0], lt.ApproxConv2d) and isinstance(a.body[0], nn.Conv2d)
    assert isinstance(a.body[2], lt.ApproxConv1d)
    assert [n for n, _ in lt.approximate_layers(a)] == ["body.0", "body.2"]
    c = lt.approximate(net, "exact", skip=nn.Sequential)                        # a type covers its children
    assert [n for n, _ in lt.approximate_layers(c)] == ["stem", "head"]
    same = lt.approximate(net, "exact", inplace=True)
    assert same is net and isinstance(net.stem, lt.ApproxLayer) and isinstance(net.head, lt.ApproxLinear)
    with pytest.raises(ValueError, match="nope"):
        lt.approximate(_Net(), "exact", skip=["nope"])


def test_multihead_attention_stays_float_with_a_warning():
    m = nn.Sequential(nn.MultiheadAttention(8, 2), nn.Linear(8, 8))
    with pytest.warns(UserWarning, match="0 is an nn.MultiheadAttention"):
        a = lt.approximate(m, "exact")
    assert [n for n, _ in lt.approximate_layers(a)] == ["1"]
    import warnings
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        lt.approximate(nn.TransformerEncoderLayer(8, 2, 16), "exact")
    msgs = " ".join(str(w.message) for w in got)
    assert "set_fastpath_enabled" in msgs and "self_attn is an nn.MultiheadAttention" in msgs


def test_state_dict_round_trip_and_set_units(rng):
    torch.manual_seed(12)
    net = _Net()
    a = lt.approximate(net, "mitchell", backward="units")
    sd = a.state_dict()
    assert list(sd) == list(net.state_dict())
    fresh = _Net()
    fresh.load_state_dict(sd)                                                     # into the float model
    x = _x(rng, 2, 3, 5, 5)
    assert torch.equal(fresh(x), net(x))
    b = lt.approximate(fresh, "exact")
    b.load_state_dict(a.state_dict())
    lt.set_units(b, "mitchell")
    assert torch.equal(b(x), a(x))                                                # set_units == conversion
    lt.set_units(a, "truncated:5")
    assert torch.equal(a(x), lt.approximate(net, "truncated:5")(x))
    with pytest.raises(ValueError, match="no approximate layers"):
        lt.set_units(_Net(), "exact")


def test_weight_change_requantizes(rng):
    torch.manual_seed(13)
    m = lt.approximate(nn.Linear(6, 3), "exact")
    x = _x(rng, 4, 6)
    y0 = m(x)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m(x).sum().backward()
    opt.step()
    y1 = m(x)
    want = linear_ref(x.numpy(), m.weight.detach().numpy(), m.bias.detach().numpy(), UNITS["exact"].mul)
    assert not torch.equal(y0, y1) and np.array_equal(y1.detach().numpy(), want)


def test_calibrate_static(rng):
    torch.manual_seed(14)
    net = _Net()
    batches = [(_x(rng, 2, 3, 5, 5), None) for _ in range(3)]
    a = lt.approximate(net, "mitchell", activations="static")
    with pytest.raises(RuntimeError, match="stem: .*never calibrated"):
        a(batches[0][0])
    stem_in = max(float(b[0].abs().max()) for b in batches)
    lt.calibrate(a, batches)
    assert a.stem.activations == "static"
    assert a.stem.input_scale.item() == np.float32(stem_in) / np.float32(127)
    x = _x(rng, 2, 3, 5, 5)
    want = conv2d_ref(x.numpy(), net.stem.weight.detach().numpy(), net.stem.bias.detach().numpy(),
                      UNITS["mitchell"].mul, padding=1, input_scale=np.float32(stem_in) / np.float32(127))
    assert np.array_equal(a.stem(x).detach().numpy(), want)
    assert torch.isfinite(a(x)).all()


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.float64])
def test_wrong_dtype_names_layer(rng, dtype):
    a = lt.approximate(nn.Sequential(nn.Linear(4, 3)), "exact")
    with pytest.raises(TypeError, match=r"0: input has dtype torch\.") as e:
        a(torch.ones(2, 4).to(dtype))
    assert str(dtype) in str(e.value)
    b = lt.approximate(nn.Sequential(nn.Conv2d(2, 3, 3)), "exact").to(torch.float16)
    with pytest.raises(TypeError, match=r"0: input has dtype torch.float16"):
        b(torch.ones(1, 2, 5, 5, dtype=torch.float16))


def test_non_cpu_and_nan_inputs(rng):
    a = lt.approximate(nn.Sequential(nn.Linear(4, 3)), "exact")
    with pytest.raises(TypeError, match="0: input is on device meta"):
        a(torch.ones(2, 4, device="meta"))
    with pytest.raises(ValueError, match="0: input holds 1 non-finite"):
        a(torch.tensor([[1.0, float("nan"), 0.0, 2.0]]))
    with pytest.raises(ValueError, match="lut_conv2d: input has 4 channels"):
        lt.lut_conv2d(torch.ones(1, 4, 5, 5), torch.ones(3, 3, 3, 3))
    with pytest.raises(ValueError, match="backward"):
        lt.approximate(nn.Linear(2, 2), "exact", backward="float")
    with pytest.raises(TypeError, match="units"):
        lt.approximate(nn.Linear(2, 2), 3.5)


def test_import_without_torch_is_one_clear_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import lutcore.torch\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "IMPORTERROR" in out and "lutcore[torch]" in out


# --------------------------------------------------------------------- Hugging Face models

@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_hf_causal_lm_converted(arch):
    import transformers
    torch.manual_seed(15)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=97, n_positions=32)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                       hidden_size=32, intermediate_size=48, vocab_size=97,
                                       max_position_embeddings=32)
        model = transformers.LlamaForCausalLM(cfg)
    model.eval()
    ids = torch.randint(0, 97, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits
        a = lt.approximate(model, "exact")
        kinds = {type(m).__name__ for _, m in lt.approximate_layers(a)}
        got = a(ids).logits
        worse = lt.set_units(lt.approximate(model, "truncated:8"), "truncated:8")(ids).logits
    assert kinds == ({"ApproxConv1D", "ApproxLinear"} if arch == "gpt2" else {"ApproxLinear"})
    assert torch.isfinite(got).all()
    rel = float((got - ref).norm() / ref.norm())
    rel_worse = float((worse - ref).norm() / ref.norm())
    print(arch, "relative L2 exact", rel, "truncated:8", rel_worse)
    assert rel < 0.05 and rel < rel_worse


@pytest.mark.parametrize("units", ["exact", "random"])
def test_large_inputs_run_threaded_passes(rng, units):
    """Inputs past the native passes' one-thread threshold (im2col.h LC_IM2COL_PAR_MIN): the
    threaded quantize, max, im2col, grouped direct products and dequantize give the oracle's bits at 1 and 2 threads."""
    torch.manual_seed(16)
    m = nn.Conv2d(16, 8, 3, stride=2, padding=1)
    x = _x(rng, 4, 16, 48, 48)                                            # 147k values
    want = _conv_ref(m, x, UNITS[units].mul)
    lin = nn.Linear(600, 16)
    xl = _x(rng, 256, 600)
    want_l = linear_ref(xl.numpy(), lin.weight.detach().numpy(), lin.bias.detach().numpy(), UNITS[units].mul)
    dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)                     # depthwise: the grouped direct pass
    want_d = _conv_ref(dw, x, UNITS[units].mul)
    for t in (1, 2):
        assert np.array_equal(lt.approximate(m, UNITS[units], threads=t)(x).detach().numpy(), want)
        assert np.array_equal(lt.approximate(dw, UNITS[units], threads=t)(x).detach().numpy(), want_d)
        assert np.array_equal(lt.approximate(lin, UNITS[units], threads=t)(xl).detach().numpy(), want_l)
