"""Property-based tests of the public kernels (hypothesis; issue 16, "Keep it found").

Random shapes (0, 1, odd, beyond the SIMD width), dtypes, strided views, NaN/Inf
and aliased ``out=`` arguments.  Every case either matches its tests/reference/
oracle (bits where the contract is bit-exact, the kernel's named tolerance where
it is float) or raises ValueError/TypeError — never a crash, never a silent wrong
answer.  ``derandomize=True`` fixes the examples (the same run on every machine)
and ``max_examples`` keeps the file to seconds.

    kernel              oracle                      compared
    lut_gemm            gemm_ref.lut_gemm_ref       bits, any table, strided inputs
    quantize            quant_ref.quantize_ref      bits (codes, scales); NaN/Inf -> ValueError
    qmatmul             quant_ref.qmatmul_ref       bits; out aliasing a
    requant / relu8     units_ref                   bits, any shift, strided, out=in place
    fp16_round/encode   fp16_ref                    bits, both modes, NaN/Inf/subnormals
    selective_scan      scan_ref (float64)          F64_TOL; NaN propagates as in the oracle
    causal_conv1d(+step) scan_ref.causal_conv1d_ref  F64_TOL; step with aliased x_t
    matmul              float64 numpy               MATMUL_REL; out aliasing a
    AdamW               test_optim.RefAdamW         its tolerances, or the whole step skipped (NaN, overflow)
    softplus/silu/sigmoid scan_ref (float64)         ACT_ULP; NaN/Inf, in place
    wrong dtype / rank  -                           TypeError / ValueError naming the argument
"""
import numpy as np
import pytest

# the test extra installs it (pyproject [test]): a missing one is an error, not a skip
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import lutcore  # noqa: E402
from lutcore import ops  # noqa: E402
from lutcore.units import Units  # noqa: E402
from reference.fp16_ref import fp16_encode_ref, fp16_round_ref  # noqa: E402
from reference.gemm_ref import lut_gemm_ref  # noqa: E402
from reference.quant_ref import qmatmul_ref, quantize_ref  # noqa: E402
from reference.scan_ref import causal_conv1d_ref, selective_scan_ref  # noqa: E402
from reference.units_ref import relu8_ref, requant_ref  # noqa: E402

F64_TOL = 1e-10                      # float64 scan / conv: max|got - want| <= F64_TOL * max(1, max|want|)
SETTINGS = settings(derandomize=True, max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

dims = st.one_of(st.sampled_from([0, 1, 7, 16, 17, 33]), st.integers(0, 40))
small = st.integers(1, 9)
seeds = st.integers(0, 2 ** 32 - 1)


def _units(kind, rng):
    if kind == "exact":
        return Units.exact()
    return Units.from_mul(rng.integers(-2 ** 15, 2 ** 15, 65536).astype(np.int16))


def _layout(x, how):
    """The same values as ``x`` in another memory layout: C order, a strided view, or
    a transposed (Fortran-order) copy."""
    if how == "strided" and x.ndim:
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    if how == "fortran" and x.ndim >= 2:
        return np.asfortranarray(x)
    return x


layouts = st.sampled_from(["c", "strided", "fortran"])


def _close(name, got, want):
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape, got.dtype)
    fin = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), fin), (name, "non-finite pattern differs")
    if fin.any():
        err = np.max(np.abs(got[fin] - want[fin]))
        assert err <= F64_TOL * max(1.0, float(np.max(np.abs(want[fin])))), (name, err)


# ------------------------------------------------------------------ int8 kernels

