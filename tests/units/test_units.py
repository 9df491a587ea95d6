"""lutcore.Units: building, loading, saving, verifying and fingerprinting the
arithmetic-unit tables, and the shipped approximate multipliers."""
import re

import numpy as np
import pytest

import lutcore
from lutcore.units import approx
from reference.units_ref import default_relu_lut, default_requant_lut, exact_mul_lut

EXACT = exact_mul_lut()                                   # (65536,) int16
_IDX = np.arange(65536)
A8 = (_IDX >> 8).astype(np.uint8).view(np.int8).astype(np.int64)    # (65536,) a of entry
B8 = (_IDX & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)  # (65536,) b of entry
SWAP = (_IDX & 0xFF) * 256 + (_IDX >> 8)                  # entry index of (b, a)


def _assert_tables(u, mul, requant, relu):
    assert u.mul.dtype == np.int16 and u.mul.shape == (65536,)
    assert u.requant_lut.dtype == np.int8 and u.requant_lut.shape == (65536,)
    assert u.relu_lut.dtype == np.int8 and u.relu_lut.shape == (256,)
    assert np.array_equal(u.mul, mul)
    assert np.array_equal(u.requant_lut, requant)
    assert np.array_equal(u.relu_lut, relu)


# ---------------------------------------------------------------- exact / repr / digest
def test_exact_tables():
    u = lutcore.Units.exact()
    _assert_tables(u, EXACT, default_requant_lut(), default_relu_lut())
    assert u.is_exact is True or u.is_exact == True  # noqa: E712
    assert isinstance(u.digest, str) and re.fullmatch(r"[0-9a-f]{64}", u.digest)
    r = repr(u)
    assert u.digest[:12] in r and "exact" in r


def test_digest_is_deterministic_and_sensitive():
    d0 = lutcore.Units.exact().digest
    assert lutcore.Units.exact().digest == d0
    assert lutcore.Units.from_mul(EXACT.copy()).digest == d0
    t = EXACT.copy()
    t[12345] += 1
    u = lutcore.Units.from_mul(t)
    assert u.digest != d0
    assert u.is_exact == False  # noqa: E712
    r = repr(u)
    assert u.digest[:12] in r and "approx" in r


# ---------------------------------------------------------------- from_mul
def test_from_mul_flat_and_square(rng):
    t = rng.integers(-32768, 32768, 65536).astype(np.int16)
    u1 = lutcore.Units.from_mul(t)
    u2 = lutcore.Units.from_mul(t.reshape(256, 256))       # row a&0xff, column b&0xff
    u3 = lutcore.Units.from_mul(t.astype(np.int64).reshape(256, 256))
    for u in (u1, u2, u3):
        _assert_tables(u, t, default_requant_lut(), default_relu_lut())
        assert u.is_exact == False  # noqa: E712
    assert u1.digest == u2.digest == u3.digest


def test_from_mul_square_orientation():
    sq = np.zeros((256, 256), dtype=np.int16)
    sq[3, 250] = 7          # a = 3, b = -6
    u = lutcore.Units.from_mul(sq)
    assert u.mul[3 * 256 + 250] == 7 and u.mul[250 * 256 + 3] == 0


def test_from_mul_function():
    def exact(a, b):
        return np.asarray(a).astype(np.int32) * np.asarray(b).astype(np.int32)

    u = lutcore.Units.from_mul(exact)
    _assert_tables(u, EXACT, default_requant_lut(), default_relu_lut())
    assert u.is_exact == True  # noqa: E712
    assert u.digest == lutcore.Units.exact().digest

    def skew(a, b):  # a non-symmetric unit: a*b - 2a + (b > 0)
        a = np.asarray(a).astype(np.int32)
        b = np.asarray(b).astype(np.int32)
        return a * b - 2 * a + (b > 0)

    u = lutcore.Units.from_mul(skew)
    assert np.array_equal(u.mul, (A8 * B8 - 2 * A8 + (B8 > 0)).astype(np.int16))
    assert u.is_exact == False  # noqa: E712


