"""lutcore.ops.selective_scan / selective_scan_backward (Mamba-1 S6) against the
float64 numpy oracle in tests/reference/scan_ref.py, over the contract grid:
shapes (incl. L > 64 and L = 130, across internal chunk boundaries) x both
discretizations x every optional input on/off x float32/float64; every gradient;
the recurrence order (time-varying A-bar, by hand); threads 1 vs 2 and every
SIMD path bit-identical; last_state chaining; bad input.

Error budgets (named, STYLE habit 10):
    F64_TOL       float64: max|got - want| <= F64_TOL * max|want|, per tensor
    F32_REL       float32 forward: ||got - want||_2 / ||want||_2 (whole tensor)
    F32_GRAD_REL  float32 backward, per gradient, same norm-wise measure
"""
import math

import numpy as np
import pytest

import lutcore
import lutcore.ops as ops
from reference.scan_ref import selective_scan_backward_ref, selective_scan_ref
from reference.asserts import assert_bits_equal
from reference.asserts import names_arg as _names_arg

F64_TOL = 1e-10
F32_REL = 1e-5
F32_GRAD_REL = 1e-4

SHAPES = [(1, 1, 1, 1), (2, 7, 33, 5), (1, 33, 8, 16), (3, 65, 17, 4), (2, 130, 9, 3),
          (1, 257, 3, 17),   # 4 chunks of 64 and a tail of 1; N not a SIMD multiple
          (2, 19, 137, 2)]   # D > 64: several backward channel groups, a partial 16-lane unit
DISCS = ["zoh", "simplified"]
DTYPES = [np.float64, np.float32]
OPTIONAL = ("D", "z", "delta_bias", "initial_state")
# option sets: every optional input on / off, each one alone off, softplus off
OPTSETS = {
    "all": dict(D=1, z=1, delta_bias=1, initial_state=1, softplus=1),
    "none": dict(D=0, z=0, delta_bias=0, initial_state=0, softplus=1),
    "noD": dict(D=0, z=1, delta_bias=1, initial_state=1, softplus=1),
    "noz": dict(D=1, z=0, delta_bias=1, initial_state=1, softplus=1),
    "nobias": dict(D=1, z=1, delta_bias=0, initial_state=1, softplus=1),
    "nostate": dict(D=1, z=1, delta_bias=1, initial_state=0, softplus=1),
    "nosoftplus": dict(D=1, z=1, delta_bias=1, initial_state=1, softplus=0),
    "none-nosoftplus": dict(D=0, z=0, delta_bias=0, initial_state=0, softplus=0),
}


# ---------------------------------------------------------------- helpers
def make_inputs(rng, batch, L, Dm, N, dtype, opts=OPTSETS["all"]):
    """Mamba-like magnitudes; returns (kwargs for selective_scan, softplus flag)."""
    softplus = bool(opts["softplus"])
    u = rng.standard_normal((batch, L, Dm))
    if softplus:
        delta = rng.normal(-1.0, 1.0, (batch, L, Dm))          # dt = softplus ~ 0.05 .. 1.5
    else:
        delta = rng.uniform(0.02, 0.6, (batch, L, Dm))         # dt directly, > 0
    A = -np.exp(rng.normal(0.0, 0.8, (Dm, N)))
    kw = dict(u=u, delta=delta, A=A, B=rng.standard_normal((batch, L, N)),
              C=rng.standard_normal((batch, L, N)))
    if opts["D"]:
        kw["D"] = rng.standard_normal(Dm)
    if opts["z"]:
        kw["z"] = rng.standard_normal((batch, L, Dm))
    if opts["delta_bias"]:
        kw["delta_bias"] = rng.uniform(0.0, 0.3, Dm)
    if opts["initial_state"]:
        kw["initial_state"] = rng.standard_normal((batch, Dm, N))
    kw = {k: np.ascontiguousarray(v, dtype=dtype) for k, v in kw.items()}
    kw["delta_softplus"] = softplus
    return kw


def _arrays(kw):
    return {k: v for k, v in kw.items() if isinstance(v, np.ndarray)}


