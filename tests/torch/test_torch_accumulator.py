"""lutcore.torch layers through units with a declared accumulator: the forward bits of
lut_linear / lut_conv2d / lut_conv1d and of approximate() against tests/reference/zeropoint_ref.py
with each code sum in the register (tests/reference/accum_ref.py); a conv's patch enters it in the
weight's (c, kh, kw) order.  Signed 8 x 8 units with a register take the operand-format path
(symmetric codes), never the int8 path that would drop it; the same bits at 1 and 2 threads."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")   # noqa: E402  (the torch extra is a test requirement)
from torch import nn  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.ops import accum  # noqa: E402
from lutcore.units import Units, approx  # noqa: E402
from lutcore.units.accumulator import Accumulator  # noqa: E402
from reference.accum_ref import adder_fn_from_netlist  # noqa: E402
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
