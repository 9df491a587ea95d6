"""lutcore.train.AdamW / global_grad_norm / clip_grad_norm against an
independent float64 numpy reference of the DESIGN.md "AdamW" formula, and
against torch.optim.AdamW (max_delta = 0).

Reference (DESIGN.md), per element, one global step counter t >= 1:
    m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
    s  = lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps);  non-finite s -> 0
    s <- clamp(s, -max_delta, max_delta) when max_delta > 0
    p <- p (1 - lr wd) - s
A step whose gradients hold any NaN/Inf is skipped whole.
"""
import math

import numpy as np
import pytest

import lutcore
from lutcore.train import AdamW, clip_grad_norm, global_grad_norm

F32 = np.float32
F64 = np.float64

# float32 kernel vs float64 reference after a few steps: the kernel rounds
# each of ~10 float32 operations per element per step (rel. 6e-8 each).
P_RTOL, P_ATOL = 1e-5, 1e-6          # parameters
M_RTOL = 1e-5                        # moments; absolute slack of M_ATOL_REL x the largest
M_ATOL_REL = 1e-6                    # entry of the tensor (m near 0 after cancellation)
# float32 vs float32 with a different operation order (torch).
TORCH_RTOL, TORCH_ATOL = 1e-5, 1e-6
TORCH_M_ATOL = 1e-7                   # m near 0 after cancellation: ~ulp of the gradients
# Betas exactly representable in float32, so the formula tests below do not
# also measure how (1 - beta) is rounded; test_one_minus_beta_* does that.
EXACT_BETAS = (0.875, 1 - 2.0 ** -10)


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)
    yield


# --------------------------------------------------------------- reference
class RefAdamW:
    """float64 numpy AdamW written from DESIGN.md (not from the package)."""

    def __init__(self, params, lr, betas, eps, wd, max_delta):
        self.p = {k: np.array(v, F64) for k, v in params.items()}
        self.lr, (self.b1, self.b2), self.eps, self.wd, self.md = lr, betas, eps, wd, max_delta
        self.m, self.v, self.t = {}, {}, 0

    def step(self, grads, max_grad_norm=None, grad_scale=1.0):
        g64 = {k: np.asarray(g, F64) * grad_scale for k, g in grads.items()}
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in g64.values()))
        clip = 1.0
        if max_grad_norm is not None and norm > max_grad_norm:
            clip = max_grad_norm / (norm + 1e-6)
        self.t += 1
        t = self.t
        for k, g in g64.items():
            g = g * clip
            m = self.m.setdefault(k, np.zeros_like(g))
            v = self.v.setdefault(k, np.zeros_like(g))
            m[...] = self.b1 * m + (1 - self.b1) * g
            v[...] = self.b2 * v + (1 - self.b2) * g * g
            with np.errstate(all="ignore"):
                s = self.lr * (m / (1 - self.b1 ** t)) / (np.sqrt(v / (1 - self.b2 ** t)) + self.eps)
            s[~np.isfinite(s)] = 0.0
            if self.md > 0:
                s = np.clip(s, -self.md, self.md)
            self.p[k] = self.p[k] * (1 - self.lr * self.wd) - s
        return norm, clip


def _close_m(actual, desired, err_msg):
    atol = M_ATOL_REL * float(np.max(np.abs(desired), initial=0.0))
    np.testing.assert_allclose(actual, desired, rtol=M_RTOL, atol=atol, err_msg=err_msg)


def _params(rng, shapes):
    return {k: rng.normal(0, 1, s).astype(F32) for k, s in shapes.items()}


def _grads(rng, params, scale=1.0):
    return {k: (rng.normal(0, 1, v.shape) * scale).astype(F32) for k, v in params.items()}


def _snapshot(opt):
    return ({k: v.tobytes() for k, v in opt.params.items()},
            {k: v.tobytes() for k, v in opt.m.items()},
            {k: v.tobytes() for k, v in opt.v.items()})


