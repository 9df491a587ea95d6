"""The MX GEMM (lutcore.ops.mxgemm, csrc/mxgemm/): both accumulations bit for bit against the
integer oracle (tests/reference/mxgemm_ref.py) on odd shapes (M, N, K in 1, 7, 33, 65; K not a
multiple of the block; blocks 32, 16, 48 and 300 — the bodies' chunks), every MX element format
and a mixed pair, the exact table and approximate ones (low mantissa bits cleared: one part, rows
reduced; a random factor per product: two parts; random values of the grid: no reduction; a
table whose T[0, 0] is not 0), NaN/inf inputs, NaN and inf codes, NaN scales, subnormal and
overflowing results; the same bits at 1 and 2 threads and on every SIMD path; the exact mode
against float64 dequantize @ dequantize where that is exact, and against torchao's MX emulation
within float32 rounding; the routes each table takes; errors naming the argument.
(tests/bodies/test_x86_bodies_mxgemm.py holds every body, SIMDe twin included, to the generic one.)"""
import warnings

import numpy as np
import pytest

import lutcore
from lutcore.mx import MX, mx_quantize
from lutcore.ops.mxgemm import MXProducts, Narrow, mx_gemm
from lutcore.units import fp_format
from reference.mxgemm_ref import mx_gemm_exact_ref, mx_gemm_narrow_ref, round_bits

FORMATS = ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8"]
PAIRS = [(f, f) for f in FORMATS] + [("e4m3", "e5m2"), ("e2m1", "e4m3")]
# (M, K, N): 1, 7, 33, 65 and K across block boundaries
SHAPES = [(1, 1, 1), (7, 65, 33), (33, 7, 7), (65, 33, 1), (1, 100, 65), (33, 65, 7)]
# ours against float64 dequantize @ dequantize, over blocks: per block one rounding of the exact
# sum, one of the scaling, one float32 addition (relative to sum |a| |b|)
EXACT_VS_F64 = 2.0 ** -22
# torchao's emulation (float32 matmul of the dequantized operands) against ours: its float32
# partial sums round K times (relative to sum |a| |b|)
TAO_PER_K = 2.0 ** -23


def bits(y):
    return np.ascontiguousarray(y, np.float32).view(np.uint32)


def assert_bits(got, want, what=""):
    bad = np.argwhere(bits(got) != bits(want))
    assert not len(bad), (what, [(tuple(i), got[tuple(i)], want[tuple(i)]) for i in bad[:4]])


def exact_table(fa, fb):
    with np.errstate(all="ignore"):
        return np.multiply.outer(fp_format(fa).values(), fp_format(fb).values())


def cleared(t, keep=2):
    """Each finite product with only its top keep mantissa bits (sign-symmetric, exponent-separable)."""
    u = t.view(np.uint32) & np.uint32((0xFFFFFFFF << (23 - keep)) & 0xFFFFFFFF)
    return np.where(np.isfinite(t), u.view(np.float32), t).astype(np.float32)


def factor(t, rng):
    """Each finite product times its own random factor in [0.5, 2), rounded to float32."""
    r = rng.uniform(0.5, 2.0, t.shape)
    with np.errstate(all="ignore"):
        return np.where(np.isfinite(t), (t * r).astype(np.float32), t).astype(np.float32)


def grid(t, rng):
    """Random values of the exact table's own grid at random places (random signs)."""
    fin = np.isfinite(t)
    vals = np.abs(t[fin])
    out = rng.choice(vals, t.shape) * rng.choice([-1.0, 1.0], t.shape)
    return np.where(fin, out, t).astype(np.float32)


def tables(fa, fb, rng):
    t = exact_table(fa, fb)
    out = {"exact": t, "cleared": cleared(t), "factor": factor(t, rng), "grid": grid(t, rng)}
    off = out["cleared"].copy()
    off[0, 0] = np.float32(0.75)                       # T[0, 0] != 0: the padding still adds nothing
    out["t00"] = off
    return out


def operands(rng, M, K, N, fa, fb, block, spread=6):
    x = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread, (M, 1)))).astype(np.float32)
    w = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread, (1, N)))).astype(np.float32)
    return mx_quantize(x, fa, block, axis=-1), mx_quantize(w, fb, block, axis=0)


