"""Self-checks of the Mamba-1 oracles in tests/reference/scan_ref.py.

Forward: against pure-Python scalar loops (math module, no numpy vectorisation)
and against exact special cases.  Backward: against float64 central differences
with the 4th-order stencil (f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) / 12h, for
every gradient, both discretizations, every optional input on and off, and A
holding a zero (and a tiny) entry for ZOH.  These never import lutcore."""
import math

import numpy as np
import pytest

from reference.scan_ref import (causal_conv1d_backward_ref, causal_conv1d_ref,
                                selective_scan_backward_ref, selective_scan_ref, softplus_ref,
                                zoh_factor_grad_ref, zoh_factor_ref)

FD_STEP = 1e-3            # relative step of the 4th-order stencil (truncation ~ h^4)
FD_RTOL = 1e-6            # |fd - analytic| <= FD_RTOL*|analytic| + FD_ATOL*max|analytic|
FD_ATOL = 1e-8
LOOP_RTOL = 1e-12         # numpy oracle vs scalar Python loop (both float64)

OPTIONAL = ("D", "z", "delta_bias", "initial_state")


# ---------------------------------------------------------------- helpers
def _inputs(rng, batch, L, Dm, N, softplus=True, zero_A=True):
    u = rng.standard_normal((batch, L, Dm))
    if softplus:
        delta = rng.normal(-1.0, 0.7, (batch, L, Dm))          # softplus -> dt ~ 0.1..1
    else:
        delta = rng.uniform(0.1, 0.6, (batch, L, Dm))          # dt > 0 directly
    A = -np.exp(rng.normal(0.0, 0.8, (Dm, N)))
    if zero_A:
        A[0, 0] = 0.0                                          # ZOH limit g(0) = 1
        if Dm > 1 and N > 1:
            A[1, 1] = -1e-6                                    # series branch of g'
        if Dm > 2:
            A[2, 0] = 0.3                                      # a positive entry too
    B = rng.standard_normal((batch, L, N))
    C = rng.standard_normal((batch, L, N))
    opt = dict(D=rng.standard_normal(Dm), z=rng.standard_normal((batch, L, Dm)),
               delta_bias=rng.uniform(0.0, 0.2, Dm),
               initial_state=rng.standard_normal((batch, Dm, N)))
    return dict(u=u, delta=delta, A=A, B=B, C=C), opt