@pytest.mark.parametrize("bad", [
    np.full(65536, 40000, dtype=np.int64),                  # outside int16
    np.full((256, 256), -40000, dtype=np.int32),
    np.zeros(65536, dtype=np.float32),                      # not integer
    np.zeros((256, 256), dtype=np.float64),
])
def test_from_mul_rejects_bad_values(bad):
    with pytest.raises((ValueError, TypeError)):
        lutcore.Units.from_mul(bad)


@pytest.mark.parametrize("shape", [(65535,), (256, 255), (128, 512), (2, 256, 256)])
def test_from_mul_rejects_bad_shape(shape):
    with pytest.raises(ValueError):
        lutcore.Units.from_mul(np.zeros(shape, dtype=np.int16))


def test_from_mul_function_out_of_range():
    with pytest.raises((ValueError, TypeError)):
        lutcore.Units.from_mul(lambda a, b: np.asarray(a).astype(np.int64) * 1000)


# ---------------------------------------------------------------- save / load
def test_save_load_roundtrip(tmp_path, rng):
    t = rng.integers(-32768, 32768, 65536).astype(np.int16)
    u = lutcore.Units.from_mul(t)
    u.save(tmp_path)
    assert (tmp_path / "mul_lut.bin").read_bytes() == t.astype("<i2").tobytes()
    assert (tmp_path / "requant_lut.bin").read_bytes() == default_requant_lut().tobytes()
    assert (tmp_path / "relu_lut.bin").read_bytes() == default_relu_lut().tobytes()
    v = lutcore.Units.load(tmp_path)
    _assert_tables(v, t, default_requant_lut(), default_relu_lut())
    assert v.digest == u.digest
    v2 = lutcore.Units.load(str(tmp_path))  # str path too
    assert v2.digest == u.digest


def test_load_custom_tables_little_endian(tmp_path, rng):
    t = rng.integers(-32768, 32768, 65536).astype(np.int16)
    rq = rng.integers(-128, 128, 65536).astype(np.int8)
    rl = rng.integers(-128, 128, 256).astype(np.int8)
    (tmp_path / "mul_lut.bin").write_bytes(t.astype("<i2").tobytes())
    (tmp_path / "requant_lut.bin").write_bytes(rq.tobytes())
    (tmp_path / "relu_lut.bin").write_bytes(rl.tobytes())
    u = lutcore.Units.load(tmp_path)
    _assert_tables(u, t, rq, rl)
    assert u.is_exact == False  # noqa: E712


def _write_exact_mul(d):
    (d / "mul_lut.bin").write_bytes(EXACT.astype("<i2").tobytes())


def test_load_missing_requant_relu_are_exact_defaults_and_reported(tmp_path):
    _write_exact_mul(tmp_path)                            # mul only
    u = lutcore.Units.load(tmp_path)
    _assert_tables(u, EXACT, default_requant_lut(), default_relu_lut())
    assert u.is_exact == True  # noqa: E712
    assert u.digest == lutcore.Units.exact().digest
    assert u.defaulted == ("requant", "relu")
    assert "defaulted=requant+relu" in repr(u)
    assert "exact defaults used: requant, relu" in str(u.verify())
    rl = np.arange(256).astype(np.uint8).view(np.int8).copy()
    (tmp_path / "relu_lut.bin").write_bytes(rl.tobytes())  # relu given too
    u = lutcore.Units.load(tmp_path)
    _assert_tables(u, EXACT, default_requant_lut(), rl)
    assert u.digest != lutcore.Units.exact().digest
    assert u.defaulted == ("requant",)


@pytest.mark.parametrize("files", [[], ["mul_lut.bn"], ["relu_lut.bin"], ["model.safetensors", "trainer.json"]])
def test_load_dir_without_mul_is_an_error(tmp_path, files):
    """An empty directory, a typo or a checkpoint directory used to pass for the exact multiplier."""
    for f in files:
        (tmp_path / f).write_bytes(b"\0" * 512)
    with pytest.raises(ValueError) as ei:
        lutcore.Units.load(tmp_path)
    msg = str(ei.value)
    print(msg)
    assert str(tmp_path) in msg and "mul_lut.bin" in msg and "requant_lut.bin" in msg and "relu_lut.bin" in msg
    for f in files:
        assert f in msg
    from lutcore.units import resolve
    with pytest.raises(ValueError, match="mul_lut.bin"):
        resolve(str(tmp_path))


