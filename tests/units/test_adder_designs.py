"""lutcore.units.adder_designs (the lower-part-OR and truncated adders) against integer models
written here from the designs' arithmetic, never from their netlists.

Design: ``loa_model`` / ``trunc_model`` give an adder's output value for operand values, the
upper parts added with shifts and the low part as the design says; each netlist is held to
its model on every pair for 8 bits and on edge pairs plus fixed-seed random ones for 16
bits (``Adder.add``: lutcore's netlist evaluator), at k = 0, 1, a middle k and k = bits - 1.
Then: k = 0 is the exact adder (same digest); the error bounds the module docstring states,
on every 8-bit pair; name and cost; argument checks; and a register through each design in
the accumulator kernel (``lutcore.ops.accum.accumulate``) against the accumulator oracle
(tests/reference/accum_ref.py) driven by the integer model -- values and overflow counts.
"""
import numpy as np
import pytest

from lutcore.units.accumulator import Accumulator
from lutcore.units.adder_designs import COST_SOURCE, loa, truncated
from lutcore.units.adders import Adder
from reference.accum_ref import accumulate_ref

RANDOM_PAIRS = 1 << 16
DESIGNS = {"loa": loa, "trunc": truncated}


# ------------------------------------------------------------------------------ the models
def loa_model(a, b, W, signed, k):
    """int64: the lower-part-OR adder's sum of values a, b: (a >> k) + (b >> k) + (a_{k-1} & b_{k-1})
    at 2^k, plus the OR of the k low bits (arithmetic shifts: a signed value's floor)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if k == 0:
        return a + b
    mk = (1 << k) - 1
    low = (a | b) & mk                                      # two's-complement low bits, as patterns
    carry = (a >> (k - 1)) & (b >> (k - 1)) & 1
    return (((a >> k) + (b >> k) + carry) << k) + low


def trunc_model(a, b, W, signed, k):
    """int64: the upper parts of a, b added, the k low bits 0."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    return ((a >> k) + (b >> k)) << k


MODELS = {"loa": loa_model, "trunc": trunc_model}


def _range(W, signed):
    return (-(1 << (W - 1)), (1 << (W - 1)) - 1) if signed else (0, (1 << W) - 1)


