"""OCP MX block quantization (lutcore.mx): the scalar oracle (tests/reference/mx_ref.py) on odd
shapes, both axes, two block sizes, both roundings; the spec's special blocks (all zero, NaN,
inf, tiny, huge) and the padding; named error budgets; stochastic rounding reproducible and
unbiased; errors naming the argument; and conformance with torchao's MX emulation
(``torchao.prototype.mx_formats``, ``to_mx`` with ScaleCalculationMode.FLOOR), with the
places it differs pinned down (docs/DESIGN.md)."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import lutcore
from lutcore.mx import MX, MX_ELEMENTS, mx_quantize
from lutcore.units import fp_format
from reference import mx_ref

# NMSE of dequantize(mx_quantize(x)) against x for x ~ N(0, 1), (256, 1024), blocks of 32 (measured
# 0.86e-3, 2.9e-3, 2.9e-3, 0.80e-3, 13.2e-3, 6.8e-5 nearest; about twice that stochastic)
NMSE_NEAREST = {"e4m3": 1.2e-3, "e5m2": 4e-3, "e3m2": 4e-3, "e2m3": 1.2e-3, "e2m1": 1.8e-2, "int8": 1e-4}
NMSE_STOCHASTIC = {k: 2.5 * v for k, v in NMSE_NEAREST.items()}
SR_SIGMAS = 5.0          # unbiasedness: |mean error| within this many standard errors


def data(rng, shape, spread=20):
    """Normal values over many binades (a different magnitude per element), a few zeros."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    x.reshape(-1)[:: 11] = 0.0
    return x.astype(np.float32)


# ------------------------------------------------------------------ the oracle
@pytest.mark.parametrize("fmt", MX_ELEMENTS)
@pytest.mark.parametrize("L", [1, 7, 33, 65])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("block", [32, 8])
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_matches_the_reference(fmt, L, axis, block, rounding, rng):
    shape = (L, 3) if axis == 0 else (2, L)
    x = data(rng, shape)
    seed = 1234 if rounding == "stochastic" else None
    m = mx_quantize(x, fmt, block, axis, rounding, seed)
    codes, scales = mx_ref.mx_quantize_ref(x, fmt, block, axis, rounding, seed)
    assert m.codes.dtype == np.uint8 and m.scales.dtype == np.uint8
    assert m.codes.shape == codes.shape and m.scales.shape == scales.shape
    bad = np.argwhere(m.codes != codes)
    assert not len(bad), [(tuple(i), hex(m.codes[tuple(i)]), hex(codes[tuple(i)])) for i in bad[:4]]
    assert np.array_equal(m.scales, scales)
    y = m.dequantize()
    assert y.dtype == np.float32 and y.shape == x.shape
    assert np.array_equal(y, mx_ref.mx_dequantize_ref(codes, scales, fmt, block, axis % 2, L), equal_nan=True)
    assert (m.fmt.name, m.block, m.axis, m.shape) == (fmt, block, axis % 2, x.shape)


@pytest.mark.parametrize("fmt", ["e4m3", "e2m1", "int8"])
def test_three_dimensions_middle_axis(fmt, rng):
    x = data(rng, (2, 37, 3))
    for rounding, seed in (("nearest", None), ("stochastic", 5)):
        m = mx_quantize(x, fmt, 16, 1, rounding, seed)
        codes, scales = mx_ref.mx_quantize_ref(x, fmt, 16, 1, rounding, seed)
        assert m.codes.shape == (2, 48, 3) and m.scales.shape == (2, 3, 3)
        assert np.array_equal(m.codes, codes) and np.array_equal(m.scales, scales)