def test_load_unknown_file_warns(tmp_path):
    _write_exact_mul(tmp_path)
    (tmp_path / "requant_lut.bn").write_bytes(b"\0" * 65536)
    (tmp_path / ".hidden").write_bytes(b"")
    with pytest.warns(UserWarning, match=r"requant_lut\.bn") as rec:
        u = lutcore.Units.load(tmp_path)
    assert not any(".hidden" in str(w.message) for w in rec)
    assert u.defaulted == ("requant", "relu")


@pytest.mark.parametrize("name,size", [("mul_lut.bin", 65536), ("mul_lut.bin", 131071),
                                       ("requant_lut.bin", 65535), ("relu_lut.bin", 512),
                                       ("relu_lut.bin", 0)])
def test_load_wrong_size_names_file(tmp_path, name, size):
    _write_exact_mul(tmp_path)
    (tmp_path / name).write_bytes(b"\x01" * size)
    with pytest.raises(ValueError) as ei:
        lutcore.Units.load(tmp_path)
    print(ei.value)
    assert name in str(ei.value)


# ---------------------------------------------------------------- verify
def test_verify_exact():
    rep = lutcore.Units.exact().verify()
    for part in (rep.mul, rep.requant, rep.relu):
        assert part.exact == True  # noqa: E712
        assert part.max_abs_err == 0 and part.mean_abs_err == 0 and part.bias == 0
    assert rep.mul.symmetric == True  # noqa: E712
    s = str(rep)
    print(s)
    assert isinstance(s, str) and len(s.splitlines()) >= 3


def test_verify_known_errors():
    t = EXACT.astype(np.int64)
    t[(3 & 0xFF) * 256 + (5 & 0xFF)] += 2        # only (3, 5): asymmetric
    rep = lutcore.Units.from_mul(t.astype(np.int16)).verify()
    print(rep)
    assert rep.mul.exact == False and rep.mul.symmetric == False  # noqa: E712
    assert rep.mul.max_abs_err == 2
    assert rep.mul.mean_abs_err == pytest.approx(2 / 65536)
    assert rep.mul.bias == pytest.approx(2 / 65536)
    assert rep.requant.exact == True and rep.relu.exact == True  # noqa: E712

    t = EXACT.astype(np.int64)
    t[(-7 & 0xFF) * 256 + (9 & 0xFF)] -= 3      # (-7, 9) and (9, -7): symmetric
    t[(9 & 0xFF) * 256 + (-7 & 0xFF)] -= 3
    rep = lutcore.Units.from_mul(t.astype(np.int16)).verify()
    print(rep)
    assert rep.mul.exact == False and rep.mul.symmetric == True  # noqa: E712
    assert rep.mul.max_abs_err == 3
    assert rep.mul.mean_abs_err == pytest.approx(6 / 65536)
    assert rep.mul.bias == pytest.approx(-6 / 65536)


def test_verify_requant_relu_errors(tmp_path):
    rq = default_requant_lut().copy()
    rq[5] = 9                                      # +4 at t = 5
    rl = default_relu_lut().copy()
    rl[(-1) & 0xFF] = -1                           # relu(-1) = -1: error -1
    _write_exact_mul(tmp_path)
    (tmp_path / "requant_lut.bin").write_bytes(rq.tobytes())
    (tmp_path / "relu_lut.bin").write_bytes(rl.tobytes())
    rep = lutcore.Units.load(tmp_path).verify()
    print(rep)
    assert rep.mul.exact == True  # noqa: E712
    assert rep.requant.exact == False and rep.requant.max_abs_err == 4  # noqa: E712
    assert rep.requant.bias > 0
    assert rep.relu.exact == False and rep.relu.max_abs_err == 1  # noqa: E712
    assert rep.relu.bias < 0


