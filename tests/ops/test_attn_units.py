"""Attention's two products through the units, held to tests/reference/attn_ref.py:

* ``attn_scores`` / ``attn_values`` give the oracle's bits on odd shapes (R, S in 1, 7, 33, 70;
  D in 1, 7, 32, 33, 64, 130; blocks not dividing them), through signed 8 x 8 (exact, mitchell),
  unsigned and mixed formats, an approximate unsigned table, and declared registers (a
  saturating 16-bit one that overflows here, a 20-bit one that cannot, one with an approximate
  adder in chunks), every SIMD path, threads 1 and 2;
* the decode property: a causal row's values equal those of its visible prefix, a score depends
  on its query and its key alone;
* ``check_attention_units`` accepts what keeps masked positions out and refuses (naming
  ``where``) a table with T[0, b] != 0 and an adder that changes r + 0;
* bad input named; the float picture: scores within the quantization bound of q @ k^T, the
  whole attention near torch's softmax(q k^T) v.
"""
import functools

import numpy as np
import pytest
import torch

from lutcore import quant
from lutcore.ops.rows import softmax_causal
from lutcore.units import Units, approx
from lutcore.units.accumulator import Accumulator
from lutcore.units.adders import Adder
from reference.attn_ref import attention_ref, causal_softmax_ref, scores_ref, values_ref
from reference.format_ref import quantize_ref as codes_ref
from reference.quant_ref import quantize_ref as q8_ref
from test_accum_paths import _acc_kw, _loa

THREADS = (1, 2)
SOFTMAX_ATOL = 2e-6          # lutcore's softmax kernel vs float64 cast to float32, per probability
ATTN_RRMSE = 0.03            # 8-bit exact units vs torch's float64 attention (relative RMSE)


def _trunc8u(a, b):
    """An approximate 8u x 8u product: the low 3 bits dropped, an operand-asymmetric error added
    (so a transposed table shows); T[0, b] = 0."""
    return ((a * b) >> 3 << 3) + (a & 7) * (b > 128)


def _leaky8u(a, b):
    """Exact but for 0 x 3 = 1: a masked position would count."""
    return a * b + ((a == 0) & (b == 3))


def _or_one_adder(bits=16):
    """A signed ripple-carry adder whose sum bit 0 is a0 | b0 | 1 (node 1: the constant 1),
    carries exact: r + 0 = r | 1."""
    from lutcore.units.netlist import Netlist
    gates = []

    def g(x, y, z, tt):
        gates.append((x, y, z, tt))
        return 2 + 2 * bits + len(gates) - 1
    a = [2 + i for i in range(bits)]
    b = [2 + bits + i for i in range(bits)]
    outs = [g(a[0], b[0], 1, 0xFE)]                          # x | y | z, z = 1
    c = g(a[0], b[0], 0, 0xE8)                                # maj(a0, b0, 0)
    for i in range(1, bits):
        outs.append(g(a[i], b[i], c, 0x96))
        c = g(a[i], b[i], c, 0xE8)
    outs.append(g(a[bits - 1], b[bits - 1], c, 0x96))         # the sign-extended sum bit
    return Adder(Netlist(bits, bits, bits + 1, np.array(gates, np.int32), np.array(outs, np.int32)), True,
                 name=f"or1_{bits}s")


UNITS = {   # name -> maker; every one passes check_attention_units
    "exact": lambda: Units.exact(),
    "mitchell": lambda: approx.mitchell(),
    "8u": lambda: Units.exact("8u"),
    "8u x 4s": lambda: Units.exact("8u x 4s"),
    "trunc8u": lambda: Units.from_mul(_trunc8u, format="8u", name="trunc8u"),
    "exact@16s:saturate": lambda: Units.exact().with_accumulator("16s:saturate"),
    "exact@20s": lambda: Units.exact().with_accumulator("20s"),
    "mitchell@16s:saturate:chunks=3+loa": lambda: approx.mitchell().with_accumulator(
        Accumulator.parse("16s:saturate:chunks=3", adder=_loa(16, True, 5))),
}
SHAPES = [  # (R, S, D, block)
    (1, 1, 1, 32), (7, 33, 7, 32), (33, 7, 32, 32), (70, 33, 33, 32), (1, 70, 64, 32),
    (33, 1, 130, 32), (7, 70, 130, 32), (70, 7, 1, 32), (7, 70, 33, 16), (33, 33, 64, 48),
    (7, 7, 33, 1), (7, 33, 130, 256),
]


