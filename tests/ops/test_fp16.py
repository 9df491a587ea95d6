"""lutcore.fp16_encode / fp16_decode / fp16_round against numpy's cast
("nearest") and the hand-written oracle ("truncate", decode)."""
import numpy as np
import pytest

import lutcore
from reference.fp16_ref import fp16_decode_ref, fp16_encode_ref, fp16_round_ref

F = np.float32
NAMED = np.array([
    0.0, -0.0,
    2.0 ** -24, -(2.0 ** -24),            # smallest subnormal
    2.0 ** -25, 1.5 * 2.0 ** -24,         # ties at the bottom of the subnormal grid
    2.0 ** -26, 3e-8, 6e-8,
    1e-6, 3.0 * 2.0 ** -20, 2.5 * 2.0 ** -24,   # subnormals
    1023 * 2.0 ** -24,                    # largest subnormal
    1023.5 * 2.0 ** -24,                  # tie between largest subnormal and smallest normal
    2.0 ** -14, -(2.0 ** -14),            # smallest normal
    1.0, -1.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 0.1, 3.14159, 1000.1,
    65472.0, 65488.0, 65500.0, 65504.0, -65504.0,   # normals near the top
    65519.99, 65520.0, -65520.0, 65535.0, 65536.0, 1e5, -1e5, 3e38,
    np.inf, -np.inf, np.nan, -np.nan,
], dtype=np.float32)


def _probe(rng):
    """NAMED + every finite fp16 value, the midpoints between neighbours and one
    float32 ulp either side of them, random bit patterns (NaN payloads included)."""
    fin = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)
    up = np.nextafter(mids, F(np.inf))
    dn = np.nextafter(mids, F(0))
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    logu = (np.exp2(rng.uniform(-28, 18, 20000)) * rng.choice([-1, 1], 20000)).astype(np.float32)
    v = np.concatenate([fin, mids, up, dn])
    return np.concatenate([NAMED, v, -v, bits, logu]).astype(np.float32)


def _same_bits_or_both_nan_f32(got, want):
    got = np.asarray(got)
    assert got.dtype == np.float32 and got.shape == want.shape
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    bad = (nan_g != nan_w) | (~nan_w & (got.view(np.uint32) != want.view(np.uint32)))
    print("mismatches:", int(bad.sum()), "first:", [(i, got.flat[i], want.flat[i]) for i in np.flatnonzero(bad)[:5]])
    assert not bad.any()