SHAPES = {"w": (7, 13), "b": (13,), "emb": (33, 5)}


# --------------------------------------------------------------- vs reference
@pytest.mark.parametrize("max_delta", [0.0, 0.004])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_matches_float64_reference(rng, max_delta, wd):
    params = _params(rng, SHAPES)
    kw = dict(lr=1e-2, betas=EXACT_BETAS, eps=1e-8)
    ref = RefAdamW(params, kw["lr"], kw["betas"], kw["eps"], wd, max_delta)
    opt = AdamW(params, weight_decay=wd, max_delta=max_delta, **kw)
    clamped = 0
    for step in range(1, 7):
        # gradients of varying magnitude so |s| straddles max_delta
        grads = _grads(rng, params, scale=10.0 ** rng.uniform(-3, 1))
        before = {k: v.copy() for k, v in params.items()}
        info = opt.step(grads)
        ref.step(grads)
        assert info["step"] == step and info["skipped"] is False
        for k in params:
            np.testing.assert_allclose(params[k], ref.p[k], rtol=P_RTOL, atol=P_ATOL, err_msg=k)
            _close_m(opt.m[k], ref.m[k], k)
            _close_m(opt.v[k], ref.v[k], k)
            if max_delta > 0:
                # decay outside the trust region: the step itself is bounded
                s = before[k].astype(F64) * (1 - kw["lr"] * wd) - params[k].astype(F64)
                assert np.all(np.abs(s) <= max_delta * (1 + 1e-5) + 1e-6), k
                clamped += int(np.sum(np.abs(np.abs(s) - max_delta) < 1e-6))
    assert opt.t == 6
    if max_delta > 0:
        assert clamped > 0, "the trust region never bound: test is vacuous"


def test_trust_region_clamps_step_and_decay_is_outside(rng):
    """lr 0.1 makes |s| ~ 0.1 at step 1; max_delta 0.01 clamps it; a strong
    decay (lr*wd = 0.05) still applies on top of the clamped step."""
    p0 = rng.normal(0, 1, 1000).astype(F32)
    p = {"x": p0.copy()}
    opt = AdamW(p, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5, max_delta=0.01)
    g = rng.normal(0, 1, 1000).astype(F32)
    opt.step({"x": g})
    want = p0.astype(F64) * (1 - 0.05) - 0.01 * np.sign(g)
    np.testing.assert_allclose(p["x"], want, rtol=1e-6, atol=1e-7)
    # the total change exceeds max_delta wherever |0.05 p| is large: decay is not clamped
    assert np.any(np.abs(p["x"].astype(F64) - p0) > 0.01 + 1e-3)


def test_adamw_matches_torch(rng):
    import torch
    params = _params(rng, SHAPES)
    lr, betas, eps, wd = 3e-3, EXACT_BETAS, 1e-6, 0.05
    tparams = {k: torch.nn.Parameter(torch.tensor(v.copy())) for k, v in params.items()}
    topt = torch.optim.AdamW(list(tparams.values()), lr=lr, betas=betas, eps=eps, weight_decay=wd,
                             foreach=False)
    opt = AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd, max_delta=0.0)
    for _ in range(5):
        grads = _grads(rng, params, scale=0.3)
        for k, tp in tparams.items():
            tp.grad = torch.tensor(grads[k])
        topt.step()
        opt.step(grads)
    for k, tp in tparams.items():
        np.testing.assert_allclose(params[k], tp.detach().numpy(), rtol=TORCH_RTOL, atol=TORCH_ATOL, err_msg=k)
        st = topt.state[tp]
        np.testing.assert_allclose(opt.m[k], st["exp_avg"].numpy(), rtol=TORCH_RTOL, atol=TORCH_M_ATOL,
                                   err_msg=k)
        np.testing.assert_allclose(opt.v[k], st["exp_avg_sq"].numpy(), rtol=TORCH_RTOL, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.9, 0.99999), (0.9, 0.99999999), (0.99999999, 0.999)])