@functools.lru_cache(maxsize=None)
def _units(name):
    return UNITS[name]()


def _fmt(u):
    f = u.format
    return (f.a_bits, f.a_signed, f.b_bits, f.b_signed)


def _acc(u):
    return None if u.accumulator is None else _acc_kw(u.accumulator)


@functools.lru_cache(maxsize=None)
def _data(R, S, D):
    """q (R, D), k (S, D), v (S, D), p (R, S) float32, fixed per shape; edge rows on purpose."""
    rng = np.random.default_rng(R * 1_000_003 + S * 1009 + D)
    q = (2 * rng.standard_normal((R, D))).astype(np.float32)           # (R, D)
    k = rng.standard_normal((S, D)).astype(np.float32)                 # (S, D)
    v = rng.standard_normal((S, D)).astype(np.float32)                 # (S, D)
    q[0] = np.abs(q[0])                                                # with k[0]: a large positive
    k[0] = np.abs(k[0]) + 1                                            # score, a 16-bit register saturates
    v[:, 0] = 3 + np.abs(v[:, 0])                                      # column 0 each row's largest
    if R > 1:
        q[-1] = 0                                                      # an all-zero query: scale 0
    if S > 1:
        k[-1] = 0                                                      # an all-zero key
        v[-1] = 0                                                      # an all-zero value row: s_v = 0
    p = rng.random((R, S)).astype(np.float32)                          # (R, S)
    p[rng.random((R, S)) < 0.25] = 0                                   # masked positions
    return q, k, v, p


@functools.lru_cache(maxsize=None)
def _want(name, kind, R, S, D, block):
    u = _units(name)
    q, k, v, p = _data(R, S, D)
    if kind == "scores":
        return scores_ref(q, k, u.table(), _fmt(u), block, acc=_acc(u))
    return values_ref(p, v, u.table(), _fmt(u), block, acc=_acc(u))


def _assert_bits(got, want, what):
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == want.shape, \
        (what, type(got), getattr(got, "dtype", None), getattr(got, "shape", None), want.shape)
    diff = got.view(np.int32) != want.view(np.int32)
    if diff.any():
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        i = np.unravel_index(int(np.argmax(np.where(diff, d, -1))), d.shape)
        print(f"{what}: {int(diff.sum())} of {diff.size} differ, max |diff| {d.max():.6g} at {i}: "
              f"got {got[i]!r}, want {want[i]!r}")
    assert not diff.any(), what


# ------------------------------------------------------------------ the bits, against the oracle
@pytest.fixture(autouse=True)
def _teams_on_every_size(monkeypatch):
    """The products run on one thread below ATTN_SERIAL_MACS; here every size takes the team, so
    threads=2 is exercised on the small shapes too."""
    monkeypatch.setattr(quant, "ATTN_SERIAL_MACS", 0)


@pytest.mark.parametrize("R, S, D, block", SHAPES)
@pytest.mark.parametrize("name", UNITS)
def test_scores_bits(simd, name, R, S, D, block):
    q, k, _, _ = _data(R, S, D)
    want = _want(name, "scores", R, S, D, block)
    for th in THREADS:
        got = quant.attn_scores(q, k, _units(name), block=block, threads=th)
        _assert_bits(got, want, f"attn_scores {name} R={R} S={S} D={D} block={block} {simd} threads={th}")


@pytest.mark.parametrize("R, S, D, block", SHAPES)
@pytest.mark.parametrize("name", UNITS)
def test_values_bits(simd, name, R, S, D, block):
    _, _, v, p = _data(R, S, D)
    want = _want(name, "values", R, S, D, block)
    for th in THREADS:
        got = quant.attn_values(p, v, _units(name), block=block, threads=th)
        _assert_bits(got, want, f"attn_values {name} R={R} S={S} D={D} block={block} {simd} threads={th}")


def test_the_narrow_register_overflows_here():
    """The grid above would not see a dropped register if nothing overflowed: it does."""
    for name in ("exact@16s:saturate", "mitchell@16s:saturate:chunks=3+loa"):
        base = name.split("@")[0]
        for kind in ("scores", "values"):
            a, b = _want(name, kind, 7, 70, 130, 32), _want(base, kind, 7, 70, 130, 32)
            assert not np.array_equal(a, b), (name, kind)
    wide, base = _want("exact@20s", "values", 7, 70, 130, 32), _want("exact", "values", 7, 70, 130, 32)
    assert np.array_equal(wide.view(np.int32), base.view(np.int32))


