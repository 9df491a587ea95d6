"""Floating-point element formats (lutcore.units.fp): names and fields; decode and encode
bit-exact against ml_dtypes (every code, every float16, every midpoint +-1 ulp, random
float32 bit patterns, the special values); saturation; int8 (MXINT8); stochastic rounding
against the scalar oracle (tests/reference/mx_ref.py) at its exact thresholds, reproducible
and unbiased; errors naming the argument."""
import ml_dtypes
import numpy as np
import pytest

import lutcore.units
from lutcore.units import FloatFormat, fp_format
from lutcore.units import fp as fpmod
from reference import mx_ref

ML = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e8m0"]      # the formats ml_dtypes has
ALL = ML + ["int8"]
SR_SIGMAS = 5.0          # unbiasedness: |mean error| within this many standard errors of the mean


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def ml_encode(x, f):
    return np.asarray(x, np.float32).astype(f.ml_dtype).view(np.uint8)


def positive_values(f):
    """Every finite positive value of the format, ascending (float64)."""
    v = f.values().astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v > 0)])


# ------------------------------------------------------------------ names and fields
@pytest.mark.parametrize("name,canon", [
    ("e4m3", "e4m3"), ("fp8_e4m3", "e4m3"), ("float8_e4m3fn", "e4m3"), ("E4M3", "e4m3"), ("e5m2", "e5m2"),
    ("float8_e5m2", "e5m2"), ("e2m3", "e2m3"), ("fp6_e2m3", "e2m3"), ("float6_e3m2fn", "e3m2"), ("e3m2", "e3m2"),
    ("e2m1", "e2m1"), ("fp4", "e2m1"), ("float4_e2m1fn", "e2m1"), ("e8m0", "e8m0"), ("float8_e8m0fnu", "e8m0"),
    ("int8", "int8"), ("mxint8", "int8"), ("fp8-e4m3", "e4m3")])
def test_names(name, canon):
    f = fp_format(name)
    assert isinstance(f, FloatFormat) and f.name == canon and fp_format(f) is f and str(f) == canon


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"^name: expected a known element format .*e4m3.*e5m2.*e2m1.*fp4.*int8.*"
                                         r"got 'e9m9'"):
        fp_format("e9m9")
    with pytest.raises(TypeError, match=r"^name: .*got int"):
        fp_format(8)


# name: bits, ebits, mbits, bias, has_inf, has_nan, nan codes, inf codes, max, min subnormal, emax (the OCP tables)
FIELDS = {
    "e4m3": (8, 4, 3, 7, False, True, (0x7F, 0xFF), (), 448.0, 2.0 ** -9, 8),
    "e5m2": (8, 5, 2, 15, True, True, (0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF), (0x7C, 0xFC), 57344.0, 2.0 ** -16, 15),
    "e3m2": (6, 3, 2, 3, False, False, (), (), 28.0, 2.0 ** -4, 4),
    "e2m3": (6, 2, 3, 1, False, False, (), (), 7.5, 2.0 ** -3, 2),
    "e2m1": (4, 2, 1, 1, False, False, (), (), 6.0, 0.5, 2),
    "e8m0": (8, 8, 0, 127, False, True, (0xFF,), (), 2.0 ** 127, None, 127),
    "int8": (8, 0, 6, 0, False, False, (), (), 127 / 64, None, 0),
}


@pytest.mark.parametrize("name", ALL)
def test_fields(name):
    f = fp_format(name)
    got = (f.bits, f.ebits, f.mbits, f.bias, f.has_inf, f.has_nan, f.nan_codes, f.inf_codes, f.max_normal,
           f.min_subnormal, f.emax)
    assert got == FIELDS[name]
    v = f.values()
    assert v.dtype == np.float32 and v.shape == (1 << f.bits,)
    assert np.isnan(v[list(f.nan_codes)]).all() and np.isnan(v).sum() == len(f.nan_codes)
    assert np.isinf(v).sum() == len(f.inf_codes)
    assert np.nanmax(v[np.isfinite(v)]) == f.max_normal and v[f.max_code] == f.max_normal
    assert positive_values(f)[0] == f.min_positive
    if f.ml_dtype is not None:
        fi = ml_dtypes.finfo(f.ml_dtype)
        assert float(fi.max) == f.max_normal
        if f.min_subnormal is not None:
            assert float(fi.smallest_subnormal) == f.min_subnormal
        assert 2.0 ** f.emax <= f.max_normal < 2.0 ** (f.emax + 1)


