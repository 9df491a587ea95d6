"""lutcore.ops.accum (dot products through a declared accumulator register) against the numpy
oracle tests/reference/accum_ref.py, and the pieces the contract names: Accumulator (parse,
str, range, wrap, holds_every_sum, its checks) and Adder.exact(...).add.

Design: three kinds of test, told apart by name so that ``-k "not kernel"`` runs everything
that needs no kernel.
* ``test_reference_*`` hold the oracle to what the contract promises without restating it:
  a pure-Python scalar loop (and a pure-Python netlist evaluator) row by row; wrap with an
  exact adder is the sum modulo 2^W whatever the order; a register that holds every sum gives
  the plain sum; saturate on positive products is the clamped prefix sum; the exact adder
  circuits (W + 1 and W output bits) give the exact adder's values and counts; the adders
  built here match their arithmetic.
* ``test_accumulator_*`` / ``test_adder_*``: the pure-Python classes.
* ``test_kernel_*``: lutcore.ops.accum.accumulate / gemm against the oracle, values and
  overflow counts compared with np.array_equal, on every SIMD path (the ``simd`` fixture of
  tests/conftest.py) and at threads 1 and 2 (both held to the oracle, so to each other).
  Each (register, adder) case runs every overflow policy x order (sequential; chunks of 2, 3,
  8, 64 -- K rarely a multiple), the shape rotating over odd sizes (1, 7, 33, 65, 130, ...)
  so every shape meets several policies; the exact adder runs the full shape x policy grid.
  The oracle's result of a case is cached across SIMD paths (it does not depend on one).

The approximate adders are netlists written here (``adder_netlist``): a lower-part-OR adder
(low k bits OR'd, no carry into the upper part), truncated adders (low k bits tied to 0 or
1), carry-cut adders (the carry into bit W/2 guessed from bit W/2-1's pair alone, or from the
register's bit alone: not symmetric, so swapping the adder's inputs shows), each with W + 1
output bits or, signed, W (add8s-like).  For W <= 9 the oracle reads an adder's outputs
from a table of every pair made once by the netlist evaluator (speed only).
"""
import functools

import numpy as np
import pytest

from lutcore.units import Units, approx
from lutcore.units.accumulator import Accumulator, accumulator_arg
from lutcore.units.adders import Adder
from lutcore.units.netlist import Netlist
from reference.accum_ref import accumulate_ref, adder_fn_from_netlist, exact_adder_fn, gemm_ref
from reference.format_ref import codes_of, format_gemm_ref
from test_netlist import AND2, MAJ, OR2, XOR3                        # truth tables in the IR's convention


def _accum():
    from lutcore.ops import accum           # the kernel room (imported where a kernel test needs it)
    return accum


POLICIES = [(ov, order, c) for ov in ("wrap", "saturate")
            for order, c in (("sequential", 1), ("chunks", 2), ("chunks", 3), ("chunks", 8), ("chunks", 64))]