def _fd_grad(loss, x, step=FD_STEP):
    """4th-order central differences of the scalar loss() w.r.t. every element of x (in place)."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        x0 = flat[i]
        h = step * max(1.0, abs(x0))
        vals = []
        for m in (-2, -1, 1, 2):
            flat[i] = x0 + m * h
            vals.append(loss())
        flat[i] = x0
        gflat[i] = (vals[0] - 8 * vals[1] + 8 * vals[2] - vals[3]) / (12 * h)
    return g


def _assert_grad(name, fd, an):
    assert fd.shape == an.shape, (name, fd.shape, an.shape)
    scale = max(np.max(np.abs(an)), 1e-300)
    err = np.max(np.abs(fd - an))
    print(f"{name}: max |fd - analytic| = {err:.3e} (scale {scale:.3e})")
    np.testing.assert_allclose(an, fd, rtol=FD_RTOL, atol=FD_ATOL * scale, err_msg=name)


# ---------------------------------------------------------------- scalar helpers
def test_zoh_factor_and_derivative():
    a = np.array([0.0, 1e-300, -1e-12, 1e-8, -0.3, 0.49, -0.4999, 0.5, -0.5, 0.7, -3.0, -40.0,
                  -800.0, 5.0])
    g = zoh_factor_ref(a)
    assert g[0] == 1.0
    for ai, gi in zip(a[1:], g[1:]):
        want = math.expm1(ai) / ai
        assert abs(gi - want) <= 1e-15 * abs(want), (ai, gi, want)
    gp = zoh_factor_grad_ref(a)
    assert gp[0] == 0.5
    # the series and the closed form agree where both are accurate
    for ai in (-0.9, -0.6, -0.5, -0.45, 0.45, 0.5, 0.8):
        closed = (ai * math.exp(ai) - math.expm1(ai)) / ai ** 2
        series = sum(k * ai ** (k - 1) / math.factorial(k + 1) for k in range(1, 40))
        assert abs(closed - series) <= 1e-14 * abs(series), (ai, closed, series)
        assert abs(zoh_factor_grad_ref(np.array([ai]))[0] - series) <= 1e-14 * abs(series)
    # g' by 4th-order differences of g, away from 0 where g is smooth everywhere
    for ai in (-2.0, -0.51, -0.49, -1e-3, 0.0, 1e-4, 0.3):
        h = 1e-3
        fd = (zoh_factor_ref(ai - 2 * h) - 8 * zoh_factor_ref(ai - h) + 8 * zoh_factor_ref(ai + h)
              - zoh_factor_ref(ai + 2 * h)) / (12 * h)
        assert abs(fd - zoh_factor_grad_ref(np.array([ai]))[0]) <= 1e-9, ai


def test_softplus_threshold():
    x = np.array([-50.0, -1.0, 0.0, 3.0, 19.9, 20.0, 20.5, 1e3])
    want = [math.log1p(math.exp(v)) if v <= 20 else v for v in x]
    np.testing.assert_array_equal(softplus_ref(x), np.array(want))


# ---------------------------------------------------------------- forward vs scalar loops
def _scan_loop(u, delta, A, B, C, D, z, delta_bias, softplus, disc, h0):
    batch, L, Dm = u.shape
    N = A.shape[1]
    y = np.zeros((batch, L, Dm))
    last = np.zeros((batch, Dm, N))
    for b in range(batch):
        for d in range(Dm):
            h = [0.0 if h0 is None else float(h0[b, d, n]) for n in range(N)]
            for t in range(L):
                s = float(delta[b, t, d]) + (0.0 if delta_bias is None else float(delta_bias[d]))
                dt = (s if s > 20 else math.log1p(math.exp(s))) if softplus else s
                acc = 0.0
                for n in range(N):
                    a = dt * float(A[d, n])
                    if disc == "zoh":
                        bb = dt * (math.expm1(a) / a if a != 0.0 else 1.0) * float(B[b, t, n])
                    else:
                        bb = dt * float(B[b, t, n])
                    h[n] = math.exp(a) * h[n] + bb * float(u[b, t, d])
                    acc += float(C[b, t, n]) * h[n]
                if D is not None:
                    acc += float(D[d]) * float(u[b, t, d])
                if z is not None:
                    zz = float(z[b, t, d])
                    acc *= zz / (1.0 + math.exp(-zz))
                y[b, t, d] = acc
            last[b, d] = h
    return y, last


@pytest.mark.parametrize("disc", ["zoh", "simplified"])
@pytest.mark.parametrize("with_opt", [False, True])
@pytest.mark.parametrize("softplus", [True, False])
def test_scan_forward_vs_loop(rng, disc, with_opt, softplus):
    base, opt = _inputs(rng, 2, 9, 4, 3, softplus=softplus)
    if not with_opt:
        opt = {k: None for k in opt}
    y, last = selective_scan_ref(**base, **opt, delta_softplus=softplus, discretization=disc,
                                 return_last_state=True)
    y2, last2 = _scan_loop(base["u"], base["delta"], base["A"], base["B"], base["C"], opt["D"],
                           opt["z"], opt["delta_bias"], softplus, disc, opt["initial_state"])
    print("max diff", np.max(np.abs(y - y2)), np.max(np.abs(last - last2)))
    np.testing.assert_allclose(y, y2, rtol=LOOP_RTOL, atol=LOOP_RTOL * np.max(np.abs(y2)))
    np.testing.assert_allclose(last, last2, rtol=LOOP_RTOL, atol=LOOP_RTOL * np.max(np.abs(last2)))
    assert selective_scan_ref(**base, **opt, delta_softplus=softplus, discretization=disc).shape \
        == y.shape


def test_scan_zoh_A_zero_is_simplified():
    rng = np.random.default_rng(5)
    base, _ = _inputs(rng, 1, 6, 2, 2)
    base["A"] = np.zeros((2, 2))
    y_zoh = selective_scan_ref(**base, discretization="zoh")
    y_simp = selective_scan_ref(**base, discretization="simplified")
    np.testing.assert_array_equal(y_zoh, y_simp)


def test_scan_unknown_discretization():
    rng = np.random.default_rng(6)
    base, _ = _inputs(rng, 1, 2, 2, 2)
    with pytest.raises(ValueError):
        selective_scan_ref(**base, discretization="bilinear")


# ---------------------------------------------------------------- backward vs differences
_CASES = [dict(D=True, z=True, delta_bias=True, initial_state=True, softplus=True),
          dict(D=False, z=False, delta_bias=False, initial_state=False, softplus=True),
          dict(D=False, z=False, delta_bias=False, initial_state=False, softplus=False),
          dict(D=True, z=True, delta_bias=True, initial_state=True, softplus=False)]
for _k in OPTIONAL:   # all on but one
    _CASES.append(dict(dict(D=True, z=True, delta_bias=True, initial_state=True, softplus=True),
                       **{_k: False}))
for _k in OPTIONAL:   # all off but one
    _CASES.append(dict(dict(D=False, z=False, delta_bias=False, initial_state=False,
                            softplus=True), **{_k: True}))


def _case_id(c):
    on = [k for k in OPTIONAL if c[k]]
    return ("+".join(on) or "none") + ("" if c["softplus"] else "-nosoftplus")


@pytest.mark.parametrize("disc", ["zoh", "simplified"])
@pytest.mark.parametrize("case", _CASES, ids=_case_id)
def test_scan_backward_vs_fd(rng, disc, case):
    softplus = case["softplus"]
    base, opt = _inputs(rng, 2, 5, 3, 4, softplus=softplus)
    opt = {k: (v if case[k] else None) for k, v in opt.items()}
    if softplus:
        base["delta"][1, 2, 1] = 25.0          # beyond the softplus threshold: slope 1
    dy = rng.standard_normal(base["u"].shape)
    kw = dict(delta_softplus=softplus, discretization=disc)
    an = selective_scan_backward_ref(dy, **base, **opt, **kw)
    want_keys = {"u", "delta", "A", "B", "C"} | {k for k in OPTIONAL if opt[k] is not None}
    assert set(an) == want_keys
    params = dict(base, **{k: v for k, v in opt.items() if v is not None})

    def loss():
        return float(np.sum(dy * selective_scan_ref(**base, **opt, **kw)))

    for name in sorted(want_keys):
        fd = _fd_grad(loss, params[name])
        _assert_grad(name, fd, an[name])


def test_scan_backward_zoh_A_zero_large_L(rng):
    """Longer sequence, A with zero and tiny entries; gradients w.r.t. A and delta only."""
    base, opt = _inputs(rng, 1, 40, 3, 3)
    base["A"][2, 2] = 0.0
    dy = rng.standard_normal(base["u"].shape)
    an = selective_scan_backward_ref(dy, **base, **opt)

    def loss():
        return float(np.sum(dy * selective_scan_ref(**base, **opt)))

    for name in ("A", "delta_bias", "initial_state"):
        x = base[name] if name in base else opt[name]
        _assert_grad(name, _fd_grad(loss, x), an[name])


# ---------------------------------------------------------------- conv1d
def _conv_loop(x, w, bias):
    batch, L, Dm = x.shape
    K = w.shape[1]
    y = np.zeros((batch, L, Dm))
    for b in range(batch):
        for t in range(L):
            for d in range(Dm):
                acc = 0.0 if bias is None else float(bias[d])
                for k in range(K):
                    s = t - (K - 1) + k
                    if s >= 0:
                        acc += float(w[d, k]) * float(x[b, s, d])
                y[b, t, d] = acc
    return y


@pytest.mark.parametrize("K", [1, 2, 3, 4])
@pytest.mark.parametrize("L", [1, 3, 10])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv1d_forward_vs_loop(rng, K, L, with_bias):
    x = rng.standard_normal((2, L, 5))
    w = rng.standard_normal((5, K))
    bias = rng.standard_normal(5) if with_bias else None
    y = causal_conv1d_ref(x, w, bias)
    np.testing.assert_allclose(y, _conv_loop(x, w, bias), rtol=LOOP_RTOL, atol=1e-14)
    # and np.convolve per channel (full convolution, first L outputs)
    for b in range(2):
        for d in range(5):
            full = np.convolve(x[b, :, d], w[d, ::-1])[:L] + (0.0 if bias is None else bias[d])
            np.testing.assert_allclose(y[b, :, d], full, rtol=LOOP_RTOL, atol=1e-14)


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("L", [2, 9])
def test_conv1d_backward_vs_fd(rng, K, L):
    x = rng.standard_normal((2, L, 3))
    w = rng.standard_normal((3, K))
    bias = rng.standard_normal(3)
    dy = rng.standard_normal(x.shape)
    dx, dw, db = causal_conv1d_backward_ref(dy, x, w, bias)
    _, _, db_nobias = causal_conv1d_backward_ref(dy, x, w, None)
    np.testing.assert_array_equal(db, db_nobias)

    def loss():
        return float(np.sum(dy * causal_conv1d_ref(x, w, bias)))

    _assert_grad("x", _fd_grad(loss, x), dx)
    _assert_grad("weight", _fd_grad(loss, w), dw)
    _assert_grad("bias", _fd_grad(loss, bias), db)
