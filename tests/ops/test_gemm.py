"""lutcore.lut_gemm against the numpy oracle, over the contract grid:
shapes x tables x SIMD paths, threads 1 and 2 bit-identical; plus the audit."""
import numpy as np
import pytest

import lutcore
from lutcore.units import approx
from reference.gemm_ref import lut_gemm_ref
from reference.units_ref import exact_mul_lut

SHAPES = [(1, 1, 1), (7, 33, 5), (33, 100, 65), (2, 64, 3), (64, 256, 48), (5, 1, 9),
          (3, 37, 11),            # K not a multiple of 2, 8 or 32
          (4, 130, 17), (1, 300, 1),
          (1, 512, 70), (70, 512, 1),   # GEMV both ways
          (50, 37, 129),                # N > M >= 48: the table kernels run it transposed
          (0, 5, 3), (3, 0, 4), (3, 5, 0)]
TABLES = ["exact", "truncated-2", "mitchell", "reduced_operands-4", "random"]

_UNITS = {}


def make_units(name):
    if name not in _UNITS:
        if name == "exact":
            u = lutcore.Units.exact()
        elif name == "truncated-2":
            u = approx.truncated(2)
        elif name == "mitchell":
            u = approx.mitchell()
        elif name == "reduced_operands-4":
            u = approx.reduced_operands(4)
        elif name == "random":
            # full int16 range, |entry| <= 32767; K <= 300 so sums fit in int32
            r = np.random.default_rng(20240501)
            u = lutcore.Units.from_mul(r.integers(-32767, 32768, 65536).astype(np.int16))
        else:
            raise KeyError(name)
        _UNITS[name] = u
    return _UNITS[name]


def _inputs(rng, M, K, N):
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    return a, b


def _check(got, want):
    assert got.dtype == np.int32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    if want.size:
        print("max |diff| =", int(np.max(np.abs(got.astype(np.int64) - want))))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lut_gemm_grid(simd, shape, table, rng):
    M, K, N = shape
    a, b = _inputs(rng, M, K, N)
    u = make_units(table)
    want = lut_gemm_ref(a, b, u.mul)
    c1 = lutcore.lut_gemm(a, b, units=u, threads=1)
    c2 = lutcore.lut_gemm(a, b, units=u, threads=2)
    _check(c1, want)
    _check(c2, want)
    assert np.array_equal(c1, c2)
    if K == 0:
        assert not c1.any()


def test_lut_gemm_default_units_exact(simd, rng):
    a, b = _inputs(rng, 9, 70, 13)
    want = a.astype(np.int64) @ b.astype(np.int64)
    _check(lutcore.lut_gemm(a, b), want)
    _check(lutcore.lut_gemm(a, b, units=None, threads=2), want)
    _check(lutcore.lut_gemm(a, b, units=lutcore.Units.exact()), want)


@pytest.mark.parametrize("table", TABLES)
def test_lut_gemm_extremes(simd, table):
    # every (a, b) corner: -128 and 127 operands, all pairs of the table's corners
    vals = np.array([-128, -127, -1, 0, 1, 127], dtype=np.int8)
    a = np.repeat(vals, 6)[None, :].repeat(3, axis=0)        # (3, 36)
    b = np.tile(vals, 6)[:, None].repeat(5, axis=1)          # (36, 5)
    u = make_units(table)
    _check(lutcore.lut_gemm(a.copy(), b.copy(), units=u, threads=1), lut_gemm_ref(a, b, u.mul))
    full_a = np.full((4, 300), -128, np.int8)
    full_b = np.full((300, 6), -128, np.int8)
    _check(lutcore.lut_gemm(full_a, full_b, units=u, threads=2), lut_gemm_ref(full_a, full_b, u.mul))