def test_signed_8_bit_codes_are_q8(rng):
    """For 8-bit signed codes quantize_codes and the Q8 blocks coincide (scale, codes, zero point
    0), so the scores' two contracts agree: lutcore's int8 path and its zero-point path (a register
    wide enough for every sum), and the oracle's two branches."""
    x = (3 * rng.standard_normal((9, 100))).astype(np.float32)
    x[1, 32:64] = 0                                                    # an all-zero block
    x[2, :32] = np.arange(32, dtype=np.float32) * 0.5 - 8              # ties at the half
    x[2, 0] = 127 * 0.5                                                # ... on a scale of 0.5
    for block in (32, 7):
        q8 = quant.quantize(x, block)
        qr, sr = q8_ref(x, block)
        assert np.array_equal(q8.q, qr) and np.array_equal(q8.scale.view(np.int32), sr.view(np.int32))
        for j, b0 in enumerate(range(0, x.shape[1], block)):
            xb = x[:, b0:b0 + block]
            qc, sc, zc = quant.quantize_codes(xb, 8, True, axis=1)
            assert np.array_equal(qc, q8.q[:, b0:b0 + xb.shape[1]].astype(np.int64)), (block, b0)
            assert np.array_equal(sc[:, 0].view(np.int32), q8.scale[:, j].view(np.int32)) and not zc.any()
            for r in range(x.shape[0]):                                # the two oracles agree too
                cq, cs, cz = codes_ref(xb[r], 8, True)
                assert np.array_equal(cq, qr[r, b0:b0 + xb.shape[1]]) and cs == sr[r, j] and cz == 0
    # quantize_codes' axis reads as the values' per-position quantization (over D, axis=1)
    v = (rng.standard_normal((5, 37)) + 1).astype(np.float32)
    for bits, signed in ((8, False), (4, True), (8, True)):
        qc, sc, zc = quant.quantize_codes(v, bits, signed, axis=1)
        for s in range(5):
            cq, cs, cz = codes_ref(v[s], bits, signed)
            assert np.array_equal(qc[s], cq) and sc[s, 0] == cs and zc[s, 0] == cz, (bits, signed, s)
    q, k, _, _ = _data(33, 70, 130)
    for base in ("exact", "mitchell"):
        u = _units(base)
        q8_branch = scores_ref(q, k, u.table(), _fmt(u), 32)
        zp_branch = scores_ref(q, k, u.table(), _fmt(u), 32, acc=dict(bits=32, signed=True, overflow="wrap",
                                                                      order="sequential", chunk=1))
        assert np.array_equal(q8_branch.view(np.int32), zp_branch.view(np.int32)), base
        wide = u.with_accumulator("32s")
        assert np.array_equal(quant.attn_scores(q, k, wide).view(np.int32), q8_branch.view(np.int32)), base


# ------------------------------------------------------------------ decode: a row sees its prefix alone
DECODE_UNITS = ["exact", "mitchell", "8u", "8u x 4s", "trunc8u", "exact@16s:saturate",
                "mitchell@16s:saturate:chunks=3+loa"]


@pytest.mark.parametrize("name", DECODE_UNITS)
def test_values_of_a_causal_row_are_its_prefix(rng, name):
    u = _units(name)
    S, D = 70, 33
    v = rng.standard_normal((S, D)).astype(np.float32)                 # (S, D)
    v[:, 1] += 2                                                       # large sums: the register saturates
    p = rng.random((S, S)).astype(np.float32)                          # (S, S) one query per position
    p[np.triu_indices(S, 1)] = 0                                       # causal: zeros past the row
    full = quant.attn_values(p, v, u)                                  # (S, D)
    want = values_ref(p, v, u.table(), _fmt(u), 32, acc=_acc(u))
    _assert_bits(full, want, f"attn_values {name} causal ({S}, {S}) x ({S}, {D})")
    for t in range(S):
        got = quant.attn_values(p[t:t + 1, :t + 1], v[:t + 1], u)      # (1, D) the decode step
        _assert_bits(got, full[t:t + 1], f"attn_values {name}: row {t} from its {t + 1} visible positions")
    for t in (0, 31, 32, 47):
        got = quant.attn_values(p[:t + 1, :t + 1], v[:t + 1], u, threads=2)   # (t+1, D) a prefill
        _assert_bits(got, full[:t + 1], f"attn_values {name}: rows 0..{t} from positions 0..{t}")
    ref = values_ref(p[20:21, :21], v[:21], u.table(), _fmt(u), 32, acc=_acc(u))   # the oracle has it too
    _assert_bits(ref, want[20:21], f"values_ref {name}: row 20's prefix")