# ------------------------------------------------------------------ the spec's special blocks
def blocks_of(*rows, B=8):
    return np.stack([np.pad(np.asarray(r, np.float32), (0, B - len(r))) for r in rows])


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_special_blocks(fmt):
    f = fp_format(fmt)
    x = blocks_of([0.0, -0.0],                         # all zero
                  [1.0, np.nan, 2.0],                  # NaN
                  [1.0, -np.inf, 2.0],                 # inf
                  [2.0 ** -128, -(2.0 ** -140)],       # below 2^(emax - 126): the smallest scale
                  [3e38, -1.0],                        # the largest binade
                  [1.0, 0.5, 0.25])
    m = mx_quantize(x, fmt, 8)
    s = m.scales[:, 0]
    assert s[0] == 0 and np.array_equal(m.codes[0], f.encode(blocks_of([0.0, -0.0])[0]))  # 2^-127, +-0 codes
    assert s[1] == 0xFF and s[2] == 0xFF and not m.codes[1:3].any()   # X = NaN: codes 0
    assert s[3] == 0                                                  # clamped to 2^-127
    assert s[4] == 127 + 127 - f.emax                                 # floor(log2 3e38) = 127
    assert s[5] == 127 - f.emax
    y = m.dequantize()
    assert np.isnan(y[1:3]).all() and not np.isnan(y[[0, 3, 4, 5]]).any()
    assert np.array_equal(np.signbit(y[0]), [False, f.kind == "float"] + [False] * 6)   # int8 has no -0
    assert y[5, 0] == 1.0 and y[4, 1] == 0.0 and abs(y[4, 0] / 3e38 - 1) < 0.25   # -1 is lost beside 3e38
    # the tiny block is quantized at 2^-127: its elements are x * 2^127 in the element format
    assert np.array_equal(m.codes[3], f.encode(x[3] * np.float32(2.0 ** 127), saturate=True))


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_block_maximum_lands_in_the_top_binade(fmt, rng):
    """The spec's offset: the block maximum maps into [2^emax, 2^(emax+1)) -- and saturates to
    max_normal where that binade ends short of 2^(emax+1)."""
    f = fp_format(fmt)
    x = data(rng, (50, 32), spread=30)
    m = mx_quantize(x, fmt, 32)
    amax = np.abs(x).max(axis=1)
    X = np.exp2(m.scales[:, 0].astype(np.float64) - 127)
    top = amax / X
    assert ((top >= 2.0 ** f.emax) & (top < 2.0 ** (f.emax + 1))).all()
    big = f.values()[m.codes[np.arange(50), np.abs(x).argmax(axis=1)]]
    assert np.array_equal(np.abs(big), np.abs(f.values()[f.encode(top, saturate=True)]))
    assert (np.abs(big) == np.minimum(np.abs(f.values()[f.encode(np.minimum(top, f.max_normal))]), f.max_normal)).all()


def test_padding_is_zero_and_changes_nothing(rng):
    x = data(rng, (4, 33))
    m = mx_quantize(x, "e4m3", 32)
    assert m.codes.shape == (4, 64) and m.scales.shape == (4, 2)
    assert not m.codes[:, 33:].any()
    padded = np.pad(x, ((0, 0), (0, 31)))
    p = mx_quantize(padded, "e4m3", 32)
    assert np.array_equal(p.codes, m.codes) and np.array_equal(p.scales, m.scales)
    assert np.array_equal(m.dequantize(), p.dequantize()[:, :33])
    assert mx_quantize(np.zeros((3, 0), np.float32), "e2m1").codes.shape == (3, 0)


# ------------------------------------------------------------------ error budgets, stochastic rounding
@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_error_budget(fmt):
    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    for rounding, budget in (("nearest", NMSE_NEAREST), ("stochastic", NMSE_STOCHASTIC)):
        y = mx_quantize(x, fmt, 32, rounding=rounding, seed=1).dequantize()
        nmse = float(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2))
        print(fmt, rounding, f"nmse {nmse:.3g} (budget {budget[fmt]:.3g})")
        assert nmse <= budget[fmt]


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_stochastic_is_reproducible(fmt, rng):
    x = data(rng, (4, 96))
    a = mx_quantize(x, fmt, 32, rounding="stochastic", seed=42)
    b = mx_quantize(x, fmt, 32, rounding="stochastic", seed=42)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales)
    c = mx_quantize(x.reshape(2, 2, 96), fmt, 32, rounding="stochastic", seed=42)      # C order unchanged
    assert np.array_equal(c.codes.reshape(4, 96), a.codes)
    g = [mx_quantize(x, fmt, 32, rounding="stochastic", seed=np.random.default_rng(8)) for _ in range(2)]
    assert np.array_equal(g[0].codes, g[1].codes)
    assert not np.array_equal(a.codes, mx_quantize(x, fmt, 32, rounding="stochastic", seed=43).codes)


@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_stochastic_is_unbiased(fmt, rng):
    """Blocks whose maximum is a power of two (so it is exact and nothing saturates), repeated R
    times: the mean dequantized block is x within SR_SIGMAS standard errors (<= step/2/sqrt(R))."""
    f = fp_format(fmt)
    R = 20000
    row = rng.uniform(-1, 1, 32).astype(np.float32)
    row[0] = 1.0                                                    # the maximum: 2^0
    x = np.repeat(row[None], R, axis=0)                              # (R, 32)
    y = mx_quantize(x, fmt, 32, rounding="stochastic", seed=3).dequantize().astype(np.float64)
    X = 2.0 ** -f.emax
    v = np.concatenate([[0.0], np.unique(np.abs(f.values()[np.isfinite(f.values())]))]) * X
    i = np.searchsorted(v, np.abs(row), side="right") - 1
    step = v[np.minimum(i + 1, len(v) - 1)] - v[i]
    err = y.mean(axis=0) - row
    assert (np.abs(err) <= SR_SIGMAS * np.maximum(step, 1e-30) / 2 / np.sqrt(R)).all(), err


