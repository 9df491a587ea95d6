"""lutcore.torch: the silent wrong answers of issue 24, each against a plain expectation.

* a weight edited in place through ``.data`` (mul_, an element fill_, copy_) is what the
  next call computes with: the output, ``qweight`` and ``weight_scale`` equal those of a
  fresh layer holding the edited weight, and the numpy oracle's;
* ``input_scale`` is checked in float32 (1e39 is inf there, 1e-46 is 0), naming the layer;
* ``backward="units"`` refuses a second differentiation (create_graph=True) loudly;
  ``"ste"`` stays twice differentiable;
* every zero-size dimension of every layer kind gives torch's own result (values,
  shape, gradients), or, where torch refuses the shapes, a ValueError naming the layer;
* torch.compile (fullgraph), torch.export (strict and not) and torch.jit.trace of a
  converted model give the eager bits (outputs and gradients) and follow weight edits;
* ``padding="same"`` with a stride is refused, as torch refuses it.
"""
import copy
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers.pytorch_utils import Conv1D

import lutcore.torch as lt
from lutcore.units import approx
from reference.torch_layers_ref import conv1d_ref, conv2d_ref, linear_ref

MITCHELL = approx.mitchell()

# One line per layer kind: (name, float layer builder, input shape)
KINDS = [
    ("linear", lambda: nn.Linear(7, 5), (3, 7)),
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), (2, 3, 9)),
    ("conv2d", lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1), (2, 3, 7, 6)),
    ("hf_conv1d", lambda: Conv1D(5, 7), (2, 3, 7)),
]


