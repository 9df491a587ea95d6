"""lutcore.ops.netlist (GEMM and products through a gate netlist, csrc/netlist/netlist.h) against
the numpy oracle (tests/reference/netlist_ref.py) and against a*b for exact multipliers built here.

The netlists are made in this file, in the IR (lutcore.ops.netlist's docstring): an unsigned
array multiplier of AND gates and ripple adders (full adders as one XOR3 and one MAJ, or as five
2-input gates), a Baugh-Wooley signed multiplier (its columns compressed by full and half adders),
random netlists of random gates with random truth tables (every tt, constants and repeated inputs
included), and an approximate multiplier (low product bits tied to constants and input bits,
dead gates, P(0, 0) != 0).  Shapes cross the 64-lane words and the bodies' passes; threads 1
and 2 give the same bits; every SIMD path this CPU has (the ``simd`` fixture); the SIMDe twin
of the AVX-512 bodies is tests/bodies/test_x86_bodies_netlist.py.  Bad input raises naming the
argument.
"""
import numpy as np
import pytest

from lutcore.ops import netlist as nl
from reference.netlist_ref import gemm_ref, products_ref


def tt_of(f):
    """The truth table of f(x, y, z) in the IR's convention (bit 4 x + 2 y + z)."""
    return sum(int(f((m >> 2) & 1, (m >> 1) & 1, m & 1)) << m for m in range(8))


AND2, XOR2, OR2 = tt_of(lambda x, y, z: x & y), tt_of(lambda x, y, z: x ^ y), tt_of(lambda x, y, z: x | y)
NAND2 = tt_of(lambda x, y, z: 1 - (x & y))
XOR3, MAJ = tt_of(lambda x, y, z: x ^ y ^ z), tt_of(lambda x, y, z: (x & y) | (x & z) | (y & z))


class Netlist:
    """A netlist being built: gate(...) appends a row and returns its node id."""

    def __init__(self, a_bits, b_bits):
        self.a_bits, self.b_bits, self.rows = a_bits, b_bits, []
        self.a = [2 + i for i in range(a_bits)]
        self.b = [2 + a_bits + j for j in range(b_bits)]

    def gate(self, x, y=0, z=0, tt=0):
        self.rows.append((x, y, z, tt))
        return 2 + self.a_bits + self.b_bits + len(self.rows) - 1

    def full_add(self, x, y, z, two_input):
        if two_input:
            t = self.gate(x, y, tt=XOR2)
            s = self.gate(t, z, tt=XOR2)
            return s, self.gate(self.gate(x, y, tt=AND2), self.gate(t, z, tt=AND2), tt=OR2)
        return self.gate(x, y, z, XOR3), self.gate(x, y, z, MAJ)

    def half_add(self, x, y):
        return self.gate(x, y, tt=XOR2), self.gate(x, y, tt=AND2)

    def ir(self, outputs):
        return np.array(self.rows, np.int32).reshape(-1, 4), np.array(outputs, np.int32)


def array_multiplier(a_bits, b_bits, two_input=False):
    """Unsigned a_bits x b_bits -> a_bits + b_bits bits: rows of AND partial products added by
    ripple adders (EvoApproxLib's exact mulNu have this form)."""
    n = Netlist(a_bits, b_bits)
    acc = [n.gate(n.a[i], n.b[0], tt=AND2) for i in range(a_bits)] + [0] * b_bits
    for j in range(1, b_bits):
        carry = None
        for i in range(a_bits):
            pp = n.gate(n.a[i], n.b[j], tt=AND2)
            if carry is None:
                acc[i + j], carry = n.half_add(acc[i + j], pp)
            else:
                acc[i + j], carry = n.full_add(acc[i + j], pp, carry, two_input)
        acc[a_bits + j] = carry
    return n.ir(acc)


def baugh_wooley(a_bits, b_bits):
    """Signed a_bits x b_bits -> a_bits + b_bits bits (two's complement): the partial products
    with the sign row and column negated, constant ones at a_bits-1, b_bits-1 and the top."""
    n = Netlist(a_bits, b_bits)
    W, A, B = a_bits + b_bits, a_bits - 1, b_bits - 1
    cols = [[] for _ in range(W)]
    for i in range(a_bits):
        for j in range(b_bits):
            cols[i + j].append(n.gate(n.a[i], n.b[j], tt=NAND2 if (i == A) != (j == B) else AND2))
    for k in (A, B, W - 1):
        cols[k].append(1)
    for k in range(W):
        while len(cols[k]) > 1:
            if len(cols[k]) >= 3:
                s, c = n.full_add(cols[k].pop(), cols[k].pop(), cols[k].pop(), False)
            else:
                s, c = n.half_add(cols[k].pop(), cols[k].pop())
            cols[k].insert(0, s)
            if k + 1 < W:
                cols[k + 1].append(c)
    return n.ir([c[0] if c else 0 for c in cols])


