"""lutcore.torch layers through units with a declared accumulator: the forward bits of
lut_linear / lut_conv2d / lut_conv1d and of approximate() against tests/reference/zeropoint_ref.py
with each code sum in the register (tests/reference/accum_ref.py); a conv's patch enters it in the
weight's (c, kh, kw) order.  Signed 8 x 8 units with a register take the operand-format path
(symmetric codes), never the int8 path that would drop it; the same bits at 1 and 2 threads.
The overflow log of a converted model: entries under each layer's module name whose counts are
the oracle's (a two-layer MLP, 6u x 4s codes, a 10-bit register that most sums of 12 products
overflow, exact and lower-part-OR adders), and a "units" backward's under "<name> (backward)"."""
import numpy as np
import pytest

import torch  # noqa: E402  (the torch extra is a test requirement)
from torch import nn  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.ops import accum  # noqa: E402
from lutcore.units import Units, approx  # noqa: E402
from lutcore.units.accumulator import Accumulator  # noqa: E402
from lutcore.units.adder_designs import loa  # noqa: E402
from reference import zeropoint_ref as R  # noqa: E402
from reference.accum_ref import accumulate_ref, adder_fn_from_netlist  # noqa: E402
from reference.zeropoint_ref import conv1d_forward, conv2d_forward, linear_forward  # noqa: E402
from test_accum_paths import _loa  # noqa: E402

T = torch.from_numpy


def _kw(acc):
    kw = dict(bits=acc.bits, signed=acc.signed, overflow=acc.overflow, order=acc.order, chunk=acc.chunk)
    if acc.adder is not None:
        kw["adder"] = adder_fn_from_netlist(acc.adder.netlist.gates, acc.adder.netlist.outputs, acc.bits)
    return kw


CASES = {  # name: (units, format spelling for the oracle)
    "8s-sat16": (lambda: Units.exact().with_accumulator("16s:saturate"), "8s x 8s"),
    "mitchell-loa16": (lambda: approx.mitchell().with_accumulator(Accumulator(16, True, "wrap", adder=_loa(16, True, 4))),
                       "8s x 8s"),
    "8u4u-12u-chunks": (lambda: Units.exact("8u x 4u").with_accumulator("12u:saturate:chunks=4"), "8u x 4u"),
    "4s-9s-loa": (lambda: Units.exact("4s").with_accumulator(Accumulator(9, True, "saturate", adder=_loa(9, True, 2))),
                  "4s x 4s"),
}


def _bits_eq(got, want, what):
    got, want = np.ascontiguousarray(got, np.float32), np.ascontiguousarray(want, np.float32)
    assert got.shape == want.shape and np.array_equal(got.view(np.int32), want.view(np.int32)), \
        (what, float(np.abs(got - want).max()))


@pytest.mark.parametrize("name", list(CASES))
def test_linear_forward_through_the_register(rng, name):
    mk, spec = CASES[name]
    u = mk()
    for M, K in ((1, 7), (7, 33), (5, 130)):
        x = (rng.standard_normal((M, K)) * 2).astype(np.float32)
        w = rng.standard_normal((6, K)).astype(np.float32)
        b = rng.standard_normal(6).astype(np.float32)
        want = linear_forward(x, w, b, u.table(), spec, acc=_kw(u.accumulator))
        for th in (1, 2):
            lutcore.set_num_threads(th)
            _bits_eq(lt.lut_linear(T(x), T(w), T(b), u).numpy(), want, f"{name} M{M} K{K} threads {th}")


@pytest.mark.parametrize("name", ["8s-sat16", "8u4u-12u-chunks", "4s-9s-loa"])
def test_conv_forward_through_the_register(rng, name):
    mk, spec = CASES[name]
    u = mk()
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    want = conv2d_forward(x, w, b, u.table(), spec, 1, 1, 1, 2, acc=_kw(u.accumulator))
    _bits_eq(lt.lut_conv2d(T(x), T(w), T(b), u, stride=1, padding=1, groups=2).numpy(), want, f"{name} conv2d")
    x1 = rng.standard_normal((2, 5, 17)).astype(np.float32)
    w1 = rng.standard_normal((4, 5, 5)).astype(np.float32)
    want = conv1d_forward(x1, w1, None, u.table(), spec, 2, 3, 1, 1, acc=_kw(u.accumulator))
    _bits_eq(lt.lut_conv1d(T(x1), T(w1), None, u, stride=2, padding=3).numpy(), want, f"{name} conv1d")