def test_one_minus_beta_is_not_rounded_through_float32_beta(betas):
    """(1 - beta) must be the float32 of the real 1 - beta, as torch does,
    not 1 - float32(beta): for beta2 = 0.99999999, float32(beta2) == 1.0,
    so the second moment would never grow and the first step would be
    lr / eps = 1e5 instead of lr = 1e-3 (likewise beta1: m stays 0)."""
    lr = 1e-3
    p = {"x": np.zeros(8, F32)}
    opt = AdamW(p, lr=lr, betas=betas, eps=1e-8, weight_decay=0.0)
    opt.step({"x": np.ones(8, F32)})
    # reference: after one step with g = 1, m = 1 - b1, v = 1 - b2 and the step is lr / (1 + eps)
    np.testing.assert_allclose(p["x"], -lr / (1 + 1e-8), rtol=1e-6, err_msg="p after one step")
    np.testing.assert_allclose(opt.m["x"], 1 - betas[0], rtol=1e-6, err_msg="m after one step")
    np.testing.assert_allclose(opt.v["x"], 1 - betas[1], rtol=1e-6, err_msg="v after one step")


# --------------------------------------------------------------- NaN guard
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["first", "last"])
def test_nan_guard_skips_whole_step(rng, bad, where):
    params = _params(rng, SHAPES)
    opt = AdamW(params, lr=1e-2, weight_decay=0.1, max_delta=0.0)
    opt.step(_grads(rng, params))          # moments exist now
    snap = _snapshot(opt)
    grads = _grads(rng, params)
    name = sorted(grads)[0] if where == "first" else sorted(grads)[-1]
    idx = 0 if where == "first" else grads[name].size - 1
    grads[name].reshape(-1)[idx] = bad
    info = opt.step(grads, max_grad_norm=1.0)
    assert info["skipped"] is True
    assert opt.skipped == 1
    assert opt.t == 1 and info["step"] == 1
    assert _snapshot(opt) == snap
    # the next clean step proceeds with t = 2 and matches a reference that never saw the bad step
    info = opt.step(_grads(rng, params))
    assert info["skipped"] is False and info["step"] == 2 and opt.skipped == 1


def test_nan_guard_on_first_step(rng):
    params = _params(rng, SHAPES)
    before = {k: v.tobytes() for k, v in params.items()}
    opt = AdamW(params, lr=1e-2, weight_decay=0.1)
    grads = _grads(rng, params)
    grads["w"][3, 4] = np.nan
    info = opt.step(grads)
    assert info["skipped"] is True and opt.t == 0 and opt.skipped == 1
    assert {k: v.tobytes() for k, v in params.items()} == before
    for k in opt.m:                        # if moments were created, they are still zero
        assert not opt.m[k].any() and not opt.v[k].any()


def test_per_element_guard_non_finite_step_becomes_zero(simd):
    """v underflows to 0 in float32 for g = 1e-23 (g^2 = 1e-46 < smallest
    subnormal), so with eps = 1e-45 the step lr*m_hat/eps overflows to inf:
    that element's step must be 0 — not the trust-region bound — while a
    normal element in the same tensor is clamped to max_delta.  27 elements:
    the vector body and the scalar tail both see every case."""
    p0 = np.tile(np.array([0.5, 0.5, -0.25], F32), 9)
    g = np.tile(np.array([1e-23, 1e-3, -1e-23], F32), 9)
    p = {"x": p0.copy()}
    opt = AdamW(p, lr=1e30, betas=(0.9, 0.999), eps=1e-45, weight_decay=0.0, max_delta=0.01)
    info = opt.step({"x": g})
    assert info["skipped"] is False
    tiny = np.abs(g) < 1e-20
    assert (opt.v["x"][tiny] == 0).all()                 # the honest underflow
    assert p["x"][tiny].tobytes() == p0[tiny].tobytes()  # non-finite step -> 0
    np.testing.assert_array_equal(p["x"][~tiny], p0[~tiny] - F32(0.01))
    assert np.isfinite(p["x"]).all()