def random_netlist(rng, a_bits, b_bits, G, p_bits, every_tt=False):
    """G random gates (inputs any earlier node, constants included; tt random, or 0..255 in
    turn), p_bits outputs at random nodes (constants and inputs included)."""
    first = 2 + a_bits + b_bits
    rows = np.zeros((G, 4), np.int32)
    for g in range(G):
        rows[g, :3] = rng.integers(0, first + g, 3)
        rows[g, 3] = g % 256 if every_tt else rng.integers(0, 256)
    outputs = rng.integers(0, first + G, p_bits).astype(np.int32)
    outputs[-min(p_bits, 4):] = np.arange(first + G - min(p_bits, 4), first + G)    # the last gates
    return rows, outputs


def approximate_multiplier(a_bits, b_bits):
    """An 'approximate' unsigned multiplier: the exact array's low bits replaced (bit 0 the
    constant 1, bit 1 the input a_0, bit 2 constant 0) -- P(0, 0) = 1 -- and its gates kept
    (dead ones included)."""
    g, o = array_multiplier(a_bits, b_bits)
    o = o.copy()
    o[0], o[1], o[2] = 1, 2, 0
    return g, o


def unsigned_codes(rng, bits, shape):
    return rng.integers(0, 1 << bits, shape)


def signed_codes(rng, bits, shape):
    return rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), shape)


def kw(a_bits, b_bits, a_signed=False, b_signed=False, product_signed=False):
    return dict(a_bits=a_bits, b_bits=b_bits, a_signed=a_signed, b_signed=b_signed, product_signed=product_signed)


def ref_kw(k):
    return dict(a_bits=k["a_bits"], b_bits=k["b_bits"], product_signed=k["product_signed"])


# ------------------------------------------------------------------ the circuits built here are right

@pytest.mark.parametrize("a_bits,b_bits", [(1, 1), (3, 5), (8, 8), (12, 12)])
def test_reference_multipliers_are_exact(a_bits, b_bits):
    rng = np.random.default_rng(a_bits * 31 + b_bits)
    n = 4096
    a, b = unsigned_codes(rng, a_bits, n), unsigned_codes(rng, b_bits, n)
    for two in (False, True):
        g, o = array_multiplier(a_bits, b_bits, two)
        assert np.array_equal(products_ref(a, b, g, o, a_bits=a_bits, b_bits=b_bits, product_signed=False), a * b)
    if a_bits > 1 and b_bits > 1:
        a, b = signed_codes(rng, a_bits, n), signed_codes(rng, b_bits, n)
        g, o = baugh_wooley(a_bits, b_bits)
        assert np.array_equal(products_ref(a, b, g, o, a_bits=a_bits, b_bits=b_bits, product_signed=True), a * b)


# ------------------------------------------------------------------ products

@pytest.mark.parametrize("a_bits,b_bits", [(2, 3), (5, 4), (8, 8), (11, 11), (16, 16)])
def test_products_exact_multipliers_all_paths(simd, a_bits, b_bits):
    rng = np.random.default_rng(a_bits * 17 + b_bits)
    n = 5000
    g, o = array_multiplier(a_bits, b_bits)
    a, b = unsigned_codes(rng, a_bits, n), unsigned_codes(rng, b_bits, n)
    got = nl.products(a, b, g, o, **kw(a_bits, b_bits))
    print("max diff", np.abs(got - a * b).max())
    assert np.array_equal(got, a * b)
    g, o = baugh_wooley(a_bits, b_bits)
    a, b = signed_codes(rng, a_bits, n), signed_codes(rng, b_bits, n)
    got = nl.products(a.astype(np.int16), b.astype(np.int16), g, o, **kw(a_bits, b_bits, True, True, True))
    assert np.array_equal(got, a * b)
    # the same bits read unsigned: the product's pattern
    unsigned = nl.products(a.astype(np.int16), b.astype(np.int16), g, o, **kw(a_bits, b_bits, True, True, False))
    assert np.array_equal(unsigned, (a * b) & ((1 << (a_bits + b_bits)) - 1))


