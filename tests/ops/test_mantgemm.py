"""The mantissa-product GEMM (lutcore.ops.mantgemm, csrc/mantgemm/): bit for bit against the numpy
oracle (tests/reference/mantgemm_ref.py) on odd shapes (1, 7, 33, 65 and columns past the 16-lane
vectors and 64-column panels), both formats, the exact table (the mul route, and the same table
forced through the table route), Mitchell, truncated and random tables (zeros, float32 subnormal
and huge entries), data with zeros, subnormals of the format and of float32, NaN, +-inf, values
rounding to inf and products overflowing and underflowing float32; on every SIMD path at 1, 2 and
3 threads.  The operands' rounding bit for bit against ml_dtypes.bfloat16 (and torch.bfloat16) and
numpy's float16; the exact unit against torch's float32 products of bf16-rounded operands (bit
for bit, summed in k order) and a float64 sum (a named budget); errors naming the argument.
(tests/bodies/test_x86_bodies_mantgemm.py holds every body, SIMDe twin included, to the generic one.)"""
import ml_dtypes
import numpy as np
import pytest
import torch

import lutcore
from lutcore._native import mantgemm as _mt
from lutcore import _workspace
from lutcore.ops.mantgemm import mant_gemm, mant_round
from lutcore.units import MantissaUnit
from reference.mantgemm_ref import EMIN, exact_table, mant_gemm_ref, round_fmt

FMTS = ["bf16", "fp16"]
# (M, K, N): 1, 7, 33, 65; N across the 16-lane vectors and the 64-column panels
SHAPES = [(1, 1, 1), (7, 33, 65), (33, 7, 17), (65, 65, 7), (1, 100, 129), (13, 40, 64)]
SEQ_F32 = 2.0 ** -24          # a float32 sum of K terms against the exact sum: per k, relative to sum |p|


def bits(y):
    return np.ascontiguousarray(y, np.float32).view(np.uint32)


def assert_bits(got, want, what=""):
    bad = np.argwhere(bits(got) != bits(want))
    assert not len(bad), (what, len(bad), [(tuple(i), got[tuple(i)], want[tuple(i)]) for i in bad[:4]])


