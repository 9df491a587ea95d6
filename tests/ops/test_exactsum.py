"""lutcore.train.exactsum against its integer reference (tests/reference/exact_sum_ref.py):
random values over float32's whole exponent range, denormals, cancellation, ties, overflow,
inf/nan; and the contract's point: any order / partition / merge tree gives the same bits."""
import numpy as np
import pytest

from lutcore.train.exactsum import ExactSum, GradSum, exact_sum
from reference.exact_sum_ref import exact_sum_ref


def bits_equal(a, b):
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def wide(rng, n):
    """float32 values with random sign, exponent field 0..254 (denormals included) and fraction."""
    e = rng.integers(0, 255, n).astype(np.uint32)
    f = rng.integers(0, 1 << 23, n).astype(np.uint32)
    s = rng.integers(0, 2, n).astype(np.uint32)
    return ((s << 31) | (e << 23) | f).view(np.float32)


@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (33, 9), (130, 70)])
def test_matches_reference_wide_range(n, k):
    rng = np.random.default_rng(n * 100 + k)
    xs = [wide(rng, n) for _ in range(k)]
    assert bits_equal(exact_sum(xs), exact_sum_ref(xs))


@pytest.mark.parametrize("n", [1, 7, 33])
def test_matches_reference_gradient_like_and_denormals(n):
    rng = np.random.default_rng(n)
    xs = [(rng.standard_normal(n) * 10.0 ** rng.integers(-30, 3)).astype(np.float32) for _ in range(11)]
    den = (rng.integers(-(1 << 23), 1 << 23, n).astype(np.float32) * np.float32(2.0 ** -149)).astype(np.float32)
    xs.append(den)
    assert bits_equal(exact_sum(xs), exact_sum_ref(xs))
    assert bits_equal(exact_sum([den]), den)                        # a denormal alone is exact


def test_edge_cases_explicit():
    f = np.float32
    big, tiny = f(3.4028235e38), f(2.0 ** -149)
    cases = [
        ([1.0, 2.0 ** -24], 1.0),                                     # tie, even stays
        ([1.0 + 2.0 ** -23, 2.0 ** -24], 1.0 + 2.0 ** -22),           # tie, odd rounds up
        ([1.0, 2.0 ** -24, tiny], 1.0 + 2.0 ** -23),                  # sticky bit breaks the tie
        ([1e30, 1.0, -1e30], 1.0),                                    # float sum would give 0
        ([big, big, -big], big),                                      # float sum would give inf
        ([big, big], np.inf),                                         # the exact sum overflows
        ([-big, -big], -np.inf),
        ([tiny, -tiny], 0.0),
        ([-0.0, -0.0], 0.0),                                          # exact zero is +0.0 (contract)
        ([np.inf, 1.0], np.inf), ([-np.inf, 1.0], -np.inf),
        ([np.inf, -np.inf], np.nan), ([np.nan, 1.0], np.nan), ([np.inf, np.inf], np.inf),
    ]
    for terms, want in cases:
        xs = [np.array([t], np.float32) for t in terms]
        got = exact_sum(xs)
        assert bits_equal(got, np.array([want], np.float32)), (terms, got, want)
        assert bits_equal(got, exact_sum_ref(xs)), terms


def test_any_order_partition_and_merge_tree_gives_the_same_bits():
    rng = np.random.default_rng(29)
    n, k = 257, 40
    xs = [(rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)).astype(np.float32) for _ in range(k)]
    xs[3][5], xs[7][9], xs[8][9] = np.inf, np.nan, -np.inf
    want = exact_sum_ref(xs)
    float_sums = set()
    for trial in range(12):
        order = rng.permutation(k)
        parts = np.array_split(order, rng.integers(1, 6))              # 1..5 workers
        accs = []
        for p in parts:
            a = ExactSum((n,))
            for i in p:
                a.add(xs[i])
            accs.append(ExactSum.from_wire(a.to_wire()))               # as sent between processes
        while len(accs) > 1:                                          # a random merge tree
            i, j = sorted(rng.choice(len(accs), 2, replace=False))
            accs[i].merge(accs.pop(j))
        assert bits_equal(accs[0].result(), want)
        fs = np.zeros(n, np.float32)
        for i in order:
            fs += xs[i]
        float_sums.add(fs.tobytes())
    assert len(float_sums) > 1                                         # a plain float sum does depend on order