def test_a_leaky_table_breaks_the_decode_property(rng):
    """Why check_attention_units refuses T[0, b] != 0: the contract's formula still holds (lutcore
    gives the oracle's bits), but a masked position now counts."""
    u = Units.from_mul(_leaky8u, format="8u", name="leaky")
    S, D = 40, 9
    v = rng.standard_normal((S, D)).astype(np.float32)
    p = rng.random((S, S)).astype(np.float32)
    p[np.triu_indices(S, 1)] = 0
    full = quant.attn_values(p, v, u)
    _assert_bits(full, values_ref(p, v, u.table(), _fmt(u), 32), "attn_values leaky")
    rows = [quant.attn_values(p[t:t + 1, :t + 1], v[:t + 1], u)[0] for t in range(S)]
    assert not np.array_equal(np.stack(rows).view(np.int32), full.view(np.int32))


@pytest.mark.parametrize("name", ["exact", "8u x 4s", "exact@16s:saturate"])
def test_a_score_depends_on_its_query_and_key_alone(rng, name):
    u = _units(name)
    q, k, _, _ = _data(33, 70, 130)
    full = quant.attn_scores(q, k, u)                                  # (33, 70)
    for r in range(q.shape[0]):
        _assert_bits(quant.attn_scores(q[r:r + 1], k, u), full[r:r + 1], f"{name}: query row {r} alone")
    for s in range(k.shape[0]):
        _assert_bits(quant.attn_scores(q, k[s:s + 1], u), full[:, s:s + 1], f"{name}: key {s} alone")
    for t in (0, 31, 32, 69):
        _assert_bits(quant.attn_scores(q, k[:t + 1], u, threads=2), full[:, :t + 1], f"{name}: keys 0..{t}")
    pr, ps = rng.permutation(q.shape[0]), rng.permutation(k.shape[0])
    _assert_bits(quant.attn_scores(q[pr], k[ps], u), full[pr][:, ps], f"{name}: rows and keys permuted")


# ------------------------------------------------------------------ check_attention_units
def test_check_attention_units_accepts():
    for name in UNITS:
        u = _units(name)
        got = quant.check_attention_units(u, "blk.0.attn")
        assert isinstance(got, Units) and got.digest == u.digest, name
    assert quant.check_attention_units("exact").digest == Units.exact().digest
    assert quant.check_attention_units("mitchell@16s:saturate").accumulator is not None
    wide = Units.exact().with_accumulator(Accumulator.parse("16s", adder=Adder.exact(16, True)))
    assert quant.check_attention_units(wide) is not None


def test_check_attention_units_refuses():
    leaky = Units.from_mul(_leaky8u, format="8u", name="leaky")
    assert leaky.table()[0, 3] == 1
    with pytest.raises(ValueError, match=r"^blk\.3\.attn: .*leaky"):
        quant.check_attention_units(leaky, "blk.3.attn")
    with pytest.raises(ValueError, match=r"^units: "):
        quant.check_attention_units(leaky)
    ad = _or_one_adder(16)
    r = np.array([0, 2, -4, 100], np.int64)
    assert np.array_equal(ad.add(r, np.zeros_like(r)), r | 1)         # the circuit is what it says
    u = Units.exact().with_accumulator(Accumulator.parse("16s:saturate", adder=ad))
    with pytest.raises(ValueError, match=r"^layer7: .*or1_16s"):
        quant.check_attention_units(u, "layer7")


# ------------------------------------------------------------------ bad input, named
def _with(x, val):
    x = x.copy()
    x[-1, -1] = val
    return x