def ref_exact(a, b, t):
    return mx_gemm_exact_ref(a.codes, a.scales, b.codes, b.scales, t, a.shape[1], a.block)


def ref_narrow(a, b, t, n):
    return mx_gemm_narrow_ref(a.codes, a.scales, b.codes, b.scales, t, a.shape[1], a.block, n.mbits, n.promote,
                              n.rounding)


def every_path(a, b, p, accumulate="exact"):
    """The result on every SIMD path at 1 and 2 threads, all the same bits; returned once."""
    prev = lutcore.get_simd()
    try:
        ys = []
        for simd in lutcore.available_simd():
            lutcore.set_simd(simd)
            for nt in (1, 2):
                ys.append((simd, nt, mx_gemm(a, b, p, accumulate, threads=nt)))
    finally:
        lutcore.set_simd(prev)
    for simd, nt, y in ys[1:]:
        assert_bits(y, ys[0][2], (simd, nt))
    return ys[0][2]


# ------------------------------------------------------------------ the oracle's rounding, checked
def test_oracle_rounding_against_numpy(rng):
    """round_bits to 24 bits is numpy's float64 -> float32 conversion (nearest even, subnormals,
    overflow to inf; its zeros are +0); toward zero it is the float32 neighbour at or below |x|."""
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 140, 20000).astype(np.float64))
    x[:50] = np.float64(np.float32(3.4e38)) * (1 + np.arange(50) * 1e-9)          # near and past the top
    x[50:60] = np.ldexp(np.arange(1, 11, dtype=np.float64) + 0.5, -150)           # subnormal ties
    for v in x:
        num, den = float(v).as_integer_ratio()
        e = -(den.bit_length() - 1)
        m, q = round_bits(num, e, 24)
        got = np.float32(m if isinstance(m, float) else np.ldexp(m, q))
        with np.errstate(over="ignore"):
            assert got == np.float32(v), v                               # (a zero is +0 in the oracle)
        m, q = round_bits(num, e, 24, "truncate")
        t = abs(np.ldexp(m, q))
        with np.errstate(over="ignore"):
            up = np.nextafter(np.float32(t), np.float32(np.inf))
        assert t <= abs(v) and (up > abs(v) or t == np.float32(np.finfo(np.float32).max)), v


# ------------------------------------------------------------------ exact mode against the oracle
@pytest.mark.parametrize("fa,fb", PAIRS, ids=[f"{a}x{b}" for a, b in PAIRS])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_exact_matches_the_reference(fa, fb, shape, rng):
    M, K, N = shape
    a, b = operands(rng, M, K, N, fa, fb, 32)
    for name, t in tables(fa, fb, rng).items():
        p = MXProducts(t, fa, fb)
        y = every_path(a, b, p)
        assert y.shape == (M, N) and y.dtype == np.float32
        assert_bits(y, ref_exact(a, b, t), (name, p.route(32)))


@pytest.mark.parametrize("block", [16, 48, 300])
@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("int8", "e2m1")])
def test_exact_other_blocks(block, fa, fb, rng):
    """Blocks below the row tables' 32, across it (two chunks a block) and beyond the FMA tile's 256."""
    K = {16: 70, 48: 100, 300: 333}[block]
    a, b = operands(rng, 5, K, 34, fa, fb, block)
    for name, t in tables(fa, fb, rng).items():
        p = MXProducts(t, fa, fb)
        assert_bits(every_path(a, b, p), ref_exact(a, b, t), (name, block, p.route(block)))


def test_block_of_one(rng):
    a, b = operands(rng, 3, 5, 4, "e4m3", "e4m3", 1)
    for name, t in tables("e4m3", "e4m3", rng).items():
        assert_bits(every_path(a, b, MXProducts(t, "e4m3", "e4m3")), ref_exact(a, b, t), name)


# ------------------------------------------------------------------ narrow accumulator
NARROWS = [Narrow(13, 128), Narrow(13), Narrow(13, 128, "truncate"), Narrow(13, None, "truncate"), Narrow(1, 5),
           Narrow(23, 7, "truncate"), Narrow(4, 3)]