def operand(rng, shape, fmt, specials=True):
    """float32 data of every kind the contract names, at fixed places and at random ones."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    tiny = 2.0 ** EMIN[fmt]
    kinds = [0.0, -0.0, tiny * 0.5, -tiny * 0.75, tiny, 1e-42, tiny * (1 - 2.0 ** -12),    # subnormals, boundaries
             1e30 if fmt == "bf16" else 6e4, -3e38 if fmt == "bf16" else -65519.0,          # huge: products overflow
             3.4e38 if fmt == "bf16" else 7e4, 1e-30 if fmt == "bf16" else 1e-4]             # rounding to inf; small
    if specials:
        kinds += [np.nan, np.inf, -np.inf]
    pick = rng.random(shape) < 0.15
    x = np.where(pick, np.array(kinds)[rng.integers(0, len(kinds), shape)], x)
    return x.astype(np.float32)


def random_table(fmt, rng):
    n = 1 << (7 if fmt == "bf16" else 10)
    t = rng.uniform(0.0, 4.0, (n, n)).astype(np.float32)
    t[rng.random((n, n)) < 0.02] = 0.0
    t[rng.random((n, n)) < 0.02] = np.float32(1e-41)              # float32 subnormal entries
    t[rng.random((n, n)) < 0.02] = np.float32(3e38)               # products overflow
    return t


def units(fmt, rng):
    return {"exact": MantissaUnit.exact(fmt), "mitchell": MantissaUnit.mitchell(fmt),
            "truncated3": MantissaUnit.truncated(fmt, 3), "random": MantissaUnit.from_table(fmt, random_table(fmt, rng))}


def every_path(a, b, unit):
    """The result on every SIMD path at 1, 2 and 3 threads, all the same bits; returned once."""
    prev = lutcore.get_simd()
    try:
        ys = []
        for simd in lutcore.available_simd():
            lutcore.set_simd(simd)
            for nt in (1, 2, 3):
                ys.append((simd, nt, mant_gemm(a, b, unit, threads=nt)))
    finally:
        lutcore.set_simd(prev)
    for simd, nt, y in ys[1:]:
        assert_bits(y, ys[0][2], (simd, nt))
    return ys[0][2]


def native(a, b, table, fmt, route, isa=0, nt=1, mod=_mt):
    """The native call (of ``mod``: the module or a SIMDe twin) with a chosen route (the room picks
    the mul route for the exact table)."""
    code = mod.BF16 if fmt == "bf16" else mod.FP16
    y = np.full((a.shape[0], b.shape[1]), 7.0, np.float32)
    work = _workspace.empty_aligned(mod.work_size(a.shape[0], b.shape[1], a.shape[1], code, route, isa, nt))
    mod.gemm(y, a, b, table, code, route, work, isa, nt)
    return y


# ------------------------------------------------------------------ against the oracle
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_matches_the_reference(fmt, shape, rng):
    M, K, N = shape
    a, b = operand(rng, (M, K), fmt), operand(rng, (K, N), fmt)
    for name, u in units(fmt, rng).items():
        y = every_path(a, b, u)
        assert y.shape == (M, N) and y.dtype == np.float32
        assert_bits(y, mant_gemm_ref(a, b, u.table, fmt), name)


@pytest.mark.parametrize("fmt", FMTS)
def test_finite_data_and_rows_without_specials(fmt, rng):
    """No inf/NaN anywhere (the vector bodies' own lanes throughout), and one NaN row and one inf
    column among finite ones (those rows and panels take the scalar row, the others not)."""
    a = operand(rng, (20, 70), fmt, specials=False)
    b = operand(rng, (70, 150), fmt, specials=False)
    for name, u in units(fmt, rng).items():
        assert_bits(every_path(a, b, u), mant_gemm_ref(a, b, u.table, fmt), name)
        a2, b2 = a.copy(), b.copy()
        a2[3, 10], b2[66, 100] = np.nan, -np.inf                          # b's in its second 64 rows
        assert_bits(every_path(a2, b2, u), mant_gemm_ref(a2, b2, u.table, fmt), (name, "specials"))


@pytest.mark.parametrize("fmt", FMTS)
def test_the_mul_route_is_the_exact_table_through_the_table_route(fmt, rng):
    a, b = operand(rng, (9, 45), fmt), operand(rng, (45, 70), fmt)
    t = exact_table(fmt)
    want = mant_gemm_ref(a, b, t, fmt)
    for isa in sorted({0, lutcore._simd.isa_of(lutcore.available_simd()[-1])}):
        assert_bits(native(a, b, t, fmt, _mt.ROUTE_MUL, isa), want, ("mul", isa))
        assert_bits(native(a, b, t, fmt, _mt.ROUTE_TABLE, isa), want, ("table", isa))


def test_specials_by_hand():
    """inf x 0 = NaN (a flushed subnormal is 0); inf - inf = NaN; overflow to inf; NaN canonical;
    zeros +0; a subnormal operand contributes nothing even through a table with T[0, 0] = 3."""
    t = exact_table("bf16").copy()
    t[0, 0] = 3.0
    u = MantissaUnit.from_table("bf16", t)
    a = np.array([[np.inf, 1.0], [np.inf, 1e-39], [2.0 ** 100, 2.0 ** 100], [-0.0, 1e-39], [np.nan, 1.0],
                  [np.inf, 0.0]], np.float32)
    b = np.array([[1e-39, 2.0], [-1.0, 1e-39]], np.float32)
    for v in (u, MantissaUnit.exact("bf16")):
        y = mant_gemm(a, b, v)
        assert np.isnan(y[0, 0]) and y[0, 1] == np.inf                   # inf x subnormal; inf x 2 + ...
        assert np.isnan(y[1, 0])                                         # inf x 1e-39 (0): NaN
        t00 = float(v.table[0, 0])                                       # 1.0 x 1.0 through the unit
        assert y[2, 0] == -t00 * 2.0 ** 100 and y[2, 1] == t00 * 2.0 ** 101   # subnormal b: nothing added
        assert bits(y[3])[0] == 0 and bits(y[3])[1] == 0                 # +0 from -0 and subnormals
        assert (bits(y[4]) == 0x7FC00000).all()
        assert np.isnan(y[5, 0]) and y[5, 1] == np.inf
    y = mant_gemm(np.array([[1.0, 1.0]], np.float32), np.array([[np.inf], [-np.inf]], np.float32), u)
    assert bits(y)[0, 0] == 0x7FC00000                                    # inf + -inf
    y = mant_gemm(np.array([[2.0 ** 100], [-2.0 ** 100]], np.float32), np.array([[2.0 ** 100]], np.float32), u)
    assert y[0, 0] == np.inf and y[1, 0] == -np.inf                       # the product overflows


@pytest.mark.parametrize("fmt", FMTS)
def test_products_round_once_to_float32(fmt):
    """T[0, 0] with 24 significant bits scaled into float32's subnormals rounds once (nearest even,
    ties included); scaled past float32's top it is inf; a float32 subnormal entry scales exactly."""
    t = exact_table(fmt).copy()
    t[0, 0] = np.float32(1 + 2.0 ** -23)                                 # 1.ma = 1.mb = 1.0
    t[0, 1] = np.float32(1.5 * 2.0 ** -140)                              # a float32 subnormal entry
    u = MantissaUnit.from_table(fmt, t)
    lo = EMIN[fmt]
    one_b = 2.0 ** -1 if fmt == "bf16" else 2.0 ** -14
    cases = [(2.0 ** lo, 2.0 ** lo), (2.0 ** lo, one_b), (2.0 ** -100, 2.0 ** -49)] if fmt == "bf16" else \
        [(2.0 ** lo, 2.0 ** lo), (2.0 ** lo, one_b)]                      # fp16: no product leaves float32
    for x, w in cases:
        y = mant_gemm(np.array([[x]], np.float32), np.array([[w]], np.float32), u)
        exact = (1 + 2.0 ** -23) * x * w                                  # float64: exact
        assert bits(y)[0, 0] == bits(np.float32(exact)), (x, w, y, exact)
    m = 7 if fmt == "bf16" else 10
    y = mant_gemm(np.array([[1.0]], np.float32), np.array([[1.0 + 2.0 ** -m]], np.float32), u)   # mb = 1
    assert y[0, 0] == np.float32(1.5 * 2.0 ** -140)                      # T[0, 1] * 2^0
    if fmt == "bf16":
        y = mant_gemm(np.array([[2.0 ** 127]], np.float32), np.array([[2.0]], np.float32), u)
        assert y[0, 0] == np.inf


