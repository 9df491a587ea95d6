"""lutcore.ops.causal_conv1d / causal_conv1d_backward / causal_conv1d_step
(Mamba-1 causal depthwise conv) against the float64 numpy oracle in
tests/reference/scan_ref.py and against torch's F.conv1d; the step form against
the full convolution; threads 1 vs 2 and every SIMD path bit-identical; bad input.

Error budgets (named, STYLE habit 10):
    F64_TOL    float64: max|got - want| <= F64_TOL * max|want|
    F32_TOL    float32: max|got - want| <= F32_TOL * max|want| (K <= 4 products, no long sums)
    F32_DW_TOL float32 dweight/dbias: sums over batch*L terms
"""

import numpy as np
import pytest

import lutcore
import lutcore.ops as ops
from reference.scan_ref import causal_conv1d_backward_ref, causal_conv1d_ref
from reference.asserts import assert_bits_equal, bits
from reference.asserts import names_arg as _names_arg

F64_TOL = 1e-12
F32_TOL = 2e-6
F32_DW_TOL = 2e-5

SHAPES = [(1, 1, 1), (2, 7, 33), (1, 33, 8), (3, 65, 17), (2, 130, 9), (1, 2, 70)]
KS = [1, 2, 3, 4]
DTYPES = [np.float64, np.float32]


def _inputs(rng, batch, L, Dm, K, dtype, with_bias=True):
    x = rng.standard_normal((batch, L, Dm)).astype(dtype)
    w = (rng.standard_normal((Dm, K)) / np.sqrt(K)).astype(dtype)
    b = rng.standard_normal(Dm).astype(dtype) if with_bias else None
    return x, w, b


def check_close(name, got, want, dtype, tol32=F32_TOL):
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == dtype, (name, got.dtype, dtype)
    if not want.size:
        return
    scale = float(np.max(np.abs(want)))
    maxdiff = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"{name}: max|diff| = {maxdiff:.3e} (max|want| {scale:.3e})")
    tol = F64_TOL if dtype == np.float64 else tol32
    assert maxdiff <= tol * max(scale, 1e-30), (name, maxdiff, scale)


# ---------------------------------------------------------------- vs oracle
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_backward_vs_ref(rng, shape, K, with_bias, dtype):
    x, w, b = _inputs(rng, *shape, K, dtype, with_bias)
    dy = rng.standard_normal(x.shape).astype(dtype)
    saved = [a.copy() for a in (x, w, dy)]
    y = ops.causal_conv1d(x, w, b)
    check_close("y", y, causal_conv1d_ref(x, w, b), dtype)
    dx, dw, db = ops.causal_conv1d_backward(dy, x, w, b)
    dx_r, dw_r, db_r = causal_conv1d_backward_ref(dy, x, w, b)
    check_close("dx", dx, dx_r, dtype)
    check_close("dweight", dw, dw_r, dtype, tol32=F32_DW_TOL)
    assert db is not None, "dbias must be returned even when bias is None"
    check_close("dbias", db, db_r, dtype, tol32=F32_DW_TOL)
    for a, s in zip((x, w, dy), saved):
        assert_bits_equal("input after call", a, s)


# ---------------------------------------------------------------- vs torch
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("K", [2, 3, 4])
def test_vs_torch(rng, K, with_bias, dtype):
    import torch
    import torch.nn.functional as F
    batch, L, Dm = 2, 37, 12
    x, w, b = _inputs(rng, batch, L, Dm, K, dtype, with_bias)
    dy = rng.standard_normal(x.shape).astype(dtype)
    xt = torch.tensor(x.transpose(0, 2, 1).copy(), requires_grad=True)   # (batch, D, L)
    wt = torch.tensor(w, requires_grad=True)                              # (D, K)
    bt = torch.tensor(b, requires_grad=True) if with_bias else None
    yt = F.conv1d(xt, wt[:, None, :], bt, padding=K - 1, groups=Dm)[..., :L]  # (batch, D, L)
    yt.backward(torch.tensor(dy.transpose(0, 2, 1).copy()))
    y_torch = yt.detach().numpy().transpose(0, 2, 1)
    check_close("y vs torch", ops.causal_conv1d(x, w, b), y_torch, dtype)
    dx, dw, db = ops.causal_conv1d_backward(dy, x, w, b)
    check_close("dx vs torch", dx, xt.grad.numpy().transpose(0, 2, 1), dtype)
    check_close("dweight vs torch", dw, wt.grad.numpy(), dtype, tol32=F32_DW_TOL)
    if with_bias:
        check_close("dbias vs torch", db, bt.grad.numpy(), dtype, tol32=F32_DW_TOL)


