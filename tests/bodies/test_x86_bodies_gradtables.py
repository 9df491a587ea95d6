"""The gradient-table pass's x86 bodies (csrc/gradtables/x86/avx2.c, avx512.c) bit for bit
against the generic body and a float32 numpy reference of the contract
(csrc/gradtables/gradtables.h: each sum in index order from 0, the product rounded
before its add), on odd shapes (1, 7, 33, non-multiples of 8/16/32: every tail of the
32-, 16- and 8-lane blocks), both passes (dx and s), at 1 and 2 threads.  The planes pass
(csrc/gradtables/planes.h) likewise: its VBMI body (x86/avx512_vbmi.c) against its generic body,
its reference and the gathers pass on the same tables (the end of this file).

As tests/bodies/test_x86_bodies_optim.py: the AVX-512 body runs through
lutcore._native._simde_gt (the same source compiled against SIMDe's exact emulation,
AVX2+FMA flags -- any x86-64 CPU) and natively where this CPU has AVX-512; the AVX2
body natively where this CPU has AVX2.
"""

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import gradtables as _gt
from body_runners import IS_X86, runners, twin

_simde_gt = twin("_simde_gt")

RUNNERS = runners(_gt, _simde_gt)
IDS = [r[0] for r in RUNNERS]
# (M, K, O): K covers < 8, 8..15, 16..31, 32 + every tail; M and O odd and 1
SHAPES = [(1, 1, 1), (7, 7, 3), (3, 33, 7), (5, 9, 1), (1, 47, 13), (9, 63, 5), (2, 100, 33), (33, 17, 2)]


def _ref(which, qx, qw, w, table):
    """The contract in float32, the sums in index order (plain loops over the inner index)."""
    M, K = qx.shape
    O = qw.shape[0]
    t = table.reshape(256, 256)
    a = qx.view(np.uint8).astype(np.int64)
    b = qw.astype(np.int64)
    if which == 0:
        out = np.zeros((M, K), np.float32)
        for o in range(O):
            out = out + w[:, o:o + 1] * t[a, b[o][None, :]]        # (M, K) += g[m, o] Ga[a[m, k], b[o, k]]
    else:
        out = np.zeros((O, K), np.float32)
        for m in range(M):
            out = out + w[m][:, None] * t[b, a[m][None, :]]        # (O, K) += dy[m, o] GbT[b[o, k], a[m, k]]
    return out


def _case(rng, M, K, O):
    qx = rng.integers(-128, 128, (M, K)).astype(np.int8)
    qw = rng.integers(0, 256, (O, K)).astype(np.uint8)
    qx[0, 0], qw[0, -1] = -128, 255                                # the table's corners
    w = (rng.standard_normal((M, O)) * 3).astype(np.float32)
    table = (rng.standard_normal(65536) * 100).astype(np.float32)   # asymmetric
    return qx, qw, w, table


def _run(mod, which, qx, qw, w, table, isa, nt):
    M, K = qx.shape
    O = qw.shape[0]
    out = np.full(((O if which else M), K), np.nan, np.float32)
    mod.table_pass(which, out, qx, qw, w, table, isa, nt)
    return out


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{o}" for m, k, o in SHAPES])
def test_body_matches_generic_and_reference(runner, shape):
    _, mod, isa = runner
    rng = np.random.default_rng(sum(shape) * 7 + 1)
    qx, qw, w, table = _case(rng, *shape)
    for which in (0, 1):
        ref = _ref(which, qx, qw, w, table)
        gen = _run(_gt, which, qx, qw, w, table, 0, 1)
        assert np.array_equal(gen.view(np.uint32), ref.view(np.uint32)), (which, shape)
        for nt in (1, 2):
            got = _run(mod, which, qx, qw, w, table, isa, nt)
            assert np.array_equal(got.view(np.uint32), gen.view(np.uint32)), (which, shape, nt)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_threaded_shape_same_bits(runner):
    """Above the threading threshold (M K O > 2^15): 1 and 2 threads, the generic body's bits."""
    _, mod, isa = runner
    rng = np.random.default_rng(3)
    qx, qw, w, table = _case(rng, 37, 71, 29)
    for which in (0, 1):
        gen = _run(_gt, which, qx, qw, w, table, 0, 1)
        assert np.array_equal(_run(_gt, which, qx, qw, w, table, 0, 2).view(np.uint32), gen.view(np.uint32))
        for nt in (1, 2):
            got = _run(mod, which, qx, qw, w, table, isa, nt)
            assert np.array_equal(got.view(np.uint32), gen.view(np.uint32)), (which, nt)