# ------------------------------------------------------------------ decode
@pytest.mark.parametrize("name", ML)
def test_every_code_decodes_as_ml_dtypes(name):
    f = fp_format(name)
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    want = codes.view(f.ml_dtype).astype(np.float32)
    assert np.array_equal(bits(f.values()), bits(want))             # NaN bits and signs too
    assert np.array_equal(bits(f.decode(codes.reshape(-1, 4 if f.bits > 2 else 1))), bits(want).reshape(-1, 4))
    assert np.array_equal(bits(f.decode(codes.astype(np.int64))), bits(want))


def test_int8_values():
    v = fp_format("int8").values()
    assert np.array_equal(v, np.arange(256).astype(np.uint8).view(np.int8).astype(np.float32) / 64)


@pytest.mark.parametrize("name", ALL)
def test_decode_refuses_codes_outside_the_format(name):
    f = fp_format(name)
    if f.bits < 8:
        with pytest.raises(ValueError, match=rf"^codes: expected codes of the {f.bits}-bit format {name} in "
                                             rf"\[0, {(1 << f.bits) - 1}\], got {1 << f.bits}"):
            f.decode(np.array([0, 1 << f.bits]))
    with pytest.raises(ValueError, match=r"^codes: .*got -1"):
        f.decode(np.array([-1, 0]))
    with pytest.raises(TypeError, match=r"^codes: expected integer codes"):
        f.decode(np.array([0.0]))


# ------------------------------------------------------------------ encode vs ml_dtypes
@pytest.mark.parametrize("name", ML)
def test_encode_every_float16_as_ml_dtypes(name):
    f = fp_format(name)
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)     # NaNs, infs, subnormals
    assert np.array_equal(f.encode(x), ml_encode(x, f))


@pytest.mark.parametrize("name", ML)
def test_encode_every_midpoint_and_its_neighbours_as_ml_dtypes(name):
    """Each midpoint between two adjacent values (ties), 1 float32 ulp either side, the values
    themselves, and the overflow edge (max + half a step) likewise; both signs."""
    f = fp_format(name)
    v = positive_values(f)
    step_top = (v[-1] - v[-2]) if f.kind != "scale" else v[-1]
    edges = np.concatenate([v, [v[-1] + step_top]])
    mids = (edges[:-1] + edges[1:]) / 2                               # exact in float32 (few bits)
    base = np.concatenate([[0.0], v, mids, [v[0] / 2, v[0] / 4]]).astype(np.float32)
    assert np.array_equal(base[1:len(v) + len(mids) + 1].astype(np.float64), np.concatenate([v, mids]))
    x = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(0))])
    x = np.concatenate([x, -x])
    assert np.array_equal(f.encode(x), ml_encode(x, f))


@pytest.mark.parametrize("name", ML)
def test_encode_random_float32_bit_patterns_as_ml_dtypes(name):
    f = fp_format(name)
    rng = np.random.default_rng(1234)
    x = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)   # NaN payloads too
    with np.errstate(over="ignore"):                                    # (e8m0: some become inf)
        y = rng.standard_normal(1 << 18) * f.max_normal * rng.choice([1e-6, 1e-3, 0.1, 1, 1.2], 1 << 18)
        y = y.astype(np.float32)
    for arr in (x, y, y.reshape(64, -1)):
        assert np.array_equal(f.encode(arr), ml_encode(arr, f)), name