# ------------------------------------------------------------------ inputs and errors
def test_input_dtypes_and_layouts(rng):
    x = data(rng, (6, 40))
    want = mx_quantize(x, "e4m3", 8)
    for other in (x.astype(np.float64), np.asfortranarray(x)):
        got = mx_quantize(other, "e4m3", 8)
        assert np.array_equal(got.codes, want.codes) and np.array_equal(got.scales, want.scales)
    t = mx_quantize(np.ascontiguousarray(x.T).T, "e4m3", 8)                # non-contiguous view
    assert np.array_equal(t.codes, want.codes)
    bf = x.astype(ml_dtypes.bfloat16)
    assert np.array_equal(mx_quantize(bf, "e2m1").codes, mx_quantize(bf.astype(np.float32), "e2m1").codes)
    assert np.array_equal(mx_quantize(np.arange(64), "int8").codes,
                          mx_quantize(np.arange(64).astype(np.float32), "int8").codes)
    for alias in ("fp8_e4m3", "float8_e4m3fn", fp_format("e4m3")):
        assert np.array_equal(mx_quantize(x, alias, 8).codes, want.codes)


def test_mx_is_read_only_and_checked(rng):
    m = mx_quantize(data(rng, (2, 40)), "e2m1", 32)
    with pytest.raises(ValueError):
        m.codes[0, 0] = 1
    again = MX(m.codes, m.scales, "e2m1", 32, -1, (2, 40))
    assert np.array_equal(again.dequantize(), m.dequantize()) and repr(again).startswith("MX(shape=(2, 40)")
    with pytest.raises(ValueError, match=r"^codes: an MX of shape \(2, 40\) .* shape \(2, 64\), got \(2, 40\)"):
        MX(m.codes[:, :40], m.scales, "e2m1", 32, -1, (2, 40))
    with pytest.raises(ValueError, match=r"^scales: .*got \(2, 1\)"):
        MX(m.codes, m.scales[:, :1], "e2m1", 32, -1, (2, 40))
    with pytest.raises(ValueError, match=r"^codes: expected e2m1 codes in \[0, 15\], got 16"):
        MX(np.full((2, 64), 16, np.uint8), m.scales, "e2m1", 32, -1, (2, 40))
    with pytest.raises(TypeError, match=r"^codes: expected dtype uint8"):
        MX(m.codes.astype(np.int16), m.scales, "e2m1", 32, -1, (2, 40))


X2 = np.zeros((2, 8), np.float32)


@pytest.mark.parametrize("kw,exc,msg", [
    ({"block": 0}, ValueError, r"^block: expected an int >= 1, got 0"),
    ({"block": 2.5}, TypeError, r"^block: expected an int, got float"),
    ({"block": True}, TypeError, r"^block: expected an int, got bool"),
    ({"axis": 2}, ValueError, r"^axis: expected an int in \[-2, 1\], got 2"),
    ({"axis": -3}, ValueError, r"^axis: expected an int in \[-2, 1\], got -3"),
    ({"axis": "0"}, TypeError, r"^axis: expected an int"),
    ({"fmt": "e8m0"}, ValueError, r"^fmt: expected an MX element format \(e4m3, e5m2, e3m2, e2m3, e2m1, int8\), got "
                                  r"e8m0"),
    ({"fmt": "e9m9"}, ValueError, r"^fmt: expected an MX element format .*got 'e9m9'"),
    ({"fmt": 4}, TypeError, r"^fmt: expected an MX element format name .*got int"),
    ({"x": np.array(["a", "b"])}, TypeError, r"^x: expected an array of real numbers .*got dtype <U1"),
    ({"x": [object()]}, TypeError, r"^x: expected an array of real numbers"),
    ({"x": np.float32(1.0)}, ValueError, r"^x: expected an array of at least 1 dimension"),
    ({"rounding": "down"}, ValueError, r"^rounding: expected one of 'nearest', 'stochastic', got 'down'"),
    ({"rounding": "stochastic"}, ValueError, r"^seed: stochastic rounding needs a seed"),
    ({"rounding": "stochastic", "seed": -2}, ValueError, r"^seed: expected an int"),
])
def test_errors_name_the_argument(kw, exc, msg):
    args = {"x": X2, "fmt": "e4m3", **kw}
    with pytest.raises(exc, match=msg):
        mx_quantize(**args)