def check_close(name, got, want, dtype, rel=None):
    """Named budgets: float64 per-tensor max error, float32 norm-wise relative error."""
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == dtype, (name, got.dtype, dtype)
    assert np.all(np.isfinite(got)), f"{name}: non-finite output"
    g = got.astype(np.float64)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    maxdiff = float(np.max(np.abs(g - want))) if want.size else 0.0
    nrm = float(np.linalg.norm(want))
    relerr = float(np.linalg.norm(g - want)) / nrm if nrm > 0 else float(np.linalg.norm(g))
    print(f"{name}: max|diff| = {maxdiff:.3e} (max|want| {scale:.3e}), rel L2 err = {relerr:.3e}")
    if dtype == np.float64:
        assert maxdiff <= F64_TOL * max(scale, 1e-300), (name, maxdiff, scale)
    else:
        assert relerr <= (F32_REL if rel is None else rel), (name, relerr)


# ---------------------------------------------------------------- forward vs oracle
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("opt", list(OPTSETS))
@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_vs_ref(rng, shape, disc, opt, dtype):
    kw = make_inputs(rng, *shape, dtype, OPTSETS[opt])
    saved = {k: v.copy() for k, v in _arrays(kw).items()}
    y, last = ops.selective_scan(**kw, discretization=disc, return_last_state=True)
    y_want, last_want = selective_scan_ref(**kw, discretization=disc, return_last_state=True)
    check_close("y", y, y_want, dtype)
    check_close("last_state", last, last_want, dtype)
    y_only = ops.selective_scan(**kw, discretization=disc)
    assert isinstance(y_only, np.ndarray)
    assert_bits_equal("y (return_last_state=False vs True)", y_only, y)
    for k, v in saved.items():                  # inputs are not modified
        assert_bits_equal(f"input {k} after call", kw[k], v)


# ---------------------------------------------------------------- backward vs oracle
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("opt", list(OPTSETS))
@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_vs_ref(rng, shape, disc, opt, dtype):
    kw = make_inputs(rng, *shape, dtype, OPTSETS[opt])
    dy = rng.standard_normal(kw["u"].shape).astype(dtype)
    saved = {k: v.copy() for k, v in _arrays(kw).items()}
    got = ops.selective_scan_backward(dy, **kw, discretization=disc)
    want = selective_scan_backward_ref(dy, **kw, discretization=disc)
    expect_keys = {"u", "delta", "A", "B", "C"} | {k for k in OPTIONAL if k in kw}
    assert set(got) == expect_keys, (sorted(got), sorted(expect_keys))
    for name in sorted(expect_keys):
        assert got[name].shape == kw[name].shape, (name, got[name].shape, kw[name].shape)
        check_close("d" + name, got[name], want[name], dtype, rel=F32_GRAD_REL)
    for k, v in saved.items():
        assert_bits_equal(f"input {k} after backward", kw[k], v)