def test_many_terms_carry_and_lazy_normalisation():
    x = np.full(5, 3.4028235e38 / 4096, np.float32)
    x[1] = -x[1]
    x[2] = np.float32(2.0 ** -149)
    acc = ExactSum((5,))
    for _ in range(300):                                              # past the lazy-normalise interval
        acc.add(x)
    assert bits_equal(acc.result(), exact_sum_ref([x] * 300))


def test_gradsum_dict_and_bad_input():
    g = GradSum().add({"b": np.ones(3, np.float32), "a": np.ones((2, 2), np.float32)})
    g.merge(GradSum().add({"a": np.ones((2, 2), np.float32), "b": np.ones(3, np.float32)}))
    r = g.result()
    assert list(r) == ["a", "b"] and bits_equal(r["a"], np.full((2, 2), 2, np.float32))
    with pytest.raises(TypeError, match="x: expected a float32"):
        ExactSum((3,)).add(np.ones(3))
    with pytest.raises(ValueError, match=r"x: expected shape \(3,\), got \(4,\)"):
        ExactSum((3,)).add(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="arrays: expected at least one"):
        exact_sum([])


@pytest.mark.parametrize("n", [1, 7, 33, 1031])
@pytest.mark.parametrize("threads", [1, 2])
def test_native_passes_equal_the_numpy_passes_and_the_reference(n, threads):
    """csrc/exactsum (the default) against the numpy passes (native=False) and the integer
    reference: the whole exponent range, denormals, specials, cancellation, > _LAZY terms, at
    1 and 2 threads — limbs, flags and result bit for bit."""
    from lutcore.train import exactsum as es
    rng = np.random.default_rng(7000 + n)
    xs = [wide(rng, n) for _ in range(es._LAZY + 5)]
    xs[0][: min(n, 3)] = np.array([np.inf, -np.inf, np.nan][: min(n, 3)], np.float32)
    xs[1][:] = -xs[2]                                               # exact cancellation of a term
    finite = [np.where(np.isfinite(x), x, np.float32(0)) for x in xs]
    nat, ref = ExactSum((n,), threads=threads), ExactSum((n,), native=False)
    for x in xs:
        nat.add(x)
        ref.add(x)
    assert nat.lo == ref.lo and np.array_equal(nat.limbs, ref.limbs)
    assert np.array_equal(nat.flags, ref.flags)
    assert bits_equal(nat.result(), ref.result())
    assert bits_equal(exact_sum(finite), exact_sum_ref(finite))
    merged = ExactSum((n,), threads=threads).merge(nat)             # round after a merge, too
    assert bits_equal(merged.result(), ref.result())


def test_native_passes_bad_input():
    from lutcore._native import exactsum as xs
    L = np.zeros((2, 5), np.int64)
    with pytest.raises(ValueError, match="x: expected a C-contiguous 1-D float32"):
        xs.add(L, 0, np.zeros(5, np.float64), None, 1)
    with pytest.raises(ValueError, match=r"limbs: expected a C-contiguous int64 array of shape \(nl, 4\)"):
        xs.add(L, 0, np.zeros(4, np.float32), None, 1)
    with pytest.raises(ValueError, match=r"flags: expected shape \(5,\)"):
        xs.add(L, 0, np.zeros(5, np.float32), np.zeros(4, np.uint8), 1)
    with pytest.raises(ValueError, match="limbs: expected at most"):
        xs.round_f32(np.zeros((xs.MAX_LIMBS + 1, 3), np.int64), 0, 1)
    assert xs.limb_range(np.zeros(3, np.float32), 1) == (-1, -1, False)


def test_merge_wire_equals_merge_of_from_wire():
    rng = np.random.default_rng(11)
    parts = []
    for _ in range(3):
        g = GradSum()
        g.add({"a": wide(rng, 33), "b": (rng.standard_normal((3, 7)) * 1e-3).astype(np.float32)})
        parts.append(g.to_wire())
    one, two = GradSum(), GradSum()
    for w in parts:
        one.merge(GradSum.from_wire(w))
        two.merge_wire(w)
        assert GradSum.wire_nbytes(w) == GradSum.from_wire(w).nbytes_wire()
    r1, r2 = one.result(), two.result()
    assert sorted(r1) == sorted(r2) and all(bits_equal(r1[k], r2[k]) for k in r1)
    with pytest.raises(ValueError, match=r"w: expected an accumulator of shape \(33,\)"):
        ExactSum((33,)).merge_wire(((34,), 0, None, None, None))