def test_body_names():
    assert _gt.body_names(0) == {"gradient tables (backward='table')": "generic",
                                 "gradient tables, planes (backward='table')": "generic"}
    if IS_X86:
        assert _simde_gt.body_names(2)["gradient tables (backward='table')"] == "avx512"
        assert _gt.body_names(1)["gradient tables (backward='table')"] == "avx2"
    assert "gradient tables (backward='table')" in _simd.bodies()


# ------------------------------------------------------------------ the planes pass
# csrc/gradtables/planes.h: outT[k, l] = sum_i w[i, l] * G[c[i, k]][idxT[k, l]] with G held as int16 byte
# planes; the VBMI body (x86/avx512_vbmi.c) natively where this CPU has VBMI and through the twin
# everywhere, against the generic body, a float32 numpy reference of the contract, and the gathers pass
# (lc_gt) on the same tables: the same bits.

VBMI = _simd.VBMI
PLANES_RUNNERS = ([("avx512vbmi-simde", _simde_gt, 2 | VBMI)] if _simde_gt is not None else []) + \
                 ([("avx512vbmi-native", _gt, 2 | VBMI)] if _simd._features & VBMI else [])
PLANES_IDS = [r[0] for r in PLANES_RUNNERS]
# (NI, K, L): L 1, 7, 33, 63 (partial groups), 64 (one group), 65, 100, 127 (a group + a partial one),
# 128 (a tile), 129, 200, 300 (tiles + a partial); K 1 .. 65 (units of 32 k's and their tails); NI 0, 1,
# below, at and above the body's block of 8 steps (sums continued from outT between blocks)
PLANES_SHAPES = [(1, 1, 1), (0, 3, 70), (7, 5, 33), (9, 33, 63), (17, 40, 64), (8, 7, 65), (3, 2, 100),
                 (25, 9, 127), (16, 3, 128), (12, 65, 129), (5, 4, 200), (33, 2, 300)]


def _planes_of(v):
    """planes.h's layout of int16 values v (256 rows, 256 entries): per row lo(x < 128), hi(x < 128),
    lo(x >= 128), hi(x >= 128)."""
    u = v.astype(np.int64) & 0xffff
    lo, hi = (u & 0xff).astype(np.uint8), (u >> 8).astype(np.uint8)
    return np.ascontiguousarray(np.concatenate([lo[:, :128], hi[:, :128], lo[:, 128:], hi[:, 128:]], axis=1))


def _planes_ref(c, idxT, w, T):
    """The contract in float32: (K, L) = sum over i in order of w[i, l] * T[c[i, k], idxT[k, l]]."""
    NI, K = c.shape
    out = np.zeros((K, idxT.shape[1]), np.float32)                     # (K, L)
    rows = c.view(np.uint8).astype(np.int64)                          # (NI, K)
    ent = idxT.astype(np.int64)                                       # (K, L)
    for i in range(NI):
        out = out + w[i][None, :] * T[rows[i][:, None], ent]          # (K, L) += w[i, l] G[c[i, k], x[k, l]]
    return out


def _planes_case(rng, NI, K, L, half, zeros):
    v = rng.integers(-32768, 32768, (256, 256)).astype(np.int16)     # the whole int16 range
    v[0] = 0                                                          # row 0: the code whose steps may be left out
    T = (v.astype(np.float32) * np.float32(2.0 ** -3)).astype(np.float32)       # e = -3
    c = rng.integers(-128, 128, (NI, K)).astype(np.int8)
    if zeros:
        c[rng.random((NI, K)) < 0.6] = 0
    idxT = rng.integers(0, 128 if half else 256, (K, L)).astype(np.uint8)
    if not half and idxT.size:
        idxT.flat[0], idxT.flat[-1] = 255, 128                        # the table's corners
    w = (rng.standard_normal((NI, L)) * 3).astype(np.float32)
    return _planes_of(v), np.float32(2.0 ** (-3 - 16)), T, c, idxT, w


def _planes_run(mod, isa, nt, c, idxT, w, planes, scale, skip):
    out = np.full((c.shape[1], idxT.shape[1]), np.nan, np.float32)
    mod.planes_pass(out, c, idxT, w, planes, scale, skip, isa, nt)
    return out