def test_approximate_model_logs_overflows_per_module(rng):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 6))
    u = Units.exact().with_accumulator("16s:wrap")
    a = lt.approximate(net, u)
    x = T((rng.standard_normal((2, 3, 5, 5)) * 4).astype(np.float32))
    plain = lt.approximate(nn.Sequential(*[m for m in net]), Units.exact())
    with accum.overflow_log() as log:
        with torch.no_grad():
            y = a(x).numpy()
    rows = log.to_dict()
    assert set(rows) <= {"0", "3"} and rows, rows
    with torch.no_grad():
        wide = lt.approximate(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                            nn.Linear(4 * 5 * 5, 6)), Units.exact().with_accumulator("32s"))
    assert y.shape == (2, 6) and plain is not None and wide is not None


MLP_FMT = "6u x 4s"
MLP_BITS = 10               # 6u x 4s products (|p| <= 63 * 8) fit, sums of 12 often do not


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 6), nn.ReLU(), nn.Linear(6, 3))


def _linear_ref(x, w, b, acc):
    """(y float32 (M, O), counts int64 (M, O)): one linear layer through the exact 6u x 4s unit and
    the register, each dot product's overflow events with it."""
    ab, asg, bb, bsg = R.parse_format(MLP_FMT)
    qx, s_x, zp_x = R.quantize_tensor(x, ab, asg)                       # (M, K)
    qw, s_w, zp_w = R.quantize_rows(w, bb, bsg)                         # (O, K)
    (M, K), O = qx.shape, qw.shape[0]
    p = qx[:, None, :] * qw[None, :, :]                                 # (M, O, K) the exact unit's products
    reg, n = accumulate_ref(p.reshape(M * O, K), **_kw(acc))            # (M O,) each
    a = reg.reshape(M, O) - zp_w[None, :] * qx.sum(axis=1)[:, None] - zp_x * qw.sum(axis=1)[None, :] \
        + np.int64(K) * zp_x * zp_w[None, :]                            # (M, O) the exact zero-point terms
    return R.dequantize(a, s_x, s_w, b), n.reshape(M, O)


@pytest.mark.parametrize("overflow", ["wrap", "saturate"])
@pytest.mark.parametrize("adder", [None, "loa"])
def test_overflow_log_per_module_is_the_oracles(overflow, adder):
    acc = Accumulator(MLP_BITS, True, overflow, adder=None if adder is None else loa(MLP_BITS, True, 2))
    model = _mlp()
    m = lt.approximate(_mlp(), Units.exact(MLP_FMT).with_accumulator(acc))
    x = torch.randn(9, 12, generator=torch.Generator().manual_seed(1))
    with accum.overflow_log() as log, torch.no_grad():
        got = m(x).numpy()
    w0, b0 = (t.detach().numpy() for t in (model[0].weight, model[0].bias))
    w2, b2 = (t.detach().numpy() for t in (model[2].weight, model[2].bias))
    h, n0 = _linear_ref(x.numpy(), w0, b0, acc)
    want, n2 = _linear_ref(np.maximum(h, np.float32(0)), w2, b2, acc)
    _bits_eq(got, want, str(acc))
    rows = log.to_dict()
    print(acc, rows)
    assert list(rows) == ["0", "2"]                                     # the module names, in call order
    for name, n, K in (("0", n0, 12), ("2", n2, 6)):
        assert rows[name] == {"outputs": n.size, "overflowed": int(np.count_nonzero(n)), "events": int(n.sum()),
                              "additions": n.size * K}
    assert rows["0"]["overflowed"] > 0                                  # the case exercises the register


def test_units_backward_is_labelled():
    m = lt.approximate(_mlp(), Units.exact("4s x 4s").with_accumulator("8s:saturate"), backward="units")
    x = torch.randn(9, 12, generator=torch.Generator().manual_seed(2))
    with accum.overflow_log() as log:
        m(x).sum().backward()
    rows = log.to_dict()
    print(rows)
    assert set(rows) == {"0", "2", "0 (backward)", "2 (backward)"}
    assert all(r["outputs"] > 0 for r in rows.values())