def _x(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def _oracle(m, x):
    """The contract's output of float layer m (its current weight) on x, in numpy."""
    w, b, xn = m.weight.detach().numpy(), m.bias.detach().numpy(), x.numpy()
    if isinstance(m, Conv1D):
        return linear_ref(xn.reshape(-1, w.shape[0]), w.T, b, MITCHELL.mul).reshape(*x.shape[:-1], -1)
    if isinstance(m, nn.Linear):
        return linear_ref(xn, w, b, MITCHELL.mul)
    if isinstance(m, nn.Conv1d):
        return conv1d_ref(xn, w, b, MITCHELL.mul, m.stride[0], m.padding[0])
    return conv2d_ref(xn, w, b, MITCHELL.mul, m.stride, m.padding)


# ------------------------------------------------------------------- 1. in-place edits

EDITS = [
    ("data_mul_mask", lambda w, r: w.data.mul_(torch.from_numpy((r.random(w.shape) > 0.5).astype(np.float32)))),
    ("data_row_fill", lambda w, r: w.data[0].fill_(0.25)),
    ("data_copy", lambda w, r: w.data.copy_(_x(r, *w.shape))),
    ("data_one_element", lambda w, r: w.data.view(-1)[-1].mul_(-3.0)),
    ("no_grad_setitem", lambda w, r: w.data.__setitem__((0,), w.data[0] * 2)),
]


@pytest.mark.parametrize("edit_name,edit", EDITS, ids=[e[0] for e in EDITS])
@pytest.mark.parametrize("kind,build,shape", KINDS, ids=[k[0] for k in KINDS])
def test_in_place_weight_edits_are_followed(rng, kind, build, shape, edit_name, edit):
    torch.manual_seed(0)
    layer = lt.approximate(build(), MITCHELL)
    x = _x(rng, *shape)
    y_before = layer(x).detach()
    scale_before = layer.weight_scale
    version = layer.weight._version
    edit(layer.weight, rng)
    assert layer.weight._version == version            # the edit the old version-keyed cache missed
    fresh = lt.approximate(copy.deepcopy(layer), MITCHELL)    # a new layer (new cache) with the edited weight
    got = layer(x).detach()
    assert not torch.equal(got, y_before)
    assert np.array_equal(got.numpy(), _oracle(layer, x))
    assert torch.equal(got, fresh(x))
    assert torch.equal(layer.qweight, fresh.qweight) and torch.equal(layer.weight_scale, fresh.weight_scale)
    if edit_name in ("data_copy", "data_row_fill"):
        assert not torch.equal(layer.weight_scale, scale_before)


def test_edits_between_calls_and_gradients_follow(rng):
    """Pruning in a training loop: mask the weight through .data between steps; the
    forward and the unit backward use the masked weight."""
    torch.manual_seed(1)
    layer = lt.approximate(nn.Linear(9, 6), MITCHELL, backward="units")
    x = _x(rng, 4, 9)
    for step in range(3):
        layer.weight.data.mul_(torch.from_numpy((rng.random((6, 9)) > 0.3).astype(np.float32)))
        fresh = lt.approximate(copy.deepcopy(layer), MITCHELL, backward="units")
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ya, yb = layer(xa), fresh(xb)
        assert torch.equal(ya, yb)
        ya.sum().backward()
        yb.sum().backward()
        assert torch.equal(xa.grad, xb.grad)


def test_copies_get_their_own_cache(rng):
    """deepcopy and pickle give a new, empty cache (own key), so an edit of one copy
    never reaches the other."""
    torch.manual_seed(2)
    a = lt.approximate(nn.Linear(6, 4), MITCHELL)
    x = _x(rng, 2, 6)
    y = a(x)
    for b in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert b._lc_cache.key != a._lc_cache.key
        assert torch.equal(b(x), y)
        b.weight.data.mul_(0.5)
        assert not torch.equal(b(x), y) and torch.equal(a(x), y)


CHUNK = 1 << 18                     # csrc/im2col/im2col.h LC_SAME_CHUNK: the compare's chunk


@pytest.mark.parametrize("n", [0, 1, 7, 33, CHUNK - 1, CHUNK + 1, 4 * CHUNK + 1, 5 * CHUNK + 33])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_same_bytes_against_bytes_equality(rng, n, threads):
    """The weight check's memcmp (_native.im2col.same_bytes) against Python's bytes ==, a byte
    changed at the first, a middle, a chunk's edge and the last position."""
    from lutcore._native import im2col
    a = rng.integers(0, 256, n, dtype=np.uint8)
    assert im2col.same_bytes(a, a.copy(), threads)
    assert not im2col.same_bytes(a, a[:-1].copy() if n else np.zeros(1, np.uint8), threads)
    for i in sorted({0, n // 2, min(CHUNK, n - 1), n - 1}) if n else []:
        b = a.copy()
        b[i] ^= 0x80
        assert a.tobytes() != b.tobytes()
        assert im2col.same_bytes(a, b, threads) is False


@pytest.mark.parametrize("threads", [1, 2])
def test_big_weight_edits_are_followed(rng, threads):
    """A weight spanning several compare chunks (threaded memcmp): one element edited in the
    last chunk; 0.0 -> -0.0 (equal as floats, but the check is bitwise: it quantizes again);
    and a transposed weight (transformers' Conv1D)."""
    torch.manual_seed(3)
    layer = lt.approximate(nn.Linear(1100, 1030), MITCHELL, threads=threads)
    x = _x(rng, 2, 1100)
    y0 = layer(x).detach()
    layer.weight.data.view(-1)[-5] = 40.0          # the new max |w|: the scale of its row changes
    got = layer(x).detach()
    assert not torch.equal(got, y0)
    assert np.array_equal(got.numpy(), _oracle(layer, x))
    qw = layer._lc_cache._state[2]
    layer.weight.data.view(-1)[7] = 0.0
    layer(x)
    qw0 = layer._lc_cache._state[2]
    layer.weight.data.view(-1)[7] = -0.0
    layer(x)
    assert layer._lc_cache._state[2] is not qw0 and qw0 is not qw      # the sign bit is seen
    hf = lt.approximate(Conv1D(1030, 1100), MITCHELL, threads=threads)  # weight (in, out) read as W.t()
    y1 = hf(x).detach()
    hf.weight.data[-1, -1] = -50.0
    got = hf(x).detach()
    assert not torch.equal(got, y1)
    assert np.array_equal(got.numpy(), _oracle(hf, x))


# ----------------------------------------------------------------- 2. input_scale in float32

@pytest.mark.parametrize("bad", [1e39, np.float64(3.5e38), 1e-46, torch.tensor(1e39, dtype=torch.float64), 0.0])
def test_input_scale_checked_in_float32(rng, bad):
    x, w = _x(rng, 2, 5), _x(rng, 3, 5)
    with pytest.raises(ValueError, match=r"lut_linear: input_scale"):
        lt.lut_linear(x, w, input_scale=bad)
    layer = lt.approximate(nn.Conv2d(2, 3, 3), activations="static")
    with pytest.raises(ValueError, match=r"Conv2d: input_scale"):
        layer.input_scale = bad


def test_input_scale_extremes_that_fit_float32(rng):
    x, w = _x(rng, 2, 5), _x(rng, 3, 5)
    y = lt.lut_linear(x, w, input_scale=3.0e38)           # finite in float32: codes 0, the output 0
    assert torch.isfinite(y).all()
    layer = lt.approximate(nn.Linear(5, 3), activations="static")
    layer.input_scale = 1e-3
    assert layer.input_scale.dtype == torch.float32 and float(layer.input_scale) == float(np.float32(1e-3))


# ------------------------------------------------------------ 3. double backward through units

def _penalty(model, x):
    """A gradient penalty: || d sum(model(x)^2) / dx ||^2, then its backward."""
    x = x.clone().requires_grad_(True)
    g, = torch.autograd.grad(model(x).pow(2).sum(), x, create_graph=True)
    g.pow(2).sum().backward()
    return g


@pytest.mark.parametrize("kind,build,shape", KINDS, ids=[k[0] for k in KINDS])
def test_units_backward_refuses_double_backward(rng, kind, build, shape):
    torch.manual_seed(3)
    layer = lt.approximate(build(), MITCHELL, backward="units")
    x = _x(rng, *shape)
    with pytest.raises(RuntimeError, match=r"backward='units' is differentiable once"):
        _penalty(layer, x)
    # one differentiation is fine, with or without create_graph
    xr = x.clone().requires_grad_(True)
    g, = torch.autograd.grad(layer(xr).sum(), xr)
    assert g.shape == x.shape and torch.isfinite(g).all()


def test_units_backward_functional_double_backward(rng):
    x, w = _x(rng, 1, 2, 5, 5), _x(rng, 3, 2, 3, 3).requires_grad_(True)
    f = lambda t: lt.lut_conv2d(t, w, None, MITCHELL, backward="units")  # noqa: E731
    with pytest.raises(RuntimeError, match=r"lut_conv2d: backward='units' is differentiable once"):
        _penalty(f, x)


@pytest.mark.parametrize("kind,build,shape", KINDS, ids=[k[0] for k in KINDS])
def test_ste_backward_is_twice_differentiable(rng, kind, build, shape):
    """STE's second derivative is the float layer's (its gradients are the float formulas)."""
    torch.manual_seed(4)
    m = build()
    a = lt.approximate(m, "exact")
    x = _x(rng, *shape)
    _penalty(a, x)
    assert a.weight.grad is not None and torch.isfinite(a.weight.grad).all()


# -------------------------------------------------------------------- 4. zero-size dimensions

# (name, float layer builder, input shape): every zero-size dimension of every layer kind
ZERO = [
    ("linear_in0", lambda: nn.Linear(0, 4), (3, 0)),
    ("linear_in0_nobias", lambda: nn.Linear(0, 4, bias=False), (2, 3, 0)),
    ("linear_out0", lambda: nn.Linear(5, 0), (3, 5)),
    ("linear_batch0", lambda: nn.Linear(5, 4), (0, 5)),
    ("linear_lead0", lambda: nn.Linear(5, 4), (2, 0, 5)),
    ("linear_all0", lambda: nn.Linear(0, 0), (0, 0)),
    ("conv2d_batch0", lambda: nn.Conv2d(3, 4, 3, padding=1), (0, 3, 5, 5)),
    ("conv2d_in0", lambda: nn.Conv2d(0, 4, 3), (2, 0, 5, 5)),
    ("conv2d_out0", lambda: nn.Conv2d(3, 0, 3), (2, 3, 5, 5)),
    ("conv2d_h0", lambda: nn.Conv2d(3, 4, 1), (2, 3, 0, 5)),
    ("conv2d_w0_pad", lambda: nn.Conv2d(3, 4, 3, padding=1), (1, 3, 4, 0)),
    ("conv2d_batch0_same", lambda: nn.Conv2d(3, 4, 4, padding="same"), (0, 3, 5, 5)),
    ("conv2d_batch0_reflect", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (0, 3, 5, 5)),
    ("conv2d_unbatched_in0", lambda: nn.Conv2d(0, 4, 3), (0, 5, 5)),
    ("conv1d_batch0", lambda: nn.Conv1d(3, 4, 3), (0, 3, 7)),
    ("conv1d_in0", lambda: nn.Conv1d(0, 4, 3), (2, 0, 7)),
    ("conv1d_out0", lambda: nn.Conv1d(3, 0, 3), (2, 3, 7)),
    ("conv1d_len0", lambda: nn.Conv1d(3, 4, 1), (2, 3, 0)),
    ("hf_in0", lambda: Conv1D(4, 0), (2, 3, 0)),
    ("hf_out0", lambda: Conv1D(0, 5), (2, 5)),
    ("hf_batch0", lambda: Conv1D(4, 5), (0, 3, 5)),
]


class _HFAsLinear(nn.Module):
    """HF Conv1D's function as F.linear (its own forward's x.view(-1, 0) fails for nx = 0)."""

    def __init__(self, hf):
        super().__init__()
        self.weight, self.bias = hf.weight, hf.bias

    def forward(self, x):
        return F.linear(x, self.weight.t(), self.bias)


def _run(m, x):
    """(y, x.grad, {param: grad}) of m on x with the sum as loss, or the exception."""
    x = x.clone().requires_grad_(True)
    for p in m.parameters():
        p.grad = None
    try:
        y = m(x)
    except (RuntimeError, ValueError) as e:
        return e
    if y.requires_grad:
        y.sum().backward()
    return y.detach(), x.grad, {n: p.grad for n, p in m.named_parameters()}


@pytest.mark.parametrize("backward", ["ste", "units"])
@pytest.mark.parametrize("name,build,shape", ZERO, ids=[z[0] for z in ZERO])
def test_zero_size_dims_give_torchs_result(rng, name, build, shape, backward):
    torch.manual_seed(5)
    m = build()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()                                 # a non-zero bias to broadcast
    x = _x(rng, *shape)
    want = _run(_HFAsLinear(m) if isinstance(m, Conv1D) else m, x)
    a = lt.approximate(m, MITCHELL, backward=backward)
    got = _run(a, x)
    if isinstance(want, Exception):                     # torch refuses these shapes: so do we, clearly
        assert isinstance(got, ValueError), got
        assert type(a).__name__ in str(got) or name.split("_")[0] in str(got)
        return
    assert not isinstance(got, Exception), got
    (y0, gx0, gp0), (y1, gx1, gp1) = want, got
    assert y1.shape == y0.shape and y1.dtype == y0.dtype and torch.equal(y1, y0)
    assert (gx0 is None) == (gx1 is None) and (gx0 is None or torch.equal(gx0, gx1))
    for n in gp0:
        assert (gp0[n] is None) == (gp1[n] is None), n
        assert gp0[n] is None or torch.equal(gp0[n], gp1[n]), n


def test_zero_size_functional_and_properties(rng):
    b = _x(rng, 4)
    y = lt.lut_linear(_x(rng, 3, 0), torch.zeros(4, 0), b, MITCHELL)
    assert torch.equal(y, b.expand(3, 4))                  # F.linear: the bias broadcast
    layer = lt.approximate(nn.Linear(5, 0), MITCHELL)
    assert layer.qweight.shape == (0, 5) and layer.weight_scale.shape == (0,)
    conv = lt.approximate(nn.Conv2d(0, 3, 2), MITCHELL)
    assert conv.qweight.shape == (3, 0, 2, 2) and torch.equal(conv.weight_scale, torch.zeros(3))


# ---------------------------------------------------------------- 5. compile, export, trace

class _Tiny(nn.Module):
    """Every layer kind, a 'same' conv, one static scale, STE and unit backwards mixed."""

    def __init__(self):
        super().__init__()
        self.c2 = nn.Conv2d(2, 3, 3, padding=1)
        self.c1 = nn.Conv1d(3, 4, 2, padding="same")
        self.fc = nn.Linear(4 * 16, 5)
        self.hf = Conv1D(3, 5)

    def forward(self, x):
        y = torch.relu(self.c2(x))
        n = y.shape[0]
        y = self.c1(y.reshape(n, 3, 16))
        return self.hf(torch.tanh(self.fc(y.reshape(n, -1))))


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(6)
    m = lt.approximate(_Tiny(), MITCHELL)
    m.c1.backward = "units"
    m.hf.backward = "units"
    m.fc.activations = "static"
    m.fc.input_scale = 0.02
    x = torch.from_numpy(np.random.default_rng(6).standard_normal((2, 2, 4, 4)).astype(np.float32))
    return m, x, torch.compile(m, fullgraph=True, dynamic=True)   # compiled once (any batch size)


def _fwd_bwd(model, m, x):
    xr = x.clone().requires_grad_(True)
    m.zero_grad(set_to_none=True)
    y = model(xr)
    y.pow(2).sum().backward()
    return y.detach(), xr.grad, [p.grad.clone() for p in m.parameters()]


def test_compile_gives_eager_bits_and_gradients(tiny):
    m, x, mc = tiny
    y0, gx0, gp0 = _fwd_bwd(m, m, x)
    y1, gx1, gp1 = _fwd_bwd(mc, m, x)
    assert torch.equal(y0, y1) and torch.equal(gx0, gx1)
    assert all(torch.equal(a, b) for a, b in zip(gp0, gp1))
    x3 = torch.cat([x, x[:1] * 0.5])                       # another batch size, the same graph
    (y0, gx0, _), (y1, gx1, _) = _fwd_bwd(m, m, x3), _fwd_bwd(mc, m, x3)
    assert torch.equal(y0, y1) and torch.equal(gx0, gx1)
    # a weight edit through .data reaches the compiled model too (same cache, by key)
    w0 = m.c2.weight.detach().clone()
    try:
        m.c2.weight.data.mul_(0.5)
        with torch.no_grad():
            y2 = m(x)
            assert not torch.equal(y2, y0) and torch.equal(mc(x), y2)
    finally:
        m.c2.weight.data.copy_(w0)


@pytest.mark.parametrize("strict", [False, True])
def test_export_gives_eager_bits(tiny, strict):
    m, x, _ = tiny
    with torch.no_grad():
        y0 = m(x)
    ep = torch.export.export(m, (x,), strict=strict)
    ops = {str(n.target) for n in ep.graph.nodes if "lutcore" in str(n.target)}
    assert ops == {"lutcore.conv.default", "lutcore.linear.default"}
    assert torch.equal(ep.module()(x), y0)


def test_jit_trace_gives_eager_bits(tiny):
    m, x, _ = tiny
    with torch.no_grad():
        y0 = m(x)
        tr = torch.jit.trace(m, (x,), check_trace=False)
    graph = str(tr.inlined_graph)
    assert "lutcore::conv" in graph and "lutcore::linear" in graph
    assert torch.equal(tr(x), y0)
    y1, gx1, _ = _fwd_bwd(tr, m, x)
    y0, gx0, _ = _fwd_bwd(m, m, x)
    assert torch.equal(y1, y0) and torch.equal(gx1, gx0)


def test_custom_ops_units_backward_refuses_double_backward(tiny):
    """The traced path (the custom ops' autograd) refuses a second differentiation too."""
    m, x, _ = tiny
    with torch.no_grad():
        tr = torch.jit.trace(m, (x,), check_trace=False)
    with pytest.raises(RuntimeError, match=r"differentiable once"):
        _penalty(tr, x)


# ------------------------------------------------------------------ 6. padding='same', stride

@pytest.mark.parametrize("stride", [2, (1, 2), (2, 1)])
def test_same_padding_with_stride_is_refused_like_torch(rng, stride):
    x, w = _x(rng, 1, 3, 6, 6), _x(rng, 4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(x, w, padding="same", stride=stride)
    with pytest.raises(ValueError, match=r"lut_conv2d: padding='same' is not supported for strided convolutions"):
        lt.lut_conv2d(x, w, padding="same", stride=stride)
    x1, w1 = _x(rng, 1, 3, 9), _x(rng, 4, 3, 3)
    with pytest.raises(ValueError, match=r"lut_conv1d: padding='same' is not supported for strided convolutions"):
        lt.lut_conv1d(x1, w1, padding="same", stride=2)
    assert lt.lut_conv2d(x, w, padding="same", stride=1).shape == (1, 4, 6, 6)