def _same(a, b):
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
@pytest.mark.parametrize("shape", PLANES_SHAPES, ids=[f"{n}x{k}x{l}" for n, k, l in PLANES_SHAPES])
def test_planes_body_matches_generic_and_reference(runner, shape):
    _, mod, isa = runner
    NI, K, L = shape
    for half in (False, True):
        for zeros in (False, True):
            rng = np.random.default_rng(sum(shape) * 13 + 2 * half + zeros)
            planes, scale, T, c, idxT, w = _planes_case(rng, NI, K, L, half, zeros)
            ref = _planes_ref(c, idxT, w, T)
            cs = np.asfortranarray(c).T.copy().T                     # the same codes read with strides (1, NI)
            for cc in (c, cs):
                for skip in (False, True):
                    gen = _planes_run(_gt, 0, 1, cc, idxT, w, planes, scale, skip)
                    assert _same(gen, ref), (shape, half, zeros, skip)
                    for nt in (1, 2):
                        got = _planes_run(mod, isa, nt, cc, idxT, w, planes, scale, skip)
                        print(shape, half, zeros, skip, nt, np.nanmax(np.abs(got - ref)) if got.size else 0)
                        assert _same(got, gen), (shape, half, zeros, skip, nt)


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
def test_planes_skip_keeps_nan_and_inf(runner):
    """Left-out code-0 steps would drop inf * 0 = NaN: with a non-finite weight nothing is left out."""
    _, mod, isa = runner
    rng = np.random.default_rng(41)
    planes, scale, T, c, idxT, w = _planes_case(rng, 20, 9, 130, False, True)
    c[:, 0] = 0
    w[3, 5], w[11, 100], w[17, 7] = np.inf, -np.inf, np.nan
    ref = _planes_ref(c, idxT, w, T)
    assert np.isnan(ref[0, 5]) and np.isnan(ref[0, 100])                # inf * 0 in code 0's steps
    for nt in (1, 2):
        assert _same(_planes_run(mod, isa, nt, c, idxT, w, planes, scale, True), ref)


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
@pytest.mark.parametrize("M,K,O", [(7, 9, 3), (130, 33, 70), (200, 40, 129), (333, 27, 64)])
def test_planes_equals_the_gathers_pass(runner, M, K, O):
    """dX and dW of backward="table" as planes passes (planes.h's mapping) have lc_gt's bits (which 0 / 1)."""
    _, mod, isa = runner
    rng = np.random.default_rng(M + K + O)
    va = rng.integers(-900, 900, (256, 256)).astype(np.int16)
    vb = rng.integers(-900, 900, (256, 256)).astype(np.int16)
    vb[0] = 0
    Ga, Gb = (va * np.float32(0.5)).astype(np.float32), (vb * np.float32(0.5)).astype(np.float32)   # [a, b]
    pa, pb, scale = _planes_of(np.ascontiguousarray(va.T)), _planes_of(vb), np.float32(2.0 ** -17)
    qx = rng.integers(-127, 128, (M, K)).astype(np.int8)
    qx[rng.random((M, K)) < 0.5] = 0
    qw = rng.integers(-127, 128, (O, K)).astype(np.int8)
    g, dy = (rng.standard_normal((M, O)).astype(np.float32) for _ in range(2))
    dx0 = np.empty((M, K), np.float32)
    s0 = np.empty((O, K), np.float32)
    _gt.table_pass(0, dx0, qx, qw.view(np.uint8), g, Ga.reshape(-1), 0, 1)
    _gt.table_pass(1, s0, qx, qw.view(np.uint8), dy, np.ascontiguousarray(Gb.T).reshape(-1), 0, 1)
    AT = np.ascontiguousarray(qx.T)
    for nt in (1, 2):
        dxT = _planes_run(mod, isa, nt, qw, AT.view(np.uint8), np.ascontiguousarray(g.T), pa, scale, False)
        sT = _planes_run(mod, isa, nt, AT.T, np.ascontiguousarray(qw.T).view(np.uint8), dy, pb, scale, True)
        assert _same(np.ascontiguousarray(dxT.T), dx0) and _same(np.ascontiguousarray(sT.T), s0), nt


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
@pytest.mark.parametrize("L", [64, 100, 128, 200, 256])
def test_planes_even_rows_by_magnitude(runner, L):
    """sym (LC_GTP_SYM): rows even in the entry (v[r][-x] = v[r][x], 0 < x < 127) are read by the codes'
    magnitude where a (tile, k) has no code -127 or -128; the bits of the generic body and the reference on
    even tables (codes -128, -127, 127, 0 included) and on a table that is not even (the hint is dropped)."""
    _, mod, isa = runner
    rng = np.random.default_rng(L)
    NI, K = 23, 41
    v = rng.integers(-32768, 32768, (256, 256)).astype(np.int16)
    x = np.arange(1, 127)
    v[:, (-x) & 0xff] = v[:, x]                                       # even; entries 127, -127, -128 free
    for even in (True, False):
        vv = v.copy()
        if not even:
            vv[200, 250] += 1                                         # one entry: no longer even
        T = (vv.astype(np.float32) * np.float32(0.5)).astype(np.float32)
        planes, scale = _planes_of(vv), np.float32(2.0 ** -17)
        c = rng.integers(-128, 128, (NI, K)).astype(np.int8)
        idxT = rng.integers(-126, 128, (K, L)).astype(np.int8).view(np.uint8)
        idxT[3, 5], idxT[7, L - 1], idxT[9, 0], idxT[11, 2] = 0x81, 0x80, 127, 0      # -127, -128, 127, 0
        w = rng.standard_normal((NI, L)).astype(np.float32)
        ref = _planes_ref(c, idxT, w, T)
        gen = np.full((K, L), np.nan, np.float32)
        _gt.planes_pass(gen, c, idxT, w, planes, scale, False, 0, 1, True)
        assert _same(gen, ref)
        for nt in (1, 2):
            got = np.full((K, L), np.nan, np.float32)
            mod.planes_pass(got, c, idxT, w, planes, scale, False, isa, nt, True)
            assert _same(got, ref), (even, nt)


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
@pytest.mark.parametrize("shape", [(7, 5, 33), (17, 40, 64), (25, 9, 200)], ids=["7x5x33", "17x40x64", "25x9x200"])
def test_planes_scale_one(runner, shape):
    """scale 1 (the caller's weights carry the power of two): the body skips the multiply by it; the bits of
    the generic body and the reference, G = float32(v * 65536)."""
    _, mod, isa = runner
    NI, K, L = shape
    rng = np.random.default_rng(NI + K + L)
    planes, _, _, c, idxT, w = _planes_case(rng, NI, K, L, False, True)
    p = planes.reshape(256, 4, 128).astype(np.int64)
    v = (np.concatenate([p[:, 1], p[:, 3]], 1) << 8 | np.concatenate([p[:, 0], p[:, 2]], 1)).astype(np.uint16)
    T = (v.view(np.int16).astype(np.float32) * np.float32(65536)).astype(np.float32)
    ref = _planes_ref(c, idxT, w, T)
    for skip in (False, True):
        assert _same(_planes_run(_gt, 0, 1, c, idxT, w, planes, np.float32(1.0), skip), ref)
        for nt in (1, 2):
            assert _same(_planes_run(mod, isa, nt, c, idxT, w, planes, np.float32(1.0), skip), ref), (skip, nt)