# --------------------------------------------------------------- name-keyed moments
def test_moments_by_name_survive_trainable_set_change(rng):
    params = _params(rng, {"a": (50,), "b": (20, 3)})
    ref = RefAdamW(params, 1e-2, EXACT_BETAS, 1e-8, 0.1, 0.0)
    opt = AdamW(params, lr=1e-2, betas=EXACT_BETAS, eps=1e-8, weight_decay=0.1)
    assert opt.m == {} and opt.v == {}
    g1 = _grads(rng, params)
    opt.step({"a": g1["a"]})                           # b untouched, no moments for it yet
    ref.step({"a": g1["a"]})
    assert set(opt.m) == {"a"} and set(opt.v) == {"a"}
    g2 = _grads(rng, params)
    opt.step(g2)
    ref.step(g2)
    assert set(opt.m) == {"a", "b"}
    b_bytes = (params["b"].tobytes(), opt.m["b"].tobytes(), opt.v["b"].tobytes())
    g3 = _grads(rng, params)
    opt.step({"a": g3["a"]})                           # b absent: untouched, moments kept
    ref.step({"a": g3["a"]})
    assert (params["b"].tobytes(), opt.m["b"].tobytes(), opt.v["b"].tobytes()) == b_bytes
    g4 = _grads(rng, params)
    info = opt.step(g4)                                # b back: t = 4, its moments decay once more
    ref.step(g4)
    assert info["step"] == 4 and opt.t == 4
    for k in ("a", "b"):
        np.testing.assert_allclose(params[k], ref.p[k], rtol=P_RTOL, atol=P_ATOL, err_msg=k)
        _close_m(opt.m[k], ref.m[k], k)
        _close_m(opt.v[k], ref.v[k], k)
    # b's moments were not reset: a fresh moment would equal (1-b1) g4
    assert not np.allclose(opt.m["b"], (1 - EXACT_BETAS[0]) * g4["b"], rtol=1e-3)


# --------------------------------------------------------------- norms and clipping
def _norm64(grads):
    return math.sqrt(sum(float(np.sum(np.asarray(g, F64) ** 2)) for g in grads.values()))


def test_global_grad_norm_is_float64(rng):
    grads = {"a": rng.normal(0, 1, 100_003).astype(F32), "b": rng.normal(0, 1e-3, (17, 9)).astype(F32),
             "c": np.zeros(0, F32)}
    assert global_grad_norm(grads) == pytest.approx(_norm64(grads), rel=1e-12)
    # values whose squares are below float32's range still count (float64 sum)
    tiny = {"t": np.full(1000, 1e-30, F32)}
    assert global_grad_norm(tiny) == pytest.approx(_norm64(tiny), rel=1e-12)
    assert global_grad_norm(tiny) > 0
    big = {"t": np.full(1000, 1e25, F32)}           # squares overflow float32, not float64
    assert global_grad_norm(big) == pytest.approx(_norm64(big), rel=1e-12)
    assert global_grad_norm({}) == 0.0


def _sumsq_in_documented_order(x):
    """csrc/optim/optim.h's order, written out: chunks of 16384 elements, each
    summed in 4 interleaved float64 lanes then ((l0 + l1) + (l2 + l3)), the chunk
    sums added in order."""
    x = np.asarray(x, F64).ravel()
    total = 0.0
    for c0 in range(0, x.size, 16384):
        ch = x[c0:c0 + 16384]
        lanes = [0.0, 0.0, 0.0, 0.0]
        for i, d in enumerate(ch):
            lanes[i % 4] = lanes[i % 4] + d * d
        total = total + ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
    return total