def test_empty_and_k0(rng):
    u = MantissaUnit.mitchell("bf16")
    assert mant_gemm(np.zeros((0, 5), np.float32), np.zeros((5, 3), np.float32), u).shape == (0, 3)
    assert mant_gemm(np.zeros((4, 5), np.float32), np.zeros((5, 0), np.float32), u).shape == (4, 0)
    y = mant_gemm(np.zeros((4, 0), np.float32), np.zeros((0, 3), np.float32), u)
    assert y.shape == (4, 3) and (bits(y) == 0).all()


# ------------------------------------------------------------------ the operands' rounding
def _rounding_inputs(rng, fmt):
    """float32 inputs: random bit patterns, and every value of the format with its midpoints and
    their float32 neighbours."""
    rnd = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    h = np.arange(1 << 16, dtype=np.uint32)
    if fmt == "bf16":
        vals = (h << 16).view(np.float32)
        mids = ((h << 16) | 0x8000).view(np.float32)
    else:
        vals = h.astype(np.uint16).view(np.float16).astype(np.float32)
        nxt = (h + 1).astype(np.uint16).view(np.float16).astype(np.float32)
        with np.errstate(invalid="ignore"):
            mids = ((vals.astype(np.float64) + nxt) / 2).astype(np.float32)
    mids = mids[np.isfinite(mids)]
    near = [np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))]
    return np.concatenate([rnd, vals, mids, *near]).astype(np.float32)


def _flushed(v, fmt):
    v = v.astype(np.float32)
    tiny = np.isfinite(v) & (np.abs(v) < np.float32(2.0 ** EMIN[fmt]))
    return np.where(tiny, np.copysign(np.float32(0), v), v).astype(np.float32)