@pytest.mark.parametrize("path", ["avx512", "avx2"])
def test_products_every_12x12_pair(path):
    """The tabulation use: all 16M products of a 12x12 multiplier, once, on the vector paths the
    CPU has (the others: test_products_exact_multipliers_all_paths)."""
    import lutcore
    prev = lutcore.get_simd()
    try:
        lutcore.set_simd(path)
    except ValueError:
        lutcore.set_simd(prev)                   # a CPU without this path: its fastest instead
    g, o = array_multiplier(12, 12)
    a = np.repeat(np.arange(4096, dtype=np.uint16), 4096)
    b = np.tile(np.arange(4096, dtype=np.uint16), 4096)
    try:
        got = nl.products(a, b, g, o, **kw(12, 12), threads=2)
    finally:
        lutcore.set_simd(prev)
    assert np.array_equal(got, a.astype(np.int64) * b.astype(np.int64))


@pytest.mark.parametrize("n", [1, 7, 33, 63, 64, 65, 4095, 4097, 16385])
def test_products_random_netlists_vs_reference(simd, n):
    rng = np.random.default_rng(n)
    for trial in range(3):
        a_bits, b_bits = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        p_bits = int(rng.integers(1, 33))
        g, o = random_netlist(rng, a_bits, b_bits, int(rng.integers(0, 300)), p_bits)
        ps = bool(rng.integers(0, 2))
        a, b = unsigned_codes(rng, a_bits, n), unsigned_codes(rng, b_bits, n)
        want = products_ref(a, b, g, o, a_bits=a_bits, b_bits=b_bits, product_signed=ps)
        got = nl.products(a, b, g, o, **kw(a_bits, b_bits, product_signed=ps))
        assert np.array_equal(got, want), (trial, a_bits, b_bits, p_bits)


def test_every_truth_table_on_every_path(simd):
    """256 gates, gate g with tt g (the generic bodies' op table, the AVX-512 switch), each
    gate's inputs three distinct operand bits, then again over earlier gates; every gate an output
    in turn (32 outputs a netlist)."""
    rng = np.random.default_rng(256)
    a_bits = b_bits = 3
    first = 2 + a_bits + b_bits
    n = 4096
    a, b = unsigned_codes(rng, a_bits, n), unsigned_codes(rng, b_bits, n)
    for inputs in ("operands", "gates"):
        rows = np.zeros((512, 4), np.int32)
        for g in range(512):
            rows[g, :3] = rng.permutation(np.arange(2, first))[:3] if (inputs == "operands" or g < 8) else \
                rng.choice(np.arange(first, first + g), 3, replace=False)
            rows[g, 3] = g % 256
        for start in range(0, 512, 32):
            o = np.arange(first + start, first + start + 32, dtype=np.int32)
            want = products_ref(a, b, rows, o, a_bits=a_bits, b_bits=b_bits, product_signed=True)
            got = nl.products(a, b, rows, o, **kw(a_bits, b_bits, product_signed=True))
            assert np.array_equal(got, want), (inputs, start)


def test_constant_and_repeated_inputs():
    """Gates reading the constants and the same node twice; outputs on constants and inputs."""
    rng = np.random.default_rng(5)
    a_bits, b_bits = 4, 4
    first = 10
    rows = []
    for tt in range(256):
        x, y = int(rng.integers(2, first)), int(rng.integers(2, first))
        rows += [(0, x, 1, tt), (x, x, y, tt), (1, 1, 0, tt), (x, 0, x, tt)]
    rows = np.array(rows, np.int32)
    G = len(rows)
    a, b = unsigned_codes(rng, a_bits, 1000), unsigned_codes(rng, b_bits, 1000)
    for start in range(0, G, 29):
        o = np.r_[[0, 1, 2, first - 1], np.arange(first + start, min(first + start + 28, first + G))].astype(np.int32)
        want = products_ref(a, b, rows, o, a_bits=a_bits, b_bits=b_bits, product_signed=False)
        assert np.array_equal(nl.products(a, b, rows, o, **kw(a_bits, b_bits)), want), start


# ------------------------------------------------------------------ gemm

SHAPES = [(1, 1, 1), (7, 7, 7), (1, 64, 1), (33, 65, 7), (7, 130, 33), (65, 33, 1), (2, 511, 3), (3, 513, 2),
          (1, 1100, 5), (130, 7, 65)]