def _natural_order(t):
    """A (65536,) table rewritten with row/column 0 = -128 (entry [a + 128, b + 128])."""
    return np.roll(np.asarray(t).reshape(256, 256), (128, 128), axis=(0, 1)).reshape(65536)


@pytest.mark.parametrize("make", [lambda: EXACT, lambda: approx.mitchell().mul, lambda: approx.truncated(4).mul])
def test_verify_flags_natural_order_table(make):
    rep = lutcore.Units.from_mul(_natural_order(make())).verify()
    print(rep)
    assert rep.layout is not None and "natural order" in rep.layout and "(a & 0xff) * 256" in rep.layout
    assert "WARNING" in str(rep)


def test_verify_flags_one_axis_rotation():
    rot = np.roll(EXACT.reshape(256, 256), 128, axis=1).reshape(65536)    # only b in natural order
    rep = lutcore.Units.from_mul(rot).verify()
    print(rep)
    assert rep.layout is not None and "rotated" in rep.layout


@pytest.mark.parametrize("u", [lutcore.Units.exact(), approx.mitchell(), approx.truncated(6),
                               approx.reduced_operands(3)], ids=lambda u: u.name)
def test_verify_no_layout_flag_for_correct_tables(u):
    assert u.verify().layout is None


# ---------------------------------------------------------------- shipped approximations
APPROX = [("truncated", 1), ("truncated", 3), ("mitchell", None),
          ("reduced_operands", 4), ("reduced_operands", 6)]


def _make(name, arg):
    fn = getattr(approx, name)
    return fn() if arg is None else fn(arg)


@pytest.mark.parametrize("name,arg", APPROX, ids=[f"{n}-{a}" for n, a in APPROX])
def test_approx_non_exact(name, arg):
    u = _make(name, arg)
    assert isinstance(u, lutcore.Units)
    assert u.mul.dtype == np.int16 and u.mul.shape == (65536,)
    assert u.is_exact == False  # noqa: E712
    assert not np.array_equal(u.mul, EXACT)
    rep = u.verify()
    print(rep)
    assert rep.mul.exact == False  # noqa: E712
    assert rep.mul.max_abs_err > 0 and rep.mul.mean_abs_err > 0
    err = np.abs(u.mul.astype(np.int64) - EXACT)
    assert rep.mul.max_abs_err == err.max()
    assert rep.mul.mean_abs_err == pytest.approx(err.mean())
    assert rep.mul.bias == pytest.approx((u.mul.astype(np.int64) - EXACT).mean())
    assert u.digest != lutcore.Units.exact().digest
    assert "approx" in repr(u)


def test_truncated_zero_is_exact():
    u = approx.truncated(0)
    assert u.is_exact == True  # noqa: E712
    assert np.array_equal(u.mul, EXACT)


def test_mitchell_properties():
    m = approx.mitchell().mul.astype(np.int64)      # (65536,)
    p = A8 * B8                                     # (65536,) exact products
    over = np.abs(m) > np.abs(p)
    print("overestimates:", int(over.sum()))
    assert not over.any()                           # never overestimates |a*b|
    assert np.all(m * p >= 0)                       # sign of the product kept (sign-magnitude)
    assert np.all(m[(A8 == 0) | (B8 == 0)] == 0)    # zero operand -> 0 (implied by the bound)
    pow2 = lambda v: (v != 0) & ((np.abs(v) & (np.abs(v) - 1)) == 0)
    both = pow2(A8) & pow2(B8)
    assert np.array_equal(m[both], p[both])         # exact for powers of two
    assert np.array_equal(m, m[SWAP])               # a commutative unit
    assert approx.mitchell().verify().mul.symmetric == True  # noqa: E712


def test_reduced_operands_7_bits_is_exact():
    # every int8 magnitude (<= 127, and 128 = 2^7) fits in 7 significant bits
    assert lutcore.units.approx.reduced_operands(7).is_exact