@pytest.mark.parametrize("fmt", FMTS)
def test_rounding_is_ml_dtypes_and_numpy(fmt, rng):
    x = _rounding_inputs(rng, fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(ml_dtypes.bfloat16 if fmt == "bf16" else np.float16).astype(np.float32)
    want = _flushed(ref, fmt)
    nan = np.isnan(want)
    prev = lutcore.get_simd()
    try:
        for simd in lutcore.available_simd():                             # every body's pre-pass
            lutcore.set_simd(simd)
            got = mant_round(x, fmt)
            assert np.array_equal(np.isnan(got), nan)
            assert_bits(got[~nan], want[~nan], (fmt, simd))
            assert (np.signbit(got[nan]) == np.signbit(x[nan])).all()    # a NaN keeps its sign
    finally:
        lutcore.set_simd(prev)
    with np.errstate(invalid="ignore"):
        oracle = round_fmt(x, fmt).astype(np.float32)                     # the oracle's own rounding, too
    assert_bits(oracle[~nan], want[~nan], ("oracle", fmt))
    strided = x[:35].reshape(5, 7)[:, ::2]                                # any shape; strided input copied
    assert_bits(mant_round(strided, fmt), mant_round(strided.copy().ravel(), fmt).reshape(5, 4))


def test_torch_bfloat16_rounds_as_ml_dtypes(rng):
    x = _rounding_inputs(rng, "bf16")
    x = x[~np.isnan(x)]
    t = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert_bits(t, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert_bits(mant_round(x, "bf16"), _flushed(t, "bf16"))


# ------------------------------------------------------------------ the exact unit against its peers
def test_exact_bf16_is_torchs_float32_products_summed_in_k_order(rng):
    M, K, N = 9, 70, 33
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = (rng.standard_normal((K, N)) * 1e3).astype(np.float32)
    at = torch.from_numpy(a).to(torch.bfloat16).float()                   # (M, K) bf16 values in float32
    bt = torch.from_numpy(b).to(torch.bfloat16).float()
    y = torch.zeros(M, N)
    for k in range(K):
        y = y + at[:, k:k + 1] * bt[k:k + 1, :]                           # exact products, float32 sums
    got = every_path(a, b, MantissaUnit.exact("bf16"))
    assert_bits(got, y.numpy())
    ref64 = at.double() @ bt.double()                                    # exact products, float64 sum
    mag = at.abs().double() @ bt.abs().double()
    err = np.abs(got - ref64.numpy())
    budget = K * SEQ_F32 * mag.numpy()
    print("max |y - float64| / budget:", float((err / budget).max()))
    assert (err <= budget).all()
    tm = torch.matmul(at, bt).numpy()                                    # torch's own order: within budget
    assert (np.abs(tm - ref64.numpy()) <= budget).all()


def test_exact_fp16_against_a_float64_sum(rng):
    M, K, N = 17, 100, 40
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    a16, b16 = _flushed(a.astype(np.float16), "fp16"), _flushed(b.astype(np.float16), "fp16")
    got = every_path(a, b, MantissaUnit.exact("fp16"))
    ref64 = a16.astype(np.float64) @ b16.astype(np.float64)
    budget = K * SEQ_F32 * (np.abs(a16).astype(np.float64) @ np.abs(b16).astype(np.float64))
    print("max |y - float64| / budget:", float((np.abs(got - ref64) / budget).max()))
    assert (np.abs(got - ref64) <= budget).all()
    assert_bits(got, mant_gemm_ref(a, b, exact_table("fp16"), "fp16"))


# ------------------------------------------------------------------ the room
def test_out_strided_inputs_and_aliasing(rng):
    u = MantissaUnit.truncated("fp16", 5)
    a = operand(rng, (12, 12), "fp16")
    b = operand(rng, (12, 12), "fp16")
    want = mant_gemm(a, b, u)
    out = np.empty((12, 12), np.float32)
    assert mant_gemm(a, b, u, out=out) is out
    assert_bits(out, want)
    big = np.zeros((24, 12), np.float32)
    big[::2] = a
    assert_bits(mant_gemm(big[::2], np.asfortranarray(b), u), want)       # non-contiguous: copied
    a2 = a.copy()
    assert mant_gemm(a2, b, u, out=a2) is a2                              # out = a: a is read whole first
    assert_bits(a2, want)
    strided = np.empty((12, 24), np.float32)[:, ::2]
    assert mant_gemm(a, b, u, out=strided) is strided
    assert_bits(strided, want)


class _Fake:
    def __init__(self, fmt, table):
        self.fmt, self.table = fmt, table


BAD = [
    (lambda a, b, u: mant_gemm(a.astype(np.float64), b, u), TypeError, r"^a: expected dtype float32 \(M, K\), got float64"),
    (lambda a, b, u: mant_gemm(a, b.astype(np.float16), u), TypeError, r"^b: expected dtype float32 \(K, N\), got float16"),
    (lambda a, b, u: mant_gemm(a.tolist(), b, u), TypeError, r"^a: expected a float32 numpy array \(M, K\), got list"),
    (lambda a, b, u: mant_gemm(a[0], b, u), ValueError, r"^a: expected a 2-D array \(M, K\), got shape \(6,\)"),
    (lambda a, b, u: mant_gemm(a, b[:5], u), ValueError, r"^a, b: inner dimensions differ: a is \(4, 6\), b is \(5, 3\)"),
    (lambda a, b, u: mant_gemm(a, b, "exact"), TypeError, r"^unit: expected a MantissaUnit .* got str"),
    (lambda a, b, u: mant_gemm(a, b, _Fake("fp8", u.table)), ValueError, r"^unit.fmt: expected one of bf16, fp16, got 'fp8'"),
    (lambda a, b, u: mant_gemm(a, b, _Fake("fp16", u.table)), ValueError,
     r"^unit.table: a fp16 unit's table has shape \(1024, 1024\), got \(128, 128\)"),
    (lambda a, b, u: mant_gemm(a, b, _Fake("bf16", u.table.astype(np.float64))), TypeError,
     r"^unit.table: expected a float32 ndarray, got ndarray float64"),
    (lambda a, b, u: mant_gemm(a, b, _Fake("bf16", np.full((128, 128), np.nan, np.float32))), ValueError,
     r"^unit.table: expected finite entries >= 0, got T\[0, 0\] = nan"),
    (lambda a, b, u: mant_gemm(a, b, _Fake("bf16", -np.ones((128, 128), np.float32))), ValueError,
     r"^unit.table: expected finite entries >= 0"),
    (lambda a, b, u: mant_gemm(a, b, u, threads=0), ValueError, r"threads"),
    (lambda a, b, u: mant_gemm(a, b, u, threads=1.5), TypeError, r"threads"),
    (lambda a, b, u: mant_gemm(a, b, u, out=np.empty((4, 4), np.float32)), ValueError, r"^out: "),
    (lambda a, b, u: mant_gemm(a, b, u, out=np.empty((4, 3))), (TypeError, ValueError), r"^out: "),
    (lambda a, b, u: mant_round(a, "e4m3"), ValueError, r"^fmt: expected one of bf16, fp16, got 'e4m3'"),
    (lambda a, b, u: mant_round(a.astype(np.float64), "bf16"), TypeError, r"^x: expected a float32 ndarray"),
]


@pytest.mark.parametrize("call,err,match", BAD, ids=range(len(BAD)))
def test_bad_input_is_named(call, err, match):
    a, b = np.ones((4, 6), np.float32), np.ones((6, 3), np.float32)
    with pytest.raises(err, match=match):
        call(a, b, MantissaUnit.mitchell("bf16"))


def test_a_table_is_checked_once_unless_writeable(rng, monkeypatch):
    """A read-only table's check and route are kept; a writeable one (a duck-typed unit) is checked
    on every call, so a change between calls is seen."""
    from lutcore.ops import mantgemm as room
    a, b = operand(rng, (3, 9), "bf16"), operand(rng, (9, 5), "bf16")
    u = MantissaUnit.mitchell("bf16")
    calls = []
    real = room._route
    monkeypatch.setattr(room, "_route", lambda t, f: calls.append(1) or real(t, f))
    y = mant_gemm(a, b, u)
    assert_bits(mant_gemm(a, b, u), y)
    assert len(calls) == 1
    fake = _Fake("bf16", u.table.copy())
    assert_bits(mant_gemm(a, b, fake), y)
    fake.table[:] = exact_table("bf16")
    assert_bits(mant_gemm(a, b, fake), mant_gemm(a, b, MantissaUnit.exact("bf16")))
    fake.table[0, 0] = np.nan
    with pytest.raises(ValueError, match="unit.table"):
        mant_gemm(a, b, fake)


def test_threads_scope_and_body_names():
    from lutcore import _simd, _threads
    a, b = np.ones((40, 30), np.float32), np.ones((30, 200), np.float32)
    u = MantissaUnit.mitchell("fp16")
    with _threads.record() as calls, _threads.scope(2):
        mant_gemm(a, b, u)
        mant_gemm(a, b, u, threads=1)
    assert calls == [("mantgemm.gemm", 2), ("mantgemm.gemm", 1)]
    assert "mant_gemm" in _simd.bodies()
    assert _mt.body_names(0) == {"mant_gemm": "generic"}
