"""The selective scan's AVX-512 body (csrc/scan/x86/avx512.c: scan_impl.h at 16 lanes,
one zmm per 16-channel unit) bit for bit against the generic and AVX2 bodies, and
close to the float64 numpy oracle, forward and backward, both discretizations,
every option (D, z, delta_bias, delta_softplus, initial_state, last state, the
saved chunk states and their length), on odd shapes (D 1, 7, 15, 17, 33 — below,
at, across 16-lane units — and 137: several spans and backward groups; L 1, 7, 33
and 130: across chunks; N 1, 5, 16; batch 1 and 2), at 1 and 2 threads; and the
exp range check per unit (a unit whose dt A leaves the fast range, a NaN).

As tests/bodies/test_x86_bodies.py: the body runs through lutcore._native._simde_scan
(the same source compiled against SIMDe's exact emulation with the AVX2 flags —
any x86-64 CPU) and natively where this CPU has AVX-512.  The kernels are driven
through lutcore.ops.scan (its validation and buffers) with the module and the isa
argument swapped in.
"""
import platform
from types import SimpleNamespace

import numpy as np
import pytest

import lutcore.ops.scan as scan_ops
from lutcore import _simd
from lutcore._native import scan as _m
from reference.asserts import assert_bits_equal
from reference.scan_ref import selective_scan_backward_ref, selective_scan_ref
from test_scan import make_inputs as _scan_inputs

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_scan  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_scan = None

GENERIC, AVX2, AVX512 = 0, 1, 2
RUNNERS = ([("avx512-simde", _simde_scan)] if _simde_scan is not None else []) + \
          ([("avx512-native", _m)] if _simd._features & 2 else [])
IDS = [r[0] for r in RUNNERS]
HAVE_AVX2 = bool(_simd._features & 1)
SHAPES = [(1, 1, 1, 1), (2, 7, 7, 16), (1, 33, 15, 5), (2, 33, 17, 1), (1, 7, 33, 16), (2, 1, 33, 5),
          (1, 33, 1, 16), (2, 7, 15, 1), (2, 130, 137, 3)]     # batch, L, D, N
OPTS = {   # D, z, delta_bias, initial_state, delta_softplus; chunk (None: the default 64)
    "all": dict(D=1, z=1, delta_bias=1, initial_state=1, softplus=1, chunk=None),
    "none": dict(D=0, z=0, delta_bias=0, initial_state=0, softplus=1, chunk=None),
    "noz-chunk5": dict(D=1, z=0, delta_bias=1, initial_state=1, softplus=1, chunk=5),
    "nosoftplus-chunk3": dict(D=1, z=1, delta_bias=0, initial_state=0, softplus=0, chunk=3),
}
F32_REL = 1e-5          # norm-wise relative error against the float64 oracle (tests/ops/test_scan.py)
F32_GRAD_REL = 1e-4


def make_inputs(rng, batch, L, Dm, N, opts):
    """tests/ops/test_scan.py's Mamba-like inputs, float32."""
    return _scan_inputs(rng, batch, L, Dm, N, np.float32, opts)


def run(mod, isa, kw, disc, dy, threads, chunk=None):
    """Forward (y, last state; with and without the saved context) and every gradient,
    through lutcore.ops.scan with kernel module `mod` and isa argument `isa`."""
    saved = scan_ops._scan, scan_ops._simd
    scan_ops._scan, scan_ops._simd = mod, SimpleNamespace(isa=lambda: isa)
    try:
        y, last = scan_ops.selective_scan(**kw, discretization=disc, return_last_state=True, threads=threads)
        extra = {} if chunk is None else {"chunk": chunk}
        y2, _, ctx = scan_ops.selective_scan_forward(**kw, discretization=disc, threads=threads, **extra)
        g = scan_ops.selective_scan_backward(dy, ctx=ctx, threads=threads)
    finally:
        scan_ops._scan, scan_ops._simd = saved
    out = {"y": y, "last_state": last, "y (saved)": y2}
    out.update({"d" + k: v for k, v in g.items()})
    return out


def rel_err(got, want):
    want = np.asarray(want, np.float64)
    nrm = float(np.linalg.norm(want))
    diff = float(np.linalg.norm(got.astype(np.float64) - want))
    return diff / nrm if nrm > 0 else diff


def test_body_names():
    assert _m.body_names(AVX512)["selective scan"] == ("avx512" if IS_X86 else "generic")
    assert _m.body_names(AVX2)["selective scan"] == ("avx2" if IS_X86 else "generic")
    assert _m.body_names(GENERIC)["selective scan"] == "generic"
    if IS_X86:
        assert _simde_scan.body_names(AVX512)["selective scan"] == "avx512"
    if _simd._features & 2:
        assert _simd.bodies("avx512")["selective scan"] == "avx512"
        assert _simd.bodies("avx512bw")["selective scan"] == "avx512"


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("opt", list(OPTS))
@pytest.mark.parametrize("disc", ["zoh", "simplified"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_scan_body(rng, runner, shape, disc, opt):
    label, mod = runner
    opts = OPTS[opt]
    kw = make_inputs(rng, *shape, opts)
    dy = rng.standard_normal(kw["u"].shape).astype(np.float32)
    want = run(_m, GENERIC, kw, disc, dy, 1, opts["chunk"])
    if HAVE_AVX2:
        for name, v in run(_m, AVX2, kw, disc, dy, 2, opts["chunk"]).items():
            assert_bits_equal(f"{name} generic vs avx2", want[name], v)
    for threads in (1, 2):
        got = run(mod, AVX512, kw, disc, dy, threads, opts["chunk"])
        assert set(got) == set(want)
        for name in sorted(want):
            assert_bits_equal(f"{name} generic vs {label}, threads {threads}", want[name], got[name])
    # and the bits are right: close to the float64 oracle
    ref_kw = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    y_ref, last_ref = selective_scan_ref(**ref_kw, discretization=disc, return_last_state=True)
    assert rel_err(got["y"], y_ref) <= F32_REL
    assert rel_err(got["last_state"], last_ref) <= F32_REL
    g_ref = selective_scan_backward_ref(dy.astype(np.float64), **ref_kw, discretization=disc)
    assert {"d" + k for k in g_ref} == {k for k in got if k.startswith("d")}
    for k, v in g_ref.items():
        assert rel_err(got["d" + k], v) <= F32_GRAD_REL, k


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("disc", ["zoh", "simplified"])
def test_exp_range_per_unit(rng, runner, disc):
    """One unit whose dt A leaves exp's fast range (underflow to 0; softplus past its
    threshold), one with a NaN from step 33 on, the rest ordinary: the generic bits,
    forward and backward (the careful exp paths at 16 lanes)."""
    label, mod = runner
    kw = make_inputs(rng, 2, 70, 150, 3, OPTS["all"])   # 10 units: two spans, two groups, the last unit partial
    kw["delta"][:, 5:9, 20] = 60.0
    kw["A"][20] = -50.0
    kw["delta"][1, 33, 100] = np.nan
    dy = rng.standard_normal(kw["u"].shape).astype(np.float32)
    want = run(_m, GENERIC, kw, disc, dy, 1)
    got = run(mod, AVX512, kw, disc, dy, 2)
    assert np.all(np.isnan(got["y"][1, 33:, 100])) and not np.any(np.isnan(got["y"][0]))
    for name in sorted(want):
        assert_bits_equal(f"{name} generic vs {label}", want[name], got[name])