def test_global_grad_norm_has_the_documented_bits(rng, simd):
    """Whole chunks go four at a time (their add chains overlap), ragged ones singly: the
    sums are the documented order's, bit for bit, on every path and thread count."""
    sizes = [1, 7, 33, 16384, 16385, 4 * 16384, 5 * 16384 + 3, 9 * 16384]
    grads = {f"g{i}": rng.normal(0, 1, n).astype(F32) for i, n in enumerate(sizes)}
    want = math.sqrt(sum(_sumsq_in_documented_order(g) for g in grads.values()))
    for threads in (1, 2):
        assert global_grad_norm(grads, threads=threads) == want
        for k, g in grads.items():
            assert global_grad_norm({k: g}, threads=threads) == math.sqrt(_sumsq_in_documented_order(g))


def test_clip_grad_norm_scales_in_place(rng):
    grads = {"a": rng.normal(0, 1, (40, 40)).astype(F32), "b": rng.normal(0, 1, 77).astype(F32)}
    orig = {k: v.copy() for k, v in grads.items()}
    pre = _norm64(grads)
    assert pre > 5
    got = clip_grad_norm(grads, 5.0)
    assert got == pytest.approx(pre, rel=1e-12)
    post = _norm64(grads)
    assert post <= 5.0 * (1 + 1e-6)
    assert post == pytest.approx(5.0, rel=1e-5)
    for k in grads:                                     # one common factor for every tensor
        np.testing.assert_allclose(grads[k], orig[k] * (5.0 / pre), rtol=1e-6, atol=1e-12)
    # below the limit: returned norm, gradients untouched
    before = {k: v.tobytes() for k, v in grads.items()}
    assert clip_grad_norm(grads, 100.0) == pytest.approx(post, rel=1e-12)
    assert {k: v.tobytes() for k, v in grads.items()} == before


@pytest.mark.parametrize("grad_scale", [1.0, 1.0 / 1024])
def test_fused_clipping_in_step(rng, grad_scale):
    params = _params(rng, SHAPES)
    ref = RefAdamW(params, 1e-2, EXACT_BETAS, 1e-8, 0.01, 0.0)
    opt = AdamW(params, lr=1e-2, betas=EXACT_BETAS, eps=1e-8, weight_decay=0.01)
    max_norm = 0.5
    for i in range(4):
        # magnitudes alternate so clipping is active on some steps and not on others
        grads = _grads(rng, params, scale=(3.0 if i % 2 == 0 else 1e-3) / grad_scale)
        before = {k: v.tobytes() for k, v in grads.items()}
        info = opt.step(grads, max_grad_norm=max_norm, grad_scale=grad_scale)
        norm, clip = ref.step(grads, max_grad_norm=max_norm, grad_scale=grad_scale)
        assert info["grad_norm"] == pytest.approx(norm, rel=1e-6)    # pre-clip, after grad_scale
        assert info["clip_factor"] == pytest.approx(clip, rel=1e-6)
        if i % 2 == 0:
            assert info["clip_factor"] < 1
        else:
            assert info["clip_factor"] == 1.0
        assert {k: v.tobytes() for k, v in grads.items()} == before  # fused: caller's grads untouched
        for k in params:
            np.testing.assert_allclose(params[k], ref.p[k], rtol=P_RTOL, atol=P_ATOL, err_msg=k)
            _close_m(opt.m[k], ref.m[k], k)


# --------------------------------------------------------------- determinism
def _run_big(isa, threads, steps=3):
    rng = np.random.default_rng(1234)
    n = 100_003                                         # 3 full 32768-chunks + a ragged tail, not a multiple of 8
    params = {"big": rng.normal(0, 1, n).astype(F32), "small": rng.normal(0, 1, 37).astype(F32)}
    grads = [{k: (rng.normal(0, 1, v.shape) * 10.0 ** rng.uniform(-4, 1, v.shape)).astype(F32)
              for k, v in params.items()} for _ in range(steps)]
    prev = lutcore.get_simd()
    lutcore.set_simd(isa)
    try:
        opt = AdamW(params, lr=3e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, max_delta=0.02,
                    threads=threads)
        norms = []
        for g in grads:
            norms.append(opt.step(g, max_grad_norm=50.0, grad_scale=0.5)["grad_norm"])
            norms.append(global_grad_norm(g, threads=threads))
    finally:
        lutcore.set_simd(prev)
    return ({k: v.tobytes() for k, v in params.items()}, {k: v.tobytes() for k, v in opt.m.items()},
            {k: v.tobytes() for k, v in opt.v.items()}, norms)


