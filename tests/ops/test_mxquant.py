"""The native MX quantizer (lutcore.ops.mxquant, csrc/mxquant/) against the numpy body of
lutcore.mx (``mx_quantize_numpy``: the contract's reference path) and against the oracle built
from ml_dtypes (the element formats' library) and the OCP MX spec's scale rule
(tests/reference/mxquant_ref.py; tests/units/test_mx.py holds mx_quantize, native now, to the
exact-rational oracle mx_ref.py): np.array_equal on codes and scales, on odd shapes (rows 1, 7,
33; lengths 1, 31, 32, 33, 100, and rows long enough for the bodies' runs of 8 and 16 blocks;
N-D), blocks 32, 16, 1 and 7, every element format, both axes, on data with zeros, subnormals,
huge values (saturation), NaN and +-inf in some blocks and values exactly at the rounding ties, on
every SIMD path of this CPU and at 1, 2 and 3 threads.  Also: mx_quantize dispatches to it
exactly where it should (nearest, last axis or axis 0), the room's errors, and the bits do not
move under flush-to-zero / denormals-are-zero.  The x86 bodies one by one (and the SIMDe twin)
are tests/bodies/test_x86_bodies_mxquant.py."""
import platform

import numpy as np
import pytest
import torch

import lutcore
from lutcore import _threads
from lutcore.mx import MX, MX_ELEMENTS, mx_quantize, mx_quantize_numpy
from lutcore.ops import mxquant
from lutcore.units import fp_format
from reference import mxquant_ref

BLOCKS = [32, 16, 1, 7]
ROW_SHAPES = [(1, 1), (1, 31), (7, 32), (33, 33), (7, 100), (2, 3, 47), (65,),
              (3, 565), (40, 1040)]                   # runs of 16 whole blocks; ranges split inside rows
COL_SHAPES = [(1, 1), (31, 7), (32, 33), (33, 100), (100, 17), (47, 3, 5), (1, 40)]
THREADS = (1, 2, 3)


def data(rng, shape, specials=True):
    """Normal values over many binades (a different magnitude per element), zeros of both signs,
    float32 subnormals, a few huge values, and (specials) NaN / +-inf in a few places."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))
    f = x.reshape(-1)
    f[::11] = 0.0
    f[5::13] = -0.0
    f[3::17] = rng.standard_normal(f[3::17].shape) * 2.0 ** -140          # subnormal float32
    f[7::29] = rng.choice([3e38, -3.4e38, 1e37], f[7::29].shape)           # the top binades
    x = x.astype(np.float32)
    if specials and x.size > 8:
        f = x.reshape(-1)
        f[rng.integers(0, f.size)] = np.nan
        f[rng.integers(0, f.size)] = np.inf
        f[rng.integers(0, f.size)] = -np.inf
    return x


def same(got, want, what):
    gc, gs = got
    bad = np.argwhere(gc != want.codes)
    assert not len(bad), (what, "codes", [(tuple(i), hex(gc[tuple(i)]), hex(want.codes[tuple(i)])) for i in bad[:4]])
    bad = np.argwhere(gs != want.scales)
    assert not len(bad), (what, "scales", [(tuple(i), gs[tuple(i)], want.scales[tuple(i)]) for i in bad[:4]])
    assert gc.dtype == gs.dtype == np.uint8 and gc.flags.c_contiguous and gs.flags.c_contiguous


# ------------------------------------------------------------------ against the numpy body
@pytest.mark.parametrize("fmt", MX_ELEMENTS)
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("axis", [-1, 0])
def test_matches_the_numpy_body(fmt, block, axis, simd, rng):
    for shape in ROW_SHAPES if axis == -1 else COL_SHAPES:
        x = data(rng, shape)
        want = mx_quantize_numpy(x, fmt, block, axis)
        for nt in THREADS:
            same(mxquant.mx_quantize_nearest(x, fmt, block, axis, threads=nt), want, (shape, nt))
        m = mx_quantize(x, fmt, block, axis)                    # the public path: native here
        same((m.codes, m.scales), want, (shape, "mx_quantize"))
        assert (m.fmt, m.block, m.axis, m.shape) == (want.fmt, want.block, want.axis, want.shape)


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_random_bit_patterns(fmt, simd, rng):
    """Every float32 exponent, random mantissas and signs (NaN / inf a few times), blocks of 2, 3
    and 32: the elements land anywhere below their block's maximum."""
    u = rng.integers(0, 1 << 32, (257, 96), dtype=np.uint64).astype(np.uint32)
    e = rng.integers(0, 255, u.shape).astype(np.uint32)
    x = ((u & np.uint32(0x807FFFFF)) | (e << np.uint32(23))).view(np.float32)
    x[5, 7], x[100, 3] = np.inf, np.nan
    for block in (2, 3, 32):
        for axis in (-1, 0):
            want = mx_quantize_numpy(x, fmt, block, axis)
            for nt in (1, 2):
                same(mxquant.mx_quantize_nearest(x, fmt, block, axis, threads=nt), want, (block, axis, nt))