def test_lut_gemm_all_entries_used(simd):
    # a: every int8 value in a row of K=256; b: every int8 value down each column
    # shifted per column, so every (a, b) pair of the table meets in some output.
    av = np.arange(-128, 128).astype(np.int8)
    a = np.stack([np.roll(av, s) for s in range(8)])          # (8, 256)
    b = np.stack([np.roll(av, s) for s in range(0, 256, 8)], axis=1)  # (256, 32)
    for table in TABLES:
        u = make_units(table)
        _check(lutcore.lut_gemm(a, b, units=u, threads=2), lut_gemm_ref(a, b, u.mul))


def test_lut_gemm_single_entry_table(simd, rng):
    # a table that is zero except one entry isolates indexing mistakes (a/b swapped, sign)
    for a_val, b_val in [(3, -6), (-6, 3), (-128, 127), (127, -128), (0, 0)]:
        t = np.zeros(65536, np.int16)
        t[(a_val & 0xFF) * 256 + (b_val & 0xFF)] = 1
        u = lutcore.Units.from_mul(t)
        a = rng.choice(np.array([a_val, b_val, 1], np.int8), (5, 40))
        b = rng.choice(np.array([a_val, b_val, 1], np.int8), (40, 7))
        _check(lutcore.lut_gemm(a, b, units=u, threads=1), lut_gemm_ref(a, b, t))


def test_lut_gemm_non_contiguous(simd, rng):
    u = make_units("random")
    big_a = rng.integers(-128, 128, (10, 66)).astype(np.int8)
    big_b = rng.integers(-128, 128, (66, 14)).astype(np.int8)
    a = big_a[:, ::2]                      # (10, 33) strided
    b = big_b[::2, 1::2]                   # (33, 7) strided
    want = lut_gemm_ref(np.ascontiguousarray(a), np.ascontiguousarray(b), u.mul)
    _check(lutcore.lut_gemm(a, b, units=u), want)
    _check(lutcore.lut_gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), units=u), want)
    _check(lutcore.lut_gemm(np.asfortranarray(a), np.asfortranarray(b), units=u), want)
    _check(lutcore.lut_gemm(a.T.copy().T, b, units=u), want)


def test_lut_gemm_threads_default(rng):
    a, b = _inputs(rng, 17, 45, 9)
    u = make_units("mitchell")
    want = lut_gemm_ref(a, b, u.mul)
    for n in (1, 2):
        lutcore.set_num_threads(n)
        assert lutcore.get_num_threads() == n
        _check(lutcore.lut_gemm(a, b, units=u), want)
        _check(lutcore.lut_gemm(a, b, units=u, threads=None), want)


def test_lut_gemm_inputs_untouched(rng):
    a, b = _inputs(rng, 6, 40, 5)
    a0, b0 = a.copy(), b.copy()
    u = make_units("random")
    mul0 = u.mul.copy()
    lutcore.lut_gemm(a, b, units=u, threads=2)
    assert np.array_equal(a, a0) and np.array_equal(b, b0) and np.array_equal(u.mul, mul0)


# ---------------------------------------------------------------- audit
def _corruptible_units():
    t = exact_mul_lut().astype(np.int64)
    t[0] += 1                                   # non-exact -> the table path, not VNNI
    return lutcore.Units.from_mul(t.astype(np.int16))


@pytest.mark.parametrize("rate", [0.01, 1.0])
def test_audit_detects_corrupt_kernel_table(simd, rng, rate):
    u = _corruptible_units()
    a, b = _inputs(rng, 64, 40, 64)
    lutcore.set_audit(rate)
    _check(lutcore.lut_gemm(a, b, units=u, threads=2), lut_gemm_ref(a, b, u.mul))
    _check(lutcore.lut_gemm(a, b, units=u, threads=1), lut_gemm_ref(a, b, u.mul))
    km = u._kernel_mul
    # a private int32 copy (possibly several per-path copies of the 65536 entries)
    assert isinstance(km, np.ndarray) and km.dtype == np.int32 and km.size % 65536 == 0
    km += 1                                     # every entry now off by one, in place
    with pytest.raises(lutcore.AuditError):
        lutcore.lut_gemm(a, b, units=u, threads=2)
    lutcore.set_audit(0)