def _is_nan16(h):
    h = np.asarray(h, dtype=np.uint16)
    return ((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0)


# ---------------------------------------------------------------- nearest
def test_encode_nearest_bit_identical_to_numpy(simd, rng):
    x = _probe(rng)
    got = lutcore.fp16_encode(x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert got.dtype == np.uint16 and got.shape == x.shape
    bad = got != want
    print("mismatches:", int(bad.sum()), [(x[i], hex(got[i]), hex(want[i])) for i in np.flatnonzero(bad)[:8]])
    assert np.array_equal(got, want)                     # NaNs: bits compared too
    assert np.array_equal(lutcore.fp16_encode(x, mode="nearest"), want)


def test_encode_nearest_named(simd):
    enc = lambda v: int(lutcore.fp16_encode(np.array([v], F))[0])
    assert enc(0.0) == 0x0000 and enc(-0.0) == 0x8000
    assert enc(2.0 ** -24) == 0x0001
    assert enc(2.0 ** -25) == 0x0000                     # tie -> even (0)
    assert enc(1.5 * 2.0 ** -24) == 0x0002               # tie -> even (2)
    assert enc(1023 * 2.0 ** -24) == 0x03FF
    assert enc(2.0 ** -14) == 0x0400
    assert enc(65504.0) == 0x7BFF
    assert enc(65519.99) == 0x7BFF                       # below the overflow threshold
    assert enc(65520.0) == 0x7C00 and enc(-65520.0) == 0xFC00  # overflow -> inf
    assert enc(np.inf) == 0x7C00 and enc(-np.inf) == 0xFC00
    assert _is_nan16(enc(np.nan))


def test_round_nearest(simd, rng):
    x = _probe(rng)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    got = lutcore.fp16_round(x)
    _same_bits_or_both_nan_f32(got, want)
    _same_bits_or_both_nan_f32(lutcore.fp16_round(x, mode="nearest"), want)


# ---------------------------------------------------------------- truncate
def test_encode_truncate(simd, rng):
    x = _probe(rng)
    got = lutcore.fp16_encode(x, mode="truncate")
    want = fp16_encode_ref(x, "truncate")
    assert got.dtype == np.uint16 and got.shape == x.shape
    nan = np.isnan(x)
    assert np.array_equal(_is_nan16(got), nan)           # NaN stays NaN (any payload)
    bad = ~nan & (got != want)
    print("mismatches:", int(bad.sum()), [(x[i], hex(got[i]), hex(want[i])) for i in np.flatnonzero(bad)[:8]])
    assert not bad.any()


def test_encode_truncate_named(simd):
    enc = lambda v: int(lutcore.fp16_encode(np.array([v], F), mode="truncate")[0])
    assert enc(3e-8) == 0x0000 and enc(-3e-8) == 0x8000
    assert enc(0.0) == 0x0000 and enc(-0.0) == 0x8000
    assert enc(65520.0) == 0x7BFF
    assert enc(65519.99) == 0x7BFF
    assert enc(1e5) == 0x7BFF and enc(-1e5) == 0xFBFF
    assert enc(3e38) == 0x7BFF
    assert enc(np.inf) == 0x7C00 and enc(-np.inf) == 0xFC00
    assert enc(2.0 ** -24) == 0x0001 and enc(1.99 * 2.0 ** -24) == 0x0001
    assert enc(1023.9 * 2.0 ** -24) == 0x03FF
    assert enc(1.0 + 2.0 ** -11) == 0x3C00               # nearest would tie to even too
    assert enc(1.0 + 3 * 2.0 ** -11) == 0x3C01           # nearest gives 0x3C02
    assert _is_nan16(enc(np.nan))


def test_truncate_is_toward_zero(rng):
    # property check independent of the oracle: |decode(t)| <= |x| < next fp16 magnitude
    x = _probe(rng)
    x = x[np.isfinite(x) & (np.abs(x) < 65504)]
    h = lutcore.fp16_encode(x, mode="truncate")
    mag = (h & 0x7FFF).astype(np.int64)
    lo = fp16_decode_ref(mag.astype(np.uint16)).astype(np.float64)
    hi = fp16_decode_ref((mag + 1).astype(np.uint16)).astype(np.float64)
    ax = np.abs(x.astype(np.float64))
    assert np.all(lo <= ax) and np.all(ax < hi)
    assert np.array_equal(h >> 15, np.signbit(x).astype(np.uint16))


def test_round_truncate(simd, rng):
    x = _probe(rng)
    _same_bits_or_both_nan_f32(lutcore.fp16_round(x, mode="truncate"), fp16_round_ref(x, "truncate"))


# ---------------------------------------------------------------- decode
def test_decode_all_patterns(simd):
    bits = np.arange(65536, dtype=np.uint16)
    got = lutcore.fp16_decode(bits)
    _same_bits_or_both_nan_f32(got, fp16_decode_ref(bits))


def test_decode_subnormals_named():
    got = lutcore.fp16_decode(np.array([0x0001, 0x0200, 0x03FF, 0x8001, 0x0400, 0x7BFF], np.uint16))
    assert got.tolist() == [2.0 ** -24, 512 / 1024 * 2.0 ** -14, 1023 / 1024 * 2.0 ** -14,
                            -(2.0 ** -24), 2.0 ** -14, 65504.0]


@pytest.mark.parametrize("mode", ["nearest", "truncate"])
def test_shapes_and_non_contiguous(simd, rng, mode):
    x = (rng.standard_normal((6, 10)) * 1000).astype(np.float32)
    xs = x[:, ::2]                                        # (6, 5) strided
    h = lutcore.fp16_encode(xs, mode=mode)
    assert h.shape == (6, 5) and h.dtype == np.uint16
    assert np.array_equal(h, fp16_encode_ref(np.ascontiguousarray(xs), mode))
    r = lutcore.fp16_round(xs, mode=mode)
    assert r.shape == (6, 5) and np.array_equal(r, fp16_round_ref(np.ascontiguousarray(xs), mode))
    d = lutcore.fp16_decode(h.T)                          # strided uint16
    assert d.shape == (5, 6) and np.array_equal(d, fp16_decode_ref(np.ascontiguousarray(h.T)))
    e = lutcore.fp16_encode(np.zeros((0, 3), np.float32), mode=mode)
    assert e.shape == (0, 3)


def test_bad_mode():
    with pytest.raises(ValueError):
        lutcore.fp16_encode(np.zeros(3, np.float32), mode="bogus")
    with pytest.raises(ValueError):
        lutcore.fp16_round(np.zeros(3, np.float32), mode="up")