# ------------------------------------------------------------------ against ml_dtypes and the spec
def ties(rng, fmt, nblocks, block=32, with_mask=False):
    """Blocks whose first element is 2^emax (so the scale is 1, and x is the element's value) and
    whose others sit exactly halfway between two neighbouring codes of the format, or one float32
    ulp either side of such a midpoint, with random signs -- above max normal too (saturation).
    with_mask: also the mask of the exact midpoints below max normal."""
    f = fp_format(fmt)
    v = np.unique(np.abs(f.values()[np.isfinite(f.values())]).astype(np.float64))
    v = v[v <= f.max_normal]                                                          # 0 .. max normal (int8's -2 out)
    mids = (v[1:] + v[:-1]) / 2
    mids = np.concatenate([mids, [(f.max_normal + 2.0 ** (f.emax + 1)) / 2]])          # still below 2^(emax+1)
    i = rng.integers(0, len(mids), (nblocks, block))
    pick = mids[i].astype(np.float32)                                                 # exact: few bits
    nudge = rng.integers(-1, 2, pick.shape).astype(np.int32)                          # -1, 0, +1 ulp
    pick = (pick.view(np.int32) + nudge).view(np.float32)
    pick *= rng.choice(np.array([-1, 1], np.float32), pick.shape)
    pick[:, 0] = 2.0 ** f.emax
    exact = (nudge == 0) & (i < len(mids) - 1)
    exact[:, 0] = False
    return (pick, exact) if with_mask else pick


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_matches_ml_dtypes_and_the_spec(fmt, rng):
    cases = [(data(rng, (33, 100)), 32, -1), (data(rng, (100, 33)), 32, 0), (data(rng, (7, 31)), 7, -1),
             (data(rng, (31, 7)), 7, 0), (ties(rng, fmt, 40), 32, -1),
             (np.ascontiguousarray(ties(rng, fmt, 40).T), 32, 0),
             (ties(rng, fmt, 40, 16) * np.float32(2.0 ** -130), 16, -1)]        # ties at the smallest scale
    for x, block, axis in cases:
        want_c, want_s = mxquant_ref.mx_quantize_nearest_ref(x, fmt, block, axis)
        for nt in (1, 2):
            got_c, got_s = mxquant.mx_quantize_nearest(x, fmt, block, axis, threads=nt)
            bad = np.argwhere(got_c != want_c)
            assert not len(bad), [(tuple(i), hex(got_c[tuple(i)]), hex(want_c[tuple(i)])) for i in bad[:4]]
            assert np.array_equal(got_s, want_s)


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_ties_round_to_even(fmt, simd, rng):
    """The rounding ties of the element's normal range and its subnormals, at 1, 2 and 3 threads."""
    x, exact = ties(rng, fmt, 64, with_mask=True)
    want = mx_quantize_numpy(x, fmt, 32)
    for nt in THREADS:
        same(mxquant.mx_quantize_nearest(x, fmt, 32, threads=nt), want, nt)
    f = fp_format(fmt)
    assert (want.scales == 127).all() and exact.sum() > 500
    mag = want.codes[exact].astype(np.int32)
    mag = np.abs(mag.astype(np.int8)) if f.kind == "int" else mag & ((1 << (f.bits - 1)) - 1)
    assert not (mag & 1).any()                                          # every midpoint went to the even code


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_special_blocks(fmt, simd):
    """All zero: scale 0 and signed zero codes; NaN or +-inf: 0xFF, codes 0; a subnormal maximum:
    scale 0; the largest binade and FLT_MAX: saturation to max normal."""
    f = fp_format(fmt)
    B = 8
    rows = [[0.0, -0.0], [1.0, np.nan, 2.0], [1.0, -np.inf, 2.0], [np.inf], [2.0 ** -128, -(2.0 ** -140)],
            [3.4028235e38, -3e38, 1.0], [1.0, 0.5, 0.25], [-(2.0 ** f.emax) * 1.999, 1e-30]]
    x = np.stack([np.pad(np.asarray(r, np.float32), (0, B - len(r))) for r in rows])
    want = mx_quantize_numpy(x, fmt, B)
    for axis, xx in ((-1, x), (0, np.ascontiguousarray(x.T))):
        for nt in THREADS:
            c, s = mxquant.mx_quantize_nearest(xx, fmt, B, axis, threads=nt)
            if axis == 0:
                c, s = c.T, s.T
            same((np.ascontiguousarray(c), np.ascontiguousarray(s)), want, (axis, nt))
    s = want.scales[:, 0]
    assert s[0] == 0 and s[1] == s[2] == s[3] == 0xFF and s[4] == 0 and s[5] == 254 - f.emax
    assert not want.codes[1:4].any()
    assert want.codes[0, 1] == (1 << (f.bits - 1) if f.kind == "float" else 0)          # -0 kept (int8: none)
    assert abs(f.values()[want.codes[5, 0]]) == f.max_normal                            # saturated
    assert abs(f.values()[want.codes[7, 0]]) == f.max_normal                            # rounds up, saturates