def test_bit_identical_across_threads_and_simd():
    base = _run_big("generic", 1)
    for isa in lutcore.available_simd():
        for threads in (1, 2):
            got = _run_big(isa, threads)
            assert got[0] == base[0], f"params differ: {isa}, {threads} threads"
            assert got[1] == base[1], f"m differs: {isa}, {threads} threads"
            assert got[2] == base[2], f"v differs: {isa}, {threads} threads"
            assert got[3] == base[3], f"norms differ: {isa}, {threads} threads"



def _two_pass_step(params, grads, m, v, t, lr, betas, eps, wd, max_delta, max_grad_norm, grad_scale, threads):
    """AdamW.step as the composition its contract names: global_grad_norm, then the skip and
    clip decision in double (Python), then one update call (_native.optim.adamw_multi); the
    one-call step must give these bits.  None when the step is skipped."""
    from lutcore import _simd
    from lutcore._native import optim as _o
    norm = global_grad_norm(grads, threads) * abs(float(grad_scale))
    if not math.isfinite(norm):
        return None
    clip = max_grad_norm / (norm + 1e-6) if (max_grad_norm is not None and norm > max_grad_norm) else 1.0
    names = sorted(grads)
    for n in names:
        m.setdefault(n, np.zeros_like(params[n]))
        v.setdefault(n, np.zeros_like(params[n]))
    b1, b2 = betas
    _o.adamw_multi([params[n] for n in names], [grads[n] for n in names], [m[n] for n in names],
                   [v[n] for n in names], b1, b2, eps, lr, wd, max_delta, 1.0 - b1 ** t, 1.0 - b2 ** t,
                   float(np.float32(grad_scale * clip)), _simd.isa(), threads)
    return norm, clip


@pytest.mark.parametrize("threads", [1, 2])
def test_one_call_step_is_norm_then_update(simd, threads):
    """The step's one native call (norm pass, decision, update in one parallel region, the update
    walking each thread's share backwards) against the two-pass composition, bit for bit: params,
    moments, norm, clip factor; tensors whose 16K-chunk groups span several of them, clipping on
    and off, a NaN (skipped, no moment created), a norm >= 2**60 (the exact overflow check's path)."""
    rng = np.random.default_rng(2812)
    sizes = {"a": 1, "b": 7, "c": 33, "d": 16384 + 5, "e": 3 * 16384, "f": 0, "g": 100_003, "h": 2 * 32768 + 17}
    hp = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, max_delta=0.0)
    p1 = {k: rng.standard_normal(n).astype(F32) for k, n in sizes.items()}
    p2 = {k: x.copy() for k, x in p1.items()}
    opt = AdamW(p1, threads=threads, **hp)
    m2, v2, t = {}, {}, 0
    cases = [(None, 1.0, 1e-2), (0.5, 1.0, 1.0), (None, 1.0 / 1024, 10.0), ("nan", 1.0, 1.0), (1.0, 0.25, 3.0),
             (None, 1.0, 1e18), (5.0, 1.0, 1e18)]
    for i, (mgn, gsc, mag) in enumerate(cases):
        names = list(sizes) if i != 3 else list(sizes) + ["late"]
        if "late" in names and "late" not in p1:
            p1["late"] = rng.standard_normal(5).astype(F32)
            p2["late"] = p1["late"].copy()
            opt.params["late"] = p1["late"]
        grads = {k: (rng.standard_normal(p1[k].shape) * mag).astype(F32) for k in names}
        if mgn == "nan":
            grads["g"][777] = np.nan
            mgn = None
        t_next = t + 1
        want = _two_pass_step(p2, grads, m2, v2, t_next, hp["lr"], hp["betas"], hp["eps"], hp["weight_decay"],
                              hp["max_delta"], mgn, gsc, threads)
        info = opt.step(grads, max_grad_norm=mgn, grad_scale=gsc)
        if want is None:
            assert info["skipped"] is True and "late" not in opt.m
        else:
            t = t_next
            assert info["skipped"] is False and info["step"] == t
            assert (info["grad_norm"], info["clip_factor"]) == want, (i, info, want)
        for k in p2:
            assert p1[k].tobytes() == p2[k].tobytes(), (i, k)
        assert sorted(opt.m) == sorted(m2)
        for k in m2:
            assert opt.m[k].tobytes() == m2[k].tobytes() and opt.v[k].tobytes() == v2[k].tobytes(), (i, k)