@pytest.mark.parametrize("n", NARROWS, ids=[f"m{n.mbits}p{n.promote}{n.rounding[0]}" for n in NARROWS])
@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("int8", "int8"), ("e2m1", "e3m2")])
def test_narrow_matches_the_reference(n, fa, fb, rng):
    a, b = operands(rng, 7, 300, 5, fa, fb, 32, spread=10)
    for name, t in tables(fa, fb, rng).items():
        if name == "grid":
            continue
        assert_bits(every_path(a, b, MXProducts(t, fa, fb), n), ref_narrow(a, b, t, n), (name, n))


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 65, 7), (7, 33, 33)], ids=str)
def test_narrow_shapes_and_blocks(shape, rng):
    M, K, N = shape
    for block in (32, 16):
        a, b = operands(rng, M, K, N, "e4m3", "e4m3", block)
        t = cleared(exact_table("e4m3", "e4m3"))
        for n in (Narrow(13, 128), Narrow(13, 16, "truncate")):
            assert_bits(every_path(a, b, MXProducts(t, "e4m3", "e4m3"), n), ref_narrow(a, b, t, n), (block, n))


def test_narrow_with_23_bits_and_no_promotion_is_not_the_exact_mode(rng):
    """A float32-wide register rounds every product's addition: it differs from the exact sums."""
    a, b = operands(rng, 16, 256, 16, "e4m3", "e4m3", 32, spread=12)
    t = exact_table("e4m3", "e4m3")
    y23 = mx_gemm(a, b, t, Narrow(23))
    ye = mx_gemm(a, b, t)
    assert not np.array_equal(y23, ye)
    np.testing.assert_allclose(y23, ye, rtol=1e-4, atol=1e-4 * np.abs(ye).max())


def test_narrow_promotion_loses_less(rng):
    """DeepSeek-V3's point: a 14-bit register promoted every 128 products is closer to the exact
    sum than one never promoted (K = 4096)."""
    a, b = operands(rng, 8, 4096, 8, "e4m3", "e4m3", 32, spread=1)
    t = exact_table("e4m3", "e4m3")
    ye = mx_gemm(a, b, t).astype(np.float64)
    e_never = np.abs(mx_gemm(a, b, t, Narrow(13)) - ye).mean()
    e_128 = np.abs(mx_gemm(a, b, t, Narrow(13, 128)) - ye).mean()
    assert e_128 < e_never / 4, (e_128, e_never)


# ------------------------------------------------------------------ specials, subnormals, overflow
def _hand(codes, scales, fmt, block, axis, shape):
    return MX(np.ascontiguousarray(codes, np.uint8), np.ascontiguousarray(scales, np.uint8), fmt, block, axis, shape)


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")])
def test_nan_inf_codes_and_nan_scales(fa, fb, rng):
    M, K, N = 9, 70, 11
    a, b = operands(rng, M, K, N, fa, fb, 32)
    ac, bc = a.codes.copy(), b.codes.copy()
    sa, sb = a.scales.copy(), b.scales.copy()
    ffa, ffb = fp_format(fa), fp_format(fb)
    ac[0, 3] = ffa.nan_codes[0]                                  # a NaN element: row 0, block 0
    bc[40, 2] = ffb.nan_codes[-1]                                # column 2, block 1
    if ffb.inf_codes:
        bc[5, 4], bc[6, 4] = ffb.inf_codes                       # +inf and -inf in one block: NaN there
        bc[70 - 1, 5] = ffb.inf_codes[0]                         # +inf, last block
    if ffa.inf_codes:
        ac[3, 10] = ffa.inf_codes[1]
    sa[4, 1] = 0xFF                                              # NaN scales
    sb[2, 7] = 0xFF
    a2 = _hand(ac, sa, fa, 32, 1, a.shape)
    b2 = _hand(bc, sb, fb, 32, 0, b.shape)
    for name, t in tables(fa, fb, rng).items():
        p = MXProducts(t, fa, fb)
        y = every_path(a2, b2, p)
        want = ref_exact(a2, b2, t)
        assert_bits(y, want, name)
        assert np.isnan(y[0]).all() and np.isnan(y[4]).all() and np.isnan(y[:, 7]).all()
        assert (bits(y)[np.isnan(y)] == 0x7FC00000).all()       # the canonical NaN
        for n in (Narrow(13, 128), Narrow(5, None, "truncate")):
            assert_bits(every_path(a2, b2, p, n), ref_narrow(a2, b2, t, n), (name, n))