def test_padding_and_empty(rng, simd):
    x = data(rng, (4, 33), specials=False)
    c, s = mxquant.mx_quantize_nearest(x, "e4m3", 32)
    assert c.shape == (4, 64) and s.shape == (4, 2) and not c[:, 33:].any()
    c, s = mxquant.mx_quantize_nearest(np.ascontiguousarray(x.T), "e2m1", 32, axis=0)
    assert c.shape == (64, 4) and s.shape == (2, 4) and not c[33:].any()
    for shape, axis in (((3, 0), -1), ((0, 5), -1), ((0, 5), 0), ((5, 0), 0), ((0,), 0)):
        z = np.zeros(shape, np.float32)
        got, want = mxquant.mx_quantize_nearest(z, "int8", 32, axis), mx_quantize_numpy(z, "int8", 32, axis)
        assert got[0].shape == want.codes.shape and got[1].shape == want.scales.shape, shape


# ------------------------------------------------------------------ dispatch, errors, MXCSR
def test_mx_quantize_runs_natively_where_it_should(rng):
    x = data(rng, (6, 3, 40), specials=False)
    cases = [(dict(axis=-1), "mxquant.quantize_rows"), (dict(axis=0), "mxquant.quantize_cols"),
             (dict(axis=1), None), (dict(axis=-1, rounding="stochastic", seed=3), None)]
    for kw, native in cases:
        with _threads.scope(3), _threads.record() as calls:
            m = mx_quantize(x, "e4m3", 16, **kw)
        assert calls == ([(native, 3)] if native else []), (kw, calls)
        want = mx_quantize_numpy(x, "e4m3", 16, **kw)
        assert isinstance(m, MX) and np.array_equal(m.codes, want.codes) and np.array_equal(m.scales, want.scales)
        assert not m.codes.flags.writeable and not m.scales.flags.writeable
    with _threads.record() as calls:                          # other dtypes: converted, then native
        m = mx_quantize(x.astype(np.float64), "e2m1", 32)
    assert [c for c, _ in calls] == ["mxquant.quantize_rows"]
    assert np.array_equal(m.codes, mx_quantize_numpy(x, "e2m1", 32).codes)
    t = mx_quantize(np.asfortranarray(x[:, 0, :]), "int8", 32)             # non-contiguous: copied
    assert np.array_equal(t.codes, mx_quantize_numpy(x[:, 0, :], "int8", 32).codes)


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(fmt="e8m0"), ValueError, r"^fmt: expected an MX element format .*got e8m0"),
    (dict(fmt=3), TypeError, r"^fmt: expected an MX element format name"),
    (dict(block=0), ValueError, r"^block: expected an int >= 1, got 0"),
    (dict(x=np.zeros((2, 8))), TypeError, r"^x: expected a float32 ndarray .*got float64"),
    (dict(x=[1.0, 2.0]), TypeError, r"^x: expected a float32 ndarray .*got list"),
    (dict(x=np.ones((), np.float32)), ValueError, r"^x: expected an array of at least 1 dim"),
    (dict(x=np.zeros((2, 3, 8), np.float32), axis=1), ValueError, r"^axis: the native quantizer runs along the last "
                                                                  r"axis or axis 0 .*got 1 of a 3-D array"),
    (dict(axis=2), ValueError, r"^axis: expected an int in \[-2, 1\], got 2"),
])
def test_room_errors_name_the_argument(kw, exc, msg):
    args = {"x": np.zeros((2, 8), np.float32), "fmt": "e4m3", **kw}
    with pytest.raises(exc, match=msg):
        mxquant.mx_quantize_nearest(**args)


def test_flush_to_zero_and_denormals_are_zero_change_no_bit(rng, simd):
    """torch.set_flush_denormal(True) sets FTZ and DAZ in the calling thread's MXCSR: a block of
    float32 subnormals (scaled up by 2^127) still gives its codes."""
    x = (rng.standard_normal((16, 64)) * 2.0 ** -135).astype(np.float32)
    x[::3] *= np.float32(2.0 ** 100)
    xt = np.ascontiguousarray(x.T)
    want = {f: mx_quantize_numpy(x, f, 32) for f in MX_ELEMENTS}
    want_t = {f: mx_quantize_numpy(xt, f, 32, axis=0) for f in MX_ELEMENTS}
    assert all(want[f].codes.any() for f in MX_ELEMENTS)
    ftz = torch.set_flush_denormal(True)          # False only where the CPU has no such mode (not x86-64)
    assert ftz or platform.machine().lower() not in ("x86_64", "amd64")
    try:
        for f in MX_ELEMENTS:
            same(mxquant.mx_quantize_nearest(x, f, 32, threads=1), want[f], f)
            same(mxquant.mx_quantize_nearest(xt, f, 32, axis=0, threads=1), want_t[f], f)
    finally:
        torch.set_flush_denormal(False)


def test_body_names():
    names = lutcore._simd.bodies()
    assert names["mx_quantize (nearest)"] in ("generic", "avx2", "avx512")
    assert lutcore._simd.bodies("generic")["mx_quantize (nearest)"] == "generic"