@SETTINGS
@given(M=dims, K=dims, N=dims, table=st.sampled_from(["exact", "random"]), la=layouts, lb=layouts, seed=seeds)
def test_lut_gemm_matches_reference(M, K, N, table, la, lb, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    u = _units(table, rng)
    got = lutcore.lut_gemm(_layout(a, la), _layout(b, lb), units=u, threads=int(seed % 2) + 1)
    assert np.array_equal(got, lut_gemm_ref(a, b, u.mul))


@SETTINGS
@given(dtype=st.sampled_from([np.int16, np.uint8, np.float32, np.int32, np.bool_]), which=st.sampled_from("ab"),
       shape=st.sampled_from([(3,), (2, 3, 4), (3, 4)]))
def test_lut_gemm_refuses_wrong_dtypes_and_ranks(dtype, which, shape):
    good = np.ones((3, 4), np.int8)
    bad = np.ones(shape, dtype)
    a, b = (bad, good.T.copy()) if which == "a" else (good, bad)
    if shape == (3, 4) and dtype == np.int8:
        return
    with pytest.raises((TypeError, ValueError), match=which):
        lutcore.lut_gemm(a, b)


@SETTINGS
@given(R=dims, L=dims, block=st.sampled_from([1, 7, 8, 16, 32, 33]), axis=st.sampled_from([-1, 0]), lay=layouts,
       special=st.sampled_from([None, np.nan, np.inf, -np.inf, 0.0]), seed=seeds)
def test_quantize_matches_reference_or_refuses_non_finite(R, L, block, axis, lay, special, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((R, L)) * rng.choice([1e-30, 1e-3, 1.0, 1e30])).astype(np.float32)
    if special is not None and x.size:
        x.flat[int(rng.integers(x.size))] = special
    xin = _layout(x, lay)
    if not np.isfinite(x).all():
        with pytest.raises(ValueError, match="non-finite"):
            lutcore.quantize(xin, block, axis=axis)
        return
    q8 = lutcore.quantize(xin, block, axis=axis)
    if axis == -1:
        q, s = quantize_ref(x, block)
    else:
        q, s = (a.T for a in quantize_ref(x.T, block))
    assert np.array_equal(q8.q, q) and np.array_equal(q8.scale, s)
    rebuilt = lutcore.Q8(q8.q.copy(), q8.scale.copy(), q8.block, axis, x.shape)   # built by hand: accepted
    assert np.array_equal(rebuilt.dequantize(), q8.dequantize())


@SETTINGS
@given(M=small, K=dims, N=small, block=st.sampled_from([8, 16, 32, 5]), table=st.sampled_from(["exact", "random"]),
       alias=st.booleans(), seed=seeds)
def test_qmatmul_matches_reference_and_out_may_alias_a(M, K, N, block, table, alias, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    u = _units(table, rng)
    qa, sa = quantize_ref(a, block)
    qbt, sbt = quantize_ref(b.T, block)
    want = qmatmul_ref(qa, sa, qbt.T, sbt.T, u.mul, block)
    if alias and K == N:
        out = a                                          # the result lands over its own input
        got = lutcore.qmatmul(a, b, units=u, block=block, out=out)
        assert got is out
    else:
        got = lutcore.qmatmul(a, b, units=u, block=block)
    assert np.array_equal(got, want)


@SETTINGS
@given(shape=st.lists(st.integers(0, 17), min_size=0, max_size=3), shift=st.integers(0, 31), lay=layouts,
       inplace=st.booleans(), seed=seeds)
def test_requant_and_relu8_match_reference(shape, shift, lay, inplace, seed):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    u = Units.from_mul(Units.exact().mul, requant=rng.integers(-128, 128, 65536),
                       relu=rng.integers(-128, 128, 256))
    got = lutcore.requant(_layout(acc, lay), shift, units=u)
    assert np.array_equal(got, requant_ref(acc, shift, u.requant_lut))
    x = rng.integers(-128, 128, shape).astype(np.int8)
    want = relu8_ref(x, u.relu_lut)
    if inplace:
        y = x.copy()
        assert lutcore.relu8(y, units=u, out=y) is y
    else:
        y = lutcore.relu8(_layout(x, lay), units=u)
    assert np.array_equal(y, want)


def test_requant_refuses_bad_shift_and_dtype():
    with pytest.raises(ValueError, match="shift"):
        lutcore.requant(np.zeros(3, np.int32), 32)
    with pytest.raises((TypeError, ValueError), match="shift"):
        lutcore.requant(np.zeros(3, np.int32), True)
    with pytest.raises(TypeError, match="acc"):
        lutcore.requant(np.zeros(3, np.float32), 1)


# ------------------------------------------------------------------ fp16

@SETTINGS
@given(n=dims, mode=st.sampled_from(["nearest", "truncate"]), lay=layouts, inplace=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=seeds)
def test_fp16_round_and_encode_match_reference(n, mode, lay, inplace, dtype, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)                            # every float32 pattern: NaN, Inf, subnormals
    x = x * np.float32(rng.choice([1.0, 2.0 ** -20, 2.0 ** 10]))
    if dtype == np.float64:
        x = x.astype(np.float64)
    want = fp16_round_ref(x, mode)
    xin = _layout(x, lay)
    try:
        got = lutcore.fp16_round(xin, mode)
    except (TypeError, ValueError) as e:
        assert dtype == np.float64 and "x" in str(e)    # a dtype the kernel does not take is named
        return
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    if dtype == np.float32:
        enc = lutcore.fp16_encode(xin, mode)
        ref = fp16_encode_ref(x, mode)
        nan = np.isnan(x)
        assert np.array_equal(enc[~nan], ref[~nan]) and np.all((enc[nan] & 0x7c00) == 0x7c00)
        if inplace:
            y = x.copy()
            assert lutcore.fp16_round(y, mode, out=y) is y
            assert np.array_equal(np.isnan(y), np.isnan(want)) and np.array_equal(y[~np.isnan(y)],
                                                                                   want[~np.isnan(want)])


# ------------------------------------------------------------------ scan and conv (float64: tight oracle)

@SETTINGS
@given(bsz=st.integers(0, 3), L=st.integers(0, 20), D=st.integers(1, 19), N=st.integers(1, 6),
       opts=st.fixed_dictionaries({"D": st.booleans(), "z": st.booleans(), "delta_bias": st.booleans(),
                                   "h0": st.booleans(), "softplus": st.booleans(),
                                   "disc": st.sampled_from(["zoh", "simplified"])}),
       chunk=st.sampled_from([1, 3, 64, 2 ** 30]), nan=st.booleans(), lay=layouts, seed=seeds)
def test_selective_scan_matches_reference(bsz, L, D, N, opts, chunk, nan, lay, seed):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s)                                    # noqa: E731
    u, delta, z = f(bsz, L, D), f(bsz, L, D) * 0.5, f(bsz, L, D)
    A = -np.exp(f(D, N) * 0.5)
    B, C = f(bsz, L, N), f(bsz, L, N)
    if not opts["softplus"]:
        delta = np.abs(delta)
    if nan and u.size:
        u.flat[int(rng.integers(u.size))] = np.nan
    kw = dict(D=f(D) if opts["D"] else None, z=z if opts["z"] else None,
              delta_bias=f(D) * 0.1 if opts["delta_bias"] else None, delta_softplus=opts["softplus"],
              discretization=opts["disc"], initial_state=f(bsz, D, N) if opts["h0"] else None)
    want_y, want_h = selective_scan_ref(u, delta, A, B, C, return_last_state=True, **kw)
    y, h = ops.selective_scan(_layout(u, lay), _layout(delta, lay), A, B, C, return_last_state=True, **kw)
    _close("y", y, want_y)
    if L:
        _close("last_state", h, want_h)
    y2, _, _ = ops.selective_scan_forward(u, delta, A, B, C, chunk=chunk, **kw)
    assert np.array_equal(np.nan_to_num(y2, nan=7.0), np.nan_to_num(y, nan=7.0))   # chunk: same bits


@SETTINGS
@given(bsz=st.integers(0, 3), L=st.integers(0, 20), D=st.integers(1, 19), K=st.integers(1, 5),
       bias=st.booleans(), lay=layouts, seed=seeds)
def test_causal_conv1d_and_its_step_match_reference(bsz, L, D, K, bias, lay, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((bsz, L, D))
    w = rng.standard_normal((D, K))
    b = rng.standard_normal(D) if bias else None
    want = causal_conv1d_ref(x, w, b)
    _close("y", ops.causal_conv1d(_layout(x, lay), w, b), want)
    if bsz == 0:
        return
    state = np.zeros((bsz, K - 1, D))
    steps = []
    for t in range(L):
        steps.append(ops.causal_conv1d_step(x[:, t], state, w, b))
        if K > 1:                    # x_t a view over the state it updates: read as it was
            r = int(rng.integers(K - 1))
            s1, s2 = state.copy(), state.copy()
            x_view = s1.reshape(bsz * (K - 1), D)[:bsz] if t % 2 else s1[:, r]
            x_copy = s2.reshape(bsz * (K - 1), D)[:bsz].copy() if t % 2 else s2[:, r].copy()
            assert np.array_equal(ops.causal_conv1d_step(x_view, s1, w, b), ops.causal_conv1d_step(x_copy, s2, w, b))
            assert np.array_equal(s1, s2)
    if L:
        _close("steps", np.stack(steps, axis=1), want)


@SETTINGS
@given(which=st.sampled_from(["u", "A", "B", "delta_softplus", "chunk", "threads"]),
       bad=st.sampled_from(["dtype", "shape", "value"]))
def test_scan_bad_arguments_raise_naming_them(which, bad):
    u = np.ones((1, 3, 2))
    args = dict(u=u, delta=u, A=-np.ones((2, 4)), B=np.ones((1, 3, 4)), C=np.ones((1, 3, 4)))
    kw = {}
    if which in ("u", "A", "B"):
        x = args[which]
        args[which] = {"dtype": x.astype(np.int32) if which != "u" else x.astype(np.complex64),
                       "shape": x[..., :1], "value": "not an array"}[bad]
    else:
        kw[which] = {"dtype": "yes", "shape": [1], "value": {"delta_softplus": 2, "chunk": 0,
                                                            "threads": 10 ** 6}[which]}[bad]
    with pytest.raises((TypeError, ValueError)) as e:
        ops.selective_scan_forward(**args, **kw)
    named = str(e.value).split(":")[0].split(" (")[0]
    # a shape names the argument, or the one whose shape it no longer fits
    assert named == which or (bad == "shape" and named in ("u", "delta", "A", "B", "C")), str(e.value)


# ------------------------------------------------------------------ float matmul, AdamW

MATMUL_REL = 1e-5                    # as test_matmul: max|err| <= MATMUL_REL * sqrt(K) * max|ref|


@SETTINGS
@given(M=dims, K=dims, N=dims, la=layouts, lb=layouts, alias=st.booleans(), seed=seeds)
def test_matmul_matches_float64_reference(M, K, N, la, lb, alias, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if alias and K == N:
        out = a.copy()
        got = ops.matmul(out, b, out=out)                 # the product over its own left operand
        assert got is out
    else:
        got = ops.matmul(_layout(a, la), _layout(b, lb))
    if ref.size:
        assert np.abs(got - ref).max() <= MATMUL_REL * np.sqrt(max(K, 1)) * max(np.abs(ref).max(), 1e-30)
    assert got.shape == (M, N)


@SETTINGS
@given(shapes=st.lists(st.tuples(st.integers(1, 40)), min_size=1, max_size=3),
       modes=st.lists(st.sampled_from(["normal", "normal", "nan", "inf", "huge"]), min_size=1, max_size=4),
       scale=st.sampled_from([1.0, 0.5, 2.0 ** -10]), clip=st.sampled_from([None, 1.0, 1e-3]), seed=seeds)
def test_adamw_matches_reference_or_skips_the_whole_step(shapes, modes, scale, clip, seed):
    from test_optim import EXACT_BETAS, P_ATOL, P_RTOL, RefAdamW
    from lutcore.train.optim import AdamW
    rng = np.random.default_rng(seed)
    params = {f"p{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    kw = dict(lr=1e-2, betas=EXACT_BETAS, eps=1e-8)
    ref = RefAdamW(params, kw["lr"], kw["betas"], kw["eps"], 0.01, 0.0)
    opt = AdamW(params, weight_decay=0.01, **kw)
    for mode in modes:
        grads = {k: (rng.standard_normal(v.shape) * 10.0 ** rng.uniform(-3, 1)).astype(np.float32)
                 for k, v in params.items()}
        gs = scale
        if mode != "normal":
            k = sorted(grads)[int(rng.integers(len(grads)))]
            grads[k].flat[int(rng.integers(grads[k].size))] = {"nan": np.nan, "inf": -np.inf, "huge": 1e30}[mode]
            gs = 1e20 if mode == "huge" else scale            # finite, but overflows float32 once scaled
        before = {k: v.copy() for k, v in params.items()}
        info = opt.step(grads, max_grad_norm=clip, grad_scale=gs)
        if mode == "huge" and clip is not None:
            mode = "normal"                                   # clipped to max_grad_norm first: a step
        if mode != "normal":
            assert info["skipped"]
            assert all(np.array_equal(before[k], params[k]) for k in params)
            continue
        assert not info["skipped"]
        ref.step(grads, max_grad_norm=clip, grad_scale=gs)
        for k in params:
            np.testing.assert_allclose(params[k], ref.p[k], rtol=P_RTOL, atol=P_ATOL, err_msg=k)
    assert all(np.isfinite(a).all() for a in list(opt.m.values()) + list(opt.v.values()))


# ------------------------------------------------------------------ element-wise math (float32 vs float64 numpy)

ACT_ULP, ACT_TINY_ABS = 4.0, 1e-37           # as test_mathfns: softplus / silu / sigmoid


@SETTINGS
@given(n=dims, fn=st.sampled_from(["softplus", "silu", "sigmoid"]), lay=layouts, inplace=st.booleans(),
       special=st.sampled_from([None, np.nan, np.inf, -np.inf]), seed=seeds)
def test_activations_match_float64_reference(n, fn, lay, inplace, special, seed):
    from reference.scan_ref import sigmoid_ref, silu_ref, softplus_ref
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * rng.choice([1.0, 10.0, 100.0])).astype(np.float32)
    if special is not None and n:
        x[int(rng.integers(n))] = special
    ref = {"softplus": softplus_ref, "silu": silu_ref, "sigmoid": sigmoid_ref}[fn]
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    if fn == "silu":
        want[np.isneginf(x)] = 0.0         # its limit (the oracle's x * sigmoid(x) is -inf * 0)
    if inplace:
        got = x.copy()
        assert getattr(ops, fn)(got, out=got) is got
    else:
        got = getattr(ops, fn)(_layout(x, lay))
    assert got.dtype == np.float32 and got.shape == x.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    w, g = want[~nan], got[~nan].astype(np.float64)
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf])
    w, g = w[~inf], g[~inf]
    ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
    assert np.all((np.abs(g - w) <= ACT_ULP * ulp) | (np.abs(g - w) <= ACT_TINY_ABS))