def test_nan_and_inf_inputs_make_nan_blocks(rng):
    x = rng.standard_normal((5, 70)).astype(np.float32)
    w = rng.standard_normal((70, 6)).astype(np.float32)
    x[1, 40], x[3, 2], w[10, 4] = np.nan, np.inf, -np.inf
    a, b = mx_quantize(x, "e4m3", 32), mx_quantize(w, "e4m3", 32, axis=0)
    t = exact_table("e4m3", "e4m3")
    y = every_path(a, b, MXProducts(t, "e4m3", "e4m3"))
    assert_bits(y, ref_exact(a, b, t))
    assert np.isnan(y[1]).all() and np.isnan(y[3]).all() and np.isnan(y[:, 4]).all()
    assert np.isfinite(np.delete(np.delete(y, [1, 3], 0), 4, 1)).all()


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e2m1", "int8")])
def test_subnormal_and_overflowing_results(fa, fb, rng):
    """Tiny scales: products times 2^-254 .. 2^-214 (zeros) and scales putting the products near
    2^-140 (subnormal results, rounded to nearest even); huge ones: 2^200 .. 2^254 (inf)."""
    M, K, N = 7, 70, 9
    a, b = operands(rng, M, K, N, fa, fb, 32)
    sub = 127 + (-140 - fp_format(fa).emax - fp_format(fb).emax) // 2 - 5      # products near 2^-140
    for lo, hi in ((0, 20), (sub, sub + 10), (227, 254)):
        sa = rng.integers(lo, hi + 1, a.scales.shape).astype(np.uint8)
        sb = rng.integers(lo, hi + 1, b.scales.shape).astype(np.uint8)
        a2, b2 = _hand(a.codes, sa, fa, 32, 1, a.shape), _hand(b.codes, sb, fb, 32, 0, b.shape)
        for name, t in tables(fa, fb, rng).items():
            p = MXProducts(t, fa, fb)
            y = every_path(a2, b2, p)
            assert_bits(y, ref_exact(a2, b2, t), (lo, name))
            for n in (Narrow(13, 128), Narrow(10, None, "truncate")):
                assert_bits(every_path(a2, b2, p, n), ref_narrow(a2, b2, t, n), (lo, name, n))
        if lo == sub:
            ya = np.abs(every_path(a2, b2, exact_table(fa, fb)))
            assert ((ya > 0) & (ya < np.finfo(np.float32).tiny)).any()      # subnormal results happen
        if lo == 227:
            assert np.isinf(every_path(a2, b2, exact_table(fa, fb))).any()


def test_zeros_are_positive(rng):
    a, b = operands(rng, 4, 40, 4, "e4m3", "e4m3", 32)
    b0 = _hand(np.zeros_like(b.codes) | 0x80, b.scales, "e4m3", 32, 0, b.shape)   # every element -0
    for acc in ("exact", Narrow(13, 8, "truncate")):
        y = mx_gemm(a, b0, exact_table("e4m3", "e4m3"), acc)
        assert (bits(y) == 0).all()


# ------------------------------------------------------------------ the routes
def test_routes():
    fma = {f: MXProducts(exact_table(f, f), f, f).route(32) for f in FORMATS}
    for f in ("e4m3", "e2m3", "e3m2", "e2m1", "int8"):
        assert fma[f].startswith("fma:"), (f, fma[f])
    assert fma["e5m2"].startswith("table: lookups, two float64 parts"), fma["e5m2"]
    assert MXProducts(exact_table("e4m3", "e5m2"), "e4m3", "e5m2").route(32).startswith("table: lookups, two")
    c = MXProducts(cleared(exact_table("e4m3", "e4m3")), "e4m3", "e4m3")
    assert c.route(32).startswith("table: lookups, one float64 part") and "hi32" in c.route(32)
    assert c.reduced_rows <= 16                                   # rows equal up to sign and exponent
    f = MXProducts(factor(exact_table("e4m3", "e4m3"), np.random.default_rng(0)), "e4m3", "e4m3")
    assert f.route(32).startswith("table: lookups, two float64 parts") and "f32" in f.route(32)
    # one part for small blocks, two for big ones
    assert MXProducts(exact_table("e4m3", "e5m2"), "e4m3", "e5m2").route(4).startswith("fma:")


