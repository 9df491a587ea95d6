"""AdamW's AVX-512 body (csrc/optim/x86/avx512.c) against a float32 numpy oracle of the
contract (optim.h: the same operations in the same order, no FMA) and bit for bit
against the generic body, on odd lengths (every tail below a vector, several
chunks), with non-finite steps, the trust-region clamp and gradient scaling, at 1
and 2 threads; one tensor and the multi-tensor entry point.

As tests/bodies/test_x86_bodies.py: the body runs through lutcore._native._simde_optim
(the same source compiled against SIMDe's exact emulation, AVX2+FMA flags — any
x86-64 CPU) and natively where this CPU has AVX-512.
"""

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import optim as _o
from body_runners import IS_X86, twin

_simde_optim = twin("_simde_optim")

AVX512 = 2
RUNNERS = ([("avx512-simde", _simde_optim)] if _simde_optim is not None else []) + \
          ([("avx512-native", _o)] if _simd._features & 2 else [])
IDS = [r[0] for r in RUNNERS]
LENGTHS = [1, 7, 15, 16, 17, 33, 1000, 2 * 32768 + 21]
F = np.float32


def adamw_oracle(p, g, m, v, b1, b2, eps, lr, wd, md, bc1, bc2, gs):
    """optim.h's contract in float32 numpy, operation by operation (constants formed in double)."""
    b1f, b2f, c1, c2 = F(b1), F(b2), F(1.0 - b1), F(1.0 - b2)
    ss, isb, dec, mdf, gsf, epsf = F(lr / bc1), F(1.0 / np.sqrt(bc2)), F(1.0 - lr * wd), F(md), F(gs), F(eps)
    with np.errstate(all="ignore"):
        gg = g * gsf
        m2 = b1f * m + c1 * gg
        v2 = b2f * v + c2 * (gg * gg)
        s = (m2 * ss) / (np.sqrt(v2) * isb + epsf)
        s[~(np.abs(s) <= F(3.40282347e38))] = 0
        if md > 0:
            s = np.minimum(np.maximum(s, -mdf), mdf)
        return p * dec - s, m2, v2


def state(rng, n):
    p = rng.standard_normal(n).astype(F)
    g = (rng.standard_normal(n) * 10).astype(F)
    m = (rng.standard_normal(n) * 0.1).astype(F)
    v = np.abs(rng.standard_normal(n) * 0.01).astype(F)
    g[::17] = 0
    v[::17] = 0                               # 0/eps steps
    g[3::29] = np.inf                         # non-finite steps -> 0
    g[5::31] = np.nan
    g[7::37] = F(3e38)                        # overflowing square
    return p, g, m, v


HP = [dict(b1=0.9, b2=0.999, eps=1e-8, lr=1e-3, wd=0.01, md=0.0, bc1=0.1, bc2=0.001, gs=1.0),
      dict(b1=0.8, b2=0.95, eps=1e-6, lr=3e-2, wd=0.1, md=1e-3, bc1=0.5, bc2=0.3, gs=0.37),
      dict(b1=0.0, b2=0.0, eps=0.0, lr=1.0, wd=0.0, md=0.5, bc1=1.0, bc2=1.0, gs=2.0)]


def bits(a):
    return a.view(np.uint32)


def test_simde_extension_present_on_x86():
    if not IS_X86:
        pytest.skip("SIMDe copies are built for x86-64 only (no AVX-512 elsewhere)")
    assert _simde_optim.body_names(AVX512) == {"AdamW": "avx512"}
    assert _o.body_names(1) == {"AdamW": "avx2"} and _o.body_names(0) == {"AdamW": "generic"}


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("hp", range(len(HP)))
def test_adamw_body(rng, runner, n, hp):
    label, mod = runner
    h = HP[hp]
    args = (h["b1"], h["b2"], h["eps"], h["lr"], h["wd"], h["md"], h["bc1"], h["bc2"], h["gs"])
    p, g, m, v = state(rng, n)
    rp, rm, rv = adamw_oracle(p, g, m, v, *args)
    wp, wm, wv = p.copy(), m.copy(), v.copy()
    _o.adamw(wp, g, wm, wv, *args, 0, 1)                       # the generic body
    for a, b in ((wp, rp), (wm, rm), (wv, rv)):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(bits(a)[~np.isnan(a)], bits(b)[~np.isnan(b)])
    for threads in (1, 2):
        gp, gm, gv = p.copy(), m.copy(), v.copy()
        mod.adamw(gp, g, gm, gv, *args, AVX512, threads)
        for a, b, what in ((gp, wp, "p"), (gm, wm, "m"), (gv, wv, "v")):
            assert np.array_equal(bits(a), bits(b)), (label, what, threads, np.flatnonzero(bits(a) != bits(b))[:5])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_adamw_multi_body(rng, runner):
    label, mod = runner
    args = tuple(HP[1][k] for k in ("b1", "b2", "eps", "lr", "wd", "md", "bc1", "bc2", "gs"))
    sizes = [1, 17, 32768 + 3, 100]
    states = [state(rng, n) for n in sizes]
    want = [[a.copy() for a in st] for st in states]
    got = [[a.copy() for a in st] for st in states]
    for s in want:
        _o.adamw(s[0], s[1], s[2], s[3], *args, 0, 1)
    mod.adamw_multi([s[0] for s in got], [s[1] for s in got], [s[2] for s in got], [s[3] for s in got],
                    *args, AVX512, 2)
    for w, gt in zip(want, got):
        for i in (0, 2, 3):
            assert np.array_equal(bits(gt[i]), bits(w[i])), label