# ---------------------------------------------------------------- step form
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("K", [2, 3, 4])
def test_step_equals_full(rng, K, with_bias, dtype):
    batch, L, Dm = 2, 11, 13
    x, w, b = _inputs(rng, batch, L, Dm, K, dtype, with_bias)
    y_full = ops.causal_conv1d(x, w, b)
    state = np.zeros((batch, K - 1, Dm), dtype)
    ys = []
    for t in range(L):
        x_t = np.ascontiguousarray(x[:, t])                    # (batch, D)
        x_t_saved = x_t.copy()
        y_t = ops.causal_conv1d_step(x_t, state, w, b)
        assert y_t.shape == (batch, Dm) and y_t.dtype == dtype
        assert_bits_equal("x_t after step", x_t, x_t_saved)
        ys.append(y_t)
        # conv_state holds the previous K-1 inputs, oldest first (zeros before the start)
        lo = t + 1 - (K - 1)
        want_state = np.zeros((batch, K - 1, Dm), dtype)
        for j in range(K - 1):
            if lo + j >= 0:
                want_state[:, j] = x[:, lo + j]
        assert_bits_equal(f"conv_state after step {t}", state, want_state)
    y_step = np.stack(ys, axis=1)
    bitexact = np.array_equal(bits(y_step), bits(y_full))
    print("step form bit-identical to full conv:", bitexact)
    check_close("y step vs full", y_step, y_full.astype(np.float64), dtype)
    check_close("y step vs ref", y_step, causal_conv1d_ref(x, w, b), dtype)


def test_step_continues_a_sequence(rng):
    """A state filled from the tail of a prefix continues the full convolution."""
    batch, L, Dm, K = 3, 20, 7, 4
    x, w, b = _inputs(rng, batch, L, Dm, K, np.float64)
    y_full = ops.causal_conv1d(x, w, b)
    state = np.ascontiguousarray(x[:, 12 - (K - 1):12])
    for t in range(12, L):
        y_t = ops.causal_conv1d_step(np.ascontiguousarray(x[:, t]), state, w, b)
        check_close(f"y[{t}]", y_t, y_full[:, t].astype(np.float64), np.float64)