def test_a_table_too_wide_for_two_parts_is_refused(rng):
    t = exact_table("e4m3", "e4m3").copy()
    t[1, 1], t[2, 2] = np.float32(2.0 ** 120), np.float32(2.0 ** -140)
    p = MXProducts(t, "e4m3", "e4m3")
    with pytest.raises(ValueError, match=r"^products: cannot be summed exactly in blocks of 32: .*2\^-140"):
        p.route(32)
    a, b = operands(rng, 2, 8, 2, "e4m3", "e4m3", 32)
    with pytest.raises(ValueError, match=r"^products: cannot be summed exactly"):
        mx_gemm(a, b, p)
    assert p.route(1).startswith("table")                         # a block of one product always can


# ------------------------------------------------------------------ against float64 and torchao
@pytest.mark.parametrize("f", ["e4m3", "e2m3", "e3m2", "e2m1", "int8"])
def test_exact_is_fl32_of_the_float64_product_within_one_block(f, rng):
    """One block (K <= 32), one-part tables, no subnormal results: y = fl32(exact dot product),
    which a float64 matmul of the dequantized operands computes exactly."""
    a, b = operands(rng, 33, 29, 17, f, f, 32, spread=3)
    y = every_path(a, b, exact_table(f, f))
    want = (a.dequantize().astype(np.float64) @ b.dequantize().astype(np.float64)).astype(np.float32)
    assert_bits(y, want)


@pytest.mark.parametrize("f", FORMATS)
def test_exact_against_float64_over_blocks(f, rng):
    a, b = operands(rng, 33, 300, 17, f, f, 32, spread=3)
    y = mx_gemm(a, b, exact_table(f, f)).astype(np.float64)
    ad, bd = a.dequantize().astype(np.float64), b.dequantize().astype(np.float64)
    err = np.abs(y - ad @ bd) / (np.abs(ad) @ np.abs(bd))
    print(f, "max relative error", err.max())
    assert err.max() <= EXACT_VS_F64 * a.nblocks


@pytest.fixture(scope="module")
def tao():
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats import constants as C
        from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode
    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m3": C.DTYPE_FP6_E2M3,
              "e3m2": C.DTYPE_FP6_E3M2, "e2m1": torch.float4_e2m1fn_x2}
    return torch, MXTensor, ScaleCalculationMode, dtypes


@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e2m3", "e2m3"), ("e3m2", "e3m2"),
                                   ("e2m1", "e2m1"), ("e4m3", "e5m2")])