# the special values, written out: x -> code with saturate=False (ml_dtypes) and True (the MX conversion);
# "err": a ValueError naming x
NAN, INF = np.float32(np.nan), np.float32(np.inf)
SPECIALS = {
    #         +NaN  -NaN  +inf  -inf  -0    +0    1e30  -1e30
    "e4m3": ((0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x00, 0x7F, 0xFF),
             (0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x00, 0x7E, 0xFE)),
    "e5m2": ((0x7E, 0xFE, 0x7C, 0xFC, 0x80, 0x00, 0x7C, 0xFC),
             (0x7E, 0xFE, 0x7C, 0xFC, 0x80, 0x00, 0x7B, 0xFB)),
    "e3m2": ((0x20, 0x00, 0x1F, 0x3F, 0x20, 0x00, 0x1F, 0x3F),
             ("err", "err", "err", "err", 0x20, 0x00, 0x1F, 0x3F)),
    "e2m3": ((0x20, 0x00, 0x1F, 0x3F, 0x20, 0x00, 0x1F, 0x3F),
             ("err", "err", "err", "err", 0x20, 0x00, 0x1F, 0x3F)),
    "e2m1": ((0x08, 0x00, 0x07, 0x0F, 0x08, 0x00, 0x07, 0x0F),
             ("err", "err", "err", "err", 0x08, 0x00, 0x07, 0x0F)),
    "e8m0": ((0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xE3, 0xFF),
             (0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xE3, 0xFF)),
    "int8": (("err", "err", 0x7F, 0x81, 0x00, 0x00, 0x7F, 0x81),
             ("err", "err", 0x7F, 0x81, 0x00, 0x00, 0x7F, 0x81)),
}
SPECIAL_X = np.array([NAN, -NAN, INF, -INF, -0.0, 0.0, 1e30, -1e30], np.float32)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("saturate", [False, True])
def test_special_values(name, saturate):
    f = fp_format(name)
    for x, want in zip(SPECIAL_X, SPECIALS[name][saturate]):
        if want == "err":
            with pytest.raises(ValueError, match=r"^x: .* has no code in " + name):
                f.encode(np.array([1.0, x], np.float32), saturate=saturate)
        else:
            got = int(f.encode(np.array([x]), saturate=saturate)[0])
            assert got == want, (name, saturate, x, hex(got), hex(want))
            if not saturate and f.ml_dtype is not None:
                assert got == int(ml_encode([x], f)[0])


@pytest.mark.parametrize("name", ALL)
def test_saturate_clamps_finite_overflow_only(name):
    f = fp_format(name)
    v = positive_values(f)
    big = np.array([v[-1], v[-1] * 1.5, v[-1] * 4, 3e38, 3.4e38])
    big = np.concatenate([big[big < 3.5e38].astype(np.float32), [np.nextafter(np.float32(v[-1] * 1.5), np.float32(0))]])
    x = big if f.kind == "scale" else np.concatenate([big, -big])        # e8m0: no negatives
    got = f.values()[f.encode(x, saturate=True)]
    assert np.array_equal(got, np.sign(x) * np.float32(f.max_normal)), (name, got)
    xs = x * np.float32(0.999)
    with np.errstate(over="ignore"):
        inside = np.abs(xs) <= f.max_normal
    assert np.array_equal(f.encode(xs[inside], saturate=True), f.encode(xs[inside]))   # below max: unchanged


def test_int8_rounds_half_to_even_and_saturates_symmetrically():
    f = fp_format("int8")
    k = np.arange(-300, 301)
    x = (k / 128).astype(np.float32)                                  # every half step: ties
    want = np.clip(np.rint(x.astype(np.float64) * 64), -127, 127).astype(np.int8).view(np.uint8)
    for sat in (False, True):
        assert np.array_equal(f.encode(x, saturate=sat), want)
    assert int(f.encode([-2.0])[0]) == 0x81 and f.values()[0x80] == -2.0     # -128 decodes, never produced


# ------------------------------------------------------------------ the scalar oracle
def _probe(f, rng):
    v = positive_values(f)
    with np.errstate(invalid="ignore"):                                # signalling NaN payloads: quieted
        return np.concatenate([
            rng.standard_normal(1500) * f.max_normal / 3,
            rng.choice(v, 300) * rng.uniform(0.5, 1.5, 300),
            rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32).view(np.float32),
            SPECIAL_X, [2.0 ** -140, -(2.0 ** -149), f.max_normal * 1.02]]).astype(np.float32)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("saturate", [False, True])