def test_audit_passes_normal_calls(simd, rng):
    lutcore.set_audit(0.01)
    for table in TABLES:
        u = make_units(table)
        for shape in [(7, 33, 5), (64, 256, 48), (1, 1, 1)]:
            a, b = _inputs(rng, *shape)
            _check(lutcore.lut_gemm(a, b, units=u), lut_gemm_ref(a, b, u.mul))
    lutcore.set_audit(0)


def test_audit_off_does_not_check(rng):
    u = _corruptible_units()
    a, b = _inputs(rng, 8, 16, 8)
    lutcore.set_audit(0)
    lutcore.lut_gemm(a, b, units=u)
    km = u._kernel_mul
    km += 1                                        # in place
    got = lutcore.lut_gemm(a, b, units=u)          # no audit: the corrupt table is used
    assert np.array_equal(got.astype(np.int64), lut_gemm_ref(a, b, u.mul).astype(np.int64) + 16)


PACKED_SHAPES = [(1, 1, 1), (7, 33, 5), (33, 100, 65), (3, 37, 11), (1, 512, 70), (50, 37, 129),
                 (16, 300, 257), (9, 129, 512), (2, 65, 513)]      # N across the 256-column units


@pytest.mark.parametrize("table", ["mitchell", "random", "truncated-2"])
@pytest.mark.parametrize("shape", PACKED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lut_gemm_packed_b_table(simd, shape, table, rng):
    """lut_gemm(a, pack_b(b)) through an any-table unit: the packed B (its staged form for the SIMD
    path's table body, csrc/gemm/table_packed.h; the plain B on AVX2 / generic) gives the bits of
    the unpacked call and of the reference, at 1 and 2 threads, on every SIMD path."""
    M, K, N = shape
    a, b = _inputs(rng, M, K, N)
    u = make_units(table)
    want = lut_gemm_ref(a, b, u.mul)
    pb = lutcore.ops.gemm.pack_b(b)
    for threads in (1, 2):
        got = lutcore.lut_gemm(a, pb, units=u, threads=threads)
        _check(got, want)
        assert np.array_equal(got, lutcore.lut_gemm(a, b, units=u, threads=threads))
        out = np.full((M, N + 3), -7, np.int32)
        lutcore.lut_gemm(a, pb, units=u, threads=threads, out=out[:, 1:1 + N])
        assert np.array_equal(out[:, 1:1 + N], want) and np.all(out[:, 0] == -7) and np.all(out[:, 1 + N:] == -7)


EXACT_PACKED_SHAPES = PACKED_SHAPES + [(100, 65, 40), (384, 33, 17), (1028, 7, 33)]   # whole calls, strips


@pytest.mark.parametrize("shape", EXACT_PACKED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lut_gemm_packed_b_exact(simd, shape, rng):
    """lut_gemm(a, pack_b(b)) through the exact units: the packed B keeps its panels and, for the
    VNNI whole calls, their converted form (one per body, made on first use): the bits of the
    unpacked call and of the reference, at 1 and 2 threads, on every SIMD path, also after the
    path changes between calls on one PackedB."""
    from lutcore import _simd
    M, K, N = shape
    a, b = _inputs(rng, M, K, N)
    want = lut_gemm_ref(a, b, exact_mul_lut())
    pb = lutcore.ops.gemm.pack_b(b)
    for path in (simd, "generic", simd):
        lutcore.set_simd(path)
        for threads in (1, 2):
            got = lutcore.lut_gemm(a, pb, threads=threads)
            _check(got, want)
            assert np.array_equal(got, lutcore.lut_gemm(a, b, threads=threads))
        form = pb.exact_form(_simd.isa(), 1)
        assert (form is not None) == (_simd.isa() & _simd.VNNI != 0), path
    lutcore.set_simd(simd)


def test_lut_gemm_packed_b_wrong_k_names_b(rng):
    a, b = _inputs(rng, 4, 30, 300)
    pb = lutcore.ops.gemm.pack_b(b[:29])
    with pytest.raises(ValueError, match=r"^a, b: inner dimensions differ"):
        lutcore.lut_gemm(a, pb, units=make_units("mitchell"))
    with pytest.raises(TypeError, match=r"\bb\b"):
        lutcore.ops.gemm.pack_b(b.astype(np.int16))


def test_table_products_run_transposed_where_rows_are_fewer():
    """The table kernels build row tables from the right operand's columns and reuse
    them for every left row, so an (M, N) product with N > M >= TABLE_DIRECT_M runs as
    B^T A^T through the swapped table (the grid's 50x37x129 checks its bits)."""
    from lutcore import _simd
    from lutcore._native import gemm as _g
    table_transposed = _g.table_transposed                          # the C drivers' decision
    assert table_transposed(50, 129) and not table_transposed(129, 50)
    assert not table_transposed(_g.TABLE_DIRECT_M - 1, 1000)       # few rows: direct lookups
    u = make_units("random")                                        # swapped: mul(b, a) for mul(a, b)
    for M, N in ((9, 11), (11, 60)):                               # direct lookups; row tables
        a, b = _inputs(np.random.default_rng(5), M, 40, N)
        got = np.empty((N, M), np.int32)
        _g.gemm_table(got, np.ascontiguousarray(b.T), np.ascontiguousarray(a.T), u._kernel_mul,
                      np.empty(_g.table_work_size(N, M, 1, False), np.int32), _simd.isa(), 1, swapped=True)
        assert np.array_equal(got.T, lut_gemm_ref(a, b, u.mul))



@pytest.mark.parametrize("M,K,N", [(50, 37, 129), (129, 37, 50), (9, 40, 11), (48, 70, 49)])
@pytest.mark.parametrize("threads", [1, 2])
def test_table_drivers_stay_inside_the_workspace_they_ask_for(M, K, N, threads):
    """The C drivers decide the orientation and transpose into the workspace that
    table_auto_work_size names: exactly that much is enough (a guard after it stays
    untouched), and the results equal the references on both orientations."""
    from lutcore import _simd
    from lutcore._native import gemm as _g
    from reference.quant_ref import qmatmul_ref, quantize_ref
    u = make_units("random")
    rng = np.random.default_rng(M * 1000 + N)
    a, b = _inputs(rng, M, K, N)
    guard = 4096
    w = np.full(_g.table_auto_work_size(M, N, K, 0, threads, False) + guard, -7, np.int32)
    c = np.empty((M, N), np.int32)
    _g.gemm_table_auto(c, a, b, u._kernel_mul, w, _simd.isa(), threads)
    assert np.array_equal(c, lut_gemm_ref(a, b, u.mul))
    assert np.all(w[-guard:] == -7)
    block = 16
    x = rng.standard_normal((M, K)).astype(np.float32)
    y = rng.standard_normal((N, K)).astype(np.float32)
    qa, sa = quantize_ref(x, block)
    qbt, sbt = quantize_ref(y, block)
    qb, sb = np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)
    nblk = sa.shape[1]
    w = np.full(_g.table_auto_work_size(M, N, nblk * block, nblk, threads, True) + guard, -7, np.int32)
    out = np.empty((M, N), np.float32)
    _g.qmatmul_table_auto(out, qa, sa, qb, sb, u._kernel_mul, nblk, block, w, _simd.isa(), threads)
    assert np.array_equal(out.view(np.uint32), qmatmul_ref(qa, sa, qb, sb, u.mul, block).view(np.uint32))
    assert np.all(w[-guard:] == -7)
    assert _g.table_transposed(M, N) == (N > M >= _g.TABLE_DIRECT_M)