@pytest.mark.parametrize("M,K,N", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_gemm_exact_multipliers(simd, M, K, N):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    g, o = array_multiplier(9, 7)
    A, B = unsigned_codes(rng, 9, (M, K)), unsigned_codes(rng, 7, (K, N))
    got = nl.gemm(A, B, g, o, **kw(9, 7))
    print("max diff", np.abs(got - A @ B).max())
    assert np.array_equal(got, A @ B)
    g, o = baugh_wooley(6, 10)
    A, B = signed_codes(rng, 6, (M, K)), signed_codes(rng, 10, (K, N))
    got = nl.gemm(A.astype(np.int32), B.astype(np.int16), g, o, **kw(6, 10, True, True, True))
    assert np.array_equal(got, A @ B)


@pytest.mark.parametrize("M,K,N", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_gemm_random_and_approximate_vs_reference(simd, M, K, N):
    rng = np.random.default_rng(M * 7 + K * 3 + N)
    g, o = random_netlist(rng, 5, 6, 120, 13)
    A, B = unsigned_codes(rng, 5, (M, K)), unsigned_codes(rng, 6, (K, N))
    want = gemm_ref(A, B, g, o, a_bits=5, b_bits=6, product_signed=True)
    assert np.array_equal(nl.gemm(A, B, g, o, **kw(5, 6, product_signed=True)), want)
    g, o = approximate_multiplier(4, 4)
    A, B = unsigned_codes(rng, 4, (M, K)), unsigned_codes(rng, 4, (K, N))
    want = gemm_ref(A, B, g, o, a_bits=4, b_bits=4, product_signed=False)
    got = nl.gemm(A, B, g, o, **kw(4, 4))
    assert np.array_equal(got, want)
    zero = nl.gemm(np.zeros((M, K), int), np.zeros((K, N), int), g, o, **kw(4, 4))
    assert np.array_equal(zero, np.full((M, N), K))            # P(0, 0) = 1, every padded lane masked


def test_gemm_threads_same_bits(simd):
    rng = np.random.default_rng(12)
    g, o = array_multiplier(16, 16)
    A, B = unsigned_codes(rng, 16, (37, 700)), unsigned_codes(rng, 16, (700, 45))
    one = nl.gemm(A, B, g, o, **kw(16, 16), threads=1)
    two = nl.gemm(A, B, g, o, **kw(16, 16), threads=2)
    assert np.array_equal(one, two)
    assert np.array_equal(one, A @ B)
    a, b = unsigned_codes(rng, 16, 100_001), unsigned_codes(rng, 16, 100_001)
    assert np.array_equal(nl.products(a, b, g, o, **kw(16, 16), threads=1),
                          nl.products(a, b, g, o, **kw(16, 16), threads=2))


def test_gemm_paths_agree():
    """Every SIMD path of this CPU gives the generic body's bits (one call each)."""
    import lutcore
    rng = np.random.default_rng(3)
    g, o = random_netlist(rng, 7, 9, 400, 20)
    A, B = unsigned_codes(rng, 7, (9, 300)), unsigned_codes(rng, 9, (300, 11))
    prev = lutcore.get_simd()
    try:
        outs = {}
        for name in lutcore.available_simd():
            lutcore.set_simd(name)
            outs[name] = nl.gemm(A, B, g, o, **kw(7, 9, product_signed=True))
    finally:
        lutcore.set_simd(prev)
    for name, got in outs.items():
        assert np.array_equal(got, outs["generic"]), name


def test_threads_none_reads_the_scope_and_an_explicit_count_wins():
    from lutcore import _threads
    g, o = array_multiplier(4, 4)
    a = np.arange(16)
    with _threads.record() as calls:
        with _threads.scope(2):
            nl.products(a, a, g, o, **kw(4, 4))
            nl.gemm(a[None], a[:, None], g, o, **kw(4, 4))
            nl.gemm(a[None], a[:, None], g, o, **kw(4, 4), threads=1)
    assert [(f, n) for f, n in calls] == [("netlist.products", 2), ("netlist.gemm", 2), ("netlist.gemm", 1)], calls


def test_empty_shapes():
    g, o = array_multiplier(4, 4)
    assert nl.gemm(np.zeros((0, 5), int), np.zeros((5, 3), int), g, o, **kw(4, 4)).shape == (0, 3)
    assert np.array_equal(nl.gemm(np.zeros((2, 0), int), np.zeros((0, 3), int), g, o, **kw(4, 4)), np.zeros((2, 3)))
    assert nl.products(np.zeros(0, int), np.zeros(0, int), g, o, **kw(4, 4)).shape == (0,)
    # no gates at all: the outputs are constants and inputs
    got = nl.products(np.arange(16), np.arange(16), np.zeros((0, 4), np.int32), np.array([1, 2, 6, 0], np.int32),
                      **kw(4, 4))
    assert np.array_equal(got, 1 + 2 * (np.arange(16) & 1) + 4 * (np.arange(16) & 1))


# ------------------------------------------------------------------ bad input

def _ok():
    g, o = array_multiplier(4, 4)
    return np.zeros((2, 3), int), np.zeros((3, 2), int), g, o


@pytest.mark.parametrize("change,err,words", [
    (dict(a=np.zeros((2, 3), np.float32)), TypeError, ["a", "integer", "float32"]),
    (dict(b=np.zeros((3, 2), bool)), TypeError, ["b", "integer", "bool"]),
    (dict(a=np.zeros(3, int)), ValueError, ["a", "2-D", "(3,)"]),
    (dict(b=np.zeros((4, 2), int)), ValueError, ["a, b", "(K, N)", "(4, 2)"]),
    (dict(a=np.full((2, 3), 16)), ValueError, ["a", "[0, 16)", "16"]),
    (dict(a=np.full((2, 3), -1)), ValueError, ["a", "[0, 16)", "-1"]),
    (dict(b=np.full((3, 2), -9), b_signed=True), ValueError, ["b", "[-8, 8)", "-9"]),
    (dict(gates=np.zeros((3, 3), np.int32)), ValueError, ["gates", "(G, 4)", "(3, 3)"]),
    (dict(gates=np.zeros((3, 4), np.float64)), TypeError, ["gates", "int32", "float64"]),
    (dict(gates=np.array([[0, 0, 10, 8]], np.int32)), ValueError, ["gates", "row 0", "input z", "[0, 10)", "10"]),
    (dict(gates=np.array([[0, 0, 0, 8], [0, 11, 0, 8]], np.int32)), ValueError, ["gates", "row 1", "input y", "11"]),
    (dict(gates=np.array([[-1, 0, 0, 8]], np.int32)), ValueError, ["gates", "row 0", "input x", "-1"]),
    (dict(gates=np.array([[0, 0, 0, 256]], np.int32)), ValueError, ["gates", "row 0", "0..255", "256"]),
    (dict(outputs=np.zeros(33, np.int32)), ValueError, ["outputs", "1..32", "(33,)"]),
    (dict(outputs=np.zeros(0, np.int32)), ValueError, ["outputs", "1..32", "(0,)"]),
    (dict(outputs=np.array([0, 999], np.int32)), ValueError, ["outputs", "bit 1", "999"]),
    (dict(outputs=np.array([0.5])), TypeError, ["outputs", "int32", "float64"]),
    (dict(a_bits=0), ValueError, ["a_bits", "1..16", "0"]),
    (dict(b_bits=17), ValueError, ["b_bits", "1..16", "17"]),
    (dict(a_bits=4.0), ValueError, ["a_bits", "1..16", "4.0"]),
    (dict(a_signed=1), TypeError, ["a_signed", "bool", "int"]),
    (dict(product_signed="no"), TypeError, ["product_signed", "bool", "str"]),
    (dict(threads=0), ValueError, ["threads"]),
])
def test_gemm_bad_input_names_the_argument(change, err, words):
    a, b, g, o = _ok()
    args = dict(a=a, b=b, gates=g, outputs=o, a_bits=4, b_bits=4, a_signed=False, b_signed=False,
                product_signed=False)
    args.update(change)
    with pytest.raises(err) as e:
        nl.gemm(args.pop("a"), args.pop("b"), args.pop("gates"), args.pop("outputs"), **args)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_gemm_k_bound():
    g, o = random_netlist(np.random.default_rng(0), 1, 1, 3, 32)
    a = np.broadcast_to(np.uint16(0), (1, 1 << 30))                # no memory: checked before any read
    b = np.broadcast_to(np.uint16(0), (1 << 30, 1))
    with pytest.raises(ValueError, match=r"a: K = 1073741824 too long .* \(K 2\^P must be < 2\^62\)"):
        nl.gemm(a, b, g, o, **kw(1, 1))


def test_products_bad_input_names_the_argument():
    g, o = array_multiplier(4, 4)
    with pytest.raises(ValueError, match=r"a, b: expected equal lengths, got \(3,\) and \(4,\)"):
        nl.products(np.zeros(3, int), np.zeros(4, int), g, o, **kw(4, 4))
    with pytest.raises(ValueError, match=r"a: expected a 1-D array, got shape \(2, 2\)"):
        nl.products(np.zeros((2, 2), int), np.zeros(4, int), g, o, **kw(4, 4))
    with pytest.raises(ValueError, match=r"b: expected signed 4-bit codes in \[-8, 8\), got 8"):
        nl.products(np.zeros(3, int), np.array([0, 8, 9]), g, o, **kw(4, 4, b_signed=True))
    with pytest.raises(TypeError, match="a: expected an integer array of codes, got dtype float64"):
        nl.products(np.zeros(3), np.zeros(3, int), g, o, **kw(4, 4))