def test_torchao_mx_emulation(tao, fa, fb, rng):
    """torchao's MX matmul emulation (its to_mx, FLOOR scales; dequantize; matmul): with exact
    products (its dequantized operands multiplied in float64, one block) ours is the same bits;
    its own emulation (a float32 matmul of the dequantized operands) differs from ours by the
    rounding of its float32 partial sums (ours: each block's exact sum rounded once, then scaled
    and added in float32 — with one block, fl32 of the exact dot product).  torchao has no MXINT8
    and no padding (K a multiple of 32 here); its codes and scales are lutcore's for these data
    (tests/units/test_mx.py pins the cases where its FLOOR mode differs)."""
    torch, MXTensor, mode, dtypes = tao
    M, N = 24, 20
    for K in (32, 128):
        x = (rng.standard_normal((M, K)) * 3).astype(np.float32)
        w = (rng.standard_normal((N, K)) * 3).astype(np.float32)
        ta = MXTensor.to_mx(torch.from_numpy(x), dtypes[fa], 32, mode.FLOOR)
        tb = MXTensor.to_mx(torch.from_numpy(w), dtypes[fb], 32, mode.FLOOR)
        da, db = ta.dequantize(torch.float32), tb.dequantize(torch.float32)          # (M, K), (N, K)
        a, b = mx_quantize(x, fa, 32), mx_quantize(w.T.copy(), fb, 32, axis=0)
        assert np.array_equal(a.dequantize(), da.numpy()) and np.array_equal(b.dequantize(), db.numpy().T)
        y = mx_gemm(a, b, exact_table(fa, fb))
        exact64 = (da.double() @ db.double().T).numpy()
        mag = (da.abs().double() @ db.abs().double().T).numpy()
        if K == 32:
            assert_bits(y, exact64.astype(np.float32))
        else:
            assert (np.abs(y - exact64) <= EXACT_VS_F64 * (K // 32) * mag).all()
        emu = (da @ db.T).numpy()                                     # torchao's emulation, float32
        err = np.abs(emu.astype(np.float64) - y) / np.maximum(mag, 1e-30)
        print(fa, fb, K, "torchao emulation vs ours, max relative", err.max())
        assert err.max() <= TAO_PER_K * K


# ------------------------------------------------------------------ the API and its errors
def test_products_forms_and_out(rng):
    a, b = operands(rng, 5, 40, 6, "e4m3", "e5m2", 32)
    t = exact_table("e4m3", "e5m2")
    want = mx_gemm(a, b, t)

    class Unit:
        products, a, b = t, fp_format("e4m3"), fp_format("e5m2")

    assert_bits(mx_gemm(a, b, Unit()), want)
    assert_bits(mx_gemm(a, b, MXProducts(t, "e4m3", "e5m2")), want)
    assert_bits(mx_gemm(a, b, t.astype(np.float64)), want)              # exact float32 values in float64
    out = np.full((5, 6), 7, np.float32)
    assert mx_gemm(a, b, t, out=out) is out
    assert_bits(out, want)
    big = np.zeros((5, 12), np.float32)
    view = big[:, ::2]
    assert mx_gemm(a, b, t, out=view) is view
    assert_bits(view, want)
    with lutcore._threads.scope(2):
        assert_bits(mx_gemm(a, b, t), want)


def test_a_bare_table_is_prepared_once_and_rechecked(rng):
    from lutcore.ops import mxgemm as room
    a, b = operands(rng, 3, 40, 4, "e4m3", "e4m3", 32)
    t = exact_table("e4m3", "e4m3").copy()
    y = mx_gemm(a, b, t)
    p = room._PREPARED[(id(t), "e4m3", "e4m3")]
    assert_bits(mx_gemm(a, b, t), y)
    assert room._PREPARED[(id(t), "e4m3", "e4m3")] is p
    t[0x38, :] *= 2                                               # the same array, new bits: analysed again
    y2 = mx_gemm(a, b, t)
    assert room._PREPARED[(id(t), "e4m3", "e4m3")] is not p
    assert_bits(y2, ref_exact(a, b, t))


def test_empty_shapes(rng):
    t = exact_table("e4m3", "e4m3")
    a, b = operands(rng, 0, 40, 3, "e4m3", "e4m3", 32)
    assert mx_gemm(a, b, t).shape == (0, 3)
    a, b = operands(rng, 3, 40, 0, "e4m3", "e4m3", 32)
    assert mx_gemm(a, b, t).shape == (3, 0)
    a = mx_quantize(np.zeros((3, 0), np.float32), "e4m3", 32)
    b = mx_quantize(np.zeros((0, 2), np.float32), "e4m3", 32, axis=0)
    assert (bits(mx_gemm(a, b, t)) == 0).all() and mx_gemm(a, b, t, Narrow(3)).shape == (3, 2)


def test_errors(rng):
    a, b = operands(rng, 3, 40, 4, "e4m3", "e5m2", 32)
    t = exact_table("e4m3", "e5m2")
    with pytest.raises(TypeError, match=r"^a: expected an MX"):
        mx_gemm(a.dequantize(), b, t)
    with pytest.raises(ValueError, match=r"^a: expected an MX of an \(M, K\) array quantized along its last axis"):
        mx_gemm(mx_quantize(rng.standard_normal((40, 3)).astype(np.float32), "e4m3", 32, axis=0), b, t)
    with pytest.raises(ValueError, match=r"^b: expected an MX of a \(K, N\) array quantized along axis 0"):
        mx_gemm(a, mx_quantize(rng.standard_normal((40, 4)).astype(np.float32), "e5m2", 32, axis=-1), t)
    with pytest.raises(ValueError, match=r"^a, b: blocks differ: a in blocks of 32, b in blocks of 16"):
        mx_gemm(a, mx_quantize(rng.standard_normal((40, 4)).astype(np.float32), "e5m2", 16, axis=0), t)
    with pytest.raises(ValueError, match=r"^a, b: inner dimensions differ"):
        mx_gemm(a, mx_quantize(rng.standard_normal((41, 4)).astype(np.float32), "e5m2", 32, axis=0), t)
    with pytest.raises(ValueError, match=r"^products: a e4m3 x e5m2 product table has shape \(256, 256\), "
                                         r"got \(64, 64\)"):
        mx_gemm(a, b, exact_table("e2m3", "e2m3"))
    with pytest.raises(TypeError, match=r"^products: expected a float32 table, got dtype bool"):
        mx_gemm(a, b, t > 0)
    with pytest.raises(ValueError, match=r"^products.b: the table is for e4m3 operands, but b holds e5m2 codes"):
        mx_gemm(a, b, MXProducts(exact_table("e4m3", "e4m3"), "e4m3", "e4m3"))

    class Wrong:
        products, a, b = exact_table("e5m2", "e5m2"), "e5m2", "e5m2"

    with pytest.raises(ValueError, match=r"^products.a: the table is for e5m2 operands, but a holds e4m3 codes"):
        mx_gemm(a, b, Wrong())
    bad = t.copy()
    bad[3, 17] = np.inf
    with pytest.raises(ValueError, match=r"^products: entry \[3, 17\] = inf is not finite, for finite operands "
                                         r"\(e4m3 code 0x03 = .*, e5m2 code 0x11 = .*\)"):
        mx_gemm(a, b, bad)
    with pytest.raises(ValueError, match=r"^products: entry \[0, 1\] = 0.1 is not a float32 value"):
        t64 = t.astype(np.float64)
        t64[0, 1] = 0.1
        MXProducts(t64, "e4m3", "e5m2")
    with pytest.raises(ValueError, match=r"^accumulate: expected \"exact\" or a Narrow"):
        mx_gemm(a, b, t, "fast")
    with pytest.raises(TypeError, match=r"^accumulate: expected \"exact\" or a Narrow, got int"):
        mx_gemm(a, b, t, 13)
    with pytest.raises(ValueError, match=r"^mbits: expected an int in \[1, 23\], got 24"):
        Narrow(24)
    with pytest.raises(ValueError, match=r"^promote: expected an int >= 1, got 0"):
        Narrow(13, 0)
    with pytest.raises(ValueError, match=r"^rounding: expected one of \('nearest', 'truncate'\), got 'down'"):
        Narrow(13, 128, "down")
    with pytest.raises(ValueError, match=r"^out: expected float32 of shape \(3, 4\), got float64 of shape \(3, 4\)"):
        mx_gemm(a, b, t, out=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"^block: expected an int >= 1, got 0"):
        MXProducts(t, "e4m3", "e5m2").route(0)


def test_rooms_record_and_body_names():
    from lutcore import _threads
    a, b = operands(np.random.default_rng(0), 3, 40, 4, "e4m3", "e4m3", 32)
    with _threads.record() as calls:
        mx_gemm(a, b, exact_table("e4m3", "e4m3"), threads=2)
        mx_gemm(a, b, exact_table("e4m3", "e4m3"), Narrow(13), threads=1)
    assert ("mxgemm.exact", 2) in calls and ("mxgemm.narrow", 1) in calls
    names = lutcore._simd.bodies()
    assert "mx_gemm exact" in names and names["mx_gemm narrow"] == names["mx_gemm exact"]