def test_encode_matches_the_reference(name, rounding, saturate, rng):
    f = fp_format(name)
    x = _probe(f, rng)
    if name == "int8" or (saturate and f.kind == "float" and not f.has_nan):
        x = x[np.isfinite(x)] if saturate or name != "int8" else x[~np.isnan(x)]
    for seed in ([5, np.random.default_rng(6)] if rounding == "stochastic" else [None]):
        seed_ref = np.random.default_rng(6) if isinstance(seed, np.random.Generator) else seed
        got = f.encode(x, rounding, saturate=saturate, seed=seed)
        want = mx_ref.encode_array_ref(x, name, rounding, saturate, seed=seed_ref)
        bad = np.flatnonzero(got != want)
        assert not len(bad), [(x[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("name", ALL)
def test_stochastic_threshold_is_exact(name, rng):
    """At each value's threshold r (the oracle's 2^32 - floor(t * 2^32)), r - 1 rounds down
    and r rounds up -- the documented use of the random bits, to the last bit."""
    f = fp_format(name)
    x = _probe(f, rng)
    x = x[np.isfinite(x)]
    thr = np.array([mx_ref.sr_threshold(float(v), name) for v in x], np.int64)
    for r in (np.clip(thr - 1, 0, (1 << 32) - 1), np.clip(thr, 0, (1 << 32) - 1)):
        got = f._encode(x, False, r.astype(np.uint32))
        want = [mx_ref.encode_ref(float(v), name, "stochastic", False, int(ri)) for v, ri in zip(x, r)]
        assert np.array_equal(got, np.array(want, np.uint8)), name


# ------------------------------------------------------------------ stochastic rounding
def test_random_bits_are_splitmix64_counters():
    assert np.array_equal(fpmod.random_bits(12345, 50), mx_ref.splitmix_bits(12345, 50))
    assert np.array_equal(fpmod.random_bits(2 ** 64 - 1, 7), mx_ref.splitmix_bits(2 ** 64 - 1, 7))
    assert np.array_equal(fpmod.random_bits(9, 10, offset=5), fpmod.random_bits(9, 15)[5:])
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert np.array_equal(fpmod.random_bits(g1, 10), g2.integers(0, 1 << 32, size=10, dtype=np.uint32))


@pytest.mark.parametrize("name", ALL)
def test_stochastic_is_reproducible_on_any_shape(name, rng):
    f = fp_format(name)
    x = (rng.standard_normal(1200) * f.max_normal / 4).astype(np.float32)
    a = f.encode(x, "stochastic", seed=77)
    assert np.array_equal(a, f.encode(x, "stochastic", seed=77))
    for shape in ((12, 100), (100, 12), (2, 3, 200)):
        assert np.array_equal(f.encode(x.reshape(shape), "stochastic", seed=77), a.reshape(shape))
    assert not np.array_equal(a, f.encode(x, "stochastic", seed=78))
    assert np.array_equal(f.encode(x, "stochastic", seed=np.random.default_rng(1)),
                          f.encode(x, "stochastic", seed=np.random.default_rng(1)))


@pytest.mark.parametrize("name", ALL)
def test_stochastic_is_unbiased(name):
    """Points a quarter, a third and 0.9 of the way between neighbours, each N times: the mean
    of the decoded values is the point within SR_SIGMAS standard errors (sigma = step *
    sqrt(p (1 - p) / N)); and over random in-range values the mean error per step is ~0."""
    f = fp_format(name)
    v = positive_values(f)
    N = 20000
    lo = v[[len(v) // 3, len(v) // 2, len(v) - 2]] if f.kind != "int" else v[[3, 60, 125]]
    hi = v[[len(v) // 3 + 1, len(v) // 2 + 1, len(v) - 1]] if f.kind != "int" else v[[4, 61, 126]]
    if f.min_subnormal is not None:
        lo, hi = np.append(lo, 0.0), np.append(hi, v[0])                # the subnormal step from 0
    for frac in (0.25, 1 / 3, 0.9):
        pts = (lo + frac * (hi - lo)).astype(np.float32)                 # (P,)
        p = (pts.astype(np.float64) - lo) / (hi - lo)
        sg = (np.where(np.arange(N) % 2, 1, -1) if f.signed else np.ones(N))[:, None]   # (N, 1) both signs
        x = np.repeat(pts[None, :], N, axis=0) * sg.astype(np.float32)                   # (N, P)
        d = f.values()[f.encode(x, "stochastic", seed=2024)].astype(np.float64) * sg
        err = d.mean(axis=0) - pts
        sigma = (hi - lo) * np.sqrt(p * (1 - p) / N)
        assert (np.abs(err) <= SR_SIGMAS * sigma + 1e-30).all(), (name, frac, err / sigma)
    rng = np.random.default_rng(99)
    x = (rng.uniform(-1, 1, 1 << 20) * f.max_normal * 0.9).astype(np.float32)
    if f.kind == "scale":
        x = np.abs(x) + np.float32(1)
    d = f.values()[f.encode(x, "stochastic", seed=7)].astype(np.float64)
    vv = np.abs(x).astype(np.float64)
    idx = np.searchsorted(np.concatenate([[0.0], v]), vv, side="right") - 1
    grid = np.concatenate([[0.0], v, [np.inf]])
    step = grid[idx + 1] - grid[idx]
    rel = (np.abs(d) - vv) / step                                        # error in steps, within (-1, 1)
    assert abs(rel.mean()) <= SR_SIGMAS * 0.5 / np.sqrt(len(x)), rel.mean()


# ------------------------------------------------------------------ inputs and errors
@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int8"])
def test_input_dtypes_are_converted_to_float32(name, rng):
    f = fp_format(name)
    x64 = rng.standard_normal(500) * 3
    assert np.array_equal(f.encode(x64), f.encode(x64.astype(np.float32)))       # float64: float32 first
    assert np.array_equal(f.encode(x64.astype(np.float16)), f.encode(x64.astype(np.float16).astype(np.float32)))
    bf = x64.astype(ml_dtypes.bfloat16)
    assert np.array_equal(f.encode(bf), f.encode(bf.astype(np.float32)))
    assert np.array_equal(f.encode(np.arange(-5, 5)), f.encode(np.arange(-5, 5).astype(np.float32)))
    assert np.array_equal(f.encode([1.0, 2.0]), f.encode(np.array([1.0, 2.0], np.float32)))
    assert f.encode(1.5).shape == () and f.encode(np.zeros((0, 3))).shape == (0, 3)
    y = rng.standard_normal((6, 8)).astype(np.float32)
    assert np.array_equal(f.encode(y.T), f.encode(np.ascontiguousarray(y.T)))
    assert np.array_equal(f.encode(y[:, ::2]), f.encode(np.ascontiguousarray(y[:, ::2])))
    big = np.array([1e300, -1e300])                                               # beyond float32: +-inf first
    assert np.array_equal(f.encode(big), f.encode(np.array([np.inf, -np.inf], np.float32)))


@pytest.mark.parametrize("call,exc,msg", [
    (lambda f: f.encode([1.0], "up"), ValueError, r"^rounding: expected one of 'nearest', 'stochastic', got 'up'"),
    (lambda f: f.encode([1.0], saturate="yes"), TypeError, r"^saturate: expected True or False"),
    (lambda f: f.encode(["a"]), TypeError, r"^x: expected an array of real numbers"),
    (lambda f: f.encode(np.array([1j])), TypeError, r"^x: expected an array of real numbers .*complex"),
    (lambda f: f.encode([1.0], "stochastic"), ValueError, r"^seed: stochastic rounding needs a seed"),
    (lambda f: f.encode([1.0], "stochastic", seed=-1), ValueError, r"^seed: expected an int"),
    (lambda f: f.encode([1.0], "stochastic", seed=1.5), TypeError, r"^seed: expected an int"),
    (lambda f: f.encode([1.0], seed="s"), TypeError, r"^seed: expected an int"),
])
def test_encode_errors_name_the_argument(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(fp_format("e4m3"))


def test_exported():
    assert lutcore.units.FloatFormat is FloatFormat and lutcore.units.fp_format is fp_format