# ---------------------------------------------------------------- determinism
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("shape", [(2, 7, 33), (3, 130, 17)], ids=lambda s: "x".join(map(str, s)))
def test_threads_bit_identical(rng, shape, dtype):
    x, w, b = _inputs(rng, *shape, 4, dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    assert_bits_equal("y", ops.causal_conv1d(x, w, b, threads=1),
                      ops.causal_conv1d(x, w, b, threads=2))
    g1 = ops.causal_conv1d_backward(dy, x, w, b, threads=1)
    g2 = ops.causal_conv1d_backward(dy, x, w, b, threads=2)
    for name, a, c in zip(("dx", "dweight", "dbias"), g1, g2):
        assert_bits_equal(name, a, c)


@pytest.mark.parametrize("K", [2, 4])
@pytest.mark.parametrize("shape", [(2, 7, 33), (3, 130, 17)], ids=lambda s: "x".join(map(str, s)))
def test_simd_paths_bit_identical_f32(rng, simd, shape, K):
    x, w, b = _inputs(rng, *shape, K, np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    outs = []
    for path in ("generic", simd):
        lutcore.set_simd(path)
        state = np.zeros((shape[0], K - 1, shape[2]), np.float32)
        steps = [ops.causal_conv1d_step(np.ascontiguousarray(x[:, t]), state, w, b)
                 for t in range(min(shape[1], 9))]
        outs.append((ops.causal_conv1d(x, w, b),) + tuple(ops.causal_conv1d_backward(dy, x, w, b))
                    + (np.stack(steps, axis=1), state))
    for name, a, c in zip(("y", "dx", "dweight", "dbias", "y_step", "conv_state"), *outs):
        assert_bits_equal(f"{name} generic vs {simd}", a, c)


# ---------------------------------------------------------------- bad input
def _valid(dtype=np.float64):
    return _inputs(np.random.default_rng(2), 2, 5, 4, 3, dtype)


@pytest.mark.parametrize("name,shape", [("x", (2, 5)), ("x", (5,)), ("weight", (5, 3)),
                                        ("weight", (4,)), ("bias", (5,)), ("bias", (4, 1))])
def test_bad_shape_names_argument(name, shape):
    x, w, b = _valid()
    kw = dict(x=x, weight=w, bias=b)
    kw[name] = np.zeros(shape)
    with pytest.raises((ValueError, TypeError)) as ei:
        ops.causal_conv1d(**kw)
    print(ei.value)
    assert _names_arg(str(ei.value), name), str(ei.value)


@pytest.mark.parametrize("name", ["weight", "bias"])
def test_mixed_dtype_names_argument(name):
    x, w, b = _valid()
    kw = dict(x=x, weight=w, bias=b)
    kw[name] = kw[name].astype(np.float32)
    with pytest.raises((TypeError, ValueError)) as ei:
        ops.causal_conv1d(**kw)
    print(ei.value)
    assert _names_arg(str(ei.value), name), str(ei.value)


@pytest.mark.parametrize("dtype", [np.int32, np.float16])
def test_unsupported_dtype(dtype):
    x, w, b = _valid()
    with pytest.raises((TypeError, ValueError)) as ei:
        ops.causal_conv1d(x.astype(dtype), w.astype(dtype), b.astype(dtype))
    print(ei.value)


def test_backward_bad_dy():
    x, w, b = _valid()
    for dy in (np.zeros((2, 5, 5)), np.zeros((2, 6, 4)), np.zeros((2, 5, 4), np.float32)):
        with pytest.raises((ValueError, TypeError)) as ei:
            ops.causal_conv1d_backward(dy, x, w, b)
        print(ei.value)
        assert _names_arg(str(ei.value), "dy"), str(ei.value)


# (argument made wrong, its shape, names acceptable in the message: a size mismatch between
# two arguments may be reported against either of them)
@pytest.mark.parametrize("name,shape,names", [
    ("x_t", (2, 5), ("x_t", "weight", "conv_state")),     # D differs from weight and state
    ("x_t", (3, 4), ("x_t", "conv_state")),               # batch differs from state
    ("x_t", (2, 1, 4), ("x_t",)),                         # wrong ndim
    ("conv_state", (2, 3, 4), ("conv_state",)),           # K-1 = 2 from weight
    ("conv_state", (2, 2, 5), ("conv_state",)),
    ("conv_state", (1, 2, 4), ("conv_state",))])
def test_step_bad_shape_names_argument(name, shape, names):
    x, w, b = _valid()
    kw = dict(x_t=np.zeros((2, 4)), conv_state=np.zeros((2, 2, 4)), weight=w, bias=b)
    kw[name] = np.zeros(shape)
    with pytest.raises((ValueError, TypeError)) as ei:
        ops.causal_conv1d_step(**kw)
    print(ei.value)
    assert any(_names_arg(str(ei.value), n) for n in names), str(ei.value)


def test_step_state_wrong_dtype():
    x, w, b = _valid()
    with pytest.raises((ValueError, TypeError)) as ei:
        ops.causal_conv1d_step(np.zeros((2, 4)), np.zeros((2, 2, 4), np.float32), w, b)
    print(ei.value)
    assert _names_arg(str(ei.value), "conv_state"), str(ei.value)


@pytest.mark.parametrize("threads", [0, -1])
def test_bad_threads(threads):
    x, w, b = _valid()
    with pytest.raises(ValueError):
        ops.causal_conv1d(x, w, b, threads=threads)