@pytest.mark.parametrize("runner", PLANES_RUNNERS, ids=PLANES_IDS)
def test_planes_lane_ranges(runner):
    """idxT and w as a range of lanes of wider arrays (rows ldi apart) and outT with rows ldo apart: the
    bits of the same lanes computed on their own."""
    _, mod, isa = runner
    rng = np.random.default_rng(8)
    planes, scale, T, c, idxT, w = _planes_case(rng, 19, 37, 300, False, True)
    full = _planes_ref(c, idxT, w, T)
    for l0, l1 in ((0, 128), (128, 300), (5, 77), (200, 201)):
        for nt in (1, 2):
            big = np.full((37, 400), -1.0, np.float32)
            out = big[:, 50:50 + l1 - l0]
            mod.planes_pass(out, c, idxT[:, l0:l1], w[:, l0:l1], planes, scale, True, isa, nt)
            assert _same(np.ascontiguousarray(out), np.ascontiguousarray(full[:, l0:l1])), (l0, l1, nt)
            assert (big[:, :50] == -1).all() and (big[:, 50 + l1 - l0:] == -1).all()
    with pytest.raises(ValueError, match="the same distance apart"):
        mod.planes_pass(np.zeros((37, 10), np.float32), c, idxT[:, :10], np.ascontiguousarray(w[:, :10]), planes,
                        scale, False, isa, 1)


def test_planes_body_names_and_refusals():
    names = _gt.body_names(0)
    assert names["gradient tables, planes (backward='table')"] == "generic" and not _gt.planes_fast(0)
    assert not _gt.planes_fast(2)                                     # AVX-512 without VBMI: the gathers
    if IS_X86:
        assert _simde_gt.body_names(2 | VBMI)["gradient tables, planes (backward='table')"] == \
            "avx512vbmi (vpermi2b planes)" and _simde_gt.planes_fast(2 | VBMI)
    p = np.zeros((256, 512), np.uint8)
    with pytest.raises(ValueError, match="shapes disagree"):
        _gt.planes_pass(np.zeros((3, 4), np.float32), np.zeros((2, 3), np.int8), np.zeros((3, 5), np.uint8),
                        np.zeros((2, 4), np.float32), p, 1.0, False, 0, 1)
    with pytest.raises(ValueError, match="outT has the wrong shape"):
        _gt.planes_pass(np.zeros((3, 5), np.float32), np.zeros((2, 3), np.int8), np.zeros((3, 4), np.uint8),
                        np.zeros((2, 4), np.float32), p, 1.0, False, 0, 1)