# --------------------------------------------------------------- state dict
def test_state_dict_round_trip_continues_bit_identically(rng):
    params = _params(rng, SHAPES)
    grads = [_grads(rng, params) for _ in range(5)]
    opt = AdamW(params, lr=1e-2, betas=(0.8, 0.95), eps=1e-7, weight_decay=0.05, max_delta=0.005)
    opt.step({"w": grads[0]["w"]})
    opt.step(grads[1])
    bad = _grads(rng, params)
    bad["b"][0] = np.inf
    opt.step(bad)                                       # a skipped step is part of the state
    sd = opt.state_dict()
    params2 = {k: v.copy() for k, v in params.items()}
    opt2 = AdamW(params2)                               # different hyper-parameters: the state dict brings them
    opt2.load_state_dict(sd)
    assert (opt2.t, opt2.skipped) == (2, 1)
    assert (opt2.lr, tuple(opt2.betas), opt2.eps, opt2.weight_decay, opt2.max_delta) == \
        (opt.lr, tuple(opt.betas), opt.eps, opt.weight_decay, opt.max_delta)
    # the state dict is a snapshot, not a view
    sd["m"]["w"][0, 0] = 123.0
    assert opt.m["w"][0, 0] != 123.0 and opt2.m["w"][0, 0] != 123.0
    for g in grads[2:]:
        a, b = opt.step(g, max_grad_norm=2.0), opt2.step(g, max_grad_norm=2.0)
        assert a == b
    assert _snapshot(opt) == _snapshot(opt2)


# --------------------------------------------------------------- bad input
def test_bad_input(rng):
    params = _params(rng, SHAPES)
    opt = AdamW(params, lr=1e-2)
    snap = _snapshot(opt)
    good = _grads(rng, params)
    with pytest.raises(ValueError, match="nope"):
        opt.step({**good, "nope": np.zeros(3, F32)})
    with pytest.raises(ValueError, match="w"):
        opt.step({**good, "w": np.zeros((13, 7), F32)})
    with pytest.raises(TypeError, match="float32"):
        opt.step({**good, "b": good["b"].astype(F64)})
    assert opt.t == 0 and opt.skipped == 0 and _snapshot(opt) == snap


def test_load_state_dict_rejects_mismatched_moments(rng):
    params = _params(rng, SHAPES)
    opt = AdamW(params, lr=1e-2)
    opt.step(_grads(rng, params))
    sd = opt.state_dict()
    other = AdamW({"w": np.zeros((13, 7), F32), "b": np.zeros(13, F32), "emb": np.zeros((33, 5), F32)})
    with pytest.raises(ValueError):
        other.load_state_dict(sd)                        # w has another shape
    fewer = AdamW({"b": np.zeros(13, F32)})
    with pytest.raises(ValueError):
        fewer.load_state_dict(sd)                        # moments for unknown names
    assert fewer.t == 0 and fewer.m == {}