def _range(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _read(v, width, signed):
    v = np.asarray(v, np.int64) & ((1 << width) - 1)
    return v - (((v >> (width - 1)) & 1) << width) if signed else v


# ------------------------------------------------------------------ adders built here

def _low_bits(W, base):
    return {"loa": max(1, W // 4), "trunc0": 2, "trunc1": 2, "cut": W // 2, "cuta": W // 2 + 1}.get(base, 0)


def adder_netlist(kind, W, signed):
    """An adder of two W-bit operands as a Netlist: ``kind`` exact | loa | trunc0 | trunc1 | cut |
    cuta (the carry guessed from a's bit alone: not symmetric, so the register must be input a),
    with ``_w`` for W output bits (signed only), else W + 1 (the sign extension / the carry)."""
    base, narrow = kind.removesuffix("_w"), kind.endswith("_w")
    rows, k = [], _low_bits(W, base)
    a, b = [2 + i for i in range(W)], [2 + W + i for i in range(W)]

    def gate(x, y, z, tt):
        rows.append((x, y, z, tt))
        return 2 + 2 * W + len(rows) - 1

    outs, carry = [], 0
    if base == "loa":
        outs = [gate(a[i], b[i], 0, OR2) for i in range(k)]          # no carry into bit k
    elif base in ("trunc0", "trunc1"):
        outs = [int(base[-1])] * k                                    # constant node 0 or 1
    elif base in ("cut", "cuta"):
        for i in range(k):
            outs.append(gate(a[i], b[i], carry, XOR3))
            carry = gate(a[i], b[i], carry, MAJ)
        carry = gate(a[k - 1], b[k - 1], 0, AND2) if base == "cut" else a[k - 1]   # the true carry dropped
    else:
        assert base == "exact"
    for i in range(k, W):
        outs.append(gate(a[i], b[i], carry, XOR3))
        carry = gate(a[i], b[i], carry, MAJ)
    if not narrow:
        outs.append(gate(a[W - 1], b[W - 1], carry, XOR3) if signed else carry)
    return Netlist(W, W, W if narrow else W + 1, np.array(rows, np.int32).reshape(-1, 4), np.array(outs, np.int32))


def adder_model(kind, W, signed, a, b):
    """The same adders in integer arithmetic: output patterns for operand patterns a, b."""
    base, narrow = kind.removesuffix("_w"), kind.endswith("_w")
    k = _low_bits(W, base)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    av, bv = _read(a, W, signed), _read(b, W, signed)
    mk = (1 << k) - 1
    if base == "exact":
        s = av + bv
    elif base in ("cut", "cuta"):
        spec = (a >> (k - 1)) & ((b >> (k - 1)) if base == "cut" else 1) & 1
        s = (((av >> k) + (bv >> k) + spec) << k) + (((a & mk) + (b & mk)) & mk)
    else:
        low = {"loa": (a | b) & mk, "trunc0": 0, "trunc1": mk}[base]
        s = (((av >> k) + (bv >> k)) << k) + low
    return s & ((1 << (W if narrow else W + 1)) - 1)


@functools.lru_cache(maxsize=None)
def make_adder(kind, W, signed):
    if kind == "none":
        return None
    if kind in ("exact", "exact_w"):
        return Adder.exact(W, signed, W if kind == "exact_w" else W + 1)
    return Adder.from_netlist(adder_netlist(kind, W, signed), signed, name=f"{kind}{W}{'s' if signed else 'u'}")


@functools.lru_cache(maxsize=None)
def oracle_adder(kind, W, signed):
    """The (fn, out_bits) the oracle takes for an adder kind: the adder's own netlist evaluated by
    tests/reference/netlist_ref.py (tabulated over every pair for W <= 9)."""
    adder = make_adder(kind, W, signed)
    if adder is None:
        return None
    fn, q = adder_fn_from_netlist(adder.netlist.gates, adder.netlist.outputs, W)
    if W > 9:
        return fn, q
    v = np.arange(1 << W, dtype=np.int64)
    table = fn(np.repeat(v, v.size), np.tile(v, v.size))                 # (2^2W,) index a 2^W + b
    return (lambda ap, bp: table[(ap << W) | bp]), q


def _acc(bits, signed, overflow, order, chunk, kind="none"):
    return Accumulator(bits, signed, overflow, order, chunk, make_adder(kind, bits, signed))


def _ref_kw(bits, signed, overflow, order, chunk, kind="none"):
    return dict(bits=bits, signed=signed, overflow=overflow, order=order, chunk=chunk,
                adder=oracle_adder(kind, bits, signed))


# ------------------------------------------------------------------ data

def products_data(rng, bits, signed, L, K):
    """(L, K) int64 products in the register's range, a row kind per row: uniform, non-negative,
    small, extremes only (lo, hi and their neighbours, 0, +-1: products that fit only just),
    and the two ends alternating."""
    lo, hi = _range(bits, signed)
    out = np.empty((L, K), np.int64)
    ends = np.array(sorted({lo, lo + 1, hi - 1, hi, 0, 1} | ({-1} if signed else set())), np.int64)
    for i in range(L):
        kind = i % 5
        if kind == 0:
            out[i] = rng.integers(lo, hi + 1, K)
        elif kind == 1:
            out[i] = rng.integers(0, hi + 1, K)
        elif kind == 2:
            out[i] = rng.integers(lo >> 3, (hi >> 3) + 1, K)
        elif kind == 3:
            out[i] = rng.choice(ends, K)
        else:
            out[i] = rng.choice(np.array([lo, hi], np.int64), K)
    return out


def byte_codes(x, signed):
    """Codes (of at most 8 bits) as int8 / uint8: the dtype every GEMM of lutcore takes (the
    signed 8 x 8 unit's GEMMs take int8 only)."""
    return np.asarray(x).astype(np.int8 if signed else np.uint8)


def codes_data(rng, fmt, which, shape, axis):
    """Codes of operand ``which`` (int8 / uint8) with a kind per row (axis 0) or column (axis 1):
    uniform, the top of the range (large non-negative), small."""
    bits, signed = (fmt.a_bits, fmt.a_signed) if which == "a" else (fmt.b_bits, fmt.b_signed)
    lo, hi = fmt.range(which)
    x = codes_of(rng, bits, signed, shape).astype(np.int64)
    idx = np.arange(shape[axis])
    top = rng.integers(max(0, hi - (hi >> 2)), hi + 1, shape)
    small = rng.integers(lo >> 2, (hi >> 2) + 1, shape)
    sel = (idx % 3)[:, None] if axis == 0 else (idx % 3)[None, :]
    return byte_codes(np.where(sel == 1, top, np.where(sel == 2, small, x)), signed)


# ------------------------------------------------------------------ pure-Python oracle of the oracle

def _eval_netlist_scalar(net, a_pat, b_pat):
    """The output pattern of a netlist on two ints, one gate at a time in plain Python."""
    W = net.a_bits
    nodes = [0, 1] + [(a_pat >> i) & 1 for i in range(W)] + [(b_pat >> i) & 1 for i in range(net.b_bits)]
    for x, y, z, tt in net.gates.tolist():
        nodes.append((tt >> (4 * nodes[x] + 2 * nodes[y] + nodes[z])) & 1)
    return sum(nodes[o] << p for p, o in enumerate(net.outputs.tolist()))


def _scalar_accumulate(row, bits, signed, overflow, order, chunk, adder):
    """One dot product in Python ints, the contract's steps written out again."""
    lo, hi = _range(bits, signed)

    def read(v, w, sg):
        v &= (1 << w) - 1
        return v - (1 << w) if sg and v >> (w - 1) else v

    def policy(v, sign_of):
        if overflow == "wrap":
            return read(v, bits, signed)
        return hi if sign_of >= 0 or not signed else lo

    C = 1 if order == "sequential" else chunk
    r = n = 0
    for j in range(0, len(row), C):
        d = sum(int(x) for x in row[j:j + C])
        if d < lo or d > hi:
            d, n = policy(d, d), n + 1
        if adder is None:
            s = r + d
            ov, sign_of = s < lo or s > hi, s
        else:
            o = _eval_netlist_scalar(adder.netlist, r & ((1 << bits) - 1), d & ((1 << bits) - 1))
            if adder.out_bits == bits + 1:
                s = read(o, bits + 1, signed)
                ov, sign_of = s < lo or s > hi, s
            else:
                s = read(o, bits, True)
                ov, sign_of = (r < 0) == (d < 0) and (s < 0) != (r < 0), r
        if ov:
            r, n = policy(s, sign_of), n + 1
        else:
            r = s
    return r, n


SCALAR_CASES = [(8, True, "none"), (8, True, "loa_w"), (8, True, "cuta"), (8, False, "trunc1"), (9, True, "cut"),
                (9, False, "loa"), (12, True, "exact_w"), (12, False, "cut"), (12, False, "cuta"),
                (16, True, "trunc0"), (16, True, "cut_w"), (16, False, "exact"), (2, True, "none"),
                (3, False, "exact"), (20, True, "none"), (32, False, "none")]


def _case_id(bits, signed, kind):
    return f"{bits}{'s' if signed else 'u'}-{kind}"


@pytest.mark.parametrize("bits,signed,kind", SCALAR_CASES, ids=[_case_id(*c) for c in SCALAR_CASES])
def test_reference_matches_a_scalar_python_loop(bits, signed, kind):
    rng = np.random.default_rng(bits * 4 + signed)
    adder = make_adder(kind, bits, signed)
    for K in (0, 1, 5, 23):
        p = products_data(rng, bits, signed, 10, K)
        for ov, order, c in POLICIES:
            v, n = accumulate_ref(p, **_ref_kw(bits, signed, ov, order, c, kind))
            assert v.dtype == np.int64 and n.dtype == np.int64 and v.shape == n.shape == (10,)
            want = [_scalar_accumulate(row.tolist(), bits, signed, ov, order, c, adder) for row in p]
            assert v.tolist() == [w[0] for w in want], (K, ov, order, c)
            assert n.tolist() == [w[1] for w in want], (K, ov, order, c)


# ------------------------------------------------------------------ reference self-checks

ADDER_WIDTHS = [8, 9, 12, 16]
ADDER_KINDS_S = ["exact", "exact_w", "loa", "loa_w", "trunc0", "trunc1", "cut", "cut_w", "cuta", "cuta_w"]
ADDER_KINDS_U = ["exact", "loa", "trunc0", "trunc1", "cut", "cuta"]


def _pairs(W, rng):
    if W <= 8:
        v = np.arange(1 << W, dtype=np.int64)
        return np.repeat(v, v.size), np.tile(v, v.size)
    m = (1 << W) - 1
    edge = np.array([0, 1, 2, m, m - 1, m >> 1, (m >> 1) + 1, (m >> 1) - 1], np.int64)
    a = np.r_[rng.integers(0, m + 1, 1 << 14), np.repeat(edge, edge.size)]
    b = np.r_[rng.integers(0, m + 1, 1 << 14), np.tile(edge, edge.size)]
    return a, b


@pytest.mark.parametrize("W", ADDER_WIDTHS)
def test_reference_adder_netlists_match_their_arithmetic(W):
    """The netlists built here are the adders they claim (each kind against its integer model),
    and the netlist route of the oracle agrees with exact_adder_fn on the exact adders."""
    rng = np.random.default_rng(W)
    a, b = _pairs(W, rng)
    for signed, kinds in ((True, ADDER_KINDS_S), (False, ADDER_KINDS_U)):
        for kind in kinds:
            net = adder_netlist(kind, W, signed)
            fn, q = adder_fn_from_netlist(net.gates, net.outputs, W)
            assert q == (W if kind.endswith("_w") else W + 1)
            got = fn(a, b)
            assert np.array_equal(got, adder_model(kind, W, signed, a, b)), (kind, signed)
        for q in ((W, W + 1) if signed else (W + 1,)):
            ex = Adder.exact(W, signed, q)
            fn, qq = adder_fn_from_netlist(ex.netlist.gates, ex.netlist.outputs, W)
            fe, qe = exact_adder_fn(W, signed, q)
            assert qq == qe == q
            assert np.array_equal(fn(a, b), fe(a, b)), (signed, q)


@pytest.mark.parametrize("bits", [2, 3, 8, 9, 12, 16, 20, 31, 32])
@pytest.mark.parametrize("signed", [True, False], ids=["s", "u"])
def test_reference_wrap_with_an_exact_adder_is_the_sum_modulo(bits, signed):
    rng = np.random.default_rng(bits)
    p = products_data(rng, bits, signed, 40, 37)
    want = _read(p.sum(axis=1), bits, signed)                          # the sum modulo 2^W, into [lo, hi]
    assert np.array_equal(Accumulator(bits, signed).wrap(p.sum(axis=1)), want)
    kinds = ["none"] + ((["exact", "exact_w"] if signed else ["exact"]) if bits <= 16 else [])
    for kind in kinds:
        for _, order, c in POLICIES[:5]:
            v, _ = accumulate_ref(p, **_ref_kw(bits, signed, "wrap", order, c, kind))
            assert np.array_equal(v, want), (kind, order, c)


@pytest.mark.parametrize("kind", ["exact", "exact_w"])
@pytest.mark.parametrize("W", ADDER_WIDTHS)
def test_reference_exact_adder_circuits_give_the_exact_adder(W, kind):
    """An exact adder circuit (W + 1 bits read as a number, or W bits with the V flag) gives the
    exact adder's values and overflow counts under every policy and order."""
    for signed in ((True, False) if kind == "exact" else (True,)):
        rng = np.random.default_rng(W * 2 + signed)
        p = products_data(rng, W, signed, 25, 29)
        for ov, order, c in POLICIES:
            want = accumulate_ref(p, **_ref_kw(W, signed, ov, order, c))
            for adder in (oracle_adder(kind, W, signed), exact_adder_fn(W, signed, W if kind == "exact_w" else W + 1)):
                got = accumulate_ref(p, bits=W, signed=signed, overflow=ov, order=order, chunk=c, adder=adder)
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (signed, ov, order, c)


@pytest.mark.parametrize("bits,signed", [(20, True), (32, True), (20, False), (32, False), (16, True)])
def test_reference_a_register_holding_every_sum_gives_the_plain_sum(bits, signed):
    rng = np.random.default_rng(bits)
    K = 130
    plo, phi = (-(1 << 11), 1 << 11) if signed else (0, 1 << 11)
    p = rng.integers(plo, phi + 1, (33, K))
    acc = Accumulator(bits, signed)
    assert acc.holds_every_sum(plo, phi, K) == (bits >= 20)
    if bits < 20:
        p = p // 16                                                   # 16s: 130 products of +-2^7 fit
        assert acc.holds_every_sum(plo // 16, phi // 16, K)
    for ov, order, c in POLICIES:
        v, n = accumulate_ref(p, **_ref_kw(bits, signed, ov, order, c))
        assert np.array_equal(v, p.sum(axis=1)) and not n.any(), (ov, order, c)
    if bits == 32 and signed:                                         # gemm_ref: the plain table GEMM
        A, B = rng.integers(-128, 128, (7, 65)), rng.integers(-128, 128, (65, 5))
        u = Units.exact()
        for ov, order, c in POLICIES:
            C, n = gemm_ref(A, B, u.table(), a_bits=8, b_bits=8, bits=bits, signed=True, overflow=ov, order=order,
                            chunk=c)
            assert np.array_equal(C, format_gemm_ref(A, B, u.table())) and not n.any()


@pytest.mark.parametrize("bits,signed", [(8, True), (9, False), (12, True), (16, False), (32, True)])
def test_reference_saturate_on_positive_products_is_the_clamped_prefix_sum(bits, signed):
    rng = np.random.default_rng(bits + 100)
    lo, hi = _range(bits, signed)
    p = rng.integers(0, (hi >> 3) + 1, (30, 70))
    p[::4] = 0
    p[1::4, ::3] = 0
    p[2] = hi
    S = np.cumsum(p, axis=1)                                           # (L, K) prefix sums
    v, n = accumulate_ref(p, **_ref_kw(bits, signed, "saturate", "sequential", 1))
    assert np.array_equal(v, np.minimum(S[:, -1], hi))
    assert np.array_equal(n, ((S > hi) & (p > 0)).sum(axis=1))
    prev = np.zeros(30, np.int64)
    for K in range(1, 70, 7):                                          # monotone in K
        vk, _ = accumulate_ref(p[:, :K], **_ref_kw(bits, signed, "saturate", "sequential", 1))
        assert np.all(vk >= prev) and np.array_equal(vk, np.minimum(S[:, K - 1], hi))
        prev = vk


@pytest.mark.parametrize("bits,signed", [(8, True), (9, True), (12, False), (16, True)])
def test_reference_saturate_with_an_exact_adder_clips_each_step(bits, signed):
    rng = np.random.default_rng(bits + 7)
    lo, hi = _range(bits, signed)
    p = products_data(rng, bits, signed, 40, 45)
    for _, order, c in POLICIES[5:]:
        r, n = np.zeros(40, np.int64), np.zeros(40, np.int64)
        for j in range(0, 45, c):
            d = p[:, j:j + c].sum(axis=1)
            n += (d < lo) | (d > hi)
            d = np.clip(d, lo, hi)
            n += (r + d < lo) | (r + d > hi)
            r = np.clip(r + d, lo, hi)
        v, nn = accumulate_ref(p, **_ref_kw(bits, signed, "saturate", order, c))
        assert np.array_equal(v, r) and np.array_equal(nn, n), (order, c)


@pytest.mark.parametrize("kind", ["none", "loa", "cut_w"])
def test_reference_one_chunk_is_one_policy_step(kind):
    """C >= K: one addend, the exact sum, brought in by the policy (an event when it leaves the
    register), then added to 0 -- which no adder here gets wrong."""
    bits, signed = 12, True
    lo, hi = _range(bits, signed)
    rng = np.random.default_rng(1)
    p = products_data(rng, bits, signed, 50, 9)
    s = p.sum(axis=1)
    out = (s < lo) | (s > hi)
    for ov in ("wrap", "saturate"):
        v, n = accumulate_ref(p, **_ref_kw(bits, signed, ov, "chunks", 64, kind))
        brought = _read(s, bits, True) if ov == "wrap" else np.where(s >= 0, hi, lo)
        assert np.array_equal(n, out.astype(np.int64))
        if kind == "none":
            assert np.array_equal(v, np.where(out, brought, s))
        else:                                           # through a circuit: 0 + d, evaluated
            fn, q = oracle_adder(kind, bits, signed)
            d = np.where(out, brought, s)
            assert np.array_equal(v, _read(fn(np.zeros_like(d), d & 4095), q, True))
            assert np.array_equal(v, d)


def test_reference_empty_and_gemm_forms():
    v, n = accumulate_ref(np.zeros((3, 0), np.int64), **_ref_kw(8, True, "saturate", "chunks", 3))
    assert np.array_equal(v, [0, 0, 0]) and np.array_equal(n, [0, 0, 0])
    v, n = accumulate_ref(np.zeros((0, 4), np.int64), **_ref_kw(8, True, "wrap", "sequential", 1))
    assert v.shape == n.shape == (0,)
    # gemm_ref is accumulate_ref over each (m, n)'s table products in k order
    u = Units.exact("8u x 4s")
    rng = np.random.default_rng(2)
    A, B = codes_of(rng, 8, False, (3, 11)), codes_of(rng, 4, True, (11, 4))
    t = u.table()
    kw = _ref_kw(12, True, "saturate", "chunks", 3, "loa")
    C, cnt = gemm_ref(A, B, t, a_bits=8, b_bits=4, **kw)
    for m in range(3):
        for j in range(4):
            row = np.array([[int(t[A[m, k] & 255, B[k, j] & 15]) for k in range(11)]])
            assert row.max() <= 1785 and row.min() >= -2040
            v, n = accumulate_ref(row, **kw)
            assert (C[m, j], cnt[m, j]) == (v[0], n[0])


def test_reference_refuses_what_the_contract_does_not_define():
    p = np.zeros((2, 3), np.int64)
    with pytest.raises(ValueError, match="order"):
        accumulate_ref(p, bits=8, signed=True, overflow="wrap", order="tree", chunk=2)
    with pytest.raises(ValueError, match="overflow"):
        accumulate_ref(p, bits=8, signed=True, overflow="clip", order="sequential", chunk=1)
    with pytest.raises(ValueError, match="chunk"):
        accumulate_ref(p, bits=8, signed=True, overflow="wrap", order="chunks", chunk=1)
    with pytest.raises(ValueError, match="adder"):
        accumulate_ref(p, bits=8, signed=False, overflow="wrap", order="sequential", chunk=1,
                       adder=exact_adder_fn(8, False, 8))


# ------------------------------------------------------------------ Accumulator

@pytest.mark.parametrize("text,fields,canonical", [
    ("16s", (16, True, "wrap", "sequential", 1), "16s:wrap"),
    ("12u:saturate", (12, False, "saturate", "sequential", 1), "12u:saturate"),
    ("16s:wrap:chunks=8", (16, True, "wrap", "chunks", 8), "16s:wrap:chunks=8"),
    ("20s:saturate:sequential", (20, True, "saturate", "sequential", 1), "20s:saturate"),
    (" 9U : SATURATE : chunks=3 ", (9, False, "saturate", "chunks", 3), "9u:saturate:chunks=3"),
    ("2s", (2, True, "wrap", "sequential", 1), "2s:wrap"),
    ("32u:chunks=64", (32, False, "wrap", "chunks", 64), "32u:wrap:chunks=64"),
])
def test_accumulator_parse_and_str(text, fields, canonical):
    a = Accumulator.parse(text)
    assert (a.bits, a.signed, a.overflow, a.order, a.chunk, a.adder) == fields + (None,)
    assert str(a) == canonical and repr(a) == f"Accumulator({canonical})"
    assert Accumulator.parse(str(a)) == a and hash(Accumulator.parse(str(a))) == hash(a)
    assert accumulator_arg(text) == a and accumulator_arg(a) is a and accumulator_arg(None) is None


def test_accumulator_str_names_the_adder_after_it_and_identity_includes_it():
    ad = Adder.exact(16, True)
    a = Accumulator.parse("16s:saturate:chunks=4", adder=ad)
    assert a.adder is ad and str(a) == "16s:saturate:chunks=4 through exact"
    assert Accumulator.parse(str(a).split(" through ")[0], adder=ad) == a
    assert a != Accumulator.parse("16s:saturate:chunks=4")
    loa = make_adder("loa", 16, True)
    assert a != Accumulator.parse("16s:saturate:chunks=4", adder=loa)
    assert Accumulator(16, True, "saturate", "chunks", 4, ad) == a
    assert a.to_dict()["adder"]["digest"] == ad.digest and a.adder_power_mw is None
    assert Accumulator(16).adder_power_mw is None


@pytest.mark.parametrize("text,name", [
    ("16", "accumulator"), ("s16", "accumulator"), ("16x", "accumulator"), ("", "accumulator"),
    ("16s:clip", "accumulator"), ("16s:chunks=x", "accumulator"), ("16s:chunks=1", "chunk"),
    ("1s", "bits"), ("33u", "bits"), ("0u", "bits"),
])
def test_accumulator_parse_refuses_naming_the_argument(text, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        Accumulator.parse(text)


def test_accumulator_parse_where_and_types():
    with pytest.raises(ValueError, match=r"^acc: "):
        Accumulator.parse("16q", where="acc")
    with pytest.raises(TypeError, match=r"^accumulator:"):
        Accumulator.parse(16)
    with pytest.raises(TypeError, match=r"^accumulator:"):
        accumulator_arg(16)
    with pytest.raises(TypeError, match=r"^acc:"):
        accumulator_arg(16.0, "acc")


@pytest.mark.parametrize("kw,err,name", [
    (dict(bits=1), ValueError, "bits"), (dict(bits=33), ValueError, "bits"),
    (dict(bits=16.0), TypeError, "bits"), (dict(bits=True), TypeError, "bits"),
    (dict(bits=16, signed=1), TypeError, "signed"),
    (dict(bits=16, overflow="clip"), ValueError, "overflow"), (dict(bits=16, overflow="Wrap"), ValueError, "overflow"),
    (dict(bits=16, order="tree"), ValueError, "order"), (dict(bits=16, order="chunk"), ValueError, "order"),
    (dict(bits=16, order="chunks", chunk=1), ValueError, "chunk"),
    (dict(bits=16, order="chunks", chunk=0), ValueError, "chunk"),
    (dict(bits=16, order="chunks", chunk=-4), ValueError, "chunk"),
    (dict(bits=16, order="chunks"), ValueError, "chunk"),
    (dict(bits=16, chunk=4), ValueError, "chunk"),
    (dict(bits=16, order="chunks", chunk=2.0), TypeError, "chunk"),
    (dict(bits=16, order="chunks", chunk=True), TypeError, "chunk"),
    (dict(bits=16, adder="exact"), TypeError, "adder"),
])
def test_accumulator_checks_name_the_argument(kw, err, name):
    with pytest.raises(err, match=rf"^{name}:"):
        Accumulator(**kw)


@pytest.mark.parametrize("bits,signed,adder", [
    (16, True, lambda: Adder.exact(12, True)),                  # width
    (12, True, lambda: Adder.exact(12, False)),                 # signedness
    (12, False, lambda: Adder.exact(12, True, 13)),
    (8, False, lambda: Adder.exact(8, False, 8)),                # unsigned without its carry out
    (16, False, lambda: Adder.from_netlist(adder_netlist("loa", 16, True), True)),
    (9, True, lambda: make_adder("cut_w", 8, True)),
])
def test_accumulator_refuses_an_adder_that_does_not_fit(bits, signed, adder):
    with pytest.raises(ValueError, match=r"^adder:"):
        Accumulator(bits, signed, adder=adder())


def test_accumulator_accepts_the_adders_that_fit():
    for W in ADDER_WIDTHS:
        for kind in ADDER_KINDS_S:
            assert Accumulator(W, True, adder=make_adder(kind, W, True)).adder.out_bits in (W, W + 1)
        for kind in ADDER_KINDS_U:
            assert Accumulator(W, False, "saturate", "chunks", 3, make_adder(kind, W, False)).adder.bits == W


@pytest.mark.parametrize("bits,signed,want", [
    (2, True, (-2, 1)), (2, False, (0, 3)), (8, True, (-128, 127)), (8, False, (0, 255)), (9, True, (-256, 255)),
    (12, False, (0, 4095)), (16, True, (-32768, 32767)), (20, True, (-524288, 524287)),
    (32, True, (-(1 << 31), (1 << 31) - 1)), (32, False, (0, (1 << 32) - 1)),
])
def test_accumulator_range_and_wrap(bits, signed, want):
    a = Accumulator(bits, signed)
    assert a.range == want
    lo, hi = want
    for v in (0, 1, -1, lo, hi, lo - 1, hi + 1, 3 * hi + 7, -5 * (1 << bits) - 3, 123456789, -987654321):
        w = a.wrap(v)
        assert lo <= w <= hi and (w - v) % (1 << bits) == 0, v
    v = np.array([lo, hi, hi + 1, lo - 1, 0, (1 << 40) + 5, -(1 << 40) - 5], np.int64)
    w = a.wrap(v)
    assert np.array_equal(w, _read(v, bits, signed)) and np.all((w >= lo) & (w <= hi))
    assert a.exact_wrap and not Accumulator(bits, signed, "saturate").exact_wrap
    if bits <= 16:
        assert not Accumulator(bits, signed, adder=Adder.exact(bits, signed)).exact_wrap


def test_accumulator_holds_every_sum_and_check_products():
    a = Accumulator(16, True)
    assert a.holds_every_sum(-16256, 16384, 1)
    assert not a.holds_every_sum(-16256, 16384, 2)                   # 2 * 16384 = 32768 > 32767
    assert a.holds_every_sum(-16384, 16383, 2)                       # -32768 .. 32766
    assert not a.holds_every_sum(-16385, 0, 2)
    assert a.holds_every_sum(0, 0, 10 ** 6) and a.holds_every_sum(5, 7, 0)
    assert a.holds_every_sum(3, 5, 6553) and not a.holds_every_sum(3, 5, 6554)   # only the larger end counts
    assert Accumulator(32, True).holds_every_sum(-16256, 16384, 130)
    assert not Accumulator(32, True, adder=None, overflow="saturate").holds_every_sum(-16256, 16384, 1 << 17)
    assert not Accumulator(16, True, adder=Adder.exact(16, True)).holds_every_sum(0, 0, 1)   # an adder: never
    u = Accumulator(16, False)
    assert u.holds_every_sum(0, 65535, 1) and not u.holds_every_sum(0, 65535, 2)
    assert u.holds_every_sum(0, 255, 257) and not u.holds_every_sum(0, 255, 258)
    assert not u.holds_every_sum(-1, 0, 1)
    a.check_products(-32768, 32767)
    Accumulator(12, True).check_products(-2040, 1785)
    Accumulator(8, False).check_products(0, 255)
    for acc, lo, hi in ((Accumulator(15, True), -16256, 16384), (Accumulator(16, False), -1, 0),
                        (Accumulator(8, False), 0, 256), (Accumulator(8, True), -129, 0)):
        with pytest.raises(ValueError, match=r"^accumulator: .*narrower than one product.*the unit's products"):
            acc.check_products(lo, hi)
    with pytest.raises(ValueError, match=r"mitchell's products span -1..70000"):
        Accumulator(16, True).check_products(-1, 70000, "mitchell")


# ------------------------------------------------------------------ Adder.exact

@pytest.mark.parametrize("W", [1, 2, 4, 8, 9, 12, 16])
@pytest.mark.parametrize("signed", [True, False], ids=["s", "u"])
def test_adder_exact_add_is_the_integer_sum(W, signed):
    lo, hi = _range(W, signed)
    rng = np.random.default_rng(W)
    if W <= 8:
        v = np.arange(lo, hi + 1)
        a, b = np.repeat(v, v.size), np.tile(v, v.size)
    else:
        a, b = rng.integers(lo, hi + 1, 20000), rng.integers(lo, hi + 1, 20000)
        a[:4], b[:4] = [lo, hi, lo, hi], [lo, hi, hi, lo]
    for q in (W + 1, W):
        ad = Adder.exact(W, signed, q)
        assert (ad.bits, ad.signed, ad.out_bits, ad.name) == (W, signed, q, "exact")
        assert ad.netlist.a_bits == ad.netlist.b_bits == W and ad.netlist.outputs.shape == (q,)
        got = ad.add(a, b)
        s = a + b
        want = s if q == W + 1 else _read(s, W, signed)                # W + 1 bits: every sum exact
        assert got.dtype == np.int64 and np.array_equal(got, want), q
        assert all(int(ad.add(int(x), int(y))) == int(w) for x, y, w in zip(a[:50], b[:50], want[:50]))
    assert Adder.exact(W, signed).out_bits == W + 1
    if 2 * W <= 16:
        assert Adder.exact(W, signed).is_exact
    assert Adder.exact(W, signed) == Adder.exact(W, signed, W + 1)
    assert Adder.exact(W, signed) != Adder.exact(W, not signed)


def test_adder_exact_and_add_refuse_naming_the_argument():
    for bits in (0, 17, 8.0, True):
        with pytest.raises(ValueError, match=r"^bits:"):
            Adder.exact(bits, True)
    for q in (7, 10):
        with pytest.raises(ValueError, match=r"^out_bits:"):
            Adder.exact(8, True, q)
    ad = Adder.exact(8, False)
    with pytest.raises(ValueError, match=r"^a:"):
        ad.add(-1, 0)
    with pytest.raises(ValueError, match=r"^b:"):
        ad.add(0, 256)
    with pytest.raises(ValueError, match=r"^netlist:"):
        Adder.from_netlist(Netlist(8, 8, 10, np.zeros((0, 4), np.int32), np.zeros(10, np.int32)), True)


def test_adder_built_here_is_not_exact_and_adds_as_modelled():
    for kind in ("loa", "trunc1", "cut_w"):
        ad = make_adder(kind, 8, True)
        assert not ad.is_exact
        v = np.arange(-128, 128)
        a, b = np.repeat(v, 256), np.tile(v, 256)
        assert np.array_equal(ad.add(a, b), _read(adder_model(kind, 8, True, a & 255, b & 255), ad.out_bits, True))


# ------------------------------------------------------------------ the kernel: accumulate

ACC_SHAPES = [(70, 67), (1, 1), (7, 33), (33, 7), (65, 130), (130, 65), (3, 64), (64, 3), (129, 10), (1, 131)]

ACC_CASES = (
    [(8, True, k) for k in ["none"] + ADDER_KINDS_S] + [(8, False, k) for k in ["none"] + ADDER_KINDS_U] +
    [(9, True, k) for k in ("none", "exact", "exact_w", "loa", "trunc1", "cut_w", "cuta")] +
    [(9, False, k) for k in ("none", "exact", "cut", "trunc1", "cuta")] +
    [(12, True, k) for k in ("none", "exact", "loa_w", "cut", "trunc0", "cuta_w")] +
    [(12, False, k) for k in ("none", "exact", "loa", "trunc0")] +
    [(16, True, k) for k in ("none", "exact", "exact_w", "loa", "cut_w", "trunc1", "cuta")] +
    [(16, False, k) for k in ("none", "exact", "cut", "loa", "cuta")] +
    [(b, s, "none") for b in (2, 20, 31, 32) for s in (True, False)])
ACC_IDS = [_case_id(*c) for c in ACC_CASES]


@functools.lru_cache(maxsize=None)
def _accumulate_case(bits, signed, kind, i):
    """(products, Accumulator, values, counts) of case policy i (its shape rotates)."""
    ov, order, c = POLICIES[i]
    L, K = ACC_SHAPES[(i + bits + 3 * signed) % len(ACC_SHAPES)]
    rng = np.random.default_rng([bits, int(signed), i, len(kind)])
    p = products_data(rng, bits, signed, L, K)
    v, n = accumulate_ref(p, **_ref_kw(bits, signed, ov, order, c, kind))
    return p, _acc(bits, signed, ov, order, c, kind), v, n


def _check(what, got, want):
    (gv, gn), (wv, wn) = got, want
    assert gv.dtype == np.int64 and gn.dtype == np.int64, (what, gv.dtype, gn.dtype)
    assert gv.shape == wv.shape and gn.shape == wn.shape, (what, gv.shape, gn.shape, wv.shape)
    bad = np.count_nonzero(gv != wv) + np.count_nonzero(gn != wn)
    if bad:
        print(f"{what}: {np.count_nonzero(gv != wv)} values differ (max |diff| {np.abs(gv - wv).max()}), "
              f"{np.count_nonzero(gn != wn)} counts differ")
    assert np.array_equal(gv, wv), what
    assert np.array_equal(gn, wn), what


@pytest.mark.parametrize("bits,signed,kind", ACC_CASES, ids=ACC_IDS)
def test_kernel_accumulate_matches_reference(simd, bits, signed, kind):
    accum = _accum()
    for i in range(len(POLICIES)):
        p, acc, v, n = _accumulate_case(bits, signed, kind, i)
        for threads in (1, 2):
            _check(f"{acc} {p.shape} threads={threads}", accum.accumulate(p, acc, counts=True, threads=threads), (v, n))
        if i == 0:
            got = accum.accumulate(p, acc)
            assert isinstance(got, np.ndarray) and np.array_equal(got, v)


def test_kernel_accumulate_empty_and_large(simd):
    accum = _accum()
    acc = Accumulator(12, True, "saturate", "chunks", 8, make_adder("loa", 12, True))
    for L, K in ((0, 5), (4, 0), (0, 0)):
        v, n = accum.accumulate(np.zeros((L, K), np.int64), acc, counts=True)
        assert v.shape == n.shape == (L,) and not v.any() and not n.any()
    rng = np.random.default_rng(11)
    p = products_data(rng, 16, True, 2049, 300)                        # lanes cross every vector width
    for ov, order, c in (("wrap", "sequential", 1), ("saturate", "chunks", 8), ("saturate", "chunks", 3)):
        a = Accumulator(16, True, ov, order, c)
        want = accumulate_ref(p, **_ref_kw(16, True, ov, order, c))
        for threads in (1, 2):
            _check(f"{a} threads={threads}", accum.accumulate(p, a, counts=True, threads=threads), want)


# ------------------------------------------------------------------ the kernel: gemm

UNITS = {
    "8s": lambda: Units.exact(),
    "8u": lambda: Units.exact("8u"),
    "8u x 4s": lambda: Units.exact("8u x 4s"),
    "8u x 4u": lambda: Units.exact("8u x 4u"),
    "4s": lambda: Units.exact("4s"),
    "4u": lambda: Units.exact("4u"),
    "mitchell": approx.mitchell,
    "truncated:4": lambda: approx.truncated(4),
    "4s~": lambda: Units.from_mul(lambda a, b: a * b - ((a * b) & 3), format="4s", name="4s-drop2"),
}


@functools.lru_cache(maxsize=None)
def make_units(name):
    return UNITS[name]()


GEMM_SHAPES = [(1, 1, 1), (7, 7, 7), (1, 65, 1), (33, 130, 7), (7, 33, 65), (65, 7, 33), (130, 65, 1),
               (2, 130, 3), (1, 33, 130), (9, 64, 5)]

GEMM_CASES = [
    ("8s", 16, True, "none"), ("8s", 16, True, "exact"), ("8s", 16, True, "exact_w"), ("8s", 16, True, "loa"),
    ("8s", 16, True, "cut_w"), ("8s", 16, True, "cuta"), ("8s", 20, True, "none"), ("8s", 32, True, "none"),
    ("8u", 16, False, "none"), ("8u", 16, False, "exact"), ("8u", 16, False, "trunc1"), ("8u", 17, False, "none"),
    ("8u", 32, False, "none"),
    ("8u x 4s", 12, True, "none"), ("8u x 4s", 12, True, "exact_w"), ("8u x 4s", 12, True, "loa_w"),
    ("8u x 4s", 12, True, "cut"), ("8u x 4s", 12, True, "cuta_w"), ("8u x 4s", 13, True, "none"),
    ("8u x 4u", 12, False, "none"), ("8u x 4u", 12, False, "loa"),
    ("4s", 8, True, "none"), ("4s", 8, True, "exact_w"), ("4s", 8, True, "trunc0"), ("4s", 9, True, "none"),
    ("4s", 9, True, "loa"), ("4s", 9, True, "cut_w"),
    ("4u", 8, False, "none"), ("4u", 8, False, "exact"), ("4u", 9, False, "cut"), ("4u", 8, False, "cuta"),
    ("mitchell", 16, True, "none"), ("mitchell", 16, True, "loa"), ("truncated:4", 16, True, "none"),
    ("truncated:4", 16, True, "trunc1"), ("4s~", 9, True, "none"), ("4s~", 8, True, "exact"),
]
GEMM_IDS = [f"{u}-{_case_id(b, s, k)}" for u, b, s, k in GEMM_CASES]


@functools.lru_cache(maxsize=None)
def _gemm_case(units_name, bits, signed, kind, i, shape=None):
    """(a, b, units, Accumulator, C, counts) of policy i; the shape rotates unless given."""
    ov, order, c = POLICIES[i]
    u = make_units(units_name)
    f = u.format
    M, K, N = shape or GEMM_SHAPES[(i + bits + len(units_name)) % len(GEMM_SHAPES)]
    rng = np.random.default_rng([M, K, N, bits, i, len(units_name), len(kind)])
    a = codes_data(rng, f, "a", (M, K), 0)
    b = codes_data(rng, f, "b", (K, N), 1)
    C, n = gemm_ref(a, b, u.table(), a_bits=f.a_bits, b_bits=f.b_bits, **_ref_kw(bits, signed, ov, order, c, kind))
    return a, b, u, _acc(bits, signed, ov, order, c, kind), C, n


def _check_gemm(what, accum, a, b, u, acc, C, n):
    for threads in (1, 2):
        _check(f"{what} {acc} {a.shape}x{b.shape} threads={threads}",
               accum.gemm(a, b, u, acc, counts=True, threads=threads), (C, n))


@pytest.mark.parametrize("units_name,bits,signed,kind", GEMM_CASES, ids=GEMM_IDS)
def test_kernel_gemm_matches_reference(simd, units_name, bits, signed, kind):
    accum = _accum()
    for i in range(len(POLICIES)):
        a, b, u, acc, C, n = _gemm_case(units_name, bits, signed, kind, i)
        _check_gemm(units_name, accum, a, b, u, acc, C, n)
        if i == 0:
            got = accum.gemm(a, b, u, acc)
            assert isinstance(got, np.ndarray) and got.dtype == np.int64 and np.array_equal(got, C)


@pytest.mark.parametrize("M,K,N", GEMM_SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in GEMM_SHAPES])
def test_kernel_gemm_every_shape_and_policy(simd, M, K, N):
    """The full shape x policy x order grid for the exact adder and an exact adder circuit; wrap
    with the exact adder also against the plain sum modulo 2^W (order-free)."""
    accum = _accum()
    for units_name, bits, signed, kind in (("8s", 16, True, "none"), ("8u x 4s", 12, True, "exact"),
                                           ("4u", 9, False, "none")):
        for i in range(len(POLICIES)):
            a, b, u, acc, C, n = _gemm_case(units_name, bits, signed, kind, i, (M, K, N))
            _check_gemm(units_name, accum, a, b, u, acc, C, n)
            if acc.exact_wrap:
                assert np.array_equal(C, acc.wrap(format_gemm_ref(a, b, u.table())))


LARGE_CASES = [("8s", (130, 200, 70), Accumulator(16, True, "saturate", "chunks", 8)),
               ("8s", (130, 200, 70), Accumulator(16, True, "wrap")),
               ("8s", (130, 200, 70), Accumulator(32, True, "saturate")),
               ("8s", (130, 150, 33), Accumulator(16, True, "saturate", adder=make_adder("loa", 16, True))),
               ("8u", (65, 513, 33), Accumulator(16, False, "saturate", "chunks", 64))]


@functools.lru_cache(maxsize=None)
def _large_case(j):
    """(a, b, units, Accumulator, C, counts), the codes in the format's narrow dtype."""
    name, (M, K, N), acc = LARGE_CASES[j]
    u = make_units(name)
    f = u.format
    rng = np.random.default_rng(j)
    dt = np.int8 if f.a_signed else np.uint8
    a = codes_of(rng, 8, f.a_signed, (M, K)).astype(dt)
    b = codes_of(rng, 8, f.b_signed, (K, N)).astype(dt)
    kind = "none" if acc.adder is None else "loa"
    C, n = gemm_ref(a, b, u.table(), a_bits=8, b_bits=8,
                    **_ref_kw(acc.bits, acc.signed, acc.overflow, acc.order, acc.chunk, kind))
    return a, b, u, acc, C, n


@pytest.mark.parametrize("j", range(len(LARGE_CASES)))
def test_kernel_gemm_larger_shapes_and_narrow_dtypes(simd, j):
    accum = _accum()
    a, b, u, acc, C, n = _large_case(j)
    assert n.any() or acc.bits == 32                                   # the data overflows the register
    _check_gemm(LARGE_CASES[j][0], accum, a, b, u, acc, C, n)
    if acc.bits == 32:
        assert np.array_equal(C, format_gemm_ref(a, b, u.table())) and not n.any()


@pytest.mark.parametrize("units_name", ["8u", "8u x 4s", "4s", "4u"])
def test_kernel_gemm_codes_in_any_integer_dtype(units_name):
    """Formats other than the signed 8 x 8 one take codes in any integer dtype (as lut_gemm does)."""
    accum = _accum()
    a, b, u, acc, C, n = _gemm_case(units_name, {"8u": 16, "8u x 4s": 12, "4s": 8, "4u": 8}[units_name],
                                    units_name != "8u" and units_name != "4u", "none", 6, (7, 33, 5))
    for dt in (np.int16, np.int32, np.int64):
        _check(f"{units_name} {dt.__name__}", accum.gemm(a.astype(dt), b.astype(dt), u, acc, counts=True), (C, n))


def test_kernel_gemm_empty_shapes():
    accum = _accum()
    u = Units.exact("8u x 4s")
    acc = Accumulator(12, True, "saturate", "chunks", 3, make_adder("loa", 12, True))
    C, n = accum.gemm(np.zeros((0, 5), np.uint8), np.zeros((5, 3), np.int8), u, acc, counts=True)
    assert C.shape == n.shape == (0, 3)
    C, n = accum.gemm(np.zeros((2, 0), np.uint8), np.zeros((0, 3), np.int8), u, acc, counts=True)
    assert np.array_equal(C, np.zeros((2, 3))) and np.array_equal(n, np.zeros((2, 3)))


def test_kernel_bad_input_names_the_argument():
    accum = _accum()
    u, acc = Units.exact(), Accumulator(16, True)
    a, b = np.zeros((2, 3), np.int8), np.zeros((3, 4), np.int8)
    # a register narrower than one of the unit's products
    for unit, reg in ((Units.exact(), Accumulator(15, True)), (Units.exact(), Accumulator(32, False)),
                      (Units.exact("8u"), Accumulator(15, False)), (Units.exact("8u"), Accumulator(16, True)),
                      (Units.exact("8u x 4s"), Accumulator(11, True)), (Units.exact("4s"), Accumulator(7, True))):
        f = unit.format
        with pytest.raises(ValueError, match=r"^accumulator:"):
            accum.gemm(byte_codes(a, f.a_signed), byte_codes(b, f.b_signed), unit, reg)
    with pytest.raises(TypeError, match=r"accumulator"):
        accum.gemm(a, b, u, 16)
    # codes outside the format
    u4, acc12 = Units.exact("8u x 4s"), Accumulator(12, True)
    with pytest.raises(ValueError, match=r"^a:"):
        accum.gemm(np.full((2, 3), -1, np.int16), b, u4, acc12)
    with pytest.raises(ValueError, match=r"^a:"):
        accum.gemm(np.full((2, 3), 256, np.int16), b, u4, acc12)
    with pytest.raises(ValueError, match=r"^b:"):
        accum.gemm(np.zeros((2, 3), np.uint8), np.full((3, 4), 8, np.int8), u4, acc12)
    with pytest.raises(ValueError, match=r"^b:"):
        accum.gemm(np.zeros((2, 3), np.uint8), np.full((3, 4), -9, np.int8), u4, acc12)
    with pytest.raises(ValueError, match=r"^a:"):
        accum.gemm(np.full((2, 3), -9, np.int8), b, Units.exact("4s"), Accumulator(8, True))
    with pytest.raises(ValueError, match=r"threads"):
        accum.gemm(a, b, u, acc, threads=0)
    # products
    with pytest.raises(TypeError, match=r"^products:"):
        accum.accumulate(np.zeros((2, 3), np.float64), acc)
    for shape in ((3,), (2, 3, 4)):
        with pytest.raises(ValueError, match=r"^products:"):
            accum.accumulate(np.zeros(shape, np.int64), acc)
    with pytest.raises(TypeError, match=r"accumulator"):
        accum.accumulate(np.zeros((2, 3), np.int64), object())
    with pytest.raises(ValueError, match=r"threads"):
        accum.accumulate(np.zeros((2, 3), np.int64), acc, threads=0)