def _pairs(W, signed):
    """(a, b) values: every pair for W <= 8, else the edges crossed plus fixed-seed random pairs."""
    lo, hi = _range(W, signed)
    if W <= 8:
        v = np.arange(lo, hi + 1, dtype=np.int64)
        return np.repeat(v, v.size), np.tile(v, v.size)
    edge = np.array(sorted({lo, lo + 1, -1 if signed else 1, 0, 1, hi - 1, hi, (lo + hi) // 2}), np.int64)
    ea, eb = (x.ravel() for x in np.meshgrid(edge, edge))
    rng = np.random.default_rng(W * 2 + signed)
    return (np.concatenate([ea, rng.integers(lo, hi + 1, RANDOM_PAIRS)]),
            np.concatenate([eb, rng.integers(lo, hi + 1, RANDOM_PAIRS)]))


def _ks(W):
    return sorted({0, 1, W // 2 - 1, W - 1})


CASES = [(d, W, s, k) for d in DESIGNS for W in (8, 16) for s in (True, False) for k in _ks(W)]


# ------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("design,W,signed,k", CASES)
def test_design_matches_its_model(design, W, signed, k):
    adder = DESIGNS[design](W, signed, k)
    a, b = _pairs(W, signed)
    got = adder.add(a, b)
    want = MODELS[design](a, b, W, signed, k)
    bad = np.flatnonzero(got != want)
    print(f"{adder.name}: {a.size} pairs, {bad.size} differ")
    assert adder.bits == W and adder.signed is signed and adder.out_bits == W + 1
    assert bad.size == 0, f"{adder.name}: a={a[bad[0]]} b={b[bad[0]]}: got {got[bad[0]]}, want {want[bad[0]]}"


@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("W,signed", [(8, True), (8, False), (16, True), (5, False)])
def test_k0_is_the_exact_adder(design, W, signed):
    adder = DESIGNS[design](W, signed, 0)
    assert adder == Adder.exact(W, signed)                  # the same netlist
    assert adder.is_exact


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("k", [1, 3, 5, 7])
def test_error_bounds(signed, k):
    """The module docstring's per-step error ranges, on every 8-bit pair (and reached)."""
    a, b = _pairs(8, signed)
    e_loa = loa(8, signed, k).add(a, b) - (a + b)
    e_tr = truncated(8, signed, k).add(a, b) - (a + b)
    print(f"k={k}: loa {e_loa.min()}..{e_loa.max()}, truncated {e_tr.min()}..{e_tr.max()}")
    assert (e_loa.min(), e_loa.max()) == (-((1 << (k - 1)) - 1), 1 << (k - 1))
    assert (e_tr.min(), e_tr.max()) == (-((1 << (k + 1)) - 2), 0)


def test_names_and_costs():
    for f, stem in ((loa, "loa"), (truncated, "trunc")):
        for W, signed, k in ((16, True, 6), (12, False, 3), (8, True, 0)):
            adder = f(W, signed, k)
            assert adder.name == f"{stem}{W}{'s' if signed else 'u'}_k{k}"
            assert adder.cost == {"cells": adder.netlist.gate_count, "source": COST_SOURCE}
            assert "adder_designs" in adder.source
    # a full adder is 2 gates, the sign extension 1: the exact 16-bit adder 33; loa swaps k full
    # adders for k ORs and one AND, truncated drops them
    assert loa(16, True, 6).cost["cells"] == 33 - 2 * 6 + 6 + 1
    assert truncated(16, True, 6).cost["cells"] == 33 - 2 * 6
    assert truncated(16, False, 15).cost["cells"] == 2      # the top bit's full adder alone


@pytest.mark.parametrize("f", [loa, truncated])
def test_bad_arguments(f):
    with pytest.raises(ValueError, match="k: expected"):
        f(8, True, 8)
    with pytest.raises(ValueError, match="k: expected"):
        f(8, True, -1)
    with pytest.raises(ValueError, match="bits: expected"):
        f(17, True, 2)
    with pytest.raises(TypeError, match="k: expected an int"):
        f(8, True, True)
    with pytest.raises(TypeError, match="signed: expected a bool"):
        f(8, 1, 2)


@pytest.mark.parametrize("design,W,signed,k", [("loa", 16, True, 6), ("trunc", 16, True, 4), ("loa", 10, False, 3),
                                               ("trunc", 12, False, 2)])
@pytest.mark.parametrize("overflow", ["wrap", "saturate"])
def test_kernel_through_a_design(design, W, signed, k, overflow):
    """A register through the design in lutcore's accumulator kernel, against the oracle driven by
    the integer model: values and overflow counts, bit for bit."""
    from lutcore.ops import accum
    lo, hi = _range(W, signed)
    rng = np.random.default_rng(W + k)
    L, K = 257, 45
    top = 1 << (W - 3) if signed else (1 << (W + 1)) // K   # some rows overflow, some do not
    p = rng.integers(-top if signed else 0, top + 1, (L, K))                               # (L, K)
    adder = DESIGNS[design](W, signed, k)
    mask = (1 << (W + 1)) - 1

    def fn(a_pat, b_pat):                                   # patterns in, (W+1)-bit pattern out
        def val(v):
            v = np.asarray(v, np.int64)
            return v - (((v >> (W - 1)) & 1) << W) if signed else v
        return MODELS[design](val(a_pat), val(b_pat), W, signed, k) & mask

    want, want_n = accumulate_ref(p, bits=W, signed=signed, overflow=overflow, order="sequential", chunk=1,
                                  adder=(fn, W + 1))
    got, got_n = accum.accumulate(p, Accumulator(W, signed, overflow, adder=adder), counts=True)
    print(f"{adder.name} {overflow}: {int((want_n > 0).sum())} of {len(want)} rows overflow")
    assert np.array_equal(got, want)
    assert np.array_equal(got_n, want_n)