_NAN, _INF = np.float32(np.nan), np.float32(np.inf)
BAD = [   # (case, call on (q, k, v, p, u), exception, the message's start)
    ("p negative", lambda q, k, v, p, u: quant.attn_values(-p - 1e-3, v, u), ValueError, r"^p\b"),
    ("p, v positions", lambda q, k, v, p, u: quant.attn_values(p, v[:-1], u), ValueError, r"^p, v\b"),
    ("p 1-D", lambda q, k, v, p, u: quant.attn_values(p[0], v, u), ValueError, r"^p\b"),
    ("v 3-D", lambda q, k, v, p, u: quant.attn_values(p, v[None], u), ValueError, r"^v\b"),
    ("q, k head dims", lambda q, k, v, p, u: quant.attn_scores(q, k[:, :-1], u), ValueError, r"^q, k\b"),
    ("q 1-D", lambda q, k, v, p, u: quant.attn_scores(q[0], k, u), ValueError, r"^q\b"),
    ("k 3-D", lambda q, k, v, p, u: quant.attn_scores(q, k[None], u), ValueError, r"^k\b"),
    ("q NaN", lambda q, k, v, p, u: quant.attn_scores(_with(q, _NAN), k, u), ValueError, r"^q:"),
    ("q Inf", lambda q, k, v, p, u: quant.attn_scores(_with(q, _INF), k, u), ValueError, r"^q:"),
    ("k NaN", lambda q, k, v, p, u: quant.attn_scores(q, _with(k, _NAN), u), ValueError, r"^k:"),
    ("k -Inf", lambda q, k, v, p, u: quant.attn_scores(q, _with(k, -_INF), u), ValueError, r"^k:"),
    ("p NaN", lambda q, k, v, p, u: quant.attn_values(_with(p, _NAN), v, u), ValueError, r"^p:"),
    ("p Inf", lambda q, k, v, p, u: quant.attn_values(_with(p, _INF), v, u), ValueError, r"^p:"),
    ("v NaN", lambda q, k, v, p, u: quant.attn_values(p, _with(v, _NAN), u), ValueError, r"^v:"),
    ("v Inf", lambda q, k, v, p, u: quant.attn_values(p, _with(v, _INF), u), ValueError, r"^v:"),
    ("scores block 0", lambda q, k, v, p, u: quant.attn_scores(q, k, u, block=0), ValueError, r"^block\b"),
    ("values block 0", lambda q, k, v, p, u: quant.attn_values(p, v, u, block=0), ValueError, r"^block\b"),
    ("threads 0", lambda q, k, v, p, u: quant.attn_values(p, v, u, threads=0), ValueError, r"^threads\b"),
    ("units unknown", lambda q, k, v, p, u: quant.attn_scores(q, k, "no-such-unit"), ValueError, r"^units\b"),
]