# ---------------------------------------------------------------- chunk length
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("chunk", [1, 5, 13, 64, 300])
def test_backward_any_chunk(rng, chunk, disc, dtype):
    """The chunked backward is the same map for any chunk length (odd ones, 1, longer than L):
    the forward is bit-identical, the gradients match the oracle."""
    kw = make_inputs(rng, 2, 70, 37, 3, dtype, OPTSETS["all"])
    dy = rng.standard_normal(kw["u"].shape).astype(dtype)
    y, _, ctx = ops.selective_scan_forward(**kw, discretization=disc, chunk=chunk)
    assert ctx.chunk_states.shape == (2, -(-70 // chunk), 37, 3)
    assert_bits_equal(f"y (chunk {chunk})", y, ops.selective_scan(**kw, discretization=disc))
    got = ops.selective_scan_backward(dy, ctx=ctx)
    want = selective_scan_backward_ref(dy, **kw, discretization=disc)
    for name in sorted(want):
        check_close("d" + name, got[name], want[name], dtype, rel=F32_GRAD_REL)


# ---------------------------------------------------------------- edge values
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("disc", DISCS)
def test_softplus_threshold_and_extreme_delta(rng, disc, dtype):
    kw = make_inputs(rng, 2, 40, 6, 4, dtype)
    vals = np.array([-30.0, -8.0, 0.0, 19.5, 20.5, 30.0])      # around torch's threshold 20
    kw["delta"][...] = vals[rng.integers(0, len(vals), kw["delta"].shape)]
    kw["delta_bias"][...] = 0.0
    check_close("y", ops.selective_scan(**kw, discretization=disc),
                selective_scan_ref(**kw, discretization=disc), dtype)
    dy = rng.standard_normal(kw["u"].shape).astype(dtype)
    got = ops.selective_scan_backward(dy, **kw, discretization=disc)
    want = selective_scan_backward_ref(dy, **kw, discretization=disc)
    for name in sorted(want):
        check_close("d" + name, got[name], want[name], dtype, rel=F32_GRAD_REL)


@pytest.mark.parametrize("disc", DISCS)
def test_softplus_gradient_threshold(disc):
    """With A = 0, u = B = C = dy = 1: y = softplus(delta), so d delta = softplus'(delta),
    which with torch's threshold is exactly 1 for delta > 20 and sigmoid(delta) below."""
    s = np.array([-5.0, 0.0, 19.5, 20.0, 20.01, 20.5, 25.0, 40.0])
    Dm = len(s)
    one = np.ones((1, 1, Dm))
    kw = dict(u=one, delta=s.reshape(1, 1, Dm), A=np.zeros((Dm, 1)), B=np.ones((1, 1, 1)),
              C=np.ones((1, 1, 1)), delta_softplus=True, discretization=disc)
    want_y = np.array([math.log1p(math.exp(v)) if v <= 20 else v for v in s])
    want_g = np.array([1.0 / (1.0 + math.exp(-v)) if v <= 20 else 1.0 for v in s])
    y = ops.selective_scan(**kw).ravel()
    g = ops.selective_scan_backward(one, **kw)["delta"].ravel()
    print("delta      ", s, "\ny   got-want", y - want_y, "\nddelta got  ", g.tolist(),
          "\nddelta want ", want_g.tolist())
    np.testing.assert_allclose(y, want_y, rtol=1e-15)
    np.testing.assert_allclose(g, want_g, rtol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_zoh_A_zero_and_tiny(rng, dtype):
    """A = 0 gives Bbar = dt*B exactly (no 0/0); tiny |dt*A| is not cancelled away."""
    kw = make_inputs(rng, 2, 70, 5, 4, dtype)
    kw["A"][0, :] = 0.0
    kw["A"][1, :] = -1e-7
    kw["A"][2, 0] = -1e-30
    y = ops.selective_scan(**kw, discretization="zoh")
    check_close("y", y, selective_scan_ref(**kw, discretization="zoh"), dtype)
    # channel 0 (A row all zero) is the same for both discretizations
    y_s = ops.selective_scan(**kw, discretization="simplified")
    check_close("y[..., 0] zoh vs simplified", y[..., 0], y_s[..., 0].astype(np.float64), dtype)
    dy = rng.standard_normal(kw["u"].shape).astype(dtype)
    got = ops.selective_scan_backward(dy, **kw, discretization="zoh")
    want = selective_scan_backward_ref(dy, **kw, discretization="zoh")
    for name in sorted(want):
        check_close("d" + name, got[name], want[name], dtype, rel=F32_GRAD_REL)
    # all-zero A: zoh == simplified everywhere
    kw["A"][...] = 0.0
    check_close("y (A == 0)", ops.selective_scan(**kw, discretization="zoh"),
                ops.selective_scan(**kw, discretization="simplified").astype(np.float64), dtype)


# ---------------------------------------------------------------- the recurrence, by hand
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_two_steps_by_hand(dtype):
    """h1 = Abar1*(Bbar0*u0) + Bbar1*u1, not the swapped composition
    Abar0*(Bbar1*u1) + Bbar0*u0.  Simplified discretization, softplus off."""
    dt0, dt1, A, B0, B1, u0, u1, C0, C1 = 0.1, 1.5, -2.0, 1.0, 0.5, 1.0, 2.0, 1.0, 3.0
    arr = lambda *v: np.array(v, dtype=dtype)  # noqa: E731
    kw = dict(u=arr(u0, u1).reshape(1, 2, 1), delta=arr(dt0, dt1).reshape(1, 2, 1),
              A=arr(A).reshape(1, 1), B=arr(B0, B1).reshape(1, 2, 1),
              C=arr(C0, C1).reshape(1, 2, 1), delta_softplus=False,
              discretization="simplified")
    h0 = dt0 * B0 * u0
    h1 = math.exp(dt1 * A) * h0 + dt1 * B1 * u1
    h1_swapped = math.exp(dt0 * A) * (dt1 * B1 * u1) + dt0 * B0 * u0
    want = np.array([C0 * h0, C1 * h1])
    y, last = ops.selective_scan(**kw, return_last_state=True)
    print("got", y.ravel(), "want", want, "swapped y1", C1 * h1_swapped)
    tol = 1e-14 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(y.ravel(), want, rtol=tol)
    np.testing.assert_allclose(last.ravel(), [h1], rtol=tol)
    assert abs(C1 * h1_swapped - want[1]) > 0.1          # the test can tell the orders apart
    # ZOH too: Bbar_t = expm1(dt_t*A)/A * B_t
    kw["discretization"] = "zoh"
    g0 = math.expm1(dt0 * A) / A * B0 * u0
    g1 = math.exp(dt1 * A) * g0 + math.expm1(dt1 * A) / A * B1 * u1
    np.testing.assert_allclose(ops.selective_scan(**kw).ravel(), [C0 * g0, C1 * g1], rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("L", [64, 65, 130, 200])
def test_impulse_response_time_varying(dtype, L):
    """Impulses at t = 0 and t = 63; dt distinct per step, so h_t = prod_{s<=t} Abar_s ... in
    time order.  Scalar Python loop (one channel, one state) as the hand computation."""
    dts = [0.01 + 0.02 * ((7 * t) % 11) for t in range(L)]   # distinct-ish, time-varying
    A = -0.7
    u = [0.0] * L
    u[0], u[min(63, L - 1)] = 1.0, -2.0
    Bv = [1.0 + 0.1 * (t % 5) for t in range(L)]
    Cv = [1.0 - 0.05 * (t % 7) for t in range(L)]
    h, want = 0.0, []
    for t in range(L):
        h = math.exp(dts[t] * A) * h + dts[t] * Bv[t] * u[t]
        want.append(Cv[t] * h)
    kw = dict(u=np.array(u, dtype).reshape(1, L, 1), delta=np.array(dts, dtype).reshape(1, L, 1),
              A=np.array([[A]], dtype), B=np.array(Bv, dtype).reshape(1, L, 1),
              C=np.array(Cv, dtype).reshape(1, L, 1))
    y = ops.selective_scan(**kw, delta_softplus=False, discretization="simplified")
    tol = 1e-13 if dtype == np.float64 else 2e-6
    print("max diff", np.max(np.abs(y.ravel() - np.array(want))))
    np.testing.assert_allclose(y.ravel(), want, rtol=tol, atol=tol * max(map(abs, want)))


# ---------------------------------------------------------------- last_state chaining
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("split", [1, 50, 65, 129])
def test_last_state_chains_halves(rng, disc, dtype, split):
    L = 130
    kw = make_inputs(rng, 2, L, 9, 5, dtype)
    y_full, last_full = ops.selective_scan(**kw, discretization=disc, return_last_state=True)
    per_t = ("u", "delta", "B", "C", "z")
    first = {k: (np.ascontiguousarray(v[:, :split]) if k in per_t else v) for k, v in kw.items()}
    second = {k: (np.ascontiguousarray(v[:, split:]) if k in per_t else v) for k, v in kw.items()}
    y1, last1 = ops.selective_scan(**first, discretization=disc, return_last_state=True)
    second["initial_state"] = last1
    y2, last2 = ops.selective_scan(**second, discretization=disc, return_last_state=True)
    check_close("y (halves vs full)", np.concatenate([y1, y2], axis=1),
                y_full.astype(np.float64), dtype)
    check_close("last_state (halves vs full)", last2, last_full.astype(np.float64), dtype)


# ---------------------------------------------------------------- determinism
DET_SHAPES = [(2, 7, 33, 5), (3, 130, 17, 4), (2, 21, 137, 3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("shape", DET_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_threads_bit_identical(rng, shape, disc, dtype):
    kw = make_inputs(rng, *shape, dtype)
    dy = rng.standard_normal(kw["u"].shape).astype(dtype)
    y1, s1 = ops.selective_scan(**kw, discretization=disc, return_last_state=True, threads=1)
    g1 = ops.selective_scan_backward(dy, **kw, discretization=disc, threads=1)
    for threads in (2, 3):
        y2, s2 = ops.selective_scan(**kw, discretization=disc, return_last_state=True,
                                    threads=threads)
        assert_bits_equal(f"y threads=1 vs {threads}", y1, y2)
        assert_bits_equal(f"last_state threads=1 vs {threads}", s1, s2)
        g2 = ops.selective_scan_backward(dy, **kw, discretization=disc, threads=threads)
        assert set(g1) == set(g2)
        for k in sorted(g1):
            assert_bits_equal(f"d{k} threads=1 vs {threads}", g1[k], g2[k])
    # repeated runs give the same bits
    assert_bits_equal("y (rerun)", y2, ops.selective_scan(**kw, discretization=disc, threads=2))


@pytest.mark.parametrize("disc", DISCS)
@pytest.mark.parametrize("shape", DET_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_simd_paths_bit_identical_f32(rng, simd, shape, disc):
    kw = make_inputs(rng, *shape, np.float32)
    dy = rng.standard_normal(kw["u"].shape).astype(np.float32)
    lutcore.set_simd("generic")
    y0, s0 = ops.selective_scan(**kw, discretization=disc, return_last_state=True)
    g0 = ops.selective_scan_backward(dy, **kw, discretization=disc)
    lutcore.set_simd(simd)
    y1, s1 = ops.selective_scan(**kw, discretization=disc, return_last_state=True)
    g1 = ops.selective_scan_backward(dy, **kw, discretization=disc)
    assert_bits_equal(f"y generic vs {simd}", y0, y1)
    assert_bits_equal(f"last_state generic vs {simd}", s0, s1)
    for k in sorted(g0):
        assert_bits_equal(f"d{k} generic vs {simd}", g0[k], g1[k])


@pytest.mark.parametrize("disc", DISCS)
def test_exp_range_chosen_per_unit(rng, simd, disc):
    """The forward proves |dt A| <= 87.3 per 16-channel unit and time block to
    skip exp's range check.  One unit with a huge dt*A (exp underflows to 0),
    one with a NaN, the rest ordinary: every path gives the generic bits, the
    NaN stays in its channel, and the other channels match the reference."""
    kw = make_inputs(rng, 2, 70, 150, 3, np.float32)   # 10 units: two spans, the last unit partial
    kw["delta"][:, 5:9, 20] = 60.0                      # unit 1: softplus(60) * A ~ -60 .. -400
    kw["A"][20] = -50.0
    kw["delta"][1, 33, 100] = np.nan                    # unit 6, batch 1, from step 33 on
    y = {}
    for path in ("generic", simd):
        lutcore.set_simd(path)
        y[path] = ops.selective_scan(**kw, discretization=disc)
    assert_bits_equal(f"y generic vs {simd}", y["generic"], y[simd])
    got = y[simd]
    assert np.all(np.isnan(got[1, 33:, 100])) and not np.any(np.isnan(got[0]))
    keep = np.ones(150, bool)
    keep[100] = False
    want = selective_scan_ref(**{k: (v[..., keep] if k in ("u", "delta", "z") else
                                     v[keep] if k in ("A", "D", "delta_bias") else
                                     v[:, keep] if k == "initial_state" else v)
                                 for k, v in kw.items()}, discretization=disc)
    check_close("y (finite channels)", got[..., keep], want, np.float32)


# ---------------------------------------------------------------- layout
def test_non_contiguous_input_copied_or_refused(rng):
    kw = make_inputs(rng, 2, 9, 6, 3, np.float64)
    want = ops.selective_scan(**kw)
    u_t = np.ascontiguousarray(kw["u"].transpose(0, 2, 1)).transpose(0, 2, 1)  # same values, F-ish
    assert not u_t.flags.c_contiguous
    try:
        got = ops.selective_scan(**dict(kw, u=u_t))
    except (ValueError, TypeError) as e:
        print("refused:", e)
        assert _names_arg(str(e), "u"), str(e)
        return
    assert_bits_equal("y (non-contiguous u)", got, want)


# ---------------------------------------------------------------- bad input
def _valid(dtype=np.float64):
    return make_inputs(np.random.default_rng(1), 2, 5, 4, 3, dtype)


BAD_SHAPES = [
    ("u", (2, 5)),                 # wrong ndim
    ("delta", (2, 5, 3)),          # D mismatch
    ("delta", (2, 6, 4)),          # L mismatch
    ("A", (5, 3)),                 # D mismatch
    ("A", (4,)),                   # wrong ndim
    ("B", (3, 5, 3)),              # batch mismatch
    ("C", (2, 4, 3)),              # L mismatch
    ("C", (2, 5, 2)),              # N mismatch (A, B say 3)
    ("D", (5,)),
    ("z", (2, 5, 5)),
    ("delta_bias", (4, 1)),
    ("initial_state", (2, 4, 2)),
    ("initial_state", (1, 4, 3)),
]


@pytest.mark.parametrize("name,shape", BAD_SHAPES)
def test_bad_shape_names_argument(name, shape):
    kw = _valid()
    kw[name] = np.zeros(shape)
    with pytest.raises((ValueError, TypeError)) as ei:
        ops.selective_scan(**kw)
    print(ei.value)
    assert _names_arg(str(ei.value), name), str(ei.value)
    dy = np.zeros_like(_valid()["u"])
    with pytest.raises((ValueError, TypeError)) as ei:
        ops.selective_scan_backward(dy, **kw)
    assert _names_arg(str(ei.value), name), str(ei.value)


@pytest.mark.parametrize("name", ["delta", "B", "C", "D", "z", "delta_bias", "initial_state", "A"])
def test_mixed_dtype_names_argument(name):
    kw = _valid(np.float64)
    kw[name] = kw[name].astype(np.float32)
    with pytest.raises((TypeError, ValueError)) as ei:
        ops.selective_scan(**kw)
    print(ei.value)
    assert _names_arg(str(ei.value), name), str(ei.value)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16])
@pytest.mark.parametrize("name", ["u", "delta", "B"])
def test_unsupported_dtype_names_argument(name, dtype):
    kw = _valid(np.float64)
    kw[name] = kw[name].astype(dtype)
    with pytest.raises((TypeError, ValueError)) as ei:
        ops.selective_scan(**kw)
    print(ei.value)
    assert _names_arg(str(ei.value), name), str(ei.value)


def test_all_int_inputs_rejected():
    kw = _valid(np.float64)
    kw = {k: (v.astype(np.int32) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    with pytest.raises((TypeError, ValueError)):
        ops.selective_scan(**kw)


def test_unknown_discretization():
    with pytest.raises(ValueError) as ei:
        ops.selective_scan(**_valid(), discretization="bilinear")
    print(ei.value)
    dy = np.zeros_like(_valid()["u"])
    with pytest.raises(ValueError):
        ops.selective_scan_backward(dy, **_valid(), discretization="bilinear")


def test_backward_bad_dy():
    kw = _valid()
    for dy in (np.zeros((2, 5, 5)), np.zeros((2, 5)), np.zeros((2, 5, 4), np.float32)):
        with pytest.raises((ValueError, TypeError)) as ei:
            ops.selective_scan_backward(dy, **kw)
        print(ei.value)
        assert _names_arg(str(ei.value), "dy"), str(ei.value)


@pytest.mark.parametrize("threads", [0, -1])
def test_bad_threads(threads):
    with pytest.raises(ValueError):
        ops.selective_scan(**_valid(), threads=threads)


def test_missing_inputs_zero_sizes_and_a_tampered_context():
    """None for a required array is a TypeError naming it (dy had reached the kernel as
    NULL); zero-size problems give zero gradients; a context whose arrays no longer fit
    together is refused before the kernel indexes them."""
    import dataclasses
    from lutcore.ops.scan import (causal_conv1d_backward, selective_scan_backward,
                                  selective_scan_forward)
    rng = np.random.default_rng(4)
    b, L, D, N = 2, 6, 5, 3
    f = lambda *s: rng.standard_normal(s).astype(np.float32)          # noqa: E731
    u, delta, A, B, C, z = f(b, L, D), f(b, L, D), -np.exp(f(D, N)), f(b, L, N), f(b, L, N), f(b, L, D)
    _, _, ctx = selective_scan_forward(u, delta, A, B, C, z=z)
    with pytest.raises(TypeError, match="dy"):
        selective_scan_backward(None, ctx=ctx)
    with pytest.raises(TypeError, match="dy"):
        selective_scan_backward(None, u, delta, A, B, C)
    with pytest.raises(TypeError, match="u, delta, A, B, C: required"):
        selective_scan_backward(u, ctx=None)
    with pytest.raises(TypeError, match="dy"):
        causal_conv1d_backward(None, u, f(D, 4))
    with pytest.raises(TypeError, match="ctx"):
        selective_scan_backward(u, ctx={})
    for field, bad in (("A", f(1, N)), ("chunk", 1), ("chunk", 0), ("B", f(b, L + 1, N)),
                       ("ypre", None), ("u", u.astype(np.float64))):
        with pytest.raises(ValueError, match="ctx"):
            selective_scan_backward(u, ctx=dataclasses.replace(ctx, **{field: bad}))
    for shape in ((0, L, D, N), (b, 0, D, N), (b, L, 0, N)):
        bb, LL, DD, NN = shape
        args = f(bb, LL, DD), f(bb, LL, DD), -np.ones((DD, NN), np.float32), f(bb, LL, NN), f(bb, LL, NN)
        _, _, c0 = selective_scan_forward(*args, D=np.ones(DD, np.float32), z=f(bb, LL, DD))
        g = selective_scan_backward(f(bb, LL, DD), ctx=c0)
        assert all(np.all(v == 0) for v in g.values()), shape