def test_exported():
    assert lutcore.mx_quantize is mx_quantize and lutcore.MX is MX


# ------------------------------------------------------------------ torchao's MX emulation
@pytest.fixture(scope="module")
def tao():
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats import constants as C
        from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode, to_mx
    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m3": C.DTYPE_FP6_E2M3,
              "e3m2": C.DTYPE_FP6_E3M2, "e2m1": torch.float4_e2m1fn_x2}

    def run(x, fmt, block, mode=ScaleCalculationMode.FLOOR):
        """(scales uint8, codes uint8 unpacked) of torchao's to_mx on x (last axis)."""
        t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
        s, d = to_mx(t, dtypes[fmt], block, mode)
        s, d = s.view(torch.uint8).numpy(), d.view(torch.uint8).numpy()
        if fmt == "e2m1":                              # torchao packs two fp4 a byte, the first in the low nibble
            d = np.stack([d & 0xF, d >> 4], axis=-1).reshape(d.shape[:-1] + (2 * d.shape[-1],))
        return s, d

    run.torch, run.MXTensor, run.mode, run.dtypes = torch, MXTensor, ScaleCalculationMode, dtypes
    return run


TAO = ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]            # torchao has no MXINT8 element


@pytest.mark.parametrize("fmt", TAO)
@pytest.mark.parametrize("shape,block", [((64, 256), 32), ((3, 4, 96), 32), ((5, 64), 16)])
def test_torchao_floor_mode_gives_the_same_bits(tao, fmt, shape, block, rng):
    x = data(rng, shape, spread=60)
    s, d = tao(x, fmt, block)
    m = mx_quantize(x, fmt, block)
    assert np.array_equal(s, m.scales) and np.array_equal(d, m.codes)
    bf = x.astype(ml_dtypes.bfloat16)                                   # bfloat16 in: the same bits again
    s, d = tao(tao.torch.from_numpy(bf.view(np.uint16)).view(tao.torch.bfloat16), fmt, block)
    m = mx_quantize(bf, fmt, block)
    assert np.array_equal(s, m.scales) and np.array_equal(d, m.codes)


@pytest.mark.parametrize("fmt", TAO)
def test_torchao_dequantize_agrees(tao, fmt, rng):
    x = data(rng, (8, 128), spread=10)
    t = tao.MXTensor.to_mx(tao.torch.from_numpy(x), tao.dtypes[fmt], 32)
    assert np.array_equal(t.dequantize(tao.torch.float32).numpy(), mx_quantize(x, fmt, 32).dequantize())


@pytest.mark.parametrize("fmt", TAO)
def test_torchao_differences(tao, fmt):
    """Where torchao's FLOOR mode differs (docs/DESIGN.md), pinned down:
    1. scale code 0 (2^-127): torchao divides by 2^-126 (it clamps the float32 scale to the
       smallest normal), so its elements are those of x * 2^126; lutcore's of x * 2^127;
    2. a block holding NaN: both scale 0xff; torchao keeps per-element codes, lutcore 0;
    3. a block holding +-inf: torchao's scale is 2^(128 - emax) (the float32 exponent field of
       inf), inf saturates to +-max and the finite elements are scaled by it; lutcore: 0xff, 0."""
    f = fp_format(fmt)
    x = blocks_of([2.0 ** -125, 2.0 ** -127, -(2.0 ** -126)], [1.0, np.nan, 2.0], [1.0, np.inf, -2.0],
                  [0.0], [1.5, -0.75])
    s, d = tao(x, fmt, 8)
    m = mx_quantize(x, fmt, 8)
    assert s[0, 0] == m.scales[0, 0] == 0
    assert np.array_equal(d[0], f.encode(x[0] * np.float32(2.0 ** 126), saturate=True))
    assert np.array_equal(m.codes[0], f.encode(x[0] * np.float32(2.0 ** 127), saturate=True))
    assert s[1, 0] == m.scales[1, 0] == 0xFF and not m.codes[1].any()
    assert s[2, 0] == 255 - f.emax and m.scales[2, 0] == 0xFF and not m.codes[2].any()
    assert d[2, 1] == f.max_code                                       # inf -> +max at that scale
    assert np.array_equal(d[2, [0, 2]], f.encode(x[2, [0, 2]] * np.float32(2.0 ** (f.emax - 128))))
    assert np.array_equal(s[3:], m.scales[3:]) and np.array_equal(d[3:], m.codes[3:])   # the rest agree