@pytest.mark.parametrize("case, call, exc, pattern", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("name", ["exact", "8u x 4s"])
def test_bad_input_named(name, case, call, exc, pattern):
    q, k, v, p = _data(7, 33, 7)
    with pytest.raises(exc, match=pattern):
        call(q, k, v, p, _units(name))


def test_tiny_scales_and_strided_input(simd):
    """Subnormal scales and p' (a kernel flushing denormals would differ), and non-contiguous
    operands (the bits of their contiguous copies)."""
    rng = np.random.default_rng(7)
    R, S, D = 7, 40, 33
    q = rng.standard_normal((R, D)).astype(np.float32)
    k = rng.standard_normal((S, D)).astype(np.float32)
    v = rng.standard_normal((S, D)).astype(np.float32)
    p = rng.random((R, S)).astype(np.float32)
    q[1] *= np.float32(1e-37)                                          # s_q subnormal
    k[2] *= np.float32(1e-37)
    v[3] *= np.float32(1e-36)                                          # s_v subnormal
    v[4] *= np.float32(1e-44)                                          # v itself subnormal
    p[:, 5] *= np.float32(1e-40)                                       # p subnormal
    for name in ("exact", "mitchell", "8u", "8u x 4s", "exact@16s:saturate"):
        u = _units(name)
        ws = scores_ref(q, k, u.table(), _fmt(u), 32, acc=_acc(u))
        wv = values_ref(p, v, u.table(), _fmt(u), 32, acc=_acc(u))
        for th in THREADS:
            _assert_bits(quant.attn_scores(q, k, u, threads=th), ws, f"attn_scores {name} tiny {simd} threads={th}")
            _assert_bits(quant.attn_values(p, v, u, threads=th), wv, f"attn_values {name} tiny {simd} threads={th}")
        qs = np.zeros((R, 2 * D), np.float32)
        qs[:, ::2] = q
        qs = qs[:, ::2]                                                # (R, D) strided, q's values
        _assert_bits(quant.attn_scores(qs, np.asfortranarray(k), u), ws, f"attn_scores {name} strided")
        _assert_bits(quant.attn_values(np.asfortranarray(p), v[::-1][::-1], u), wv, f"attn_values {name} strided")


# ------------------------------------------------------------------ the float picture
def _steps(x, bits, signed, block):
    """Each element's quantization step bound (the scale of its row's block), float64 (R, K)."""
    R, K = x.shape
    out = np.zeros((R, K))
    for b0 in range(0, K, block):
        xb = x[:, b0:b0 + block].astype(np.float64)
        if signed:
            s = np.abs(xb).max(axis=1) / (2 ** (bits - 1) - 1)
        else:
            s = (np.maximum(xb.max(axis=1), 0) - np.minimum(xb.min(axis=1), 0)) / (2 ** bits - 1)
        out[:, b0:b0 + block] = s[:, None]
    return out


@pytest.mark.parametrize("name", ["exact", "8u"])
def test_scores_within_the_quantization_bound(name):
    u = _units(name)
    q, k, _, _ = _data(33, 70, 130)
    got = quant.attn_scores(q, k, u).astype(np.float64)                # (R, S)
    exact = q.astype(np.float64) @ k.T.astype(np.float64)             # (R, S)
    f = u.format
    eq, ek = _steps(q, f.a_bits, f.a_signed, 32), _steps(k, f.b_bits, f.b_signed, 32)   # (R, D), (S, D)
    aq, ak = np.abs(q.astype(np.float64)), np.abs(k.astype(np.float64))
    bound = aq @ ek.T + eq @ ak.T + eq @ ek.T                          # |dq| <= s_q, |dk| <= s_k (loose)
    bound += 1e-5 * (aq @ ak.T) + 1e-30
    err = np.abs(got - exact)
    print(f"{name}: max err {err.max():.4g}, max err / bound {(err / bound).max():.3f}")
    assert np.all(err <= bound)


@pytest.mark.parametrize("name", ["exact", "8u"])
@pytest.mark.parametrize("R, S, D", [(1, 70, 64), (33, 33, 32), (7, 70, 130)])
def test_attention_near_torch(name, R, S, D):
    u = _units(name)
    rng = np.random.default_rng(R + S + D)
    q = (rng.standard_normal((R, D)) / np.sqrt(D) * 2).astype(np.float32)   # (R, D) scaled queries
    k = rng.standard_normal((S, D)).astype(np.float32)                 # (S, D)
    v = rng.standard_normal((S, D)).astype(np.float32)                 # (S, D)
    tq, tk, tv = (torch.from_numpy(x).double() for x in (q, k, v))
    mask = torch.arange(S)[None, :] > (S - R + torch.arange(R))[:, None]
    ref = (torch.softmax((tq @ tk.T).masked_fill(mask, float("-inf")), dim=-1) @ tv).numpy()   # (R, D)

    s = quant.attn_scores(q, k, u)                                     # (R, S)
    sc = s[None].copy()                                                # (1, R, S)
    softmax_causal(sc, R, pos=S - R)                                   # lutcore's softmax, in place
    y = quant.attn_values(sc[0], v, u)                                 # (R, D)
    p_ref = causal_softmax_ref(s)                                      # (R, S) same scores, float64 softmax
    np.testing.assert_allclose(sc[0], p_ref, rtol=0, atol=SOFTMAX_ATOL)
    # the same p on both sides: lutcore is the oracle's attention bit for bit
    want = attention_ref(q, k, v, u.table(), _fmt(u), 32, acc=_acc(u))
    _assert_bits(quant.attn_values(p_ref, v, u), want, f"attention {name} R={R} S={S} D={D}")

    def rrmse(x):
        return float(np.sqrt(np.mean((x - ref) ** 2) / np.mean(ref ** 2)))
    print(f"{name} ({R}, {S}, {D}): rrmse lutcore {rrmse(y):.4g}, oracle {rrmse(want):.4g}")
    assert rrmse(y) <= ATTN_RRMSE and rrmse(want) <= ATTN_RRMSE
